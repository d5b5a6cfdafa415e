"""How the images reach the network: their shape, their scale (no torch).

X holds images as ``(n, height, width)``, ``(n, channels, height, width)``,
``(n, height, width, channels)``, or rows of ``n_features`` values together with
``image_shape``; square grey images may come flattened without it (``(n, 784)``
is read as 28 x 28, ``(n, 64)`` as 8 x 8). ``channels='auto'`` reads an image's
last axis as its channels when it is 1, 3 or 4 (grey, RGB, RGBA, as PIL, imageio
and matplotlib give images) and its first is not, or when only that reading
gives square images (``_settings.channels_layout``), and refuses a shape it could
read both ways (``(n, 3, 8, 3)``); the fit's layout is the one new images must
come in. The network reads ``(n, channels, height, width)`` float32 images,
centred and divided by one global scale (the pixels' mean and standard deviation
over the training set), so that a fit does not depend on the images' units; new
images are read in the training images' units, and a warning says when they
come on another scale. The pixels are first rounded to float32's precision, so
that float32 and float64 copies of the same images give the same network. A few
pixels far beyond the others (a hot pixel) would set the scale and leave every
other pixel near 0: pixels farther beyond the range of the others (their 0.1th
to 99.9th percentiles) than ``OUTLIER_WIDTHS`` times its width are clipped to
that bound, with a warning that names them. A whole faulty image holds too many
pixels for those percentiles: the range is read without the images whose extremes
lie that far beyond the others' (:func:`faulty_images`), and the warning names them.
"""

import math
from numbers import Integral

import numpy as np
from skdiffclust._utils._validation import (array_ndim, check_array, check_magnitude,
                                            validate_data)
from skdiffclust._utils._warn import warn_user
from skdiffclust.deep._settings import channels_layout

# the smallest side the built-in network reads (two poolings of a 3 x 3 image
# still leave a pixel)
MIN_SIDE = 4
# images larger on a side are reduced to it by the network's first layer
MAX_SIDE = 32


def _pixels(count):
    return f"{count} channel{'' if count == 1 else 's'}"


def _describe(shape, channels):
    """Words for images of (channels, height, width) ``shape`` in a layout."""
    words = f"{_pixels(shape[0])} of {shape[1]} x {shape[2]} pixels"
    return words + (", channels last" if channels == "last" else "")


def _reading(axes, channels, what):
    """The (channels, height, width) of a 3-axis image shape ``axes`` and its
    layout, 'first' or 'last' (``channels='auto'``: as ``channels_layout`` reads
    it; both ways: a ValueError naming both readings)."""
    layout = channels_layout(axes, channels)
    if layout is None:
        readings = (_describe(axes, "first"), _describe((axes[2], *axes[:2]), "last"))
        raise ValueError(
            f"{what} can be read as {readings[0]} (channels first) or as "
            f"{readings[1]}: pass channels='first' or channels='last' to say which.")
    channels = layout
    return ((axes[2], *axes[:2]) if channels == "last" else axes), channels


def image_shape_of(X_shape, image_shape, channels="auto"):
    """The ``(channels, height, width)`` of one image of X (the shape of X given)
    and their layout in X, ``'first'`` or ``'last'`` (``channels``' reading).

    Raises a ValueError when X and ``image_shape`` do not describe images, or when
    ``channels='auto'`` could read them both ways.
    """
    sample = tuple(int(s) for s in X_shape[1:])
    layout = "first"
    if image_shape is not None:
        given = _checked_image_shape(image_shape)
        if len(given) == 3:
            shape, layout = _reading(given, channels, f"image_shape={image_shape!r}")
        else:
            shape = (1, *given)
        if math.prod(shape) != math.prod(sample):
            raise ValueError(
                f"image_shape={image_shape!r} holds {math.prod(shape)} values, but each "
                f"sample of X holds {math.prod(sample)} (X has shape {tuple(X_shape)}).")
        if len(sample) > 1 and sample not in layouts(shape, layout):  # read otherwise
            raise ValueError(
                f"X holds images of shape {sample}, which image_shape={image_shape!r} "
                "would read otherwise: image_shape is for rows of pixels (leave it None "
                "for images).")
    elif len(sample) == 3:
        shape, layout = _reading(sample, channels, f"X of shape {tuple(X_shape)}")
    elif len(sample) == 2:
        shape = (1, *sample)
    else:
        side = math.isqrt(sample[0]) if len(sample) == 1 else 0
        if len(sample) != 1 or side * side != sample[0]:
            raise ValueError(
                f"X has shape {tuple(X_shape)}: give images of shape (n_samples, height, "
                "width), (n_samples, channels, height, width) or (n_samples, height, "
                "width, channels), or rows of pixels with image_shape=(height, width) "
                "or (channels, height, width).")
        shape = (1, side, side)
    if min(shape[1:]) < MIN_SIDE:
        read = ""
        if len(sample) == 3 or (image_shape is not None and len(given) == 3):
            read = (f" (read as {_describe(shape, layout)}; channels='first' or "
                    "channels='last' says where the channels are)")
        raise ValueError(
            f"The images are {shape[1]} x {shape[2]} pixels; the network needs at "
            f"least {MIN_SIDE} x {MIN_SIDE}{read}.")
    return shape, layout


def _checked_image_shape(image_shape):
    """``image_shape`` as a tuple of 2 or 3 positive integers, or a ValueError
    (fractions were truncated, nested sequences failed inside)."""
    values = np.asarray(image_shape, dtype=object)
    if values.ndim != 1 or len(values) not in (2, 3) or not all(
            isinstance(v, Integral) and not isinstance(v, (bool, np.bool_)) and v >= 1
            for v in values):
        raise ValueError(
            "image_shape must be (height, width), (channels, height, width) or "
            f"(height, width, channels) of positive integers, got {image_shape!r}.")
    return tuple(int(v) for v in values)


def layouts(shape, channels="first"):
    """The sample shapes that hold images of (channels, height, width) ``shape``
    in the layout ``channels``: (height, width, channels) or (channels, height,
    width); grey images in any of these or as (height, width)."""
    if shape[0] == 1:
        return {shape, shape[1:], (*shape[1:], 1)}
    return {(*shape[1:], shape[0])} if channels == "last" else {shape}


def sample_shape(shape, channels):
    """One image's shape in X: (channels, height, width) or (height, width, channels)."""
    return (*shape[1:], shape[0]) if channels == "last" and shape[0] > 1 else shape


def check_images(estimator, X, *, reset, ensure_min_samples=1):
    """X validated (finite, float32 or float64) and reshaped to (n, C, H, W),
    C-contiguous (images given channels last are transposed).

    ``reset`` (in ``fit``): records ``n_features_in_`` (values per image), the
    image shape and its layout (``channels_``); later calls must give images of
    the same shape in the same layout (or rows of as many values, in that layout).
    """
    if not reset:
        _refuse_one_image(estimator, X)
    if array_ndim(X) == 2:
        X = validate_data(estimator, X, dtype=[np.float32, np.float64],
                          ensure_min_samples=ensure_min_samples, reset=reset)
    else:
        X = check_array(X, allow_nd=True, dtype=[np.float32, np.float64],
                        ensure_min_samples=ensure_min_samples)
        if reset:
            vars(estimator).pop("feature_names_in_", None)
        else:
            _check_layout(estimator, tuple(X.shape[1:]))
    check_magnitude(X)
    if reset:
        shape, channels = image_shape_of(X.shape, estimator.image_shape,
                                         estimator.channels)
        estimator.n_features_in_ = int(math.prod(shape))
        estimator.image_shape_ = shape
        estimator.channels_ = channels
    shape = estimator.image_shape_
    if getattr(estimator, "channels_", "first") == "last" and shape[0] > 1:
        return np.ascontiguousarray(
            X.reshape(X.shape[0], *shape[1:], shape[0]).transpose(0, 3, 1, 2))
    return X.reshape(X.shape[0], *shape)


def _refuse_one_image(estimator, X):
    """Refuse one image without its batch axis (read as rows of pixels, it gave
    "X has 8 features")."""
    shape = getattr(X, "shape", None)
    if shape is None and isinstance(X, (list, tuple)):
        try:
            shape = np.shape(X)
        except ValueError:  # ragged: validation says so
            return
    if shape is None or len(shape) < 2:
        return
    fitted = estimator.image_shape_
    one = fitted[1:] if fitted[0] == 1 else sample_shape(
        fitted, getattr(estimator, "channels_", "first"))
    if tuple(shape) == tuple(one):
        raise ValueError(
            f"X has shape {tuple(shape)}: one image, without the batch axis. Pass "
            f"X[np.newaxis] (shape {(1, *shape)}) to cluster one image.")


def _check_layout(estimator, sample):
    """Refuse new images of another shape or layout than the training images' (as
    many values in another layout, channels last or transposed, gave other images)."""
    shape, channels = estimator.image_shape_, getattr(estimator, "channels_", "first")
    if sample in layouts(shape, channels):
        return
    fitted = sample_shape(shape, channels)
    hint = ""
    if shape[0] > 1 and sample == sample_shape(shape, "first" if channels == "last"
                                               else "last"):
        order = (0, 2, 3, 1) if channels == "last" else (0, 3, 1, 2)
        hint = f": X.transpose{order} gives them in the training images' layout"
    raise ValueError(
        f"X has samples of shape {sample}, but {type(estimator).__name__} was fitted "
        f"on images of shape {fitted} ("
        + ("channels last, " if channels == "last" and shape[0] > 1 else "")
        + f"{estimator.n_features_in_} values){hint}.")


# a spread below which the pixels' squares may have lost their digits
TINY_SPREAD = 1e-100
# the percentiles of the pixels that span their range (a few hot pixels do not
# move them); read on whole images, about RANGE_SAMPLE pixels at most (every k-th
# image: seconds for MNIST's 47 million pixels, 0.05 s for a million)
RANGE_PERCENTILES = (0.1, 99.9)
RANGE_SAMPLE = 1_000_000
# pixels farther beyond that range than this many times its width are outliers,
# clipped; new images whose range is beyond it, this many times wider than the
# training images', or this many times narrower than most training images' own
# (NARROW_PERCENTILE of their ranges: a dark, flat image is not a rescaled one)
# are on another scale
OUTLIER_WIDTHS = 3.0
# the percentiles of the images' smallest and largest pixels that span the range of
# whole images (a faulty image or two among a hundred do not move them)
IMAGE_PERCENTILES = (1.0, 99.0)
SCALE_FACTOR = 4.0
NARROW_PERCENTILE = 1.0
# images rounded to float32 per chunk (the temporaries' memory)
ROUNDING_CHUNK = 4096


def float32_precision(images):
    """A float64 copy of the pixels rounded to float32's 24 significant bits, as
    a float32 copy of them would be, whatever their magnitude: a power of two
    brings the largest under 1 first (exact), so that pixels of 1e-200 or 1e100
    keep their digits. float32 and float64 copies of the same images give the
    same values."""
    if images.dtype == np.float32:
        return images.astype(np.float64)
    largest = max(float(images.max()), -float(images.min())) if images.size else 0.0
    if largest == 0:
        return images.astype(np.float64)
    exponent = int(np.frexp(largest)[1])
    out = np.empty(images.shape, dtype=np.float64)
    for start in range(0, images.shape[0], ROUNDING_CHUNK):
        chunk = slice(start, start + ROUNDING_CHUNK)
        out[chunk] = np.ldexp(images[chunk], -exponent).astype(np.float32)
    return np.ldexp(out, exponent, out=out)


def pixel_range(pixels):
    """The 0.1th and 99.9th percentiles of the pixels of (n, ...) images (of every
    k-th image when they hold more than ``RANGE_SAMPLE`` pixels), float64 (2,)."""
    per_image = max(1, math.prod(pixels.shape[1:]))
    step = max(1, pixels.shape[0] * per_image // RANGE_SAMPLE)
    return np.percentile(pixels[::step], RANGE_PERCENTILES)


def faulty_images(pixels):
    """The indices of the images whose smallest or largest pixel lies farther beyond
    the range of the others' (the ``IMAGE_PERCENTILES`` of the images' extremes)
    than ``OUTLIER_WIDTHS`` times its width: a faulty frame, or a hot pixel. A
    whole faulty image holds more pixels than the pixels' percentiles leave out,
    so its pixels would set the range, and the scale, alone."""
    if pixels.shape[0] < 2:
        return np.zeros(0, dtype=np.intp)
    flat = pixels.reshape(pixels.shape[0], -1)
    lowest, highest = flat.min(axis=1), flat.max(axis=1)
    lower, upper = _bounds(np.percentile(lowest, IMAGE_PERCENTILES[0]),
                           np.percentile(highest, IMAGE_PERCENTILES[1]))
    return np.flatnonzero((lowest < lower) | (highest > upper))


def training_range(pixels):
    """:func:`pixel_range` of the training images, read without the faulty ones
    (:func:`faulty_images`), unless they are most of them."""
    faulty = faulty_images(pixels)
    if 0 < faulty.size < pixels.shape[0] / 2:
        return pixel_range(np.delete(pixels, faulty, axis=0))
    return pixel_range(pixels)


def _bounds(low, high):
    """The values beyond which pixels are outliers, for a range of the pixels (no
    bound for a range of width 0: its pixels say nothing of a scale)."""
    width = high - low
    if not width > 0:
        return -np.inf, np.inf
    return low - OUTLIER_WIDTHS * width, high + OUTLIER_WIDTHS * width


def _where(index, shape):
    image, channel, row, column = np.unravel_index(index, shape)
    place = f"row {row}, column {column}"
    return f"image {image}, " + (f"channel {channel}, " if shape[1] > 1 else "") + place


def _warn_outliers(pixels, lower, upper):
    """Warn when pixels lie beyond (lower, upper), naming the farthest, or the
    images most of whose pixels do."""
    if np.isinf(lower) or not (pixels.min() < lower or pixels.max() > upper):
        return
    flat = pixels.reshape(-1)
    beyond = np.flatnonzero((flat < lower) | (flat > upper))
    middle = (lower + upper) / 2
    worst = beyond[np.argmax(np.abs(flat[beyond] - middle))]
    where = f"{flat[worst]:.4g} at {_where(worst, pixels.shape)}"
    what = (f"1 pixel, {where}," if beyond.size == 1 else
            f"{beyond.size} pixels (the farthest: {where})")
    images, counts = np.unique(beyond // max(1, math.prod(pixels.shape[1:])),
                               return_counts=True)
    faulty = images[counts * 2 > math.prod(pixels.shape[1:])]
    if faulty.size:
        named = ", ".join(str(i) for i in faulty[:10]) + (", ..." if faulty.size > 10
                                                          else "")
        what += (f" in {faulty.size} image{'s' if faulty.size > 1 else ''} most of "
                 f"whose pixels are (image{'s' if faulty.size > 1 else ''} {named}),")
    warn_user(
        f"X holds {what} far beyond the range of the others: pixels beyond "
        f"[{lower:.4g}, {upper:.4g}] are clipped to it, so that they do not set the "
        "pixels' scale. Correct or remove such pixels or images if they are faults.",
        UserWarning)


class PixelScale:
    """One global centring and scale of the pixels, float32 images out.

    Built from the training images' pixels rounded to float32's precision
    (:func:`float32_precision`, float64): their range (``low``, ``high``: the
    0.1th and 99.9th percentiles, of the images but the faulty ones), the
    outliers' bounds, the 1st percentile of the images' own ranges
    (``narrowest``), and the mean and standard deviation
    of the pixels clipped to the bounds; constant images are only centred.
    """

    def __init__(self, pixels):
        self.low, self.high = (float(v) for v in training_range(pixels))
        self.narrowest = float(np.percentile(
            np.ptp(pixels.reshape(pixels.shape[0], -1), axis=1), NARROW_PERCENTILE))
        lower, upper = _bounds(self.low, self.high)
        _warn_outliers(pixels, lower, upper)
        values = self._clipped(pixels)
        self.mean = float(values.mean())
        spread = float(values.std())
        if spread < TINY_SPREAD:  # over the largest deviation first: the squares of
            # pixels of 1e-200 underflowed, and the images became all zeros
            deviations = values - self.mean
            peak = float(np.abs(deviations).max()) if values.size else 0.0
            spread = peak * float((deviations / peak).std()) if peak > 0 else 0.0
        self.scale = spread if spread > 0 else 1.0

    @classmethod
    def fitted(cls, mean, scale, pixel_range):
        """The scale of a fitted estimator (its ``pixel_mean_``, ``pixel_scale_``
        and ``pixel_range_``: low, high, narrowest)."""
        out = cls.__new__(cls)
        out.mean, out.scale = float(mean), float(scale)
        out.low, out.high, out.narrowest = (float(v) for v in pixel_range)
        return out

    @property
    def range(self):
        """``low``, ``high`` and ``narrowest``, float64 (3,)."""
        return np.array([self.low, self.high, self.narrowest])

    def _clipped(self, pixels):
        """The pixels, those beyond the outliers' bounds clipped (a copy only then)."""
        lower, upper = _bounds(self.low, self.high)
        if pixels.size and (pixels.min() < lower or pixels.max() > upper):
            return np.clip(pixels, lower, upper)
        return pixels

    def check(self, pixels, name):
        """Warn when new images are on another scale than the training images (their
        range beyond the outliers' bounds, ``SCALE_FACTOR`` times wider than theirs
        or narrower than most training images'), or else hold outliers."""
        low, high = (float(v) for v in pixel_range(pixels))
        lower, upper = _bounds(self.low, self.high)
        width, new_width = self.high - self.low, high - low
        narrow = min(width, self.narrowest) if self.narrowest > 0 else width
        if low < lower or high > upper or (width > 0 and new_width > 0 and (
                new_width > SCALE_FACTOR * width or new_width * SCALE_FACTOR < narrow)):
            warn_user(
                f"The images have pixels in [{low:.4g}, {high:.4g}] (their 0.1th to "
                f"99.9th percentiles), but {name} was fitted on images of pixels in "
                f"[{self.low:.4g}, {self.high:.4g}]: the network reads them on another "
                "scale, and their clusters may be wrong. Scale them as the training "
                "images were.", UserWarning)
        else:
            _warn_outliers(pixels, lower, upper)

    def __call__(self, pixels):
        """Pixels (float64, rounded to float32's precision) to the network's float32."""
        out = self._clipped(pixels) - self.mean
        out /= self.scale
        return out.astype(np.float32)


def reduced_side(image_shape, max_side=MAX_SIDE):
    """(H, W) of the images the convolutions read: ``image_shape``'s, or reduced
    to ``max_side`` on the longer side (the aspect kept; None: never reduced)."""
    height, width = image_shape[1:]
    longer = max(height, width)
    if max_side is None or longer <= max_side:
        return height, width
    # a short side is kept at MIN_SIDE, the smallest the network reads
    return tuple(max(min(side, MIN_SIDE), round(side * max_side / longer))
                 for side in (height, width))

"""How the images reach the network: their shape, their scale (no torch).

X holds images as ``(n, height, width)``, ``(n, channels, height, width)``, or
rows of ``n_features`` values together with ``image_shape``; square grey images
may come flattened without it (``(n, 784)`` is read as 28 x 28, ``(n, 64)`` as
8 x 8). The network reads ``(n, channels, height, width)`` float32 images,
centred and divided by one global scale (the pixels' mean and standard deviation
over the training set), so that it does not depend on the images' units.
"""

import math
from numbers import Integral

import numpy as np
from sklearn.utils import check_array
from sklearn.utils.validation import validate_data

from skdiffclust._utils._validation import array_ndim, check_magnitude

# the smallest side the built-in network reads (two poolings of a 3 x 3 image
# still leave a pixel)
MIN_SIDE = 4
# images larger on a side are reduced to it by the network's first layer
MAX_SIDE = 32


def image_shape_of(X_shape, image_shape):
    """The ``(channels, height, width)`` of one image of X (the shape of X given).

    Raises a ValueError when X and ``image_shape`` do not describe images.
    """
    sample = tuple(int(s) for s in X_shape[1:])
    if image_shape is not None:
        shape = _checked_image_shape(image_shape)
        if math.prod(shape) != math.prod(sample):
            raise ValueError(
                f"image_shape={image_shape!r} holds {math.prod(shape)} values, but each "
                f"sample of X holds {math.prod(sample)} (X has shape {tuple(X_shape)}).")
        if len(sample) > 1 and sample not in layouts(shape):  # images read another way
            raise ValueError(
                f"X holds images of shape {sample}, which image_shape={image_shape!r} "
                "would read otherwise: image_shape is for rows of pixels (leave it None "
                "for images).")
    elif len(sample) == 3:
        shape = sample
    elif len(sample) == 2:
        shape = (1, *sample)
    else:
        side = math.isqrt(sample[0]) if len(sample) == 1 else 0
        if len(sample) != 1 or side * side != sample[0]:
            raise ValueError(
                f"X has shape {tuple(X_shape)}: give images of shape (n_samples, height, "
                "width) or (n_samples, channels, height, width), or rows of pixels with "
                "image_shape=(height, width) or (channels, height, width).")
        shape = (1, side, side)
    if min(shape[1:]) < MIN_SIDE:
        raise ValueError(
            f"The images are {shape[1]} x {shape[2]} pixels; the network needs at "
            f"least {MIN_SIDE} x {MIN_SIDE}.")
    return shape


def _checked_image_shape(image_shape):
    """``image_shape`` as (channels, height, width) of positive integers, or a
    ValueError (fractions were truncated, nested sequences failed inside)."""
    values = np.asarray(image_shape, dtype=object)
    if values.ndim != 1 or len(values) not in (2, 3) or not all(
            isinstance(v, Integral) and not isinstance(v, (bool, np.bool_)) and v >= 1
            for v in values):
        raise ValueError(
            "image_shape must be (height, width) or (channels, height, width) of "
            f"positive integers, got {image_shape!r}.")
    shape = tuple(int(v) for v in values)
    return (1, *shape) if len(shape) == 2 else shape


def layouts(shape):
    """The sample shapes that hold images of (channels, height, width) ``shape``:
    itself, and (height, width) for grey images."""
    return {shape, shape[1:]} if shape[0] == 1 else {shape}


def check_images(estimator, X, *, reset, ensure_min_samples=1):
    """X validated (finite, float32 or float64) and reshaped to (n, C, H, W).

    ``reset`` (in ``fit``): records ``n_features_in_`` (values per image) and the
    image shape; later calls must give images of the same shape (or rows of as
    many values).
    """
    if array_ndim(X) == 2:
        X = validate_data(estimator, X, dtype=[np.float32, np.float64],
                          ensure_min_samples=ensure_min_samples, reset=reset)
    else:
        X = check_array(X, allow_nd=True, dtype=[np.float32, np.float64],
                        ensure_min_samples=ensure_min_samples)
        if reset:
            vars(estimator).pop("feature_names_in_", None)
        elif tuple(X.shape[1:]) not in layouts(estimator.image_shape_):
            # as many values in another layout (channels last, transposed) gave other
            # images, silently
            raise ValueError(
                f"X has samples of shape {tuple(X.shape[1:])}, but "
                f"{type(estimator).__name__} was fitted on images of shape "
                f"{estimator.image_shape_} ({estimator.n_features_in_} values).")
    check_magnitude(X)
    if reset:
        shape = image_shape_of(X.shape, estimator.image_shape)
        estimator.n_features_in_ = int(math.prod(shape))
        estimator.image_shape_ = shape
    return X.reshape(X.shape[0], *estimator.image_shape_)


# a spread below which the pixels' squares may have lost their digits
TINY_SPREAD = 1e-100


class PixelScale:
    """One global centring and scale of the pixels, float32 images out.

    The mean and standard deviation are taken over every pixel of the training
    images (in float64); constant images are only centred.
    """

    def __init__(self, images):
        values = np.asarray(images, dtype=np.float64)
        self.mean = float(values.mean())
        spread = float(values.std())
        if spread < TINY_SPREAD:  # over the largest deviation first: the squares of
            # pixels of 1e-200 underflowed, and the images became all zeros
            deviations = values - self.mean
            peak = float(np.abs(deviations).max()) if values.size else 0.0
            spread = peak * float((deviations / peak).std()) if peak > 0 else 0.0
        self.scale = spread if spread > 0 else 1.0

    def __call__(self, images):
        out = np.asarray(images, dtype=np.float64) - self.mean
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

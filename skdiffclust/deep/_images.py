"""How the images reach the network: their shape, their scale (no torch).

X holds images as ``(n, height, width)``, ``(n, channels, height, width)``, or
rows of ``n_features`` values together with ``image_shape``; square grey images
may come flattened without it (``(n, 784)`` is read as 28 x 28, ``(n, 64)`` as
8 x 8). The network reads ``(n, channels, height, width)`` float32 images,
centred and divided by one global scale (the pixels' mean and standard deviation
over the training set), so that it does not depend on the images' units.
"""

import math

import numpy as np
from sklearn.utils import check_array
from sklearn.utils.validation import validate_data

from skdiffclust._utils._validation import array_ndim, check_magnitude

# the smallest side the built-in network reads (two poolings of a 3 x 3 image
# still leave a pixel)
MIN_SIDE = 4


def image_shape_of(X_shape, image_shape):
    """The ``(channels, height, width)`` of one image of X (the shape of X given).

    Raises a ValueError when X and ``image_shape`` do not describe images.
    """
    sample = tuple(int(s) for s in X_shape[1:])
    if image_shape is not None:
        shape = tuple(int(s) for s in image_shape)
        if len(shape) == 2:
            shape = (1, *shape)
        if len(shape) != 3 or min(shape) < 1:
            raise ValueError(
                "image_shape must be (height, width) or (channels, height, width) of "
                f"positive integers, got {image_shape!r}.")
        if math.prod(shape) != math.prod(sample):
            raise ValueError(
                f"image_shape={image_shape!r} holds {math.prod(shape)} values, but each "
                f"sample of X holds {math.prod(sample)} (X has shape {tuple(X_shape)}).")
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
        elif X[0].size != estimator.n_features_in_:
            raise ValueError(
                f"X has {X[0].size} values per sample, but {type(estimator).__name__} "
                f"was fitted on images of shape {estimator.image_shape_} "
                f"({estimator.n_features_in_} values).")
    check_magnitude(X)
    if reset:
        shape = image_shape_of(X.shape, estimator.image_shape)
        estimator.n_features_in_ = int(math.prod(shape))
        estimator.image_shape_ = shape
    return X.reshape(X.shape[0], *estimator.image_shape_)


class PixelScale:
    """One global centring and scale of the pixels, float32 images out.

    The mean and standard deviation are taken over every pixel of the training
    images (in float64); constant images are only centred.
    """

    def __init__(self, images):
        values = np.asarray(images, dtype=np.float64)
        self.mean = float(values.mean())
        spread = float(values.std())
        self.scale = spread if spread > 0 else 1.0

    def __call__(self, images):
        out = np.asarray(images, dtype=np.float64) - self.mean
        out /= self.scale
        return out.astype(np.float32)

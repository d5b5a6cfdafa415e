"""ClAM's numba kernels (Lloyd's iterations, the training epoch, inference) only ever
see its centred and scaled float64 view of the data, cast to the working precision:
float32 data at scales whose squares leave float32 give float64's partition."""

import warnings

import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

from skdiffclust import ClAM
from skdiffclust.clam import _lloyd

# large enough for Lloyd's kernel (rows x clusters x features above its NumPy share)
X, _ = make_blobs(3000, n_features=30, centers=3, random_state=0)


def _fit(X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=Warning)
        return ClAM(3, random_state=0, max_iter=3).fit(X)


def test_the_data_are_large_enough_for_lloyds_kernel():
    assert X.shape[0] * 3 * X.shape[1] > _lloyd.NUMPY_WORK


@pytest.mark.parametrize("scale", [1e30, 1e20, 1e-30, 1e-40])
def test_float32_data_at_extreme_scales_give_the_float64_partition(scale):
    reference = _fit(X)
    Z = (X * scale).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", category=RuntimeWarning)  # no overflow inside
        model = _fit(Z)
        predicted = model.predict(Z)
    assert adjusted_rand_score(reference.labels_, model.labels_) == 1.0
    assert adjusted_rand_score(reference.labels_, predicted) == 1.0
    assert np.all(np.isfinite(model.transform(Z)))

"""scikit-learn's estimator checks on ClAM (small max_iter, so that they run fast)."""

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from skdiffclust.clam import ClAM

pytestmark = pytest.mark.torch

FAST = dict(max_iter=3, n_init=1, device="cpu", random_state=0)

ESTIMATORS = [
    ClAM(**FAST),
    ClAM(metric="cosine", weighted=True, **FAST),
    ClAM(init="random", mask_prob=0.0, n_init=2, max_iter=3, device="cpu", random_state=0),
]


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible_clam(estimator, check):
    check(estimator)

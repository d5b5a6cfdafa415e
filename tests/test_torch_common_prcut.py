"""scikit-learn's estimator checks over PRCut."""

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from skdiffclust.prcut import PRCut

pytestmark = pytest.mark.torch

FAST = dict(max_iter=60, batch_size=32, learning_rate=0.05, n_iter_no_change=20,
            random_state=0, device="cpu")

ESTIMATORS = [
    PRCut(**FAST),
    PRCut(hidden_layer_sizes=(8,), **FAST),
    PRCut(affinity="rbf", **FAST),
]


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible_prcut(estimator, check):
    check(estimator)

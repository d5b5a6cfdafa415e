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


# scikit-learn's sparse checks read classifier tags of any estimator with
# predict_proba (AttributeError for a clusterer); fit, predict and predict_proba on
# every sparse format are tested in test_conventions.py and test_torch_prcut.py
SPARSE_FAILURES = {
    check: "the check assumes that predict_proba belongs to a classifier"
    for check in ("check_estimator_sparse_array", "check_estimator_sparse_matrix")
}


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=lambda _: SPARSE_FAILURES)
def test_sklearn_compatible_prcut(estimator, check):
    check(estimator)

"""scikit-learn's estimator checks over PRCut."""

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from skdiffclust.prcut import PRCut

torch = pytest.importorskip("torch", reason="PRCut trains with torch")

pytestmark = pytest.mark.torch

FAST = dict(max_iter=60, batch_size=32, learning_rate=0.05, n_iter_no_change=20,
            random_state=0, device="cpu")

ESTIMATORS = [
    PRCut(**FAST),
    PRCut(hidden_layer_sizes=(8,), **FAST),
    PRCut(affinity="rbf", **FAST),
    # a user's module: lazy, so that it reads any number of features; three
    # logits, the number of clusters the checks ask for
    PRCut(n_clusters=3, module=torch.nn.Sequential(
        torch.nn.LazyLinear(8), torch.nn.GELU(), torch.nn.LazyLinear(3)), **FAST),
]


# scikit-learn's sparse checks read classifier tags of any estimator with
# predict_proba (AttributeError for a clusterer); fit, predict and predict_proba on
# every sparse format are tested in test_conventions.py and test_torch_prcut.py
SPARSE_FAILURES = {
    check: "the check assumes that predict_proba belongs to a classifier"
    for check in ("check_estimator_sparse_array", "check_estimator_sparse_matrix")
}


# these checks set n_clusters to 1 or 2, which a module with 3 outputs cannot give:
# PRCut refuses the fit with a ValueError naming the shapes (what a user should
# get, tested in test_torch_prcut_module.py); every other check passes
N_CLUSTERS_FAILURES = {
    check: "the check sets n_clusters to 1 or 2; the module gives 3 logits, and PRCut "
           "refuses the mismatch with a clear error"
    for check in ("check_dont_overwrite_parameters", "check_methods_sample_order_invariance",
                  "check_methods_subset_invariance", "check_fit2d_1feature",
                  "check_fit2d_predict1d")
}


def expected_failed_checks(estimator):
    if estimator.module is not None:
        return {**SPARSE_FAILURES, **N_CLUSTERS_FAILURES}
    return SPARSE_FAILURES


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=expected_failed_checks)
def test_sklearn_compatible_prcut(estimator, check):
    check(estimator)

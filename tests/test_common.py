"""scikit-learn's estimator checks over every estimator that needs no torch.

ClAM trains on the CPU without torch, so it is here; the estimators and settings
that need torch are checked in ``test_torch_common*.py``.
"""

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from skdiffclust import ClAM, SparseGEMINI, SpanningForestClustering

CLAM_FAST = dict(max_iter=3, n_init=1, device="cpu", random_state=0)

ESTIMATORS = [
    SpanningForestClustering(),
    SpanningForestClustering(metric="manhattan", algorithm="prim"),
    SpanningForestClustering(metric="cosine"),
    SpanningForestClustering(metric="precomputed"),
    SparseGEMINI(max_iter=20, random_state=0),
    SparseGEMINI(gemini="wasserstein_ovo", hidden_layer_sizes=(), max_iter=5, random_state=0),
    SparseGEMINI(gemini="mmd_ova", alpha=1.0, relax=True, max_iter=10, random_state=0),
    ClAM(**CLAM_FAST),
    ClAM(metric="cosine", weighted=True, **CLAM_FAST),
    ClAM(init="random", mask_prob=0.0, n_init=2, max_iter=3, device="cpu", random_state=0),
]

PRECOMPUTED_FAILURES = {
    "check_clustering": (
        "the check feeds 2-D feature vectors, not the (n, n) similarity matrix that "
        "metric='precomputed' requires"
    ),
}


# scikit-learn's sparse checks read classifier tags of any estimator with
# predict_proba (AttributeError for a clusterer); test_conventions.py and the
# estimator's own tests fit and predict on every sparse format instead
PREDICT_PROBA_SPARSE_FAILURES = {
    check: "the check assumes that predict_proba belongs to a classifier"
    for check in ("check_estimator_sparse_array", "check_estimator_sparse_matrix")
}


def expected_failed_checks(estimator):
    if getattr(estimator, "metric", None) == "precomputed":
        return PRECOMPUTED_FAILURES
    if isinstance(estimator, (SparseGEMINI, ClAM)):
        return PREDICT_PROBA_SPARSE_FAILURES
    return {}


# the checks feed distance matrices to metric='precomputed', which warns that they
# look like distances rather than similarities (what a user should hear)
@pytest.mark.filterwarnings("ignore:X looks like a distance matrix:UserWarning")
@parametrize_with_checks(ESTIMATORS, expected_failed_checks=expected_failed_checks)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)

"""scikit-learn's estimator checks over every estimator of the package."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from skdiffclust import SpanningForestClustering

ESTIMATORS = [
    SpanningForestClustering(),
    SpanningForestClustering(metric="manhattan", algorithm="prim"),
    SpanningForestClustering(metric="cosine"),
    SpanningForestClustering(metric="precomputed"),
]

PRECOMPUTED_FAILURES = {
    "check_clustering": (
        "the check feeds 2-D feature vectors, not the (n, n) similarity matrix that "
        "metric='precomputed' requires"
    ),
}


def expected_failed_checks(estimator):
    if getattr(estimator, "metric", None) == "precomputed":
        return PRECOMPUTED_FAILURES
    return {}


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=expected_failed_checks)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)

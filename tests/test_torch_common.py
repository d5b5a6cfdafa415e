"""scikit-learn's estimator checks over the estimators that train with torch."""

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from skdiffclust import SpanningForestClustering

pytestmark = pytest.mark.torch

FAST = dict(max_iter=2, n_perturbations=5, batch_size=16, random_state=0, device="cpu")

ESTIMATORS = [
    SpanningForestClustering(embedding="linear", **FAST),
    SpanningForestClustering(embedding="mlp", hidden_layer_sizes=(8,), **FAST),
]


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible_torch_estimator(estimator, check):
    check(estimator)

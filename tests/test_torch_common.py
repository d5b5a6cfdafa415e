"""scikit-learn's estimator checks over the registered instances whose fit needs
torch (``skdiffclust._registry``: PRCut, the forest's learned embeddings)."""

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from tests._estimators import check_instances, expected_failed_checks

# expected: the checks train a few epochs (ConvergenceWarning) on small data, where
# PRCut leaves clusters empty and shortens its neighbour lists, and the forest's
# embeddings, given no partial labels (the checks' y is ignored), learn nothing:
# UserWarnings
pytestmark = [
    pytest.mark.torch,
    pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
]


@parametrize_with_checks(check_instances(torch=True),
                         expected_failed_checks=expected_failed_checks)
def test_sklearn_compatible_torch_estimator(estimator, check):
    check(estimator)

"""scikit-learn's estimator checks over every registered estimator
(``skdiffclust._registry``: the instances of each entry's ``checks`` whose fit needs
no torch; ``test_torch_common.py`` runs the others)."""

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from tests._estimators import check_instances, expected_failed_checks

# expected: the checks train a few epochs (max_iter=3 to 20: ConvergenceWarning);
# the y they pass to fit is ignored (the forest's partial labels are partial_labels)
pytestmark = [
    pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning"),
]


# the checks feed distance matrices to metric='precomputed', which warns that they
# look like distances rather than similarities (what a user should hear)
@pytest.mark.filterwarnings("ignore:X looks like a distance matrix:UserWarning")
@parametrize_with_checks(check_instances(torch=False),
                         expected_failed_checks=expected_failed_checks)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)

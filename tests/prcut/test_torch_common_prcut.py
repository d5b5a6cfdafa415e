"""scikit-learn's estimator checks over PRCut with a user's torch module (its other
instances are the registry's, in ``test_torch_common.py``)."""

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from skdiffclust._registry import BY_NAME
from tests._estimators import expected_failed_checks as shared_failures

torch = pytest.importorskip("torch", reason="PRCut trains with torch")

# expected, as in test_torch_common.py: short trainings on small data
pytestmark = [
    pytest.mark.torch,
    pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
]

PRCUT = BY_NAME["PRCut"]

ESTIMATORS = [
    # a user's module: lazy, so that it reads any number of features; three
    # logits, the number of clusters the checks ask for; the registry's first
    # settings for the checks
    PRCUT.make(n_clusters=3, module=torch.nn.Sequential(
        torch.nn.LazyLinear(8), torch.nn.GELU(), torch.nn.LazyLinear(3)),
        **PRCUT.checks[0]),
]


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
    return {**shared_failures(estimator), **N_CLUSTERS_FAILURES}


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=expected_failed_checks)
def test_sklearn_compatible_prcut(estimator, check):
    check(estimator)

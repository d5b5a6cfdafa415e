"""The registry's estimators (:mod:`skdiffclust._registry`) as pytest parameters.

Tests that run over every estimator take them from here, so that a new method's
entry in the registry is all they need: one parameter per estimator, its id the
class name, its value the registry entry, marked ``torch`` where the fit needs it.
"""

import pytest

from skdiffclust._registry import BY_NAME, COUNTING, ESTIMATORS

TORCH = pytest.mark.torch


def each(select=None, *, trained=False, counting=False):
    """A ``pytest.param`` of each registered estimator that ``select(entry)`` keeps;
    ``trained``: under its :attr:`~skdiffclust._registry.Entry.training` parameters;
    ``counting``: and of each ``n_clusters='auto'`` instance (``COUNTING``)."""
    entries = ESTIMATORS + (COUNTING if counting else ())
    return [pytest.param(entry, id=entry.name, marks=_marks(entry, trained))
            for entry in entries if select is None or select(entry)]


def each_with(cases, leave_out=None, *, counting=False):
    """A ``pytest.param(case, entry)`` of each case and registered estimator (and
    ``n_clusters='auto'`` instance, ``counting``), but the pairs that
    ``leave_out(entry, case)`` names (an estimator the case's premise does not hold
    for: the caller says why)."""
    entries = ESTIMATORS + (COUNTING if counting else ())
    return [pytest.param(case, entry, id=f"{entry.name}-{case}", marks=_marks(entry, False))
            for entry in entries for case in cases
            if leave_out is None or not leave_out(entry, case)]


def _marks(entry, trained):
    return [TORCH] if entry.needs_torch(**(entry.training if trained else {})) else []


def check_instances(*, torch):
    """The instances scikit-learn's checks run on: those needing torch, or not."""
    return [entry.make(**params) for entry in ESTIMATORS + COUNTING for params in entry.checks
            if entry.needs_torch(**params) == torch]


# scikit-learn's checks that fit on rows of data of their own (1 to 10 features,
# iris's 4 as 2 x 2 pixels): not images of at least 4 x 4 pixels, which an
# estimator that reads images refuses ("X has shape (30, 3): give images ...").
# The registry's tests fit it on their rows as images (Entry.as_input) instead:
# test_conventions, test_bad_inputs, test_adversarial, test_training_contract
CHECKS_ON_ROWS = (
    "check_array_api_input", "check_clustering", "check_dict_unchanged",
    "check_dont_overwrite_parameters", "check_dtype_object",
    "check_estimators_dtypes", "check_estimators_fit_returns_self",
    "check_estimators_nan_inf", "check_estimators_overwrite_params",
    "check_estimators_pickle", "check_f_contiguous_array_estimator",
    "check_fit2d_1feature", "check_fit2d_predict1d",
    "check_fit_check_is_fitted", "check_fit_idempotent", "check_fit_score_takes_y",
    "check_methods_sample_order_invariance", "check_methods_subset_invariance",
    "check_n_features_in", "check_n_features_in_after_fitting",
    "check_pipeline_consistency", "check_positive_only_tag_during_fit",
    "check_readonly_memmap_input", "check_transformer_data_not_an_array",
    "check_transformer_general", "check_transformer_n_iter",
    "check_transformer_preserve_dtypes",
)


def expected_failed_checks(estimator):
    """The scikit-learn checks that cannot pass on ``estimator``, with why."""
    if BY_NAME[type(estimator).__name__].images:
        return {check: "the check fits rows of a few features, which are not images of "
                "at least 4 x 4 pixels" for check in CHECKS_ON_ROWS}
    entry = BY_NAME[type(estimator).__name__]
    if entry.training_needs_labels and any(
            getattr(estimator, name, None) is not None for name in entry.training):
        # test_training_contract.py holds the epochs, fitted with partial labels
        return {"check_transformer_n_iter": (
            "the check's y is ignored, and a training that learns from partial labels "
            "runs no epoch without them (n_iter_ = 0)")}
    if getattr(estimator, "metric", None) == "precomputed":
        return {"check_clustering": (
            "the check feeds 2-D feature vectors, not the (n, n) similarity matrix that "
            "metric='precomputed' requires")}
    # scikit-learn's sparse checks read classifier tags of any estimator with
    # predict_proba that fits on sparse input (AttributeError for a clusterer);
    # test_conventions.py and the estimator's own tests fit and predict on every
    # sparse format instead. One that refuses sparse input passes them as it is.
    if hasattr(estimator, "predict_proba") and estimator.__sklearn_tags__().input_tags.sparse:
        return {check: "the check assumes that predict_proba belongs to a classifier"
                for check in ("check_estimator_sparse_array",
                              "check_estimator_sparse_matrix")}
    return {}

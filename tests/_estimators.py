"""The registry's estimators (:mod:`skdiffclust._registry`) as pytest parameters.

Tests that run over every estimator take them from here, so that a new method's
entry in the registry is all they need: one parameter per estimator, its id the
class name, its value the registry entry, marked ``torch`` where the fit needs it.
"""

import pytest

from skdiffclust._registry import ESTIMATORS

TORCH = pytest.mark.torch


def each(select=None, *, trained=False):
    """A ``pytest.param`` of each registered estimator that ``select(entry)`` keeps;
    ``trained``: under its :attr:`~skdiffclust._registry.Entry.training` parameters."""
    return [pytest.param(entry, id=entry.name, marks=_marks(entry, trained))
            for entry in ESTIMATORS if select is None or select(entry)]


def each_with(cases, leave_out=None):
    """A ``pytest.param(case, entry)`` of each case and registered estimator, but the
    pairs that ``leave_out(entry, case)`` names (an estimator the case's premise
    does not hold for: the caller says why)."""
    return [pytest.param(case, entry, id=f"{entry.name}-{case}", marks=_marks(entry, False))
            for entry in ESTIMATORS for case in cases
            if leave_out is None or not leave_out(entry, case)]


def _marks(entry, trained):
    return [TORCH] if entry.needs_torch(**(entry.training if trained else {})) else []


def check_instances(*, torch):
    """The instances scikit-learn's checks run on: those needing torch, or not."""
    return [entry.make(**params) for entry in ESTIMATORS for params in entry.checks
            if entry.needs_torch(**params) == torch]


def expected_failed_checks(estimator):
    """The scikit-learn checks that cannot pass on ``estimator``, with why."""
    if getattr(estimator, "metric", None) == "precomputed":
        return {"check_clustering": (
            "the check feeds 2-D feature vectors, not the (n, n) similarity matrix that "
            "metric='precomputed' requires")}
    # scikit-learn's sparse checks read classifier tags of any estimator with
    # predict_proba (AttributeError for a clusterer); test_conventions.py and the
    # estimator's own tests fit and predict on every sparse format instead
    if hasattr(estimator, "predict_proba"):
        return {check: "the check assumes that predict_proba belongs to a classifier"
                for check in ("check_estimator_sparse_array",
                              "check_estimator_sparse_matrix")}
    return {}

"""Proximal operators of the group lasso: closed forms and LassoNet's Hier-Prox."""

import numpy as np
import pytest
from scipy.optimize import minimize

from skdiffclust.gemini._proximal import group_soft_threshold, hierarchical_prox


def test_group_soft_threshold_shrinks_group_norms():
    W = np.array([[3.0, 4.0], [0.3, 0.4], [1.0, 0.0]])
    group = np.array([0, 1, 0])
    out = group_soft_threshold(W, group, 2, threshold=1.0)
    norm0 = np.sqrt(9 + 16 + 1)
    np.testing.assert_allclose(out[[0, 2]], W[[0, 2]] * (1 - 1 / norm0))
    np.testing.assert_array_equal(out[1], 0.0)  # norm 0.5 < 1: the group leaves


def _hier_prox_by_optimisation(theta, w, threshold, M):
    """min 1/2||t - theta||^2 + 1/2||v - w||^2 + threshold ||t|| s.t. |v_i| <= M ||t||."""
    k = theta.size

    def objective(z):
        t, v = z[:k], z[k:]
        return 0.5 * ((t - theta) ** 2).sum() + 0.5 * ((v - w) ** 2).sum() + threshold * np.sqrt(
            (t * t).sum() + 1e-16)

    constraints = [{"type": "ineq", "fun": lambda z, i=i: M * np.sqrt((z[:k] ** 2).sum() + 1e-16)
                    - abs(z[k + i])} for i in range(w.size)]
    best = None
    for start in (np.concatenate([theta, w]), np.zeros(k + w.size)):
        result = minimize(objective, start, constraints=constraints, method="SLSQP",
                          options={"ftol": 1e-12, "maxiter": 500})
        if best is None or result.fun < best.fun:
            best = result
    return best.fun, objective


@pytest.mark.parametrize("seed", range(8))
def test_hier_prox_solves_its_problem(seed):
    rng = np.random.default_rng(seed)
    theta = rng.standard_normal(3)
    w = rng.standard_normal(4)
    threshold, M = rng.uniform(0.1, 2.0), rng.uniform(0.5, 3.0)
    skip, first = hierarchical_prox(theta[None, :], w[None, :], np.array([0]), 1, threshold, M)
    reference, objective = _hier_prox_by_optimisation(theta, w, threshold, M)
    ours = objective(np.concatenate([skip[0], first[0]]))
    assert np.abs(first).max() <= M * np.linalg.norm(skip) + 1e-9
    assert ours <= reference + 1e-6


def test_hier_prox_with_a_zero_skip_row_gives_no_nan():
    # the reference implementation divides by ||theta|| = 0 here
    skip = np.zeros((2, 3))
    first = np.array([[5.0, -4.0], [0.1, 0.0]])
    new_skip, new_first = hierarchical_prox(skip, first, np.array([0, 1]), 2, 0.01, 10.0)
    assert np.all(np.isfinite(new_skip)) and np.all(np.isfinite(new_first))
    np.testing.assert_array_equal(new_skip, 0.0)


def test_hier_prox_drops_a_feature_from_both_layers():
    skip = np.array([[0.01, 0.0], [3.0, 1.0]])
    first = np.array([[0.05, -0.05, 0.02], [1.0, 1.0, 1.0]])
    new_skip, new_first = hierarchical_prox(skip, first, np.array([0, 1]), 2, 2.0, 10.0)
    np.testing.assert_array_equal(new_skip[0], 0.0)
    np.testing.assert_array_equal(new_first[0], 0.0)
    # feature 1: M (|theta| - threshold) = 10 (sqrt(10) - 2) bounds no first-layer
    # weight (all 1): the constraint is inactive, theta is group-soft-thresholded
    # and the first layer is left as it was
    np.testing.assert_allclose(new_skip[1], skip[1] * (1 - 2.0 / np.sqrt(10.0)), rtol=1e-14)
    np.testing.assert_array_equal(new_first[1], first[1])


def test_hier_prox_handles_feature_groups():
    rng = np.random.default_rng(3)
    skip = rng.standard_normal((4, 2))
    first = rng.standard_normal((4, 3))
    group = np.array([0, 0, 1, 1])
    new_skip, new_first = hierarchical_prox(skip, first, group, 2, 0.5, 2.0)
    for g in (0, 1):
        rows = group == g
        assert np.abs(new_first[rows]).max() <= 2.0 * np.linalg.norm(new_skip[rows]) + 1e-9

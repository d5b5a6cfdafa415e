"""GEMINI objectives: exact gradients (finite differences), invariances, degenerate cases."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import pairwise_distances

from skdiffclust.gemini import OBJECTIVES, gemini_value_and_grad


def _problem(n, k, seed, objective):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3))
    affinity = X @ X.T if objective.startswith("mmd") else pairwise_distances(X)
    logits = 2.0 * rng.standard_normal((n, k))
    proba = np.exp(logits - logits.max(1, keepdims=True))
    return proba / proba.sum(1, keepdims=True), affinity, rng


@pytest.mark.parametrize("objective", OBJECTIVES)
@pytest.mark.parametrize("n,k", [(6, 2), (15, 3), (30, 5)])
def test_gradient_matches_finite_differences(objective, n, k):
    proba, affinity, rng = _problem(n, k, n * k, objective)
    _, grad = gemini_value_and_grad(proba, affinity, objective)
    for _ in range(4):
        direction = rng.standard_normal((n, k))
        h = 1e-6
        plus, _ = gemini_value_and_grad(proba + h * direction, affinity, objective)
        minus, _ = gemini_value_and_grad(proba - h * direction, affinity, objective)
        assert (plus - minus) / (2 * h) == pytest.approx(float((grad * direction).sum()),
                                                         rel=1e-5, abs=1e-8)


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_value_is_nonnegative_and_invariant_to_cluster_order(objective):
    proba, affinity, _ = _problem(20, 4, 0, objective)
    value, grad = gemini_value_and_grad(proba, affinity, objective)
    permuted_value, permuted_grad = gemini_value_and_grad(proba[:, ::-1], affinity, objective)
    assert value >= 0
    assert permuted_value == pytest.approx(value)
    np.testing.assert_allclose(permuted_grad, grad[:, ::-1], atol=1e-10)


@pytest.mark.parametrize("objective", [o for o in OBJECTIVES if o != "mi"])
def test_separated_clusters_score_higher_than_mixed_ones(objective):
    # (the mutual information ignores the geometry: it cannot tell these apart)
    X = np.concatenate([np.zeros((10, 2)), np.full((10, 2), 5.0)])
    affinity = X @ X.T if objective.startswith("mmd") else pairwise_distances(X)
    good = np.repeat(np.eye(2) * 0.98 + 0.01, 10, axis=0)
    mixed = np.tile(np.eye(2) * 0.98 + 0.01, (10, 1))
    assert (gemini_value_and_grad(good, affinity, objective)[0]
            > gemini_value_and_grad(mixed, affinity, objective)[0])


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_degenerate_predictions_stay_finite(objective):
    proba, affinity, _ = _problem(12, 3, 1, objective)
    uniform = np.full_like(proba, 1.0 / 3)  # every cluster equals the data: MMD = 0
    empty = proba.copy()
    empty[:, 2] = 0.0  # a cluster that emptied
    empty /= empty.sum(1, keepdims=True)
    for P in (uniform, empty):
        value, grad = gemini_value_and_grad(P, affinity, objective)
        assert np.isfinite(value) and np.all(np.isfinite(grad))


def test_bad_arguments_raise():
    proba, affinity, _ = _problem(5, 2, 0, "mmd_ova")
    with pytest.raises(ValueError, match="objective"):
        gemini_value_and_grad(proba, affinity, "nope")
    with pytest.raises(ValueError, match="shape"):
        gemini_value_and_grad(proba, affinity[:4, :4], "mmd_ova")


@pytest.mark.parametrize("spoil, objective, error, match", [
    # values without meaning before: 346.5 for logits; Wasserstein 0.0 and no gradient
    (lambda P, A: (P * 3.0 - 1.0, A), "mi", ValueError, "negative entries"),
    (lambda P, A: (P * 3.0 - 1.0, A), "wasserstein_ovo", ValueError, "negative entries"),
    (lambda P, A: (P * 2.0, A), "mi", ValueError, "rows summing to 1"),  # doubled
    # a negative GEMINI from negative "distances"; a distance matrix as a kernel
    (lambda P, A: (P, -A - 1.0), "wasserstein_ovo", ValueError, "non-negative distances"),
    (lambda P, A: (P, A), "mmd_ova", ValueError, "not a kernel"),
    (lambda P, A: (P, np.exp(-A**2)), "wasserstein_ova", ValueError, "not a distance"),
    # torch's or NumPy's errors before
    (lambda P, A: (P, sp.csr_matrix(np.exp(-A**2))), "mmd_ovo", TypeError, "dense array"),
    (lambda P, A: (torch_tensor(P), np.exp(-A**2)), "mmd_ovo", ValueError,
     "proba is a torch tensor that requires grad"),
])
def test_what_is_not_probabilities_kernels_or_distances_is_refused(spoil, objective, error,
                                                                   match):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((8, 2))
    P = rng.dirichlet(np.ones(3), size=8)
    proba, affinity = spoil(P, pairwise_distances(X))
    with pytest.raises(error, match=match):
        gemini_value_and_grad(proba, affinity, objective)


def torch_tensor(values):
    torch = pytest.importorskip("torch", reason="needs torch (the tensor to refuse)")
    return torch.tensor(values, requires_grad=True)


@pytest.mark.parametrize("objective", [o for o in OBJECTIVES if o != "mi"])
def test_non_finite_affinity_raises(objective):
    proba, affinity, _ = _problem(6, 2, 0, objective)
    affinity[1, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        gemini_value_and_grad(proba, affinity, objective)


@pytest.mark.parametrize("objective", [o for o in OBJECTIVES if o != "mi"])
def test_an_affinity_whose_sum_overflows_says_to_rescale(objective):
    """A NaN value and gradient, with only NumPy's RuntimeWarnings, before; the torch
    objective refuses the same matrix."""
    proba, affinity, _ = _problem(6, 2, 0, objective)
    with pytest.raises(ValueError, match="too large for float64.*rescale"):
        gemini_value_and_grad(proba, affinity / np.abs(affinity).max() * 1e308, objective)
    value, grad = gemini_value_and_grad(proba, affinity * 1e200, objective)
    assert np.isfinite(value) and np.isfinite(grad).all()


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_no_samples_raise(objective):
    with pytest.raises(ValueError, match="at least one sample"):
        gemini_value_and_grad(np.empty((0, 3)), np.empty((0, 0)), objective)


def _kernel_inputs(sparse):
    import scipy.sparse as sp

    from skdiffclust.gemini._data import Standardisation

    rng = np.random.default_rng(0)
    X = rng.standard_normal((25, 4)) * [1.0, 3.0, 0.5, 2.0] + 7.0
    X[rng.uniform(size=X.shape) < 0.3] = 0.0
    standardisation = Standardisation(sp.csr_matrix(X) if sparse else X)
    inputs = standardisation.inputs(sp.csr_matrix(X) if sparse else X)
    Phi = (X - X.mean(0)) / standardisation.global_scale  # the kernel's coordinates
    return inputs, standardisation.kernel_weights, Phi @ Phi.T


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("objective", ["mmd_ova", "mmd_ovo"])
def test_linear_kernel_from_features_equals_the_kernel_matrix(objective, sparse):
    """Three restarts at once, the kernel never formed, dense or CSR: same GEMINI."""
    from skdiffclust.gemini._data import LinearKernel
    from skdiffclust.gemini._objectives import batched_gemini

    inputs, weights, K = _kernel_inputs(sparse)
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((3, 25, 4))
    T = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    values, grads = batched_gemini(T, LinearKernel(inputs, weights), objective)
    for r in range(3):
        value, grad = gemini_value_and_grad(T[r], K, objective)
        assert values[r] == pytest.approx(value, rel=1e-10)
        np.testing.assert_allclose(grads[r], grad, rtol=1e-8, atol=1e-12)

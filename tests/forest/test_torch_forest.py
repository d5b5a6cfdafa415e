"""Differentiable spanning forests in torch: values, gradients, estimators, errors."""

import numpy as np
import pytest
import torch

from skdiffclust import spanning_forest
from skdiffclust.torch import (
    constraints_from_labels,
    partial_fenchel_young_loss,
    perturbed_spanning_forest,
)

pytestmark = pytest.mark.torch


def _similarity(n=12, d=3, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=dtype)
    S = -torch.cdist(X, X) ** 2
    return (S - S.mean()) / S.std()


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def test_gradient_of_forest_value_is_the_mean_forest():
    S = _similarity().requires_grad_(True)
    A, F, M = perturbed_spanning_forest(S, 3, n_samples=50, generator=_gen())
    F.backward()
    torch.testing.assert_close(S.grad, A)


def test_outputs_are_symmetric_bounded_and_structured():
    n, k = 15, 4
    S = _similarity(n)
    A, F, M = perturbed_spanning_forest(S, k, epsilon=0.5, n_samples=200, generator=_gen())
    for P in (A, M):
        torch.testing.assert_close(P, P.T)
        assert P.min() >= 0 and P.max() <= 1
    assert torch.all(torch.diagonal(A) == 0)
    assert torch.all(torch.diagonal(M) == 1)
    # every sample is a k-forest: n - k edges, each counted twice
    assert A.sum().item() == pytest.approx(2 * (n - k))
    # an edge joins two samples of the same tree
    assert torch.all(A <= M + 1e-6)


@pytest.mark.parametrize("constrained", [False, True])
def test_small_epsilon_gives_the_exact_forest(constrained):
    S = _similarity(20, seed=3)
    y = np.array([0, 1, 2] + [-1] * 17)
    C = constraints_from_labels(y) if constrained else None
    A, F, M = perturbed_spanning_forest(S, 4, epsilon=1e-6, n_samples=5, constraints=C,
                                        generator=_gen())
    A_exact, M_exact = spanning_forest(S.numpy(), 4, constraints=None if C is None else C.numpy())
    np.testing.assert_array_equal(A.numpy(), A_exact)
    np.testing.assert_array_equal(M.numpy(), M_exact)
    assert F.item() == pytest.approx(float((A_exact * S.numpy()).sum()), abs=1e-3)


def test_same_generator_seed_gives_the_same_samples():
    S = _similarity()
    first = perturbed_spanning_forest(S, 3, epsilon=1.0, n_samples=20, generator=_gen(7))
    second = perturbed_spanning_forest(S, 3, epsilon=1.0, n_samples=20, generator=_gen(7))
    other = perturbed_spanning_forest(S, 3, epsilon=1.0, n_samples=20, generator=_gen(8))
    for a, b in zip(first, second):
        torch.testing.assert_close(a, b)
    assert not torch.equal(first[0], other[0])


def test_float64_input_gives_float64_outputs():
    S = _similarity(dtype=torch.float64)
    A, F, M = perturbed_spanning_forest(S, 3, n_samples=10, generator=_gen())
    assert A.dtype == F.dtype == M.dtype == torch.float64


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_is_solved_in_float32_and_returned_in_its_dtype(dtype):
    # bfloat16 has no NumPy type: it failed inside the conversion to NumPy
    S = _similarity()
    half = perturbed_spanning_forest(S.to(dtype), 3, n_samples=10, generator=_gen())
    full = perturbed_spanning_forest(S.to(dtype).float(), 3, n_samples=10, generator=_gen())
    for a, b in zip(half, full):
        assert a.dtype == dtype
        torch.testing.assert_close(a, b.to(dtype))


def test_partial_loss_is_nonnegative_and_vanishes_on_separated_embeddings():
    g = _gen(1)
    y = torch.tensor([0] * 5 + [1] * 5 + [2] * 5)
    partial = y.clone()
    partial[::2] = -1
    C = constraints_from_labels(partial)
    # random embeddings: the constraints are violated, the loss is positive
    emb = torch.randn(15, 2, generator=g)
    S = -torch.cdist(emb, emb) ** 2
    loss = partial_fenchel_young_loss((S - S.mean()) / S.std(), C, 3, n_samples=200, generator=g)
    assert loss.item() > 0.1
    # clusters far apart, in the labels' order: every forest satisfies them
    centers = torch.tensor([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    emb = centers[y] + 0.1 * torch.randn(15, 2, generator=g)
    S = -torch.cdist(emb, emb) ** 2
    loss = partial_fenchel_young_loss((S - S.mean()) / S.std(), C, 3, n_samples=200, generator=g)
    assert abs(loss.item()) < 1e-6


def test_partial_loss_is_nonnegative_per_draw():
    for seed in range(10):
        S = _similarity(10, seed=seed)
        C = constraints_from_labels(torch.tensor([0, 1, 0, 1, -1, -1, 2, -1, -1, -1]))
        loss = partial_fenchel_young_loss(S, C, 3, epsilon=0.5, n_samples=20, generator=_gen(seed))
        assert loss.item() >= -1e-5


def test_partial_loss_gradient_matches_finite_differences():
    # with the noise fixed by the seed, the Monte-Carlo loss is piecewise linear in
    # S and its gradient is exactly the autograd gradient away from the kinks
    S = _similarity(6, seed=4, dtype=torch.float64).requires_grad_(True)
    C = constraints_from_labels(torch.tensor([0, 0, 1, -1, -1, 1]))

    def loss_at(M):
        return partial_fenchel_young_loss(M, C, 2, epsilon=0.3, n_samples=2000, generator=_gen(11))

    loss_at(S).backward()
    rng = np.random.default_rng(0)
    for _ in range(5):
        V = torch.as_tensor(rng.standard_normal((6, 6)))
        V = (V + V.T) / 2
        h = 1e-6
        with torch.no_grad():
            fd = (loss_at(S + h * V) - loss_at(S - h * V)) / (2 * h)
        assert fd.item() == pytest.approx(float((S.grad * V).sum()), rel=1e-4, abs=1e-6)


def test_score_function_gradient_of_the_connectivity_matches_smoothed_finite_differences():
    S = torch.tensor([[0.0, 1.0, 0.2], [1.0, 0.0, 0.6], [0.2, 0.6, 0.0]], dtype=torch.float64)
    G = torch.tensor([[0.0, 1.0, -2.0], [1.0, 0.0, 0.5], [-2.0, 0.5, 0.0]], dtype=torch.float64)
    V = torch.tensor([[0.0, 0.3, -1.0], [0.3, 0.0, 0.7], [-1.0, 0.7, 0.0]], dtype=torch.float64)
    eps, n_samples = 0.5, 200_000

    def objective(M):
        A, _, Mc = perturbed_spanning_forest(M, 2, epsilon=eps, n_samples=n_samples,
                                             generator=_gen(5))
        return (G * Mc).sum() + (G * A).sum()

    S_var = S.clone().requires_grad_(True)
    objective(S_var).backward()
    estimate = float((S_var.grad * V).sum())
    h = 0.1
    with torch.no_grad():
        fd = float((objective(S + h * V) - objective(S - h * V)) / (2 * h))
    assert estimate == pytest.approx(fd, abs=0.03 * max(1.0, abs(fd)))


def test_control_variate_reduces_the_variance_of_the_gradient():
    # clustered data, small noise: most sampled forests share most edges with the
    # unperturbed one, which is when subtracting it helps
    g = _gen(2)
    centers = torch.tensor([[0.0, 0.0], [4.0, 0.0], [0.0, 4.0]], dtype=torch.float64)
    X = centers[torch.arange(30) % 3] + torch.randn(30, 2, generator=g, dtype=torch.float64)
    S = -torch.cdist(X, X) ** 2
    S = (S - S.mean()) / S.std()
    G = torch.as_tensor(np.random.default_rng(0).standard_normal((30, 30)))

    def gradient(seed, control_variate):
        S_var = S.clone().requires_grad_(True)
        A, _, _ = perturbed_spanning_forest(S_var, 3, epsilon=0.05, n_samples=20,
                                            generator=_gen(seed),
                                            control_variate=control_variate)
        (G * A).sum().backward()
        return S_var.grad

    plain = torch.stack([gradient(s, False) for s in range(40)])
    reduced = torch.stack([gradient(s, True) for s in range(40)])
    assert reduced.var(0).sum() < 0.7 * plain.var(0).sum()


# ------------------------------------------------------------------ errors
@pytest.mark.parametrize("S,match", [
    (torch.zeros(3, 4), "square"),
    (torch.zeros(3), "square"),
    (torch.tensor([[0.0, 1.0], [0.0, 0.0]]), "symmetric"),
    (torch.tensor([[0.0, float("nan")], [float("nan"), 0.0]]), "NaN"),
    # a forest's weight overflows float32 (it came back as inf, with a NumPy warning)
    (torch.full((4, 4), 3e38), "too large"),
])
def test_bad_similarity_raises(S, match):
    with pytest.raises(ValueError, match=match):
        perturbed_spanning_forest(S, 1)


def test_bad_parameters_raise():
    S = _similarity(5)
    with pytest.raises(ValueError, match="epsilon"):
        perturbed_spanning_forest(S, 2, epsilon=0.0)
    with pytest.raises(ValueError, match="epsilon"):
        perturbed_spanning_forest(S, 2, epsilon=-1.0)
    with pytest.raises(ValueError, match="n_samples"):
        perturbed_spanning_forest(S, 2, n_samples=0)
    with pytest.raises(ValueError, match="n_clusters"):
        perturbed_spanning_forest(S, 6)
    with pytest.raises(TypeError, match="torch.Tensor"):
        perturbed_spanning_forest(S.numpy(), 2)


def test_bad_constraints_raise():
    S = _similarity(5)
    with pytest.raises(ValueError, match="shape"):
        partial_fenchel_young_loss(S, torch.zeros(4, 4), 2)
    C = torch.zeros(5, 5, dtype=torch.int8)
    C[0, 1] = C[1, 0] = C[1, 2] = C[2, 1] = 1
    C[0, 2] = C[2, 0] = -1
    with pytest.raises(ValueError, match="Contradictory"):
        partial_fenchel_young_loss(S, C, 2)
    C = constraints_from_labels(torch.tensor([0, 1, 2, -1, -1]))
    with pytest.raises(ValueError, match="infeasible"):
        partial_fenchel_young_loss(S, C, 2)
    with pytest.raises(ValueError, match="required"):
        partial_fenchel_young_loss(S, None, 2)

"""Torch autograd operators on top of the numba perturbed solver.

The forward pass runs on the CPU: a tensor on another device is copied to the CPU,
solved, and the results are copied back to its device (a documented round trip;
the forests themselves are combinatorial and cheap next to the noise). Gradients:

* ``dF_eps / dS = A_eps`` exactly, from the forward samples (no second solve);
* vector-Jacobian products of ``A_eps`` and ``M_eps`` by the score-function
  estimator ``E[<G, Y> Z] / eps``, regenerating the noise from its seed, with the
  optional control variate ``Y - Y(S)``, which has mean zero against Z;
* the partial Fenchel-Young loss ``F_eps(S) - F_eps(S; C)`` has gradient
  ``A_eps(S) - A_eps(S; C)``, both terms from the same noise draw.
"""

import numpy as np
import torch

from skdiffclust._utils._validation import is_symmetric
from skdiffclust.forest._constraints import Constraints
from skdiffclust.forest._dense import kernel_constraints
from skdiffclust.forest._perturbed import (
    adjacency_inner,
    connectivity_inner,
    mean_adjacency,
    mean_connectivity,
    perturbed_forests,
    score_function_gradient,
)
from skdiffclust.forest._solver import forest_from_similarity

MAX_SEED = 2**62


def seed_from_generator(generator):
    """A 62-bit seed for the numba noise, drawn from a torch generator (or torch's)."""
    device = generator.device if generator is not None else "cpu"
    return int(torch.randint(0, MAX_SEED, (1,), generator=generator, device=device).item())


def similarity_to_numpy(S):
    """Validate S and return its symmetric part as a CPU array (float32 or float64)."""
    if not isinstance(S, torch.Tensor):
        raise TypeError(f"S must be a torch.Tensor, got {type(S).__name__}.")
    if S.ndim != 2 or S.shape[0] != S.shape[1]:
        raise ValueError(
            f"S must be a square (n, n) similarity matrix, got shape {tuple(S.shape)}.")
    if not torch.is_floating_point(S):
        raise TypeError(f"S must be a floating point tensor, got dtype {S.dtype}.")
    dtype = np.float64 if S.dtype == torch.float64 else np.float32
    array = S.detach().to("cpu").numpy().astype(dtype, copy=False)
    if not np.all(np.isfinite(array)):
        raise ValueError("S contains NaN or infinity.")
    if not is_symmetric(array):
        raise ValueError("S must be a symmetric similarity matrix.")
    return np.ascontiguousarray(0.5 * (array + array.T), dtype=dtype)


def check_perturbation(epsilon, n_samples):
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float, np.floating)):
        raise TypeError(f"epsilon must be a positive float, got {epsilon!r}.")
    if not np.isfinite(epsilon) or epsilon <= 0:
        raise ValueError(f"epsilon must be > 0, got {epsilon!r}.")
    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)):
        raise TypeError(f"n_samples must be an integer, got {n_samples!r}.")
    if n_samples < 1:
        raise ValueError(f"n_samples must be >= 1, got {n_samples}.")


def parse_constraints(constraints, n):
    """Constraints object from an n x n +1/-1/0 matrix (tensor or array), or None."""
    if constraints is None or isinstance(constraints, Constraints):
        return constraints
    if isinstance(constraints, torch.Tensor):
        constraints = constraints.detach().to("cpu").numpy()
    return Constraints.from_matrix(constraints, n)


def check_feasible(constraints, n_clusters):
    """Raise when the constraints cannot give exactly ``n_clusters`` trees."""
    if constraints is None:
        return
    feasible = constraints.feasible_n_clusters()
    if feasible is not None and not feasible[0] <= n_clusters <= feasible[1]:
        lo, hi = feasible
        raise ValueError(
            f"n_clusters={n_clusters} is infeasible under these constraints: they "
            f"allow between {lo} and {hi} clusters."
        )


class PerturbedProblem:
    """One call of the perturbed solver: inputs, noise seed, and the samples drawn."""

    def __init__(self, S, n_clusters, epsilon, n_samples, constraints, seed):
        self.S = S
        self.n = S.shape[0]
        self.n_clusters = n_clusters
        self.epsilon = float(epsilon)
        self.n_samples = int(n_samples)
        self.constraints = constraints
        self.seed = seed

    def kernel_constraints(self):
        """The constraints as the kernels take them (``_dense.kernel_constraints``)."""
        if self.constraints is None or self.constraints.is_empty:
            group_ptr, members, group, rooted, _, _ = Constraints.empty_kernel_arrays(self.n)
            return group_ptr, members, group, rooted, None
        return kernel_constraints(self.constraints)

    def solve(self, want_free, want_constrained, want_labels=True):
        """Run the samples; returns the (unconstrained, constrained) sample sets,
        None where not wanted (``_perturbed.new_sample_set``)."""
        return perturbed_forests(
            self.S, self.n_clusters, self.epsilon, self.seed, self.n_samples, want_free,
            self.kernel_constraints() if want_constrained else None, want_labels,
        )

    def exact_forest(self):
        """Edges and labels of the unperturbed forest, for the control variate."""
        forest = forest_from_similarity(self.S, self.n_clusters, constraints=self.constraints)
        edges = forest.edges.astype(np.int32)[None]
        return edges, np.array([edges.shape[1]]), forest.labels[None]


def _to_tensor(array, like):
    return torch.as_tensor(array, dtype=like.dtype).to(like.device)


class PerturbedForestFunction(torch.autograd.Function):
    """(A_eps, F_eps, M_eps) of a perturbed problem, differentiable w.r.t. S."""

    @staticmethod
    def forward(ctx, S, problem, control_variate):
        ctx.set_materialize_grads(False)
        constrained = problem.constraints is not None and not problem.constraints.is_empty
        free, con = problem.solve(not constrained, constrained)
        edges, n_edges, values, labels, _ = con if constrained else free
        A = mean_adjacency(problem.n, edges, n_edges)
        M = mean_connectivity(labels)
        ctx.problem = problem
        ctx.samples = (edges, n_edges, labels)
        ctx.control_variate = control_variate
        ctx.save_for_backward(_to_tensor(A, S))
        return _to_tensor(A, S), _to_tensor(values.mean(), S), _to_tensor(M, S)

    @staticmethod
    def backward(ctx, grad_A, grad_F, grad_M):
        (A,) = ctx.saved_tensors
        problem = ctx.problem
        grad_S = None
        if grad_F is not None:
            grad_S = grad_F * A
        if grad_A is not None or grad_M is not None:
            coefficients = _score_coefficients(ctx, grad_A, grad_M)
            score = score_function_gradient(problem.n, problem.epsilon, problem.seed, coefficients)
            score = _to_tensor(score, A)
            grad_S = score if grad_S is None else grad_S + score
        return grad_S, None, None


def _score_coefficients(ctx, grad_A, grad_M):
    """<G_A, A_s> + <G_M, M_s> per sample, minus the same for the exact forest."""
    edges, n_edges, labels = ctx.samples
    exact = ctx.problem.exact_forest() if ctx.control_variate else None
    coefficients = np.zeros(edges.shape[0])
    if grad_A is not None:
        G = grad_A.detach().to("cpu", torch.float64).numpy()
        coefficients += adjacency_inner(G, edges, n_edges)
        if exact is not None:
            coefficients -= adjacency_inner(G, exact[0], exact[1])[0]
    if grad_M is not None:
        G = grad_M.detach().to("cpu", torch.float64).numpy()
        coefficients += connectivity_inner(G, labels)
        if exact is not None:
            coefficients -= connectivity_inner(G, exact[2])[0]
    return coefficients


class PartialFenchelYoungFunction(torch.autograd.Function):
    """F_eps(S) - F_eps(S; C), with gradient A_eps(S) - A_eps(S; C)."""

    @staticmethod
    def forward(ctx, S, problem):
        free, con = problem.solve(True, True, want_labels=False)
        A_free = mean_adjacency(problem.n, free[0], free[1])
        A_con = mean_adjacency(problem.n, con[0], con[1])
        ctx.save_for_backward(_to_tensor(A_free - A_con, S))
        return _to_tensor(free[2].mean() - con[2].mean(), S)

    @staticmethod
    def backward(ctx, grad_loss):
        (direction,) = ctx.saved_tensors
        return grad_loss * direction, None

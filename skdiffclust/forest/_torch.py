"""The spanning forests' torch operators: perturbed forests and the partial Fenchel-Young loss.

:func:`perturbed_spanning_forest`, :func:`partial_fenchel_young_loss` and
:func:`constraints_from_labels` are public in :mod:`skdiffclust.torch`. They take a
symmetric similarity matrix ``S`` (n x n; larger means more similar, e.g. negative
squared distances between embeddings) and perturb it with symmetric Gaussian noise
``epsilon * Z`` (independent entries above the diagonal). For ``S`` on a CUDA device
the samples are solved there (``_gpu.py``); otherwise by the numba solver
(``_perturbed.py``), the forward pass on the CPU: a tensor on another device is
copied to the CPU, solved, and the results are copied back to its device (the
forests themselves are combinatorial and cheap next to the noise). Same noise for
the same CPU generator, same forests, same gradients. Constraints whose cannot-links
are not complete between must-link groups (never the case for partial labels) are
solved on the CPU in both cases.

Gradients:

* ``dF_eps / dS = A_eps`` exactly, from the forward samples (no second solve);
* vector-Jacobian products of ``A_eps`` and ``M_eps`` by the score-function
  estimator ``E[<G, Y> Z] / eps``, regenerating the noise from its seed, with the
  optional control variate ``Y - Y(S)``, which has mean zero against Z;
* the partial Fenchel-Young loss ``F_eps(S) - F_eps(S; C)`` has gradient
  ``A_eps(S) - A_eps(S; C)``, both terms from the same noise draw.
"""

import numpy as np
import torch

from skdiffclust._utils._cuda import is_numba_error
from skdiffclust._utils._torch_checks import check_dense, check_flag, check_generator
from skdiffclust._utils._validation import check_n_clusters, is_symmetric
from skdiffclust._utils._warn import warn_user
from skdiffclust.forest._constraints import Constraints
from skdiffclust.forest._constraints import constraints_from_labels as _labels_to_matrix
from skdiffclust.forest._dense import kernel_constraints
from skdiffclust.forest._perturbed import (
    adjacency_inner,
    connectivity_inner,
    mean_adjacency,
    mean_connectivity,
    perturbed_forests,
    score_function_gradient,
)
from skdiffclust.forest._seeds import seed_from_generator
from skdiffclust.forest._solver import forest_from_similarity


def similarity_to_numpy(S):
    """Validate S and return its symmetric part as a CPU array (float32 or float64)."""
    if not isinstance(S, torch.Tensor):
        raise TypeError(f"S must be a torch.Tensor, got {type(S).__name__}.")
    check_dense(S, "S")
    if S.ndim != 2 or S.shape[0] != S.shape[1]:
        raise ValueError(
            f"S must be a square (n, n) similarity matrix, got shape {tuple(S.shape)}.")
    if not torch.is_floating_point(S):
        raise TypeError(f"S must be a floating point tensor, got dtype {S.dtype}.")
    # half precisions (bfloat16 has no NumPy type) are solved in float32
    torch_dtype = torch.float64 if S.dtype == torch.float64 else torch.float32
    array = S.detach().to("cpu", torch_dtype).numpy()
    if not np.all(np.isfinite(array)):
        raise ValueError("S contains NaN or infinity.")
    if not is_symmetric(array):
        raise ValueError("S must be a symmetric similarity matrix.")
    # halves first: the sum of two entries near the dtype's largest overflows
    return np.ascontiguousarray(0.5 * array + 0.5 * array.T)


# below it, 1 / (2 epsilon n_samples) of the score-function gradient overflows
SMALLEST_EPSILON = float(np.finfo(np.float64).tiny)
# the kernels' standard normals come from 24-bit uniforms: |Z| <= sqrt(48 ln 2) = 5.77
NOISE_BOUND = 6.0


def check_perturbation(epsilon, n_samples):
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float, np.floating)):
        raise TypeError(f"epsilon must be a positive float, got {epsilon!r}.")
    if not np.isfinite(epsilon) or epsilon <= 0:
        raise ValueError(f"epsilon must be > 0, got {epsilon!r}.")
    if epsilon < SMALLEST_EPSILON:
        raise ValueError(
            f"epsilon must be at least {SMALLEST_EPSILON:.3g} (float64's smallest normal "
            f"number; the gradients divide by it), got {epsilon!r}.")
    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)):
        raise TypeError(f"n_samples must be an integer, got {n_samples!r}.")
    if n_samples < 1:
        raise ValueError(f"n_samples must be >= 1, got {n_samples}.")


def check_scale(largest, n, dtype, epsilon, n_samples):
    """Raise when the forests' weights of ``S + epsilon Z`` could overflow.

    ``largest`` is max |S| of the n x n matrix, solved in ``dtype``. A sample's
    forest weight counts at most 2 (n - 1) entries of at most ``largest + 6
    epsilon`` (both triangles); it is returned in ``dtype``, the means add
    ``n_samples`` of them in float64, and the partial Fenchel-Young loss subtracts
    two means.
    """
    weight = 2.0 * max(n - 1, 0) * (largest + NOISE_BOUND * float(epsilon))
    if 2.0 * weight <= float(np.finfo(dtype).max) and \
            weight * n_samples <= float(np.finfo(np.float64).max):
        return
    raise ValueError(
        f"S (max |S| = {largest:.3g}) and epsilon={epsilon!r} are too large for "
        f"{np.dtype(dtype)}: the perturbed forests' weights, each up to 2 (n - 1) "
        f"(max |S| + 6 epsilon) = {weight:.3g}, overflow (in {np.dtype(dtype)}, or "
        f"summed over n_samples={n_samples}). Rescale S, or lower epsilon.")


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


# ------------------------------------------------------------ public operators
def _parse_constraints(constraints, n):
    """Constraints from an (n, n) matrix, (n,) partial labels or a Constraints."""
    if isinstance(constraints, torch.Tensor) and constraints.ndim == 1:
        constraints = constraints.detach().to("cpu").numpy()
    if isinstance(constraints, (np.ndarray, list, tuple)) and np.ndim(constraints) == 1:
        if len(constraints) != n:
            raise ValueError(
                f"constraints given as partial labels must have {n} entries like S, "
                f"got {len(constraints)}.")
        return Constraints.from_labels(np.asarray(constraints), n, name="constraints")
    return parse_constraints(constraints, n)


def _problem(S, n_clusters, epsilon, n_samples, constraints, generator):
    if isinstance(S, torch.Tensor) and S.device.type == "meta":
        raise ValueError("S is on the meta device, which holds no values: the forests "
                         "are solved from them.")
    array = similarity_to_numpy(S)
    check_n_clusters(n_clusters, array.shape[0])
    check_perturbation(epsilon, n_samples)
    largest = max(float(array.max()), -float(array.min()))  # n >= 1: checked
    check_scale(largest, array.shape[0], array.dtype, epsilon, n_samples)
    parsed = _parse_constraints(constraints, array.shape[0])
    check_feasible(parsed, n_clusters)
    seed = seed_from_generator(generator)
    return PerturbedProblem(array, n_clusters, epsilon, n_samples, parsed, seed)


def _check_device_similarity(S):
    """The checks of ``similarity_to_numpy`` on the device, with one read back;
    returns max |S| (0.0 for an empty S)."""
    if S.ndim != 2 or S.shape[0] != S.shape[1]:
        raise ValueError(
            f"S must be a square (n, n) similarity matrix, got shape {tuple(S.shape)}.")
    if not torch.is_floating_point(S):
        raise TypeError(f"S must be a floating point tensor, got dtype {S.dtype}.")
    if S.numel() == 0:
        return 0.0  # check_n_clusters reports it
    A = S.detach() if S.dtype == torch.float64 else S.detach().to(torch.float32)
    finite = torch.isfinite(A).all()
    largest = A.abs().max()
    tolerance = float(np.sqrt(torch.finfo(A.dtype).eps)) * largest
    symmetric = ((A - A.T).abs() <= tolerance).all()
    finite, symmetric, largest = torch.stack(
        [finite.to(A.dtype), symmetric.to(A.dtype), largest]).tolist()
    if not finite:
        raise ValueError("S contains NaN or infinity.")
    if not symmetric:
        raise ValueError("S must be a symmetric similarity matrix.")
    return largest


def _device_constraints(S, n_clusters, epsilon, n_samples, constraints):
    """Validate a CUDA call; the parsed constraints, or ``False`` to solve on the CPU.

    The CPU solver takes problems the device solver does not: general cannot-link
    structures, and single points.
    """
    largest = _check_device_similarity(S)
    n = S.shape[0]
    check_n_clusters(n_clusters, n)
    check_perturbation(epsilon, n_samples)
    check_scale(largest, n, np.float64 if S.dtype == torch.float64 else np.float32, epsilon,
                n_samples)
    parsed = _parse_constraints(constraints, n)
    check_feasible(parsed, n_clusters)
    if n < 2 or (parsed is not None and parsed.rooted_samples() is None):
        return False
    return None if parsed is None or parsed.is_empty else parsed


def _on_cuda(S):
    return isinstance(S, torch.Tensor) and S.is_cuda


# numba's error, once the device solver failed on this machine (then the host solves)
_DEVICE_SOLVER_FAILURE = {"error": None}


def on_device_or_none(solve):
    """``solve()`` (a call of the device solver, ``_gpu``), or None where numba.cuda
    cannot run its kernels on this machine (no libNVVM, which torch's CUDA wheels do
    not bring; a driver too old for the PTX): that is warned about once, and the
    forests of CUDA tensors are solved on the host from then on, as on CPU tensors
    (the same forests; the similarities travel to the host and back)."""
    if _DEVICE_SOLVER_FAILURE["error"] is not None:
        return None
    try:
        return solve()
    except Exception as error:
        if not is_numba_error(error):
            raise
        _DEVICE_SOLVER_FAILURE["error"] = error
        warn_user(
            f"the perturbed spanning forests' CUDA solver cannot run here "
            f"({type(error).__name__}: {error}); CUDA tensors' forests are solved on the "
            "host CPU instead. Installing numba-cuda for this CUDA version enables it.",
            RuntimeWarning)
        return None


def perturbed_spanning_forest(S, n_clusters, *, epsilon=0.1, n_samples=100,
                              constraints=None, generator=None, control_variate=True):
    """Perturbed maximum-weight k-spanning forest, differentiable w.r.t. ``S``.

    Monte-Carlo estimates of definition 6 of Stewart et al. (2023):
    :math:`A_{k,\\varepsilon}^*(S) = E[A_k^*(S + \\varepsilon Z)]`,
    :math:`F_{k,\\varepsilon}(S) = E[F_k(S + \\varepsilon Z)]` and
    :math:`M_{k,\\varepsilon}^*(S) = E[M_k^*(S + \\varepsilon Z)]`, or their
    constrained versions when ``constraints`` is given.

    Parameters
    ----------
    S : torch.Tensor of shape (n, n)
        Symmetric similarity matrix.
    n_clusters : int
        Number of trees k.
    epsilon : float, default=0.1
        Noise amplitude.
    n_samples : int, default=100
        Number of Monte-Carlo samples.
    constraints : torch.Tensor or ndarray of shape (n, n) or (n,), default=None
        ``+1`` must-link, ``-1`` cannot-link, ``0`` unknown (see
        :func:`constraints_from_labels`), or partial labels (``-1`` unlabelled).
    generator : torch.Generator, default=None
        Source of the noise seed (torch's default generator if None). A CPU
        generator gives the same noise whatever S's device.
    control_variate : bool, default=True
        Subtract the unperturbed forest in the score-function gradient of ``A_eps``
        and ``M_eps``: same mean, lower variance.

    Returns
    -------
    A_eps : torch.Tensor of shape (n, n)
        Mean forest adjacency, in [0, 1], symmetric, zero diagonal.
    F_eps : torch.Tensor of shape ()
        Mean forest value :math:`\\langle A, S + \\varepsilon Z \\rangle` (both
        triangles counted), whose gradient is exactly ``A_eps``.
    M_eps : torch.Tensor of shape (n, n)
        Mean connectivity, in [0, 1], symmetric, unit diagonal.

    Notes
    -----
    Gradients flow to ``S`` from all three outputs: ``F_eps`` exactly (the forward
    samples give ``A_eps``), ``A_eps`` and ``M_eps`` by the score-function
    estimator :math:`E[\\langle G, Y \\rangle Z] / \\varepsilon`, which regenerates
    the noise from its seed instead of solving again.

    For ``S`` on a CUDA device, the samples are solved and reduced on that device;
    with the same CPU ``generator`` the noise, the forests and the gradients are
    those of the CPU solver.

    Examples
    --------
    >>> import torch
    >>> from skdiffclust.torch import perturbed_spanning_forest
    >>> x = torch.tensor([0.0, 0.1, 1.0, 1.1])
    >>> S = -(x[:, None] - x[None, :]) ** 2
    >>> S.requires_grad_(True)
    tensor(...)
    >>> A, F, M = perturbed_spanning_forest(S, 2, epsilon=1e-3, n_samples=10)
    >>> M.round().int()
    tensor([[1, 1, 0, 0],
            [1, 1, 0, 0],
            [0, 0, 1, 1],
            [0, 0, 1, 1]], dtype=torch.int32)
    >>> F.backward()
    >>> torch.equal(S.grad, A)
    True
    """
    check_generator(generator)
    if _on_cuda(S):
        parsed = _device_constraints(S, n_clusters, epsilon, n_samples, constraints)
        if parsed is not False:
            from skdiffclust.forest import _gpu  # numba.cuda, only for CUDA tensors

            solved = on_device_or_none(lambda: _gpu.perturbed_spanning_forest(
                S, n_clusters, epsilon=epsilon, n_samples=n_samples, constraints=parsed,
                generator=generator, control_variate=control_variate))
            if solved is not None:
                return solved
    problem = _problem(S, n_clusters, epsilon, n_samples, constraints, generator)
    return PerturbedForestFunction.apply(S, problem,
                                         check_flag(control_variate, "control_variate"))


def partial_fenchel_young_loss(S, constraints, n_clusters, *, epsilon=0.1, n_samples=100,
                               generator=None):
    """Perturbed partial Fenchel-Young loss between similarities and constraints.

    :math:`\\bar L_{FY,\\varepsilon}(S; M_\\Omega) = F_{k,\\varepsilon}(S) -
    F_{k,\\varepsilon}(S; M_\\Omega)` (Stewart et al., 2023, proposition 1), with
    gradient :math:`A_{k,\\varepsilon}^*(S) - A_{k,\\varepsilon}^*(S; M_\\Omega)`;
    both terms use the same noise draw. It is non-negative, and zero when the
    best forests already satisfy the constraints.

    Parameters
    ----------
    S : torch.Tensor of shape (n, n)
        Symmetric similarity matrix.
    constraints : torch.Tensor or ndarray of shape (n, n) or (n,)
        ``+1`` must-link, ``-1`` cannot-link, ``0`` unknown, or partial labels
        (``-1`` unlabelled).
    n_clusters : int
        Number of trees k; must be feasible under the constraints.
    epsilon : float, default=0.1
    n_samples : int, default=100
    generator : torch.Generator, default=None

    Returns
    -------
    loss : torch.Tensor of shape ()

    Examples
    --------
    >>> import torch
    >>> from skdiffclust.torch import constraints_from_labels, partial_fenchel_young_loss
    >>> emb = torch.tensor([[0.0], [0.1], [1.0], [1.1]], requires_grad=True)
    >>> S = -torch.cdist(emb, emb) ** 2
    >>> C = constraints_from_labels(torch.tensor([0, 1, -1, -1]))
    >>> loss = partial_fenchel_young_loss(S, C, 2, n_samples=50)
    >>> bool(loss > 0)
    True
    >>> loss.backward()
    >>> emb.grad.shape
    torch.Size([4, 1])
    """
    check_generator(generator)
    if _on_cuda(S):
        parsed = _device_constraints(S, n_clusters, epsilon, n_samples, constraints)
        if constraints is None:
            raise ValueError("constraints are required for the partial Fenchel-Young loss.")
        if parsed is not False:
            if parsed is None:  # no group: both forests coincide
                parsed = Constraints(np.full(S.shape[0], -1), np.zeros((0, 0), dtype=bool))
            from skdiffclust.forest import _gpu  # numba.cuda, only for CUDA tensors

            loss = on_device_or_none(lambda: _gpu.partial_fenchel_young_loss(
                S, parsed, n_clusters, epsilon=epsilon, n_samples=n_samples,
                generator=generator))
            if loss is not None:
                return loss
    problem = _problem(S, n_clusters, epsilon, n_samples, constraints, generator)
    if problem.constraints is None:
        raise ValueError("constraints are required for the partial Fenchel-Young loss.")
    return PartialFenchelYoungFunction.apply(S, problem)


def constraints_from_labels(y):
    """Constraint matrix from partial labels, as a tensor on the labels' device.

    Parameters
    ----------
    y : torch.Tensor or array-like of shape (n,)
        Integer labels, ``-1`` for unlabelled samples.

    Returns
    -------
    constraints : torch.Tensor of shape (n, n), int8
        ``+1`` same label, ``-1`` different labels, ``0`` where either is unlabelled.
    """
    device = y.device if isinstance(y, torch.Tensor) else "cpu"
    labels = y.detach().to("cpu").numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
    return torch.as_tensor(_labels_to_matrix(labels)).to(device)

"""The differentiable clustering objectives as PyTorch building blocks.

This module imports torch; the rest of skdiffclust does not. It gathers what the
method folders define, for use in your own models and training loops (see the
user guide, "The objectives in your own torch model"):

* perturbed spanning forests and the partial Fenchel-Young loss (Stewart et al.,
  NeurIPS 2023), defined here;
* :class:`PRCutLoss` and :class:`PRCutBatchPairs` (``prcut/_loss.py``,
  ``prcut/_device.py``): PRCut's batch objective and its batch pairs of a graph;
* :func:`gemini_loss` (``gemini/_torch.py``): the GEMINI objectives;
* :class:`ClAMLayer` and :func:`clam_loss` (``clam/_layer.py``): ClAM's
  associative-memory recursion and its pattern-completion loss;
* :func:`set_input_checks` (``_utils/_torch_checks.py``): how the blocks check the
  values of their inputs (on CUDA without waiting for the device).

The spanning-forest operators take a symmetric similarity matrix ``S`` (n x n; larger means more
similar, e.g. negative squared distances between embeddings) and perturb it with
symmetric Gaussian noise ``epsilon * Z`` (independent entries above the diagonal).
The Monte-Carlo samples are solved in parallel by numba kernels on the CPU, or, for
``S`` on a CUDA device, by CUDA kernels on that device (``forest/_gpu.py``): same
noise for the same CPU generator, same forests, same gradients. Constraints whose
cannot-links are not complete between must-link groups (never the case for partial
labels) are solved on the CPU in both cases, the results coming back to S's device.
"""

import numpy as np
import torch

from skdiffclust._utils._torch_checks import check_generator, set_input_checks
from skdiffclust._utils._validation import check_n_clusters
from skdiffclust.clam._layer import ClAMLayer, clam_loss
from skdiffclust.forest._constraints import Constraints
from skdiffclust.forest._constraints import constraints_from_labels as _labels_to_matrix
from skdiffclust.forest._torch_ops import (
    PartialFenchelYoungFunction,
    PerturbedForestFunction,
    PerturbedProblem,
    check_feasible,
    check_perturbation,
    parse_constraints,
    seed_from_generator,
    similarity_to_numpy,
)
from skdiffclust.gemini._torch import gemini_loss
from skdiffclust.prcut._device import PRCutBatchPairs
from skdiffclust.prcut._loss import PRCutLoss

__all__ = [
    "ClAMLayer",
    "PRCutBatchPairs",
    "PRCutLoss",
    "clam_loss",
    "constraints_from_labels",
    "gemini_loss",
    "partial_fenchel_young_loss",
    "perturbed_spanning_forest",
    "set_input_checks",
]


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
    parsed = _parse_constraints(constraints, array.shape[0])
    check_feasible(parsed, n_clusters)
    seed = seed_from_generator(generator)
    return PerturbedProblem(array, n_clusters, epsilon, n_samples, parsed, seed)


def _check_device_similarity(S):
    """The checks of ``similarity_to_numpy`` on the device, with one flag read back."""
    if S.ndim != 2 or S.shape[0] != S.shape[1]:
        raise ValueError(
            f"S must be a square (n, n) similarity matrix, got shape {tuple(S.shape)}.")
    if not torch.is_floating_point(S):
        raise TypeError(f"S must be a floating point tensor, got dtype {S.dtype}.")
    if S.numel() == 0:
        return  # check_n_clusters reports it
    A = S.detach() if S.dtype == torch.float64 else S.detach().to(torch.float32)
    finite = torch.isfinite(A).all()
    tolerance = float(np.sqrt(torch.finfo(A.dtype).eps)) * A.abs().max()
    symmetric = ((A - A.T).abs() <= tolerance).all()
    finite, symmetric = torch.stack([finite, symmetric]).tolist()
    if not finite:
        raise ValueError("S contains NaN or infinity.")
    if not symmetric:
        raise ValueError("S must be a symmetric similarity matrix.")


def _device_constraints(S, n_clusters, epsilon, n_samples, constraints):
    """Validate a CUDA call; the parsed constraints, or ``False`` to solve on the CPU.

    The CPU solver takes problems the device solver does not: general cannot-link
    structures, and single points.
    """
    _check_device_similarity(S)
    n = S.shape[0]
    check_n_clusters(n_clusters, n)
    check_perturbation(epsilon, n_samples)
    parsed = _parse_constraints(constraints, n)
    check_feasible(parsed, n_clusters)
    if n < 2 or (parsed is not None and parsed.rooted_samples() is None):
        return False
    return None if parsed is None or parsed.is_empty else parsed


def _on_cuda(S):
    return isinstance(S, torch.Tensor) and S.is_cuda


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
            from skdiffclust.forest import _gpu

            return _gpu.perturbed_spanning_forest(
                S, n_clusters, epsilon=epsilon, n_samples=n_samples, constraints=parsed,
                generator=generator, control_variate=control_variate)
    problem = _problem(S, n_clusters, epsilon, n_samples, constraints, generator)
    return PerturbedForestFunction.apply(S, problem, bool(control_variate))


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
            from skdiffclust.forest import _gpu

            if parsed is None:  # no group: both forests coincide
                parsed = Constraints(np.full(S.shape[0], -1), np.zeros((0, 0), dtype=bool))
            return _gpu.partial_fenchel_young_loss(
                S, parsed, n_clusters, epsilon=epsilon, n_samples=n_samples,
                generator=generator)
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

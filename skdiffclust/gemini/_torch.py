"""The GEMINI objectives as a torch loss, for any model that outputs cluster probabilities.

The same maths as the NumPy module :mod:`skdiffclust.gemini._objectives` (Ohl et
al., 2024, appendices B-D; see its docstring for the notation), with the same
floors, written as torch operations that autograd differentiates:

* the MMDs and the mutual information are plain tensor expressions, on the
  probabilities' device;
* the Wasserstein distances are exact optimal transports (POT's ``ot.emd``),
  solved on the host in float64 by the NumPy module's own
  :func:`~skdiffclust.gemini._objectives.transport_costs`, inside an autograd
  Function whose gradient is the dual potentials (and, for the distances, the
  transport plans), as the NumPy gradient is.

``tests/test_torch_objectives.py`` checks values and gradients against
:func:`~skdiffclust.gemini.gemini_value_and_grad`.
"""

import numpy as np
import torch

from skdiffclust._utils._torch_checks import (
    Condition,
    ValueChecks,
    check_dense,
    check_full_precision,
    check_matrix,
    check_tensor,
    finite,
    non_negative,
    probabilities,
)
from skdiffclust.gemini._objectives import (
    OBJECTIVES,
    PROBABILITY_FLOOR,
    PROPORTION_FLOOR,
    SQUARED_DISTANCE_FLOOR,
    transport_costs,
    transport_gradient,
)

__all__ = ["gemini_loss"]

_CHECKS = ValueChecks("gemini_loss", "proba or similarity")


def gemini_loss(proba, similarity, gemini="mmd_ovo"):
    """Negative GEMINI of a batch of cluster probabilities: a loss to minimise.

    The generalised mutual information of Ohl et al. (2024), the objective of
    :class:`~skdiffclust.SparseGEMINI`, for the predictions of any torch model:
    how far apart (in MMD or Wasserstein distance) the data distributions of the
    clusters are, as the batch's probabilities weight the samples.

    Parameters
    ----------
    proba : torch.Tensor of shape (n_samples, n_clusters)
        Cluster probabilities p(y=k | x_i) of the batch (rows on the simplex, e.g.
        a softmax), float32 or float64, on any device.
    similarity : torch.Tensor of shape (n_samples, n_samples) or None
        A symmetric kernel matrix of the batch's samples for the MMDs (e.g. an RBF
        kernel), a distance matrix for the Wasserstein GEMINIs; ignored, and may
        be None, for ``'mi'``. Cast to ``proba``'s dtype; gradients flow to it
        too (a kernel or distances computed from a learned embedding).
    gemini : {'mmd_ovo', 'mmd_ova', 'wasserstein_ovo', 'wasserstein_ova', 'mi'}, \
            default='mmd_ovo'
        The GEMINI, as SparseGEMINI's ``gemini`` parameter: MMD or Wasserstein
        distance between every pair of clusters (one-vs-one) or between each
        cluster and the whole data (one-vs-all), or the classic mutual
        information (a KL divergence, which ignores ``similarity``).

    Returns
    -------
    loss : torch.Tensor of shape ()
        Minus the GEMINI, in ``proba``'s dtype and on its device.

    Raises
    ------
    ValueError
        For an unknown ``gemini``, mis-shaped or empty inputs, NaN or infinity,
        ``proba`` whose rows are not probabilities (negative, or not summing to
        1: logits), negative distances.
    TypeError
        For inputs that are not float32 or float64 tensors.

    Notes
    -----
    Cluster proportions are floored at 1e-12 and squared MMDs at 1e-12, as in the
    NumPy objectives, so that an emptying cluster gives finite gradients. The
    Wasserstein GEMINIs solve ``n_clusters`` (one-vs-all) or
    ``n_clusters (n_clusters - 1) / 2`` (one-vs-one) exact transports between
    ``n_samples``-point histograms on the CPU, each call: keep their batches
    small (a few hundred samples). The optimal transport cost is piecewise linear
    in the histograms; its gradient is the (centred) dual potential, unique where
    the optimal transport is not degenerate. The values are checked as
    :func:`set_input_checks` says: on CUDA without waiting for the device after
    the first call.

    Examples
    --------
    >>> import torch
    >>> from skdiffclust.torch import gemini_loss
    >>> x = torch.tensor([[0.0], [0.1], [3.0], [3.1]])
    >>> logits = torch.tensor([[2.0, -2.0], [1.5, -1.5], [-2.0, 2.0], [-1.5, 1.5]],
    ...                       requires_grad=True)
    >>> kernel = x @ x.T
    >>> loss = gemini_loss(torch.softmax(logits, dim=1), kernel, "mmd_ovo")
    >>> round(loss.item(), 3)
    -1.402
    >>> loss.backward()
    >>> logits.grad.shape
    torch.Size([4, 2])
    """
    if not isinstance(gemini, str) or gemini not in OBJECTIVES:
        raise ValueError(f"gemini must be one of {OBJECTIVES}, got {gemini!r}.")
    check_tensor(proba, "proba")
    check_full_precision(proba, "proba", "the GEMINI's sums over the batch overflow "
                         "half precision from a few hundred samples")
    check_matrix(proba, "proba", labels=("n_samples", "n_clusters"))
    if gemini == "mi":
        _CHECKS(proba.device, lambda: probabilities(proba, "proba"))
        return -_mutual_information(proba)
    similarity = _checked_similarity(similarity, proba, gemini)
    name = f"similarity (the {_kind(gemini)} matrix of gemini={gemini!r})"
    kind = (lambda: matrix_kind(similarity, name, gemini),)
    if gemini.startswith("mmd"):
        value, gram = _mmd(proba, similarity, one_vs_one=gemini == "mmd_ovo")
        # alpha' K alpha is non-finite when K is: no pass over the n x n kernel
        _CHECKS(proba.device, lambda: probabilities(proba, "proba"),
                lambda: finite(similarity, name, through=gram), eager_only=kind)
        return -value
    _CHECKS(proba.device, lambda: probabilities(proba, "proba"),
            lambda: non_negative(similarity, name, "distances"), eager_only=kind)
    if similarity.device.type == "meta":
        raise ValueError(f"gemini={gemini!r} solves its transports on the host from the "
                         "distances' values, which a meta tensor does not hold.")
    return -_wasserstein(proba, similarity, one_vs_one=gemini == "wasserstein_ovo")


def matrix_kind(similarity, name, gemini):
    """A kernel for the MMDs, a distance matrix for the Wasserstein GEMINIs.

    Any positive semi-definite kernel has a mean diagonal entry at least its mean
    entry: their difference, times 2, is the mean of ``K_ii + K_jj - 2 K_ij``, a
    squared distance in the kernel's feature space. A distance matrix has a zero
    diagonal under positive entries, so it fails that test, and a kernel passes
    the opposite one. Passed in each other's place, they gave a loss near 0 and
    no gradient (the squared MMDs, negative, were floored), without an error.
    """
    similarity = similarity.detach()
    n = similarity.shape[0]
    mean_diagonal = similarity.diagonal().sum() / n
    mean_entry = similarity.sum() / n**2
    # rounding: each sum is exact to a small multiple of eps times its magnitude
    slack = float(torch.finfo(similarity.dtype).eps) ** 0.5 * (
        mean_diagonal.abs() + mean_entry.abs())
    excess = mean_diagonal - mean_entry
    kernel = gemini.startswith("mmd")

    def describe():
        values = f"mean diagonal entry {float(mean_diagonal):.4g}, mean entry " \
            f"{float(mean_entry):.4g}"
        if kernel:
            return (f"{name} is not a kernel ({values}; a positive semi-definite "
                    "kernel's diagonal is at least its mean): a distance matrix? For "
                    "distances use gemini='wasserstein_ovo' or 'wasserstein_ova', or "
                    "turn them into a kernel, e.g. torch.exp(-D**2 / (2 * sigma**2)).")
        return (f"{name} is not a distance matrix ({values}; distances have a zero "
                "diagonal under non-negative entries): a kernel? For a kernel use "
                "gemini='mmd_ovo' or 'mmd_ova'.")

    if kernel:
        return Condition((excess + slack,), (1.0,), (0.0,), describe)
    return Condition((excess - slack,), (-1.0,), (0.0,), describe)


def _kind(gemini):
    return "kernel" if gemini.startswith("mmd") else "distance"


def _checked_similarity(similarity, proba, gemini):
    """The kernel or distance matrix, in proba's dtype, or a clear error."""
    if not isinstance(similarity, torch.Tensor):
        raise TypeError(
            f"similarity (the {_kind(gemini)} matrix of gemini={gemini!r}) must be a "
            f"torch.Tensor, got {type(similarity).__name__}.")
    check_dense(similarity, "similarity")
    n = proba.shape[0]
    if tuple(similarity.shape) != (n, n):
        raise ValueError(
            f"similarity must have shape ({n}, {n}) like the batch of proba, "
            f"got {tuple(similarity.shape)}.")
    if not torch.is_floating_point(similarity):
        raise TypeError(
            f"similarity must be a floating point tensor, got dtype {similarity.dtype}.")
    if similarity.device != proba.device:
        raise TypeError(
            f"similarity is on {similarity.device} but proba on {proba.device}: move one.")
    return similarity.to(proba.dtype)


def _weights(T):
    """Cluster proportions (floored) and importance weights alpha = T / pi."""
    pi = T.mean(0).clamp_min(PROPORTION_FLOOR)
    return pi, T / pi


def _mmd(T, K, one_vs_one):
    """Both MMD GEMINIs from Q = alpha' K alpha, u = alpha' K 1 and c = 1' K 1;
    returns the GEMINI and Q."""
    n = T.shape[0]
    pi, alpha = _weights(T)
    Q = alpha.T @ (K @ alpha)
    diag = Q.diagonal()
    if one_vs_one:
        squared = (diag[:, None] + diag[None, :] - 2.0 * Q) / n**2
        mmd = squared.clamp_min(SQUARED_DISTANCE_FLOOR).sqrt()
        off_diagonal = 1.0 - torch.eye(pi.shape[0], dtype=T.dtype, device=T.device)
        return (pi[:, None] * pi[None, :] * off_diagonal * mmd).sum(), Q
    row_sums = K.sum(1)
    squared = (diag - 2.0 * (row_sums @ alpha) + row_sums.sum()) / n**2
    return (pi * squared.clamp_min(SQUARED_DISTANCE_FLOOR).sqrt()).sum(), Q


def _mutual_information(T):
    n = T.shape[0]
    pi = T.mean(0).clamp_min(PROPORTION_FLOOR)
    # 1e-300 underflows to 0 in float32: the smallest normal number there
    floor = max(PROBABILITY_FLOOR, float(torch.finfo(T.dtype).tiny))
    log_ratio = T.clamp_min(floor).log() - pi.log()
    return (T * log_ratio).sum() / n


def _wasserstein(T, D, one_vs_one):
    pi, alpha = _weights(T)
    costs = TransportCosts.apply(alpha, D, one_vs_one)
    return pi @ costs if not one_vs_one else pi @ costs @ pi


class TransportCosts(torch.autograd.Function):
    """Exact transport costs between the clusters' histograms (see
    :func:`~skdiffclust.gemini._objectives.transport_costs`), solved on the host.

    Backward: the centred dual potentials for ``alpha``, the transport plans for
    the distances (kept only when the distances need a gradient).
    """

    @staticmethod
    def forward(ctx, alpha, distances, one_vs_one):
        keep_plans = distances.requires_grad
        costs, potentials, plans = transport_costs(
            _to_numpy(alpha), _to_numpy(distances), one_vs_one, keep_plans=keep_plans)
        ctx.potentials, ctx.plans, ctx.one_vs_one = potentials, plans, one_vs_one
        return torch.as_tensor(costs, dtype=alpha.dtype, device=alpha.device)

    @staticmethod
    def backward(ctx, grad_costs):
        weights = _to_numpy(grad_costs)
        grad_alpha = grad_distances = None
        like = grad_costs
        if ctx.needs_input_grad[0]:
            grad_alpha = _like(transport_gradient(weights, ctx.potentials), like)
        if ctx.needs_input_grad[1]:
            if ctx.one_vs_one:  # plans[k, m] (k < m) serves costs[k, m] and costs[m, k]
                weights = np.triu(weights + weights.T, 1)
                grad = np.einsum("km,kmij->ij", weights, ctx.plans)
            else:
                grad = np.einsum("k,kij->ij", weights, ctx.plans)
            grad_distances = _like(grad, like)
        return grad_alpha, grad_distances, None


def _to_numpy(tensor):
    return tensor.detach().to("cpu", torch.float64).numpy()


def _like(array, tensor):
    return torch.as_tensor(array, dtype=tensor.dtype, device=tensor.device)

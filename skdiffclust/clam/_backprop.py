"""The training loss of ClAM and its gradient, by backpropagation through time by hand.

Autograd records about thirty small operations per recursion step; on the CPU and
with the small batches ClAM trains on, their bookkeeping costs more than the
arithmetic. Writing the T-step backward pass out (a few matrix products per step)
makes a training step 2-5x faster. ``tests/clam/test_torch_clam.py`` checks these
gradients against autograd on :func:`skdiffclust.clam._dynamics.completion_loss`.
This is the training path on CUDA; on the CPU, the numba kernels of
``_kernels`` compute the same loss and gradients (checked against these).

Notation (feature-major, as in ``_dynamics``): points ``x`` of shape (R, d, B),
prototypes ``P`` of shape (R, k, d), attraction ``p = softmax(s)`` of shape
(R, k, B) over the k axis, ``f`` the 0/1 mask of coordinates that evolve.

Euclidean step: ``s = 2 beta P x - beta ||P||^2 + log w``,
``x' = x + alpha f (P^T p - x)``.
Spherical step: ``s = beta P~ x + log w`` with unit rows ``P~``,
``v = x + alpha f P~^T p``, ``x' = v / ||v||``.
"""

import torch

from skdiffclust.clam._dynamics import COSINE, LOGIT_FLOOR, squared_norms, unit_rows


def _softmax_k(logits):
    """Softmax over the k axis (-2), with the logit floor of ``_dynamics``."""
    shifted = logits - logits.amax(-2, keepdim=True)
    weights = shifted.clamp_(min=LOGIT_FLOOR).exp_()
    return weights.div_(weights.sum(-2, keepdim=True))


def _softmax_backward(p, grad_p):
    return p * (grad_p - (p * grad_p).sum(-2, keepdim=True))


def completion_loss_and_grads(prototypes, log_weights, x, masks, fill, *, beta, metric,
                              n_steps, alpha, clip=None):
    """Per-point completion loss and the gradients of ``sum_R mean_B loss``.

    With ``clip``, each point's gradient (of the prototypes as used: unit rows for
    cosine) whose norm exceeds ``clip`` times the median over the batch (per
    restart) is scaled down to that bound first, as the CPU kernels do
    (``_kernels._clip_lanes``).

    Parameters
    ----------
    prototypes : Tensor of shape (R, k, d)
    log_weights : Tensor of shape (R, k) or None
    x : Tensor of shape (B, d)
        The complete points.
    masks : bool Tensor of shape (R, B, d) or None
        True where a coordinate is hidden (it starts at ``fill``, evolves and is
        scored); None for the unmasked loss of eq. 8.
    fill : Tensor of shape (d,)

    Returns
    -------
    per_point : Tensor of shape (R, B)
        Same values as :func:`skdiffclust.clam._dynamics.completion_loss`.
    grad_prototypes : Tensor of shape (R, k, d)
    grad_log_weights : Tensor of shape (R, k) or None
    """
    n_restarts = prototypes.shape[0]
    target = x.T.unsqueeze(0)  # (1, d, B)
    if masks is None:
        free = None
        start = target.expand(n_restarts, -1, -1).contiguous()
    else:
        hidden = masks.transpose(-1, -2)
        free = hidden.to(x.dtype)
        start = torch.where(hidden, fill[:, None], target)
    cosine = metric == COSINE
    P = unit_rows(prototypes) if cosine else prototypes
    offset = None if cosine else -beta * squared_norms(P)[..., None]  # (R, k, 1)
    if log_weights is not None:
        weights = log_weights[..., None]
        offset = weights if offset is None else offset + weights
    scale = beta if cosine else 2.0 * beta
    step = alpha if free is None else alpha * free

    # forward, keeping what the backward pass needs
    P_T = P.transpose(-1, -2).contiguous()  # (R, d, k)
    states, attractions, norms = [start], [], []
    state = start
    for _ in range(n_steps):
        if offset is None:
            logits = torch.bmm(P, state).mul_(scale)
        else:
            logits = torch.baddbmm(offset, P, state, alpha=scale)
        p = _softmax_k(logits)
        pulled = torch.bmm(P_T, p)  # (R, d, B)
        if cosine:
            moved = torch.addcmul(state, step, pulled) if free is not None else \
                state.add(pulled, alpha=step)
            norm = torch.linalg.vector_norm(moved, dim=-2, keepdim=True).clamp_min_(
                torch.finfo(moved.dtype).tiny)
            state = moved.div_(norm)
            norms.append(norm)
        else:
            pulled.sub_(state)
            state = torch.addcmul(state, step, pulled) if free is not None else \
                state.add(pulled, alpha=step)
        attractions.append(p)
        states.append(state)
    error = target - state if free is None else (target - state) * free
    per_point = error.square().sum(-2)  # (R, B)

    # backward
    n_points = x.shape[0]
    grad = error * (-2.0 / n_points)  # d(sum_R mean_B loss) / d x^T
    grad_P = torch.zeros_like(P)
    grad_offset = torch.zeros_like(P[..., :1])  # (R, k, 1)
    # with clip: each point's gradients (R, B, k, d) and offset gradients (R, k, B)
    per_point_P = None if clip is None else P.new_zeros(
        (n_restarts, n_points) + tuple(P.shape[1:]))
    per_point_offset = None if clip is None else torch.zeros_like(attractions[0])
    keep = None if cosine else 1.0 - step
    for t in range(n_steps - 1, -1, -1):
        p, state = attractions[t], states[t]
        if cosine:
            after = states[t + 1]
            grad = (grad - after * (after * grad).sum(-2, keepdim=True)).div_(norms[t])
            grad_state = grad
        else:
            grad_state = grad * keep
        grad_pulled = grad * step
        grad_logits = _softmax_backward(p, torch.bmm(P, grad_pulled))
        if clip is None:
            grad_P.baddbmm_(p, grad_pulled.transpose(-1, -2))
            grad_P.baddbmm_(grad_logits, state.transpose(-1, -2), alpha=scale)
            grad_offset += grad_logits.sum(-1, keepdim=True)
        else:
            per_point_P += torch.einsum("rkb,rdb->rbkd", p, grad_pulled)
            per_point_P += torch.einsum("rkb,rdb->rbkd", grad_logits, state) * scale
            per_point_offset += grad_logits
        grad = torch.baddbmm(grad_state, P_T, grad_logits, alpha=scale)
    if clip is not None:
        grad_P, grad_offset = _clipped_sums(per_point_P, per_point_offset, P, beta, clip,
                                            cosine)

    grad_log_weights = None if log_weights is None else grad_offset[..., 0].clone()
    if cosine:
        # P~ = P / ||P||: project out the radial component and divide by the norm
        norms_P = torch.linalg.vector_norm(prototypes, dim=-1, keepdim=True).clamp_min(
            torch.finfo(prototypes.dtype).tiny)
        grad_P = (grad_P - P * (P * grad_P).sum(-1, keepdim=True)) / norms_P
    elif clip is None:  # (the clipped sums include this term)
        grad_P += (-2.0 * beta) * grad_offset * P
    return per_point, grad_P, grad_log_weights


def _clipped_sums(per_point_P, per_point_offset, P, beta, clip, cosine):
    """The batch's gradients ``(grad_P, grad_offset)`` from each point's, each point's
    scaled down to at most ``clip`` times the median norm over its batch."""
    if not cosine:  # the offsets -beta ||rho||^2: each point's share of that term
        per_point_P = per_point_P + (-2.0 * beta) * (
            per_point_offset.transpose(-1, -2)[..., None] * P[:, None])
    norms = torch.linalg.vector_norm(per_point_P.flatten(2), dim=-1)  # (R, B)
    bound = clip * torch.quantile(norms, 0.5, dim=-1, keepdim=True)  # numpy's median
    # no clipping where the median is 0 (most points' gradients vanish)
    factors = torch.where((norms > bound) & (bound > 0), bound / norms, torch.ones_like(norms))
    grad_P = torch.einsum("rb,rbkd->rkd", factors, per_point_P)
    grad_offset = torch.einsum("rb,rkb->rk", factors, per_point_offset)[..., None]
    return grad_P, grad_offset

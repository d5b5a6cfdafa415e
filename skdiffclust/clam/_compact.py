"""The compact training kernel of ClAM on the CPU: the batch of
:mod:`skdiffclust.clam._kernels`, one lane at a time.

:func:`skdiffclust.clam._kernels._batch_loss_and_grads` runs each step of the
recursion for all the lanes of a batch at once, every inner loop over the lanes, so
that LLVM vectorises it; this kernel runs the T steps forward and back for one
lane, then the next. It runs 2.5 to 3.5 times slower and compiles in about half
the time: it has less code, and LLVM compiles it for size
(:func:`skdiffclust._utils._numba.compile_for_size`), which leaves it as fast, one
lane having little to vectorise. The kernels it shares with the vectorised batch
take ``for_size=True`` here, for a variant compiled the same way. Each lane's
arithmetic is the same, operation for operation and in the same order, on the
same workspace, so the choice between them
(:func:`skdiffclust.clam._epoch.uses_compact_kernel`, by the size of an epoch)
changes no bit: ``tests/clam/test_compact_kernel.py`` checks it for every option.
"""

import math

from skdiffclust.clam._fastexp import exp_weights
from skdiffclust.clam._kernels import (
    A_VISIBLE,
    ATTRACTION,
    DOT,
    EXP_SCRATCH,
    GRAD_ATTRACTION,
    GRAD_OFFSET,
    GRAD_P_H,
    GRAD_VISIBLE,
    GRAD_Z,
    GAMMA,
    HIDDEN,
    INTERNAL,
    LANE_SCALARS,
    LARGEST,
    LOGITS,
    LOSS,
    NORMS,
    OFFSET,
    P_H,
    SCALES,
    SQ_VISIBLE,
    STATES,
    TARGET,
    TOTAL,
    VISIBLE,
    VISIBLE_ROWS,
    _clip_factors,
    _prepare_prototypes,
    _scatter_gradients,
    _unproject_gradient,
)
from skdiffclust._utils._numba import compile_for_size, jit


@jit(**INTERNAL)
def _gather_lane(x, features, fill, start_from_fill, P, offset, r, lane, ws):
    """``_kernels._gather_lanes`` for the lane of the point ``x`` whose hidden
    features are ``features`` (restart r)."""
    compile_for_size(True)
    hid, PH, visible, visible_rows = ws[HIDDEN], ws[P_H], ws[VISIBLE], ws[VISIBLE_ROWS]
    A, off, target, zs, cs = ws[A_VISIBLE], ws[OFFSET], ws[TARGET], ws[STATES], ws[SCALES]
    sq_visible = ws[SQ_VISIBLE]
    k, d = P.shape[1], P.shape[2]
    for c in range(d):
        visible[c, lane] = x[c]
        visible_rows[lane, c] = x[c]
    for j in range(features.shape[0]):
        feature = features[j]
        hid[j, lane] = feature
        target[j, lane] = x[feature]
        zs[0, j, lane] = fill[feature] if start_from_fill else x[feature]
        visible[feature, lane] = 0.0
        visible_rows[lane, feature] = 0.0
        for mu in range(k):
            PH[j, mu, lane] = P[r, mu, feature]
    cs[0, lane] = 1.0
    sq_visible[lane] = 0.0
    for c in range(d):
        sq_visible[lane] += visible[c, lane] * visible[c, lane]
    for mu in range(k):
        off[mu, lane] = offset[r, mu]
        A[mu, lane] = 0.0
        for c in range(d):
            A[mu, lane] += P[r, mu, c] * visible[c, lane]


@jit(**INTERNAL)
def _forward_lane(lane, ws, n_steps, scale, alpha, floor, tiny, cosine):
    """``_kernels._forward`` (softmax and projection included) for one lane."""
    compile_for_size(True)
    PH, A, off, zs, ps = ws[P_H], ws[A_VISIBLE], ws[OFFSET], ws[STATES], ws[ATTRACTION]
    cs, norms, sq_visible = ws[SCALES], ws[NORMS], ws[SQ_VISIBLE]
    logits, scalars, exp_scratch = ws[LOGITS], ws[LANE_SCALARS], ws[EXP_SCRATCH]
    n_hidden, k = PH.shape[0], PH.shape[1]
    largest, total = scalars[LARGEST], scalars[TOTAL]
    for t in range(n_steps):
        z, z_next, p = zs[t], zs[t + 1], ps[t]
        for mu in range(k):
            # scale * P_H rounds as the vectorised kernel's SCALED_P_H
            logit = (off[mu, lane] + scale * cs[t, lane] * A[mu, lane]
                     + (scale * PH[0, mu, lane]) * z[0, lane])
            for j in range(1, n_hidden):
                logit += (scale * PH[j, mu, lane]) * z[j, lane]
            logits[mu, lane] = logit
        largest[lane] = logits[0, lane]
        total[lane] = 0.0
        for mu in range(1, k):
            value = logits[mu, lane]
            largest[lane] = value if value > largest[lane] else largest[lane]
        # the lane's column: the same code as the vectorised kernel's, on one lane
        column = slice(lane, lane + 1)
        exp_weights(logits[:, column], largest[column], floor, 1, p[:, column],
                    total[column], exp_scratch[:, column], for_size=True)
        total[lane] = 1.0 / total[lane]
        for mu in range(k):
            p[mu, lane] *= total[lane]
        for j in range(n_hidden):  # pulled = P_H^T p
            pulled = PH[j, 0, lane] * p[0, lane]
            for mu in range(1, k):
                pulled += PH[j, mu, lane] * p[mu, lane]
            if cosine is not None:
                z_next[j, lane] = z[j, lane] + alpha * pulled
            else:
                z_next[j, lane] = z[j, lane] + alpha * (pulled - z[j, lane])
        if cosine is not None:  # _kernels._project_to_sphere
            total[lane] = cs[t, lane] * cs[t, lane] * sq_visible[lane]
            for j in range(n_hidden):
                total[lane] += z_next[j, lane] * z_next[j, lane]
            norms[t, lane] = max(math.sqrt(total[lane]), tiny)
            cs[t + 1, lane] = cs[t, lane] / norms[t, lane]
            for j in range(n_hidden):
                z_next[j, lane] /= norms[t, lane]


@jit(**INTERNAL)
def _backward_lane(lane, ws, n_rows, n_steps, scale, alpha, keep, cosine):
    """The lane's loss (``_kernels._loss_and_seed_gradient``), then
    ``_kernels._backward`` (projection included) for one lane."""
    compile_for_size(True)
    PH, A, target, zs, ps = ws[P_H], ws[A_VISIBLE], ws[TARGET], ws[STATES], ws[ATTRACTION]
    cs, norms, sq_visible = ws[SCALES], ws[NORMS], ws[SQ_VISIBLE]
    grad_PH, grad_visible, grad_offset = ws[GRAD_P_H], ws[GRAD_VISIBLE], ws[GRAD_OFFSET]
    grad_z, grad_s, grad_p, scalars = ws[GRAD_Z], ws[LOGITS], ws[GRAD_ATTRACTION], ws[LANE_SCALARS]
    dot, gamma, loss = scalars[DOT], scalars[GAMMA], scalars[LOSS]
    n_hidden, k = PH.shape[0], PH.shape[1]
    seed = -2.0 / n_rows
    loss[lane] = 0.0
    for j in range(n_hidden):
        error = target[j, lane] - zs[n_steps, j, lane]
        loss[lane] += error * error
        grad_z[j, lane] = error * seed
    for mu in range(k):
        for j in range(n_hidden):
            grad_PH[j, mu, lane] = 0.0
        grad_visible[mu, lane] = 0.0
        grad_offset[mu, lane] = 0.0
    gamma[lane] = 0.0
    for t in range(n_steps - 1, -1, -1):
        p, z, z_next = ps[t], zs[t], zs[t + 1]
        if cosine is not None:  # _kernels._project_backward
            dot[lane] = cs[t + 1, lane] * gamma[lane]
            for j in range(n_hidden):
                dot[lane] += z_next[j, lane] * grad_z[j, lane]
            for j in range(n_hidden):
                grad_z[j, lane] = (grad_z[j, lane] - z_next[j, lane] * dot[lane]) \
                    / norms[t, lane]
            gamma[lane] = (gamma[lane] - cs[t + 1, lane] * sq_visible[lane] * dot[lane]) \
                / norms[t, lane]
        for mu in range(k):
            pulled_grad = alpha * grad_z[0, lane]
            grad_PH[0, mu, lane] += p[mu, lane] * pulled_grad
            grad_p[mu, lane] = PH[0, mu, lane] * pulled_grad
            for j in range(1, n_hidden):
                pulled_grad = alpha * grad_z[j, lane]
                grad_PH[j, mu, lane] += p[mu, lane] * pulled_grad
                grad_p[mu, lane] += PH[j, mu, lane] * pulled_grad
        dot[lane] = p[0, lane] * grad_p[0, lane]
        for mu in range(1, k):
            dot[lane] += p[mu, lane] * grad_p[mu, lane]
        for mu in range(k):
            grad = p[mu, lane] * (grad_p[mu, lane] - dot[lane])
            grad_visible[mu, lane] += cs[t, lane] * grad
            grad_offset[mu, lane] += grad
            grad_s[mu, lane] = scale * grad
        for j in range(n_hidden):
            grad_PH[j, 0, lane] += grad_s[0, lane] * z[j, lane]
            grad_z[j, lane] = keep * grad_z[j, lane] + grad_s[0, lane] * PH[j, 0, lane]
            for mu in range(1, k):
                grad_PH[j, mu, lane] += grad_s[mu, lane] * z[j, lane]
                grad_z[j, lane] += grad_s[mu, lane] * PH[j, mu, lane]
        if cosine is not None:
            for mu in range(k):
                gamma[lane] += grad_s[mu, lane] * A[mu, lane]


@jit(**INTERNAL)
def _gradient_norm_lane(lane, r, ws, P_used, beta, scale, cosine, lane_norms):
    """``_kernels._clip_lanes``' norm of the lane's gradient (restart r), into
    ``lane_norms[lane]``."""
    compile_for_size(True)
    grad_PH, grad_visible, grad_offset = ws[GRAD_P_H], ws[GRAD_VISIBLE], ws[GRAD_OFFSET]
    PH, A, sq_visible = ws[P_H], ws[A_VISIBLE], ws[SQ_VISIBLE]
    n_hidden, k, d = grad_PH.shape[0], grad_PH.shape[1], P_used.shape[2]
    lane_norms[lane] = 0.0
    for mu in range(k):
        sq_rho = 0.0
        for c in range(d):
            sq_rho += P_used[r, mu, c] * P_used[r, mu, c]
        visible = scale * grad_visible[mu, lane]
        radial = 0.0 if cosine is not None else -2.0 * beta * grad_offset[mu, lane]
        lane_norms[lane] += (visible * visible * sq_visible[lane] + radial * radial * sq_rho
                             + 2.0 * visible * radial * A[mu, lane])
        for j in range(n_hidden):
            g = grad_PH[j, mu, lane]
            lane_norms[lane] += g * (g + 2.0 * radial * PH[j, mu, lane])
    # +0.0 rather than -0.0 or NaN, as the median needs
    lane_norms[lane] = math.sqrt(lane_norms[lane]) if lane_norms[lane] > 0.0 else 0.0


@jit(error_model="numpy", inline="always")
def compact_batch(X, order, first, n_rows, hidden, restarts, P, W, fill, start_from_fill,
                  beta, cosine, n_steps, constants, ws, prepared, grad_P, grad_W, losses,
                  clip, clip_scratch):
    """``_kernels._batch_loss_and_grads``, one lane at a time (same arguments)."""
    P_used, norms, offset = prepared
    scale, alpha, keep, floor, tiny = (constants[0], constants[1], constants[2],
                                       constants[3], constants[4])
    _prepare_prototypes(P, W, restarts, beta, cosine, P_used, norms, offset, for_size=True)
    loss = ws[LANE_SCALARS][LOSS]
    for slot in range(restarts.shape[0]):
        r = restarts[slot]
        for b in range(n_rows):
            lane = slot * n_rows + b
            _gather_lane(X[order[first + b]], hidden[r, first + b], fill, start_from_fill,
                         P_used, offset, r, lane, ws)
            _forward_lane(lane, ws, n_steps, scale, alpha, floor, tiny, cosine)
            _backward_lane(lane, ws, n_rows, n_steps, scale, alpha, keep, cosine)
    if clip > 0.0:
        for slot in range(restarts.shape[0]):
            for b in range(n_rows):
                _gradient_norm_lane(slot * n_rows + b, restarts[slot], ws, P_used, beta,
                                    scale, cosine, clip_scratch[0])
        _clip_factors(clip_scratch[0], clip_scratch[1], restarts.shape[0], n_rows, clip,
                      for_size=True)
    _scatter_gradients(ws[HIDDEN], ws[GRAD_P_H], ws[GRAD_VISIBLE], ws[GRAD_OFFSET],
                       ws[VISIBLE_ROWS], restarts, n_rows, P_used, beta, scale, cosine, grad_P,
                       grad_W, clip_scratch[1], for_size=True)
    if cosine is not None:
        _unproject_gradient(grad_P, P_used, norms, restarts, for_size=True)
    for slot in range(restarts.shape[0]):
        for b in range(n_rows):
            losses[restarts[slot], b] = loss[slot * n_rows + b]

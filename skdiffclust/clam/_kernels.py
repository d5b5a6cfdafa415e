"""Numba kernels of ClAM on the CPU: one training epoch of algorithm 1 in a single
call, and inference (completion losses, converged points).

The maths are those of :mod:`skdiffclust.clam._backprop` (same notation, same
floors), reorganised for a CPU:

* **Only the hidden coordinates are tracked.** During training, only the ``h``
  masked coordinates of a point evolve (``f = 1`` there), so the visible part of
  the state is the constant ``x_V`` (Euclidean) or ``c_t x_V`` with a scalar
  ``c_t`` (spherical: the projection rescales every coordinate by a common
  factor). The logits are ``offset + scale (c_t A + P_H z_t)`` with
  ``A = P_V x_V`` computed once per point, so a step costs ``O(k h)`` instead of
  ``O(k d)``, and so does its backward pass: the gradient of a visible
  coordinate is only needed through ``<x_V, .>`` (the scalar ``gamma`` below),
  and that of the prototypes' visible columns is ``scale * sum_t c_t grad_s_t
  (x) x_V``, one outer product per point. The unmasked loss (eq. 8) is the case
  where every coordinate is "hidden" and starts at the point itself.
* **Lanes.** The ``R`` restarts times ``B`` points of a batch are ``L = R B``
  independent problems ("lanes"); every array stores lanes along its last,
  contiguous axis and every inner loop runs over lanes, so that LLVM vectorises
  it (the other axes, k and h, are a handful each).
* **Everything per batch is here** (gathering, T steps forward and back,
  scattering the gradients, Adam): a Python loop over batches costs more than
  the arithmetic.

``tests/test_torch_clam.py`` checks the loss and gradients of a batch against
the torch implementation, and whole epochs against the torch training loop.
"""

import math

import numpy as np
from numba import njit

EUCLIDEAN = "euclidean"
COSINE = "cosine"

# Logits more than 46 below the largest are raised to that floor, so attraction
# weights are never below about 1e-20 / k. Such weights cannot change a float32 or
# float64 sum whose largest term is at least 1 / k, but without the floor they and
# their gradients would be subnormal numbers, on which CPUs are 10-100x slower.
LOGIT_FLOOR = -46.0

# Adam's defaults (also those of ``_training.BatchedAdam``)
ADAM_BETA1 = 0.9
ADAM_BETA2 = 0.999
ADAM_EPS = 1e-8
# floor of the norms divided by (cosine); float32's in both precisions: only a zero
# vector gets there
SMALLEST_NORMAL = np.finfo(np.float32).tiny


# -- masks ---------------------------------------------------------------------------


def hidden_count(mask_prob, n_features):
    """Features hidden per example: ``mask_prob * n_features``, rounded half up."""
    return min(int(mask_prob * n_features + 0.5), n_features)


@njit(cache=True)
def hidden_features(draws, n_features):
    """Hidden feature indices from uniform draws in [0, 1), shape (R, n, h).

    A partial Fisher-Yates shuffle per example: ``h`` distinct features, each
    subset equally likely (the distribution of ``_dynamics.draw_masks``).
    """
    n_restarts, n_samples, n_hidden = draws.shape
    hidden = np.empty((n_restarts, n_samples, n_hidden), dtype=np.int64)
    features = np.arange(n_features)
    picked = np.empty(n_hidden, dtype=np.int64)
    for r in range(n_restarts):
        for i in range(n_samples):
            for j in range(n_hidden):
                picked[j] = j + int(draws[r, i, j] * (n_features - j))
                features[j], features[picked[j]] = features[picked[j]], features[j]
                hidden[r, i, j] = features[j]
            # undo the swaps in reverse, so that ``features`` is arange again
            for j in range(n_hidden - 1, -1, -1):
                features[j], features[picked[j]] = features[picked[j]], features[j]
    return hidden


# -- vectorisable exp ------------------------------------------------------------------
# There is no vector exp for LLVM without SVML, and a scalar call per attraction
# weight costs more than the rest of a recursion step. These compute exp(x) for
# LOGIT_FLOOR <= x <= 0 in plain arithmetic that vectorises: x = n ln2 + r with
# |r| <= ln2 / 2, a Taylor polynomial for exp(r), and 2^n written as exponent
# bits (n is between -67 and 0, a normal number in both precisions). Rounding
# ``x log2(e)`` to n is done by adding and subtracting 1.5 * 2^(mantissa bits),
# which leaves n in the low bits of the sum: no float-to-int conversion.

# float64: degree 13, remainder below 2e-16 relative; Cody-Waite split of ln2
F64_SHIFT = 6755399441055744.0  # 1.5 * 2^52
F64_SHIFT_BITS = 0x4338000000000000
F64_LN2_HI = 6.93147180369123816490e-01
F64_LN2_LO = 1.90821492927058770002e-10
F64_LOG2E = 1.0 / math.log(2.0)
# float32: degree 7, remainder below 6e-9 relative; n ln2_hi is exact for |n| < 2^15
F32_SHIFT = np.float32(12582912.0)  # 1.5 * 2^23
F32_SHIFT_BITS = np.int32(0x4B400000)
F32_LN2_HI = np.float32(0.693359375)
F32_LN2_LO = np.float32(-2.12194440e-4)
F32_LOG2E = np.float32(1.0 / math.log(2.0))
F32_TERMS = tuple(np.float32(1.0 / math.factorial(i)) for i in range(8))


# fastmath "contract" only: mul + add may fuse into FMA (fewer, more accurate
# operations); no reassociation, which would undo the Cody-Waite reduction


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def _exp_weights_double(logits, largest, floor, n_lanes, p, total, shifted):
    """``p = exp(max(logits - largest, floor))`` and ``total += p``, in float64;
    ``shifted`` is float64 scratch of the shape of ``p``."""
    bits = shifted.view(np.int64)
    for row in range(p.shape[0]):
        for lane in range(n_lanes):
            value = max(logits[row, lane] - largest[lane], floor)
            shifted[row, lane] = value * F64_LOG2E + F64_SHIFT
            n = shifted[row, lane] - F64_SHIFT
            r = (value - n * F64_LN2_HI) - n * F64_LN2_LO
            poly = r * (1.0 / 6227020800.0) + 1.0 / 479001600.0
            poly = poly * r + 1.0 / 39916800.0
            poly = poly * r + 1.0 / 3628800.0
            poly = poly * r + 1.0 / 362880.0
            poly = poly * r + 1.0 / 40320.0
            poly = poly * r + 1.0 / 5040.0
            poly = poly * r + 1.0 / 720.0
            poly = poly * r + 1.0 / 120.0
            poly = poly * r + 1.0 / 24.0
            poly = poly * r + 1.0 / 6.0
            poly = poly * r + 0.5
            poly = poly * r + 1.0
            p[row, lane] = poly * r + 1.0
        for lane in range(n_lanes):
            bits[row, lane] = (bits[row, lane] - F64_SHIFT_BITS + 1023) << 52
        for lane in range(n_lanes):
            p[row, lane] *= shifted[row, lane]
            total[lane] += p[row, lane]


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def _exp_weights_single(logits, largest, floor, n_lanes, p, total, shifted):
    """``p = exp(max(logits - largest, floor))`` and ``total += p``, in float32;
    ``shifted`` is float32 scratch of the shape of ``p``."""
    bits = shifted.view(np.int32)
    c0, c1, c2, c3, c4, c5, c6, c7 = F32_TERMS
    for row in range(p.shape[0]):
        for lane in range(n_lanes):
            value = max(logits[row, lane] - largest[lane], floor)
            shifted[row, lane] = value * F32_LOG2E + F32_SHIFT
            n = shifted[row, lane] - F32_SHIFT
            r = (value - n * F32_LN2_HI) - n * F32_LN2_LO
            p[row, lane] = (((((((c7 * r + c6) * r + c5) * r + c4) * r + c3) * r + c2) * r
                             + c1) * r + c0)
        for lane in range(n_lanes):
            bits[row, lane] = (bits[row, lane] - F32_SHIFT_BITS + np.int32(127)) \
                << np.int32(23)
        for lane in range(n_lanes):
            p[row, lane] *= shifted[row, lane]
            total[lane] += p[row, lane]


# -- one batch: lanes ----------------------------------------------------------------


# the workspace of a batch: a tuple of arrays (see ``allocate_workspace``), indexed
# by these constants (numba needs constant indices into a heterogeneous tuple)
(HIDDEN, P_H, VISIBLE, A_VISIBLE, OFFSET, TARGET, STATES, ATTRACTION, SCALES, NORMS,
 SQ_VISIBLE, GRAD_P_H, GRAD_VISIBLE, GRAD_OFFSET, GRAD_Z, LOGITS, GRAD_ATTRACTION,
 LANE_SCALARS, EXP_SCRATCH, VISIBLE_ROWS, SCALED_P_H) = range(21)
# rows of ws[LANE_SCALARS]
LARGEST, TOTAL, DOT, GAMMA, LOSS = range(5)


@njit(cache=True)
def allocate_workspace(n_lanes, n_clusters, n_features, n_hidden, n_steps, dtype):
    """Scratch arrays of one batch, lanes along the last axis."""
    L, k, d, h, T = n_lanes, n_clusters, n_features, n_hidden, n_steps
    return (
        np.empty((h, L), np.int64),  # HIDDEN: feature index of each tracked coordinate
        np.empty((h, k, L), dtype),  # P_H: the prototypes' hidden columns, per lane
        np.empty((d, L), dtype),  # VISIBLE: x with zeros at the hidden features
        np.empty((k, L), dtype),  # A_VISIBLE: A = P_V x_V
        np.empty((k, L), dtype),  # OFFSET: -beta ||rho||^2 + log w, or log w
        np.empty((h, L), dtype),  # TARGET: x_H
        np.empty((T + 1, h, L), dtype),  # STATES: z_t, hidden coordinates of the states
        np.empty((T, k, L), dtype),  # ATTRACTION: p_t
        np.ones((T + 1, L), dtype),  # SCALES: c_t, scale of the visible part (cosine)
        np.ones((T, L), dtype),  # NORMS: ||v|| before each projection (cosine)
        np.empty(L, dtype),  # SQ_VISIBLE: ||x_V||^2
        np.empty((h, k, L), dtype),  # GRAD_P_H: gradient of P_H, per lane
        np.empty((k, L), dtype),  # GRAD_VISIBLE: sum_t c_t grad_s_t
        np.empty((k, L), dtype),  # GRAD_OFFSET: sum_t grad_s_t
        np.empty((h, L), dtype),  # GRAD_Z: gradient of z_t
        np.empty((k, L), dtype),  # LOGITS: logits, then scale * their gradients
        np.empty((k, L), dtype),  # GRAD_ATTRACTION: gradient of p_t
        np.empty((5, L), dtype),  # LANE_SCALARS: rows LARGEST, TOTAL, DOT, GAMMA, LOSS
        np.empty((k, L), dtype),  # EXP_SCRATCH
        np.empty((L, d), dtype),  # VISIBLE_ROWS: VISIBLE lane-major (for the gradient)
        np.empty((h, k, L), dtype),  # SCALED_P_H: scale * P_H
    )


@njit(cache=True, error_model="numpy")
def _gather_lanes(X, rows, hidden, restarts, P, offset, fill, start_from_fill, ws):
    """Copy each lane's point, hidden features and prototype columns into place."""
    hid, PH, visible, A, off = ws[HIDDEN], ws[P_H], ws[VISIBLE], ws[A_VISIBLE], ws[OFFSET]
    target, zs, cs = ws[TARGET], ws[STATES], ws[SCALES]
    sq_visible, visible_rows = ws[SQ_VISIBLE], ws[VISIBLE_ROWS]
    n_rows, n_hidden = rows.shape[0], hidden.shape[2]
    n_lanes = restarts.shape[0] * n_rows
    k, d = P.shape[1], P.shape[2]
    # the batch's points, feature-major, repeated for the lanes of every restart
    for b in range(n_rows):
        x = X[rows[b]]
        for c in range(d):
            visible[c, b] = x[c]
    for c in range(d):
        for lane in range(n_rows, n_lanes):
            visible[c, lane] = visible[c, lane - n_rows]
    for slot in range(restarts.shape[0]):
        r = restarts[slot]
        for b in range(n_rows):
            lane = slot * n_rows + b
            x = X[rows[b]]
            for c in range(d):
                visible_rows[lane, c] = x[c]
            for j in range(n_hidden):
                feature = hidden[r, b, j]
                hid[j, lane] = feature
                target[j, lane] = x[feature]
                zs[0, j, lane] = fill[feature] if start_from_fill else x[feature]
                visible[feature, lane] = 0.0
                visible_rows[lane, feature] = 0.0
                for mu in range(k):
                    PH[j, mu, lane] = P[r, mu, feature]
        for mu in range(k):
            for b in range(n_rows):
                off[mu, slot * n_rows + b] = offset[r, mu]
    for lane in range(n_lanes):
        cs[0, lane] = 1.0
        sq_visible[lane] = 0.0
    for c in range(d):
        for lane in range(n_lanes):
            sq_visible[lane] += visible[c, lane] * visible[c, lane]
    # A = P_V x_V, restart by restart (P is shared by the lanes of a restart)
    for slot in range(restarts.shape[0]):
        r, lo = restarts[slot], slot * n_rows
        for mu in range(k):
            for b in range(n_rows):
                A[mu, lo + b] = 0.0
            for c in range(d):
                weight = P[r, mu, c]
                for b in range(n_rows):
                    A[mu, lo + b] += weight * visible[c, lo + b]


@njit(cache=True, error_model="numpy")
def _softmax_lanes(logits, p, n_lanes, floor, largest, total, exp_scratch):
    """``p = softmax(logits)`` over the k axis for each lane, logits floored at
    ``floor`` below their largest (``LOGIT_FLOOR``)."""
    k = logits.shape[0]
    for lane in range(n_lanes):
        largest[lane] = logits[0, lane]
        total[lane] = 0.0
    for mu in range(1, k):
        for lane in range(n_lanes):
            value = logits[mu, lane]
            largest[lane] = value if value > largest[lane] else largest[lane]
    if exp_scratch.itemsize == 4:  # a constant for LLVM: the branch goes
        _exp_weights_single(logits, largest, floor, n_lanes, p, total, exp_scratch)
    else:
        _exp_weights_double(logits, largest, floor, n_lanes, p, total, exp_scratch)
    for lane in range(n_lanes):
        total[lane] = 1.0 / total[lane]
    for mu in range(k):
        for lane in range(n_lanes):
            p[mu, lane] *= total[lane]


@njit(cache=True, error_model="numpy")
def _forward(ws, n_lanes, n_steps, scale, alpha, floor, tiny, cosine):
    """T steps of the masked recursion on the hidden coordinates of every lane."""
    PH, A, off, zs, ps = ws[P_H], ws[A_VISIBLE], ws[OFFSET], ws[STATES], ws[ATTRACTION]
    cs, norms, sq_visible = ws[SCALES], ws[NORMS], ws[SQ_VISIBLE]
    logits, scalars, scaled_PH = ws[LOGITS], ws[LANE_SCALARS], ws[SCALED_P_H]
    n_hidden, k = PH.shape[0], PH.shape[1]  # n_hidden >= 1: something always moves
    largest, total = scalars[LARGEST], scalars[TOTAL]
    # logits = offset + scale c A + (scale P_H) z: scaling P_H once saves a loop a step
    for j in range(n_hidden):
        for mu in range(k):
            for lane in range(n_lanes):
                scaled_PH[j, mu, lane] = scale * PH[j, mu, lane]
    for t in range(n_steps):
        z, z_next, p = zs[t], zs[t + 1], ps[t]
        for mu in range(k):
            for lane in range(n_lanes):
                logits[mu, lane] = (off[mu, lane] + scale * cs[t, lane] * A[mu, lane]
                                    + scaled_PH[0, mu, lane] * z[0, lane])
            for j in range(1, n_hidden):
                for lane in range(n_lanes):
                    logits[mu, lane] += scaled_PH[j, mu, lane] * z[j, lane]
        _softmax_lanes(logits, p, n_lanes, floor, largest, total, ws[EXP_SCRATCH])
        for j in range(n_hidden):  # pulled = P_H^T p
            for lane in range(n_lanes):
                total[lane] = PH[j, 0, lane] * p[0, lane]
            for mu in range(1, k):
                for lane in range(n_lanes):
                    total[lane] += PH[j, mu, lane] * p[mu, lane]
            if cosine:  # v + alpha P^T p, projected below
                for lane in range(n_lanes):
                    z_next[j, lane] = z[j, lane] + alpha * total[lane]
            else:  # v + alpha (P^T p - v)
                for lane in range(n_lanes):
                    z_next[j, lane] = z[j, lane] + alpha * (total[lane] - z[j, lane])
        if cosine:
            _project_to_sphere(z_next, cs, norms, sq_visible, t, n_lanes, tiny, total)


@njit(cache=True, error_model="numpy")
def _project_to_sphere(z_next, cs, norms, sq_visible, t, n_lanes, tiny, total):
    """v / ||v|| for ``v = (c_t x_V, z)``: rescale z, and c by the same factor."""
    for lane in range(n_lanes):
        total[lane] = cs[t, lane] * cs[t, lane] * sq_visible[lane]
    for j in range(z_next.shape[0]):
        for lane in range(n_lanes):
            total[lane] += z_next[j, lane] * z_next[j, lane]
    for lane in range(n_lanes):
        norms[t, lane] = max(math.sqrt(total[lane]), tiny)
        cs[t + 1, lane] = cs[t, lane] / norms[t, lane]
    for j in range(z_next.shape[0]):
        for lane in range(n_lanes):
            z_next[j, lane] /= norms[t, lane]


@njit(cache=True, error_model="numpy")
def _loss_and_seed_gradient(ws, n_lanes, n_steps, n_rows):
    """Per-lane loss ``sum_H (x - z_T)^2`` and its gradient ``d mean_B / d z_T``."""
    target, zs, grad_z, loss = ws[TARGET], ws[STATES], ws[GRAD_Z], ws[LANE_SCALARS][LOSS]
    seed = -2.0 / n_rows
    for lane in range(n_lanes):
        loss[lane] = 0.0
    for j in range(target.shape[0]):
        for lane in range(n_lanes):
            error = target[j, lane] - zs[n_steps, j, lane]
            loss[lane] += error * error
            grad_z[j, lane] = error * seed


@njit(cache=True, error_model="numpy")
def _backward(ws, n_lanes, n_steps, scale, alpha, keep, cosine):
    """Backpropagation through the T steps, lane by lane (see the module docstring).

    Accumulates the gradient of ``P_H`` (per lane) and the sums over steps that
    give the visible columns and the offsets; ``grad_z`` starts as the gradient of
    the loss at ``z_T``.
    """
    PH, A, zs, ps = ws[P_H], ws[A_VISIBLE], ws[STATES], ws[ATTRACTION]
    cs, norms, sq_visible = ws[SCALES], ws[NORMS], ws[SQ_VISIBLE]
    grad_PH, grad_visible = ws[GRAD_P_H], ws[GRAD_VISIBLE]
    grad_offset, grad_z = ws[GRAD_OFFSET], ws[GRAD_Z]
    grad_s, grad_p, scalars = ws[LOGITS], ws[GRAD_ATTRACTION], ws[LANE_SCALARS]
    dot, gamma = scalars[DOT], scalars[GAMMA]
    n_hidden, k = PH.shape[0], PH.shape[1]
    grad_PH[:, :, :n_lanes] = 0.0
    grad_visible[:, :n_lanes] = 0.0
    grad_offset[:, :n_lanes] = 0.0
    gamma[:n_lanes] = 0.0  # d loss / d c_{t+1}: the loss ignores visible coordinates
    for t in range(n_steps - 1, -1, -1):
        p, z = ps[t], zs[t]
        if cosine:
            _project_backward(grad_z, gamma, zs[t + 1], cs, norms, sq_visible, t,
                              n_lanes, dot)
        # pulled = P_H^T p moves z by alpha * pulled: gradient alpha * grad_z
        for mu in range(k):
            for lane in range(n_lanes):
                pulled_grad = alpha * grad_z[0, lane]
                grad_PH[0, mu, lane] += p[mu, lane] * pulled_grad
                grad_p[mu, lane] = PH[0, mu, lane] * pulled_grad
            for j in range(1, n_hidden):
                for lane in range(n_lanes):
                    pulled_grad = alpha * grad_z[j, lane]
                    grad_PH[j, mu, lane] += p[mu, lane] * pulled_grad
                    grad_p[mu, lane] += PH[j, mu, lane] * pulled_grad
        # softmax backward: grad_s = p (grad_p - <p, grad_p>), kept times scale
        for lane in range(n_lanes):
            dot[lane] = p[0, lane] * grad_p[0, lane]
        for mu in range(1, k):
            for lane in range(n_lanes):
                dot[lane] += p[mu, lane] * grad_p[mu, lane]
        for mu in range(k):
            for lane in range(n_lanes):
                grad = p[mu, lane] * (grad_p[mu, lane] - dot[lane])
                grad_visible[mu, lane] += cs[t, lane] * grad
                grad_offset[mu, lane] += grad
                grad_s[mu, lane] = scale * grad
        # logits = offset + scale (c A + P_H z)
        for j in range(n_hidden):
            for lane in range(n_lanes):
                grad_PH[j, 0, lane] += grad_s[0, lane] * z[j, lane]
                grad_z[j, lane] = keep * grad_z[j, lane] + grad_s[0, lane] * PH[j, 0, lane]
            for mu in range(1, k):
                for lane in range(n_lanes):
                    grad_PH[j, mu, lane] += grad_s[mu, lane] * z[j, lane]
                    grad_z[j, lane] += grad_s[mu, lane] * PH[j, mu, lane]
        if cosine:
            for mu in range(k):
                for lane in range(n_lanes):
                    gamma[lane] += grad_s[mu, lane] * A[mu, lane]


@njit(cache=True, error_model="numpy")
def _project_backward(grad_z, gamma, z_next, cs, norms, sq_visible, t, n_lanes, dot):
    """Backward of ``v' = v / ||v||`` on ``(z, c)``; gamma is ``<x_V, grad v_V>``."""
    for lane in range(n_lanes):
        dot[lane] = cs[t + 1, lane] * gamma[lane]
    for j in range(grad_z.shape[0]):
        for lane in range(n_lanes):
            dot[lane] += z_next[j, lane] * grad_z[j, lane]
    for j in range(grad_z.shape[0]):
        for lane in range(n_lanes):
            grad_z[j, lane] = (grad_z[j, lane] - z_next[j, lane] * dot[lane]) \
                / norms[t, lane]
    for lane in range(n_lanes):
        gamma[lane] = (gamma[lane] - cs[t + 1, lane] * sq_visible[lane] * dot[lane]) \
            / norms[t, lane]


@njit(cache=True, error_model="numpy")
def _scatter_gradients(ws, restarts, n_rows, P_used, beta, scale, cosine, grad_P,
                       grad_W):
    """Sum the lanes' gradients into those of each restart's prototypes (as used:
    unit rows for cosine) and offsets, then into ``grad_W`` and the Euclidean
    ``-beta ||rho||^2`` term."""
    hid, grad_PH, grad_visible = ws[HIDDEN], ws[GRAD_P_H], ws[GRAD_VISIBLE]
    grad_offset, visible_rows = ws[GRAD_OFFSET], ws[VISIBLE_ROWS]
    n_hidden, k, d = hid.shape[0], grad_P.shape[1], grad_P.shape[2]
    for slot in range(restarts.shape[0]):
        r, lo = restarts[slot], slot * n_rows
        grad_P[r] = 0.0
        for b in range(n_rows):
            for j in range(n_hidden):
                feature = hid[j, lo + b]
                for mu in range(k):
                    grad_P[r, mu, feature] += grad_PH[j, mu, lo + b]
        for mu in range(k):
            row_grad = grad_P[r, mu]
            total = 0.0
            for b in range(n_rows):
                weight = scale * grad_visible[mu, lo + b]
                point = visible_rows[lo + b]
                for c in range(d):
                    row_grad[c] += weight * point[c]
                total += grad_offset[mu, lo + b]
            grad_W[r, mu] = total
            if not cosine:
                for c in range(d):
                    row_grad[c] -= 2.0 * beta * total * P_used[r, mu, c]


@njit(cache=True, error_model="numpy")
def _prepare_prototypes(P, W, restarts, beta, cosine, P_used, norms, offset):
    """The prototypes the dynamics use (unit rows for cosine) and the offsets."""
    k, d = P.shape[1], P.shape[2]
    for r in restarts:
        for mu in range(k):
            total = 0.0
            for c in range(d):
                total += P[r, mu, c] * P[r, mu, c]
            if cosine:
                norms[r, mu] = max(math.sqrt(total), SMALLEST_NORMAL)
                for c in range(d):
                    P_used[r, mu, c] = P[r, mu, c] / norms[r, mu]
                offset[r, mu] = W[r, mu]
            else:
                P_used[r, mu] = P[r, mu]
                offset[r, mu] = -beta * total + W[r, mu]


@njit(cache=True, error_model="numpy")
def _unproject_gradient(grad_P, P_used, norms, restarts):
    """Gradient through ``rho~ = rho / ||rho||``: drop the radial part, divide by the
    norm."""
    k, d = P_used.shape[1], P_used.shape[2]
    for r in restarts:
        for mu in range(k):
            radial = 0.0
            for c in range(d):
                radial += P_used[r, mu, c] * grad_P[r, mu, c]
            for c in range(d):
                grad_P[r, mu, c] = (grad_P[r, mu, c] - P_used[r, mu, c] * radial) \
                    / norms[r, mu]


@njit(cache=True)
def _working_constants(P, beta, alpha, cosine):
    """scale, alpha, keep (see ``_backward``), logit floor and norm floor, in the
    training precision: a float64 constant would turn float32 loops into float64."""
    constants = np.empty(5, P.dtype)
    constants[0] = beta if cosine else 2.0 * beta
    constants[1] = alpha
    constants[2] = 1.0 if cosine else 1.0 - alpha
    constants[3] = LOGIT_FLOOR
    constants[4] = SMALLEST_NORMAL
    return constants


@njit(cache=True)
def _batch_forward(X, rows, hidden, restarts, prepared, fill, start_from_fill, constants,
                   cosine, n_steps, ws):
    """T steps for the lanes (restarts x rows), and each lane's loss."""
    P_used, _, offset = prepared
    n_lanes = restarts.shape[0] * rows.shape[0]
    _gather_lanes(X, rows, hidden, restarts, P_used, offset, fill, start_from_fill, ws)
    _forward(ws, n_lanes, n_steps, constants[0], constants[1], constants[3],
             constants[4], cosine)
    _loss_and_seed_gradient(ws, n_lanes, n_steps, rows.shape[0])


@njit(cache=True)
def _batch_loss_and_grads(X, rows, hidden, restarts, P, W, fill, start_from_fill, beta,
                          cosine, n_steps, alpha, ws, prepared, grad_P, grad_W, losses):
    """Per-point loss (into ``losses[r, b]``) and gradients of ``sum_R mean_B loss``
    for the given restarts, on the batch ``X[rows]``."""
    P_used, norms, offset = prepared
    constants = _working_constants(P, beta, alpha, cosine)
    n_rows = rows.shape[0]
    n_lanes = restarts.shape[0] * n_rows
    _prepare_prototypes(P, W, restarts, beta, cosine, P_used, norms, offset)
    _batch_forward(X, rows, hidden, restarts, prepared, fill, start_from_fill, constants,
                   cosine, n_steps, ws)
    _backward(ws, n_lanes, n_steps, constants[0], constants[1], constants[2], cosine)
    _scatter_gradients(ws, restarts, n_rows, P_used, beta, constants[0], cosine, grad_P,
                       grad_W)
    if cosine:
        _unproject_gradient(grad_P, P_used, norms, restarts)
    loss = ws[LANE_SCALARS][LOSS]
    for slot in range(restarts.shape[0]):
        for b in range(n_rows):
            losses[restarts[slot], b] = loss[slot * n_rows + b]


@njit(cache=True)
def _prepared_arrays(P):
    """Room for ``_prepare_prototypes``: prototypes as used, their norms, offsets."""
    n_restarts, k, _ = P.shape
    return (np.empty_like(P), np.ones((n_restarts, k), P.dtype),
            np.empty((n_restarts, k), P.dtype))


def batch_loss_and_grads(X, hidden, P, W, fill, *, start_from_fill, beta, cosine, n_steps,
                         alpha):
    """Loss and gradients of one batch for every restart (for tests and checks).

    ``X`` (B, d) holds the batch; ``hidden`` (R, B, h) the tracked coordinates of
    each example (all of them, with ``start_from_fill=False``, for eq. 8). Returns
    the per-point losses (R, B) and the gradients of ``sum_R mean_B loss`` with
    respect to ``P`` (R, k, d) and ``W`` (R, k), as
    ``_backprop.completion_loss_and_grads``.
    """
    n_restarts, k, d = P.shape
    n_rows = X.shape[0]
    ws = allocate_workspace(n_restarts * n_rows, k, d, hidden.shape[2], n_steps, P.dtype)
    grad_P, grad_W = np.zeros_like(P), np.zeros_like(W)
    losses = np.zeros((n_restarts, n_rows), dtype=P.dtype)
    _batch_loss_and_grads(X, np.arange(n_rows), hidden, np.arange(n_restarts), P, W, fill,
                          start_from_fill, beta, cosine, n_steps, alpha, ws,
                          _prepared_arrays(P), grad_P, grad_W, losses)
    return losses, grad_P, grad_W


# -- Adam and the epoch ----------------------------------------------------------------


@njit(cache=True, error_model="numpy")
def _adam_update(param, grad, m, v, restarts, step_sizes, correction2):
    """Adam on the rows of the given restarts: ``param -= step * m / (sqrt(v / c2) +
    eps)``, with ``step = lr / c1`` per restart (as ``_training.BatchedAdam``)."""
    size = param.size // param.shape[0]
    flat_p, flat_g = param.reshape(-1), grad.reshape(-1)
    flat_m, flat_v = m.reshape(-1), v.reshape(-1)
    for r in restarts:
        step = step_sizes[r]
        for i in range(r * size, (r + 1) * size):
            g = flat_g[i]
            flat_m[i] = ADAM_BETA1 * flat_m[i] + (1.0 - ADAM_BETA1) * g
            flat_v[i] = ADAM_BETA2 * flat_v[i] + (1.0 - ADAM_BETA2) * g * g
            flat_p[i] -= step * flat_m[i] / (math.sqrt(flat_v[i] / correction2) + ADAM_EPS)


@njit(cache=True)
def train_epoch(X, order, hidden, fill, start_from_fill, restarts, P, W, moments, lr,
                adam_steps, weighted, beta, cosine, n_steps, alpha, batch_size):
    """One epoch of mini-batch Adam for the given (active) restarts.

    ``order`` is the epoch's permutation of the points and ``hidden[r, i]`` the
    tracked features of the i-th example of the epoch for restart r. Updates
    ``P``, ``W`` and the Adam ``moments`` (m_P, v_P, m_W, v_W) in place; returns
    the number of Adam steps taken so far and each restart's summed loss.
    """
    n_restarts, k, d = P.shape
    n_samples = order.shape[0]
    ws = allocate_workspace(restarts.shape[0] * batch_size, k, d, hidden.shape[2],
                            n_steps, P.dtype)
    prepared = _prepared_arrays(P)
    grad_P, grad_W = np.zeros_like(P), np.zeros_like(W)
    losses = np.zeros((n_restarts, batch_size), dtype=P.dtype)
    epoch_loss = np.zeros(n_restarts)
    step_sizes = np.empty(n_restarts)
    m_P, v_P, m_W, v_W = moments
    for start in range(0, n_samples, batch_size):
        stop = min(start + batch_size, n_samples)
        _batch_loss_and_grads(X, order[start:stop], hidden[:, start:stop], restarts, P, W,
                              fill, start_from_fill, beta, cosine, n_steps, alpha, ws,
                              prepared, grad_P, grad_W, losses)
        adam_steps += 1
        correction1 = 1.0 - ADAM_BETA1**adam_steps
        correction2 = 1.0 - ADAM_BETA2**adam_steps
        for r in restarts:
            step_sizes[r] = lr[r] / correction1
            for b in range(stop - start):
                epoch_loss[r] += losses[r, b]
        _adam_update(P, grad_P, m_P, v_P, restarts, step_sizes, correction2)
        if weighted:
            _adam_update(W, grad_W, m_W, v_W, restarts, step_sizes, correction2)
    return adam_steps, epoch_loss


# -- inference --------------------------------------------------------------------------


@njit(cache=True)
def completion_losses(X, hidden, P, W, fill, start_from_fill, beta, cosine, n_steps, alpha,
                      chunk):
    """Summed completion loss of every restart over the points (forward only).

    ``hidden`` (R, n, h) as for :func:`train_epoch`, indexed by row of ``X``; the
    points go ``chunk`` at a time (``R * chunk`` lanes).
    """
    n_restarts, k, d = P.shape
    n_samples = X.shape[0]
    restarts = np.arange(n_restarts)
    ws = allocate_workspace(n_restarts * chunk, k, d, hidden.shape[2], n_steps, P.dtype)
    prepared = _prepared_arrays(P)
    _prepare_prototypes(P, W, restarts, beta, cosine, prepared[0], prepared[1],
                        prepared[2])
    constants = _working_constants(P, beta, alpha, cosine)
    totals = np.zeros(n_restarts)
    loss = ws[LANE_SCALARS][LOSS]
    for start in range(0, n_samples, chunk):
        rows = np.arange(start, min(start + chunk, n_samples))
        _batch_forward(X, rows, hidden[:, start : start + rows.shape[0]], restarts,
                       prepared, fill, start_from_fill, constants, cosine, n_steps, ws)
        for slot in range(n_restarts):
            for b in range(rows.shape[0]):
                totals[slot] += loss[slot * rows.shape[0] + b]
    return totals


@njit(cache=True)
def converged_points(X, P, W, beta, cosine, n_steps, alpha, chunk):
    """``x^T`` for every point: T steps of the unmasked recursion from x itself, with
    one set of prototypes ``P`` (1, k, d) and log-weights ``W`` (1, k)."""
    n_samples, d = X.shape
    k = P.shape[1]
    restarts = np.zeros(1, dtype=np.int64)
    every_feature = np.empty((1, chunk, d), dtype=np.int64)
    every_feature[0, :, :] = np.arange(d)
    ws = allocate_workspace(chunk, k, d, d, n_steps, P.dtype)
    prepared = _prepared_arrays(P)
    _prepare_prototypes(P, W, restarts, beta, cosine, prepared[0], prepared[1],
                        prepared[2])
    constants = _working_constants(P, beta, alpha, cosine)
    final = np.empty((n_samples, d), dtype=P.dtype)
    states = ws[STATES]
    for start in range(0, n_samples, chunk):
        rows = np.arange(start, min(start + chunk, n_samples))
        _batch_forward(X, rows, every_feature, restarts, prepared, X[0], False, constants,
                       cosine, n_steps, ws)
        for b in range(rows.shape[0]):
            for c in range(d):
                final[start + b, c] = states[n_steps, c, b]
    return final

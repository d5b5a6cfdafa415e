"""Numba kernels of ClAM on the CPU: the batches of algorithm 1's training, and the
lanes' forward pass that inference shares (its kernel is in ``_inference_kernel``).

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
* **Everything per batch is in numba** (gathering, T steps forward and back,
  scattering the gradients, and Adam in :mod:`skdiffclust.clam._epoch`): a Python
  loop over batches costs more than the arithmetic. ``_epoch.train_epoch`` (and
  ``_inference`` for large inference) calls the kernels for chunks of batches or
  points of some milliseconds each, into arrays they allocate: the kernels return
  no arrays, so that Ctrl-C, seen between calls, raises ``KeyboardInterrupt``
  cleanly.
* **Kernels to compile**: for training, this module's batch
  (:func:`_batch_loss_and_grads`) on large epochs, or
  :mod:`skdiffclust.clam._compact`'s, the same bits one lane at a time, which
  compiles in about half the time, on small ones (float32 by default); for inference,
  ``_inference_kernel._infer`` (float64): completion losses and converged points
  share it, and ``_inference`` uses it only on large data (NumPy computes the same
  bits on small data, without compiling). Their ``cosine`` argument is True, or
  None for the Euclidean variant: ``is None`` on an argument is decided when a
  kernel compiles, so that a Euclidean fit never compiles the spherical code.
* **Compilation time** (seconds the first time, in a fresh environment;
  ``benchmarks/bench_first_fit.py``). numba compiles every kernel on its own, then
  links and optimises it again into each caller, and inlining at numba's level
  (``inline="always"``) copies the callee's code block by block, at a cost that
  grows with the square of its size, and again at each level of inlining. So
  small helpers are inlined, at most two levels deep, and larger ones are kernels
  of their own, as is :func:`_clip_factors` (it inlines the median, and the batch
  kernels that call it are inlined into the epoch loop). They are declared
  :data:`INTERNAL`: called only from other
  kernels, they need no Python entry point, whose unboxing of the 21 workspace
  arrays would cost about 0.2 s of compilation each. Each array in the workspace
  tuple costs every kernel that takes it compilation time, so a kernel needing
  few takes those alone, and one kernel's scratch stays out of the tuple. The
  kernels allocate nothing, so they compile without numba's reference counting
  (``_nrt=False``, about 1 s of a cold first fit), and zero arrays by loops (a
  slice assignment compiles numba's broadcasting).

``tests/clam/test_torch_clam.py`` checks the loss and gradients of a batch against
the torch implementation, and whole epochs against the torch training loop.
"""

import math

import numpy as np

from skdiffclust.clam._fastexp import exp_weights
from skdiffclust._utils._numba import bits_as, compile_for_size, jit

EUCLIDEAN = "euclidean"
COSINE = "cosine"

# the options of the kernels called only from other kernels (module docstring)
INTERNAL = {"error_model": "numpy", "no_cpython_wrapper": True, "no_cfunc_wrapper": True,
            "_nrt": False}

# Logits more than 46 below the largest are raised to that floor, so attraction
# weights are never below about 1e-20 / k. Such weights cannot change a float32 or
# float64 sum whose largest term is at least 1 / k, but without the floor they and
# their gradients would be subnormal numbers, on which CPUs are 10-100x slower.
LOGIT_FLOOR = -46.0

# floor of the norms divided by (cosine); float32's in both precisions: only a zero
# vector gets there
SMALLEST_NORMAL = np.finfo(np.float32).tiny


# -- masks ---------------------------------------------------------------------------


def hidden_count(mask_prob, n_features):
    """Features hidden per example: ``mask_prob * n_features``, rounded half up."""
    return min(int(mask_prob * n_features + 0.5), n_features)


def hidden_features(draws, n_features):
    """Hidden feature indices from uniform draws in [0, 1), shape (R, n, h).

    A partial Fisher-Yates shuffle per example: ``h`` distinct features, each
    subset equally likely (the distribution of ``_dynamics.draw_masks``).
    """
    hidden = np.empty(draws.shape, dtype=np.int64)
    _draw_hidden(draws, n_features, hidden)
    return hidden


@jit
def _draw_hidden(draws, n_features, hidden):
    n_restarts, n_samples, n_hidden = draws.shape
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


# -- one batch: lanes ----------------------------------------------------------------


# the workspace of a batch: a tuple of arrays (see ``new_workspace``), indexed
# by these constants (numba needs constant indices into a heterogeneous tuple)
(HIDDEN, P_H, VISIBLE, A_VISIBLE, OFFSET, TARGET, STATES, ATTRACTION, SCALES, NORMS,
 SQ_VISIBLE, GRAD_P_H, GRAD_VISIBLE, GRAD_OFFSET, GRAD_Z, LOGITS, GRAD_ATTRACTION,
 LANE_SCALARS, EXP_SCRATCH, VISIBLE_ROWS, SCALED_P_H) = range(21)
# rows of ws[LANE_SCALARS]
LARGEST, TOTAL, DOT, GAMMA, LOSS = range(5)


def new_workspace(n_lanes, n_clusters, n_features, n_hidden, n_steps, dtype):
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


def new_clip_scratch(n_lanes):
    """Room for ``_clip_lanes``: each lane's gradient norm (row 0) and the factor
    ``_scatter_gradients`` scales its gradient by (row 1: ones unless clipping);
    outside the workspace, which every kernel takes (module docstring)."""
    scratch = np.empty((2, n_lanes))
    scratch[1] = 1.0
    return scratch


@jit(**INTERNAL)
def _gather_lanes(X, order, first, n_rows, hidden, per_point, restarts, P, offset, fill,
                  start_from_fill, ws):
    """Copy each lane's point, hidden features and prototype columns into place.

    The points are ``X[order[first:first + n_rows]]``; the b-th has the hidden
    features ``hidden[r, first + b]`` (``per_point``) or ``hidden[r, b]``.
    """
    hid, PH, visible, A, off = ws[HIDDEN], ws[P_H], ws[VISIBLE], ws[A_VISIBLE], ws[OFFSET]
    target, zs, cs = ws[TARGET], ws[STATES], ws[SCALES]
    sq_visible, visible_rows = ws[SQ_VISIBLE], ws[VISIBLE_ROWS]
    n_hidden = hidden.shape[2]
    hidden_first = first if per_point else 0
    n_lanes = restarts.shape[0] * n_rows
    k, d = P.shape[1], P.shape[2]
    # the batch's points, feature-major, repeated for the lanes of every restart
    for b in range(n_rows):
        x = X[order[first + b]]
        for c in range(d):
            visible[c, b] = x[c]
    for c in range(d):
        for lane in range(n_rows, n_lanes):
            visible[c, lane] = visible[c, lane - n_rows]
    for slot in range(restarts.shape[0]):
        r = restarts[slot]
        for b in range(n_rows):
            lane = slot * n_rows + b
            x = X[order[first + b]]
            for c in range(d):
                visible_rows[lane, c] = x[c]
            for j in range(n_hidden):
                feature = hidden[r, hidden_first + b, j]
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


@jit(error_model="numpy", inline="always")
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
    exp_weights(logits, largest, floor, n_lanes, p, total, exp_scratch)
    for lane in range(n_lanes):
        total[lane] = 1.0 / total[lane]
    for mu in range(k):
        for lane in range(n_lanes):
            p[mu, lane] *= total[lane]


@jit(**INTERNAL)
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
            if cosine is not None:  # v + alpha P^T p, projected below
                for lane in range(n_lanes):
                    z_next[j, lane] = z[j, lane] + alpha * total[lane]
            else:  # v + alpha (P^T p - v)
                for lane in range(n_lanes):
                    z_next[j, lane] = z[j, lane] + alpha * (total[lane] - z[j, lane])
        if cosine is not None:
            _project_to_sphere(z_next, cs, norms, sq_visible, t, n_lanes, tiny, total)


@jit(error_model="numpy", inline="always")
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


@jit(**INTERNAL)
def _loss_and_seed_gradient(target, zs, grad_z, loss, n_lanes, n_steps, n_rows):
    """Per-lane loss ``sum_H (x - z_T)^2`` and its gradient ``d mean_B / d z_T``
    (arrays of the workspace: TARGET, STATES, GRAD_Z, LANE_SCALARS[LOSS])."""
    seed = -2.0 / n_rows
    for lane in range(n_lanes):
        loss[lane] = 0.0
    for j in range(target.shape[0]):
        for lane in range(n_lanes):
            error = target[j, lane] - zs[n_steps, j, lane]
            loss[lane] += error * error
            grad_z[j, lane] = error * seed


@jit(**INTERNAL)
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
    for mu in range(k):  # loops: slice assignments compile broadcasting machinery
        for j in range(n_hidden):
            for lane in range(n_lanes):
                grad_PH[j, mu, lane] = 0.0
        for lane in range(n_lanes):
            grad_visible[mu, lane] = 0.0
            grad_offset[mu, lane] = 0.0
    for lane in range(n_lanes):
        gamma[lane] = 0.0  # d loss / d c_{t+1}: the loss ignores visible coordinates
    for t in range(n_steps - 1, -1, -1):
        p, z = ps[t], zs[t]
        if cosine is not None:
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
        if cosine is not None:
            for mu in range(k):
                for lane in range(n_lanes):
                    gamma[lane] += grad_s[mu, lane] * A[mu, lane]


@jit(error_model="numpy", inline="always")
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


@jit(**INTERNAL)
def _scatter_gradients(hid, grad_PH, grad_visible, grad_offset, visible_rows, restarts,
                       n_rows, P_used, beta, scale, cosine, grad_P, grad_W, factors,
                       for_size=None):
    """Sum the lanes' gradients, each times its factor (``_clip_lanes``), into those
    of each restart's prototypes (as used: unit rows for cosine) and offsets, then
    into ``grad_W`` and the Euclidean ``-beta ||rho||^2`` term (arrays of the
    workspace: HIDDEN, GRAD_P_H, GRAD_VISIBLE, GRAD_OFFSET, VISIBLE_ROWS).
    ``for_size``: True in the compact kernel (``_utils._numba.compile_for_size``)."""
    compile_for_size(for_size)
    n_hidden, k, d = hid.shape[0], grad_P.shape[1], grad_P.shape[2]
    # each scaled gradient rounded to the working precision, as if scaled in place
    to_working = grad_PH.dtype.type
    for slot in range(restarts.shape[0]):
        r, lo = restarts[slot], slot * n_rows
        for mu in range(k):  # loops: a slice assignment compiles broadcasting machinery
            for c in range(d):
                grad_P[r, mu, c] = 0.0
        for b in range(n_rows):
            factor = factors[lo + b]
            for j in range(n_hidden):
                feature = hid[j, lo + b]
                for mu in range(k):
                    grad_P[r, mu, feature] += to_working(grad_PH[j, mu, lo + b] * factor)
        for mu in range(k):
            row_grad = grad_P[r, mu]
            total = 0.0
            for b in range(n_rows):
                factor = factors[lo + b]
                weight = scale * to_working(grad_visible[mu, lo + b] * factor)
                point = visible_rows[lo + b]
                for c in range(d):
                    row_grad[c] += weight * point[c]
                total += to_working(grad_offset[mu, lo + b] * factor)
            grad_W[r, mu] = total
            if cosine is None:
                for c in range(d):
                    row_grad[c] -= 2.0 * beta * total * P_used[r, mu, c]


@jit(**INTERNAL)
def _prepare_prototypes(P, W, restarts, beta, cosine, P_used, norms, offset, for_size=None):
    """The prototypes the dynamics use (unit rows for cosine) and the offsets
    (``for_size`` as :func:`_scatter_gradients`')."""
    compile_for_size(for_size)
    k, d = P.shape[1], P.shape[2]
    for r in restarts:
        for mu in range(k):
            total = 0.0
            for c in range(d):
                total += P[r, mu, c] * P[r, mu, c]
            if cosine is not None:
                norms[r, mu] = max(math.sqrt(total), SMALLEST_NORMAL)
                for c in range(d):
                    P_used[r, mu, c] = P[r, mu, c] / norms[r, mu]
                offset[r, mu] = W[r, mu]
            else:  # loops: a row copy would compile its shape checks too
                for c in range(d):
                    P_used[r, mu, c] = P[r, mu, c]
                offset[r, mu] = -beta * total + W[r, mu]


@jit(**INTERNAL)
def _unproject_gradient(grad_P, P_used, norms, restarts, for_size=None):
    """Gradient through ``rho~ = rho / ||rho||``: drop the radial part, divide by the
    norm (``for_size`` as :func:`_scatter_gradients`')."""
    compile_for_size(for_size)
    k, d = P_used.shape[1], P_used.shape[2]
    for r in restarts:
        for mu in range(k):
            radial = 0.0
            for c in range(d):
                radial += P_used[r, mu, c] * grad_P[r, mu, c]
            for c in range(d):
                grad_P[r, mu, c] = (grad_P[r, mu, c] - P_used[r, mu, c] * radial) \
                    / norms[r, mu]


def _spherical(cosine):
    """The kernels' ``cosine`` argument: True, or None for the Euclidean variant."""
    return True if cosine else None


def working_constants(dtype, beta, alpha, cosine):
    """scale, alpha, keep (see ``_backward``), logit floor and norm floor, in the
    working precision: a float64 constant would turn float32 loops into float64."""
    return np.array([beta if cosine else 2.0 * beta, alpha, 1.0 if cosine else 1.0 - alpha,
                     LOGIT_FLOOR, SMALLEST_NORMAL], dtype=dtype)


def new_prepared(P):
    """Room for ``_prepare_prototypes``: prototypes as used, their norms, offsets."""
    n_restarts, k, _ = P.shape
    return (np.empty_like(P), np.ones((n_restarts, k), P.dtype),
            np.empty((n_restarts, k), P.dtype))


@jit(error_model="numpy", inline="always")
def _batch_loss_and_grads(X, order, first, n_rows, hidden, restarts, P, W, fill,
                          start_from_fill, beta, cosine, n_steps, constants, ws, prepared,
                          grad_P, grad_W, losses, clip, clip_scratch):
    """Per-point loss (into ``losses[r, b]``) and gradients of ``sum_R mean_B loss``
    for the given restarts, on the batch ``X[order[first:first + n_rows]]`` (whose
    hidden features are ``hidden[:, first:first + n_rows]``); with ``clip > 0``,
    each point's gradient is first clipped (:func:`_clip_lanes`)."""
    P_used, norms, offset = prepared
    n_lanes = restarts.shape[0] * n_rows
    _prepare_prototypes(P, W, restarts, beta, cosine, P_used, norms, offset)
    _gather_lanes(X, order, first, n_rows, hidden, True, restarts, P_used, offset, fill,
                  start_from_fill, ws)
    _forward(ws, n_lanes, n_steps, constants[0], constants[1], constants[3], constants[4],
             cosine)
    loss = ws[LANE_SCALARS][LOSS]
    _loss_and_seed_gradient(ws[TARGET], ws[STATES], ws[GRAD_Z], loss, n_lanes, n_steps, n_rows)
    _backward(ws, n_lanes, n_steps, constants[0], constants[1], constants[2], cosine)
    if clip > 0.0:
        _clip_lanes(ws[GRAD_P_H], ws[GRAD_VISIBLE], ws[GRAD_OFFSET], ws[P_H], ws[A_VISIBLE],
                    ws[SQ_VISIBLE], restarts, n_rows, P_used, beta, constants[0], clip,
                    cosine, clip_scratch)
    _scatter_gradients(ws[HIDDEN], ws[GRAD_P_H], ws[GRAD_VISIBLE], ws[GRAD_OFFSET],
                       ws[VISIBLE_ROWS], restarts, n_rows, P_used, beta, constants[0], cosine,
                       grad_P, grad_W, clip_scratch[1])
    if cosine is not None:
        _unproject_gradient(grad_P, P_used, norms, restarts)
    for slot in range(restarts.shape[0]):
        for b in range(n_rows):
            losses[restarts[slot], b] = loss[slot * n_rows + b]


@jit(**INTERNAL)
def _clip_lanes(grad_PH, grad_visible, grad_offset, PH, A, sq_visible, restarts, n_rows,
                P_used, beta, scale, clip, cosine, scratch):
    """The factor (row 1 of ``scratch``) that scales each point's gradient (of the
    prototypes, as used) down to at most ``clip`` times the median norm over the
    batch's points (per restart); ``_scatter_gradients`` applies it.

    A point's gradient is ``G_mu = g_mu (on its hidden features) + v_mu x_V +
    r_mu rho_mu`` for each prototype mu (as ``_scatter_gradients`` sums them; ``r``
    is 0 for cosine). With ``x_V`` zero at the hidden features and ``<x_V, rho_mu> =
    A_mu``, its squared norm is ``sum_mu v^2 ||x_V||^2 + r^2 ||rho||^2 + 2 v r A +
    sum_H (g^2 + 2 g r rho_H)``. Takes the workspace's arrays one by one: the whole
    workspace would cost compilation time.
    """
    n_hidden, k, d = grad_PH.shape[0], grad_PH.shape[1], P_used.shape[2]
    lane_norms, factors = scratch[0], scratch[1]
    for slot in range(restarts.shape[0]):
        r, lo, hi = restarts[slot], slot * n_rows, (slot + 1) * n_rows
        for lane in range(lo, hi):
            lane_norms[lane] = 0.0
        for mu in range(k):
            sq_rho = 0.0
            for c in range(d):
                sq_rho += P_used[r, mu, c] * P_used[r, mu, c]
            for lane in range(lo, hi):
                visible = scale * grad_visible[mu, lane]
                radial = 0.0 if cosine is not None else -2.0 * beta * grad_offset[mu, lane]
                lane_norms[lane] += (visible * visible * sq_visible[lane]
                                     + radial * radial * sq_rho
                                     + 2.0 * visible * radial * A[mu, lane])
            for j in range(n_hidden):
                for lane in range(lo, hi):
                    radial = 0.0 if cosine is not None else -2.0 * beta * grad_offset[mu, lane]
                    g = grad_PH[j, mu, lane]
                    lane_norms[lane] += g * (g + 2.0 * radial * PH[j, mu, lane])
        for lane in range(lo, hi):
            # +0.0 rather than -0.0 or NaN, as _median needs
            lane_norms[lane] = math.sqrt(lane_norms[lane]) if lane_norms[lane] > 0.0 else 0.0
    _clip_factors(lane_norms, factors, restarts.shape[0], n_rows, clip)


@jit(**INTERNAL)
def _clip_factors(lane_norms, factors, n_slots, n_rows, clip, for_size=None):
    """Each lane's factor from the gradient norms of its restart's lanes (rows of
    ``_clip_lanes``' scratch): 1 for the points within ``clip`` times their median,
    the bound over its norm for the others. ``for_size``: True in the compact
    kernel (:func:`~skdiffclust._utils._numba.compile_for_size`)."""
    compile_for_size(for_size)
    for slot in range(n_slots):
        lo, hi = slot * n_rows, (slot + 1) * n_rows
        bound = clip * _median(lane_norms, lo, hi)
        for lane in range(lo, hi):
            if bound > 0.0:
                # min(bound / max(norm, bound), 1.0), as numba's min and max compare
                # (each would compile a function of its own)
                norm = lane_norms[lane]
                factor = bound / (bound if bound > norm else norm)
                factors[lane] = 1.0 if 1.0 < factor else factor
            else:
                factors[lane] = 1.0


# the bits of +inf: for non-negative floats, the order of their bits as int64 is theirs
POSITIVE_INFINITY_BITS = 0x7FF0000000000000


@jit(error_model="numpy", inline="always")
def _median(values, start, stop):
    """numpy's median of the float64 ``values[start:stop]``, which are positive or
    +0.0 (the mean of the two middle ones for an even count).

    The middle value is found by bisection on the values' bits (at most 63
    counting passes, which vectorise), the next one by one more pass: linear time
    in the batch's size and little code to compile (quickselect took about 0.4 s
    more; an insertion sort 0.15 s less, but made batches of 1,024 10% slower to
    train).
    """
    n = stop - start
    middle = (n - 1) // 2
    # count(bits <= lo) <= middle < count(bits <= hi): hi ends as the middle's bits
    lo, hi = -1, POSITIVE_INFINITY_BITS
    while hi - lo > 1:
        bisector = lo + (hi - lo) // 2
        count = 0
        for i in range(start, stop):
            count += bits_as(np.float64(values[i]), np.int64) <= bisector
        if count > middle:
            hi = bisector
        else:
            lo = bisector
    lower = bits_as(np.int64(hi), np.float64)
    if n % 2 == 1:
        return lower
    upper, count = np.inf, 0
    for i in range(start, stop):
        value = values[i]
        if value <= lower:
            count += 1
        elif value < upper:
            upper = value
    return 0.5 * (lower + (lower if count > middle + 1 else upper))


def batch_loss_and_grads(X, hidden, P, W, fill, *, start_from_fill, beta, cosine, n_steps,
                         alpha, clip=0.0):
    """Loss and gradients of one batch for every restart (for tests and checks).

    ``X`` (B, d) holds the batch; ``hidden`` (R, B, h) the tracked coordinates of
    each example (all of them, with ``start_from_fill=False``, for eq. 8). Returns
    the per-point losses (R, B) and the gradients of ``sum_R mean_B loss`` with
    respect to ``P`` (R, k, d) and ``W`` (R, k), as
    ``_backprop.completion_loss_and_grads`` (with ``clip``, of the points'
    clipped gradients).
    """
    n_restarts, k, d = P.shape
    n_rows = X.shape[0]
    ws = new_workspace(n_restarts * n_rows, k, d, hidden.shape[2], n_steps, P.dtype)
    grad_P, grad_W = np.zeros_like(P), np.zeros_like(W)
    losses = np.zeros((n_restarts, n_rows), dtype=P.dtype)
    _batch_loss_and_grads(X, np.arange(n_rows), 0, n_rows, hidden, np.arange(n_restarts), P,
                          W, fill, start_from_fill, beta, _spherical(cosine), n_steps,
                          working_constants(P.dtype, beta, alpha, cosine), ws,
                          new_prepared(P), grad_P, grad_W, losses, float(clip),
                          new_clip_scratch(n_restarts * n_rows))
    return losses, grad_P, grad_W


# Kernel calls of training and inference take about this many lane-steps (one lane,
# one step of the recursion, weighted by its size): about 10 milliseconds each
LANE_STEPS_PER_CALL = 1 << 24


def lane_steps(n_lanes, n_clusters, n_hidden, n_steps):
    """The work of ``n_lanes`` lanes through ``n_steps`` steps, in lane-steps."""
    return n_lanes * n_steps * (n_clusters * (n_hidden + 2) + n_hidden)


def _points_per_call(n_lanes_per_point, n_clusters, n_hidden, n_steps, granule):
    """Points per kernel call, a multiple of ``granule`` (a batch, an inference chunk)."""
    cost = lane_steps(n_lanes_per_point, n_clusters, n_hidden, n_steps)
    return granule * max(LANE_STEPS_PER_CALL // max(cost * granule, 1), 1)


def _map_in_threads(function, items, n_threads):
    """``map(function, items)`` in order, on up to ``n_threads`` threads."""
    items = list(items)
    if n_threads <= 1 or len(items) <= 1:
        return [function(item) for item in items]
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(min(n_threads, len(items)))
    try:
        return list(pool.map(function, items))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)

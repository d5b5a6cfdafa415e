"""ClAM's training on CUDA: the batches of an epoch in one numba.cuda kernel.

The CPU kernel (``_epoch._train_batches``) runs, for each batch, the T steps of the
masked recursion forward and back on every lane (restart x point), sums the lanes'
gradients, clips them and takes an Adam step. On a GPU, one step of torch operations
per batch costs hundreds of tiny launches (``_torch_fit``); here a launch runs a whole
slice of an epoch:

* **One thread block per restart**, persistent over the slice's batches: batches are
  sequential SGD steps of a restart, restarts are independent. Nothing returns to the
  host between batches.
* **Threads over (lane slot, prototype)**: ``n_slots`` lanes of the batch are in
  flight at once (rounds of them when the batch is larger), a group of ``Q`` threads
  per lane (a power of two, so that a group lies in one warp: :func:`lane_shape`),
  thread ``q`` owning the prototypes ``q, q + Q, ...`` (their logits,
  attraction weights and gradients) and the hidden coordinates ``q, q + Q, ...``
  (the state ``z``). A sum over the lane (the softmax's, ``||x_V||^2``) is a
  butterfly of warp shuffles in its group, which leaves the same bits in every
  thread; numba's CUDA simulator, on which the tests run, has no warp intrinsics, so
  there a shuffle is a store and a load around barriers (:func:`_xor_partner`).
* **No global memory in the inner loops**: a lane's hidden features, which of its
  features are hidden, and its point are copied to the working memory when it is
  gathered: a read of global memory has a latency of hundreds of cycles, which the
  few warps of one block do not hide.
* **32-bit unsigned offsets, ``while`` loops**: the offsets into the working memory
  (layouts included) are ``uint32`` and the loops over prototypes, features and
  lanes are ``while`` loops that step an offset. numba indexes with signed 64-bit
  integers otherwise, each access paying for the wrap-around of negative indices,
  and a ``range`` with a step computed at run time divides 64-bit integers (a
  subroutine call) at every entry: ptxas (sm_90) made an iteration of
  ``pulled += ws[used + mu * d + f] * ws[p + mu]`` several times longer written
  with ``range`` over ``int64`` than with a ``uint32`` ``while`` loop.
* **The same maths, floors, order of sums and precision** as the CPU kernel, step
  for step (float64 where it accumulates in float64: lane norms, offsets, Adam's
  arithmetic), so that an epoch here equals the CPU's within float32 rounding. The
  CPU draws the permutation and the masks (``_trainer.CPUTrainer``), as for its own
  kernel; ``_cuda_fit`` sends them.
* **Working memory** of a block (its prototypes as used, the lanes' states and
  gradients; layout by :func:`workspace_layout`) lives in shared memory when it
  fits (48 KB: the defaults take about 40), otherwise in a global array, one row per
  block. Barriers make both visible to the whole block.
* **Deterministic**: every sum has a fixed order (a thread per parameter sums the
  lanes in order); atomics only for the counts of the most attracting prototypes,
  integers, exact in any order.

* **Warp barriers within a lane's work**: a lane's threads lie in one warp and its
  working memory is its own, so between the phases of its recursion its threads
  wait for each other only (``syncwarp``, :func:`_lane_barrier`), not for the
  block's other warps; block barriers remain around the batch's shared steps
  (the prototypes as used, clipping, the batch's gradients, Adam).

Every barrier and every shuffle is reached by every thread of the block (loops
around them have uniform bounds; inactive lanes and threads skip work, not
barriers or shuffles).
"""

import math

import numpy as np
from numba import config, cuda, float32

from skdiffclust._training._optim import ADAM_BETA1, ADAM_BETA2, ADAM_EPS
from skdiffclust.clam._kernels import SMALLEST_NORMAL

# Threads per block. ptxas gives the kernel 249 registers a thread (sm_90; 210 since
# its offsets are 32-bit), so that a block of 256 threads launches without spills
# (65,536 registers per SM). Before the 32-bit offsets, on an
# H200, 50,000 x 32 at k=20, batch 16: 258 us a batch with 256 threads (16 a lane),
# 277 with 512 (32 a lane, capped at 128 registers: 272 bytes of spills a thread),
# 278 with 128 (8 a lane). The simulator's jit takes no max_registers.
MAX_THREADS = 256
MIN_PER_LANE = 8  # fewer threads a lane before fewer lanes in flight
SIMULATED = bool(config.ENABLE_CUDASIM)
_KERNEL = {} if SIMULATED else {"cache": True,
                                "max_registers": min(65536 // MAX_THREADS, 255)}
WARP = 32
SHARED_BYTES = 48 * 1024  # dynamic shared memory available without opting in

# offsets of the float64 scratch of a block (:func:`double_layout`)
(D_SQ_RHO, D_NORMS, D_SORTED, D_FACTORS, D_PARTIAL) = range(5)
# offsets of a block's working memory (:func:`workspace_layout`)
(W_P_USED, W_OFFSET, W_P_NORMS, W_GRAD_P, W_GRAD_W, W_SLOTS, W_SLOT_SIZE, W_LANES,
 W_LANE_SIZE, W_SCRATCH) = range(10)


def lane_shape(n_clusters, batch_size):
    """Threads per lane (a power of two, at most a warp: ``k`` rounded up, halved
    down to :data:`MIN_PER_LANE` while the batch's lanes need more than
    :data:`MAX_THREADS`) and lanes in flight (slots) of a block, whose threads fill
    whole warps (idle slots included): a shuffle of the whole warp needs every one of
    its threads."""
    per_lane = 1 << (min(n_clusters, WARP) - 1).bit_length()
    while per_lane > MIN_PER_LANE and per_lane * batch_size > MAX_THREADS:
        per_lane //= 2
    n_slots = max(1, min(batch_size, MAX_THREADS // per_lane))
    lanes_per_warp = WARP // per_lane
    return per_lane, -(-n_slots // lanes_per_warp) * lanes_per_warp


def workspace_layout(k, d, h, n_steps, n_slots, batch_size, n_threads=0):
    """Offsets (``W_*``) into a block's working memory and its length, in elements.

    The prototypes as used (k, d), their offsets (k) and norms (k), the batch's
    gradient (k, d) and that of the log-weights (k); per slot :func:`_slot_parts`,
    per lane of the batch :func:`_lane_parts`; on the simulator, a value per thread
    for its shuffles (``n_threads``).
    """
    slot_size = d + h + k + (n_steps + 1) * h + n_steps * k + (n_steps + 1) + n_steps \
        + 2 * k + h
    lane_size = h * k + 2 * k + 1 + h + 2 * d
    layout = np.zeros(10, dtype=np.uint32)
    layout[W_OFFSET] = k * d
    layout[W_P_NORMS] = layout[W_OFFSET] + k
    layout[W_GRAD_P] = layout[W_P_NORMS] + k
    layout[W_GRAD_W] = layout[W_GRAD_P] + k * d
    layout[W_SLOTS] = layout[W_GRAD_W] + k
    layout[W_SLOT_SIZE] = slot_size
    layout[W_LANES] = layout[W_SLOTS] + n_slots * slot_size
    layout[W_LANE_SIZE] = lane_size
    layout[W_SCRATCH] = layout[W_LANES] + batch_size * lane_size
    return layout, int(layout[W_SCRATCH] + (n_threads if SIMULATED else 0))


def double_layout(k, n_slots, batch_size):
    """Offsets (``D_*``) into a block's float64 scratch, and its length: the
    prototypes' squared norms (k), the lanes' gradient norms, their sorted copy and
    clipping factors (B each), partial norms of the lanes in flight (slots, k)."""
    layout = np.array([0, k, k + batch_size, k + 2 * batch_size, k + 3 * batch_size],
                      dtype=np.uint32)
    return layout, int(k + 3 * batch_size + n_slots * k)


# -- device functions -----------------------------------------------------------------

U0 = np.uint32(0)
U1 = np.uint32(1)


# max() and min() of two numbers do not compile for numba's CUDA target (0.68)
@cuda.jit(device=True)
def _larger(a, b):
    return a if a > b else b


@cuda.jit(device=True)
def _smaller(a, b):
    return a if a < b else b


@cuda.jit(device=True)
def _slot_parts(base, d, h, k, n_steps):
    """Offsets of a slot's arrays: visible part (d), hidden values (h), A (k), states
    (T+1, h), attraction (T, k), scales c (T+1), norms (T), logits or their
    gradients (k), gradient of p (k), gradient of z (h)."""
    target = base + d
    visible_dot = target + h
    states = visible_dot + k
    attraction = states + (n_steps + U1) * h
    scales = attraction + n_steps * k
    norms = scales + n_steps + U1
    logits = norms + n_steps
    grad_p = logits + k
    grad_z = grad_p + k
    return target, visible_dot, states, attraction, scales, norms, logits, grad_p, grad_z


@cuda.jit(device=True)
def _lane_parts(lay, b, h, k, d):
    """Offsets of lane b's results: gradient of P_H (h, k), of the visible part (k),
    of the offsets (k), its loss; then of its hidden features (h), the position of
    each feature among them or -1 (d) and its point (d), as float32 values."""
    base = lay[W_LANES] + b * lay[W_LANE_SIZE]
    features = base + h * k + k + k + U1
    return (base, base + h * k, base + h * k + k, base + h * k + k + k, features,
            features + h, features + h + d)


@cuda.jit(device=True)
def _feature(ws, lane, j):
    """The lane's j-th hidden feature (``_lane_parts``' copy)."""
    return np.uint32(ws[lane[4] + j])


if SIMULATED:
    @cuda.jit(device=True)
    def _xor_partner(value, offset, ws, scratch, tid):
        """The value of thread ``tid ^ offset`` (a shuffle: by every thread)."""
        ws[scratch + tid] = value
        cuda.syncthreads()
        other = ws[scratch + (tid ^ offset)]
        cuda.syncthreads()
        return other
else:
    @cuda.jit(device=True)
    def _xor_partner(value, offset, ws, scratch, tid):
        """The value of thread ``tid ^ offset`` (a shuffle: by every thread)."""
        return cuda.shfl_xor_sync(0xFFFFFFFF, value, offset)


if SIMULATED:
    @cuda.jit(device=True)
    def _lane_barrier():
        """A barrier of the lane's threads (the simulator has no warp barrier)."""
        cuda.syncthreads()
else:
    @cuda.jit(device=True)
    def _lane_barrier():
        """A barrier of the lane's threads: its warp's (every thread of the warp
        reaches it; its other lanes, if any, wait for nothing of this one's)."""
        cuda.syncwarp(0xFFFFFFFF)


@cuda.jit(device=True)
def _group_sum(value, width, ws, lay, tid):
    """The sum of ``value`` over the ``width`` threads of a lane (a power of two),
    the same bits in each of them."""
    offset = width >> U1
    while offset > U0:
        value += _xor_partner(value, offset, ws, lay[W_SCRATCH], tid)
        offset >>= U1
    return value


@cuda.jit(device=True)
def _group_max(value, width, ws, lay, tid):
    """The largest ``value`` of the ``width`` threads of a lane."""
    offset = width >> U1
    while offset > U0:
        value = _larger(value, _xor_partner(value, offset, ws, lay[W_SCRATCH], tid))
        offset >>= U1
    return value


@cuda.jit(device=True)
def _dot(ws, a, a_step, b, b_step, n, total):
    """``total`` plus the sum over i < n of ``ws[a + i a_step] * ws[b + i b_step]``,
    in order."""
    i = U0
    while i < n:
        total += ws[a] * ws[b]
        a += a_step
        b += b_step
        i += U1
    return total


@cuda.jit(device=True)
def _hidden_feature(hidden, r, position, j):
    """The j-th hidden feature of the example at ``position`` of the epoch for restart
    r; ``hidden`` of shape (1, 1, h) is shared by all (the unmasked loss)."""
    if hidden.shape[1] == 1:
        return hidden[0, 0, j]
    return hidden[r, position, j]


@cuda.jit(device=True)
def _adam_update(param, grad, m, v, r, i, step_size, correction2):
    """``_optim.adam_update`` on element (r, i), in place, rounding as it does."""
    m[r, i] = ADAM_BETA1 * m[r, i] + (1.0 - ADAM_BETA1) * grad
    v[r, i] = ADAM_BETA2 * v[r, i] + (1.0 - ADAM_BETA2) * grad * grad
    param[r, i] -= step_size * m[r, i] / (math.sqrt(v[r, i] / correction2) + ADAM_EPS)


@cuda.jit(device=True)
def _prepare_prototypes(P, W, r, beta, cosine, clip, ws, lay, doubles, dlay, tid,
                        n_threads):
    """``_kernels._prepare_prototypes`` for restart r, and the squared norms of the
    prototypes as used (for clipping); ends on a barrier."""
    k = np.uint32(W.shape[1])
    d = np.uint32(P.shape[1]) // k
    mu = tid
    while mu < k:
        total = 0.0
        row = mu * d
        c = U0
        while c < d:
            total += P[r, row + c] * P[r, row + c]
            c += U1
        if cosine:
            ws[lay[W_P_NORMS] + mu] = _larger(math.sqrt(total), SMALLEST_NORMAL)
            ws[lay[W_OFFSET] + mu] = W[r, mu]
        else:
            ws[lay[W_OFFSET] + mu] = -beta * total + W[r, mu]
        mu += n_threads
    cuda.syncthreads()
    e = tid
    while e < k * d:
        if cosine:
            ws[lay[W_P_USED] + e] = P[r, e] / ws[lay[W_P_NORMS] + e // d]
        else:
            ws[lay[W_P_USED] + e] = P[r, e]
        e += n_threads
    cuda.syncthreads()
    if clip > 0.0:
        mu = tid
        while mu < k:
            row = lay[W_P_USED] + mu * d
            doubles[dlay[D_SQ_RHO] + mu] = _dot(ws, row, U1, row, U1, d, 0.0)
            mu += n_threads
    cuda.syncthreads()


@cuda.jit(device=True)
def _gather(X, row, hidden, r, position, fill, start_from_fill, ws, base, parts, lane,
            zero, q, Q):
    """The lane's point with zeros at its hidden features, its hidden values and z_0
    (``_kernels._gather_lanes``); its hidden features, where each feature is among
    them and its point, into ``lane`` (``_lane_parts``)."""
    d, h = np.uint32(X.shape[1]), np.uint32(hidden.shape[2])
    target, states = parts[0], parts[2]
    j = q
    while j < h:
        feature = _hidden_feature(hidden, r, position, j)
        ws[lane[4] + j] = feature
        ws[target + j] = X[row, feature]
        ws[states + j] = fill[feature] if start_from_fill else X[row, feature]
        j += Q
    c = q
    while c < d:
        value = X[row, c]
        ws[lane[6] + c] = value
        among = -1
        for i in range(h):
            if _hidden_feature(hidden, r, position, i) == c:
                value, among = zero, i
        ws[base + c] = value
        ws[lane[5] + c] = among
        c += Q


@cuda.jit(device=True)
def _forward(ws, lay, parts, lane, h, constants, cosine, active, sq_visible, n_steps, q,
             Q, tid):
    """T steps of the masked recursion for the lane (``_kernels._forward``): the logits
    and the state's update by the threads owning them, the softmax's largest logit
    and sum by shuffles in the lane's group. Lane barriers: 2 a step (4 for
    cosine)."""
    scale, alpha, floor, tiny, one = (constants[0], constants[1], constants[3],
                                      constants[4], constants[6])
    _, visible_dot, states, attraction, scales, norms, logits, _, _ = parts
    k = lay[W_P_NORMS] - lay[W_OFFSET]
    d = lay[W_OFFSET] // k
    used, offset = lay[W_P_USED], lay[W_OFFSET]
    c = one  # c_t, the scale of the visible part (cosine)
    if active and q == U0:
        ws[scales] = one
    t = U0
    while t < n_steps:
        z, p = states + t * h, attraction + t * k
        if active:  # logits = offset + scale (c A + P_H z)
            mu = q
            while mu < k:
                s = ws[offset + mu] + scale * c * ws[visible_dot + mu]
                row = used + mu * d
                j = U0
                while j < h:
                    s += (scale * ws[row + _feature(ws, lane, j)]) * ws[z + j]
                    j += U1
                ws[logits + mu] = s
                mu += Q
        # p = softmax(logits), floored (_kernels._softmax_lanes); a thread reads only
        # the logits it wrote, so no barrier before
        largest = constants[7]
        if active:
            mu = q
            while mu < k:
                largest = _larger(largest, ws[logits + mu])
                mu += Q
        largest = _group_max(largest, Q, ws, lay, tid)
        total = constants[5]
        if active:
            mu = q
            while mu < k:
                total += math.exp(_larger(ws[logits + mu] - largest, floor))
                mu += Q
        total = _group_sum(total, Q, ws, lay, tid)
        if active:
            inverse = one / total
            mu = q
            while mu < k:
                ws[p + mu] = math.exp(_larger(ws[logits + mu] - largest, floor)) * inverse
                mu += Q
        _lane_barrier()
        if active:  # z' = z + alpha (P_H^T p - z), or v = z + alpha P_H^T p (cosine)
            j = q
            while j < h:
                pulled = _dot(ws, used + _feature(ws, lane, j), d, p, U1, k, constants[5])
                value = ws[z + j]
                ws[z + h + j] = value + alpha * pulled if cosine \
                    else value + alpha * (pulled - value)
                j += Q
        _lane_barrier()
        if cosine:  # v / ||v||, v = (c x_V, z') (_kernels._project_to_sphere)
            norm = one
            if active:
                total = _dot(ws, z + h, U1, z + h, U1, h, c * c * sq_visible)
                norm = _larger(math.sqrt(total), tiny)
                c = c / norm
                if q == U0:
                    ws[norms + t] = norm
                    ws[scales + t + U1] = c
            _lane_barrier()  # every thread has read v before it is rescaled
            if active:
                j = q
                while j < h:
                    ws[z + h + j] = ws[z + h + j] / norm
                    j += Q
            _lane_barrier()
        t += U1


@cuda.jit(device=True)
def _incoming(ws, parts, h, j, t, dot, norm, cosine):
    """The gradient of z_{t+1}[j] through the projection (``_project_backward``):
    what it is once the step's ``dot`` is known (cosine), else the stored one."""
    grad_z, states = parts[8], parts[2]
    if cosine:
        return (ws[grad_z + j] - ws[states + (t + U1) * h + j] * dot) / norm
    return ws[grad_z + j]


@cuda.jit(device=True)
def _backward(ws, lay, parts, lane, h, constants, cosine, active, sq_visible, n_steps, q,
              Q, tid):
    """Backpropagation through the T steps (``_kernels._backward``), into the lane's
    results (``_lane_parts``); ``grad_z`` holds the gradient at z_T. Lane barriers:
    2 a step."""
    scale, alpha, keep, zero = constants[0], constants[1], constants[2], constants[5]
    _, visible_dot, states, attraction, scales, norms, logits, grad_p, grad_z = parts
    grad_PH, grad_visible, grad_offset = lane[0], lane[1], lane[2]
    k = lay[W_P_NORMS] - lay[W_OFFSET]
    d = lay[W_OFFSET] // k
    used = lay[W_P_USED]
    if active:
        mu = q
        while mu < k:
            j = U0
            while j < h:
                ws[grad_PH + j * k + mu] = zero
                j += U1
            ws[grad_visible + mu] = zero
            ws[grad_offset + mu] = zero
            mu += Q
    gamma = zero  # d loss / d c_{t+1}
    t = n_steps
    while t > U0:
        t -= U1
        z, p = states + t * h, attraction + t * k
        dot, norm = zero, constants[6]
        if active:
            if cosine:
                norm = ws[norms + t]
                dot = _dot(ws, states + (t + U1) * h, U1, grad_z, U1, h,
                           ws[scales + t + U1] * gamma)
            # pulled = P_H^T p moves z by alpha * pulled
            mu = q
            while mu < k:
                grad = zero
                row = used + mu * d
                j = U0
                while j < h:
                    pulled_grad = alpha * _incoming(ws, parts, h, j, t, dot, norm, cosine)
                    ws[grad_PH + j * k + mu] += ws[p + mu] * pulled_grad
                    grad += ws[row + _feature(ws, lane, j)] * pulled_grad
                    j += U1
                ws[grad_p + mu] = grad
                mu += Q
            if cosine:
                gamma = (gamma - ws[scales + t + U1] * sq_visible * dot) / norm
        # softmax backward: grad_s = p (grad_p - <p, grad_p>), times scale; a thread
        # reads only the grad_p it wrote, so no barrier before
        inner = zero
        if active:
            mu = q
            while mu < k:
                inner += ws[p + mu] * ws[grad_p + mu]
                mu += Q
        inner = _group_sum(inner, Q, ws, lay, tid)
        if active:
            mu = q
            while mu < k:
                grad = ws[p + mu] * (ws[grad_p + mu] - inner)
                ws[grad_visible + mu] += ws[scales + t] * grad if cosine else grad
                ws[grad_offset + mu] += grad
                grad_s = scale * grad
                ws[logits + mu] = grad_s
                j = U0
                while j < h:
                    ws[grad_PH + j * k + mu] += grad_s * ws[z + j]
                    j += U1
                mu += Q
        _lane_barrier()
        if active:  # logits = offset + scale (c A + P_H z)
            j = q
            while j < h:
                initial = keep * _incoming(ws, parts, h, j, t, dot, norm, cosine)
                ws[grad_z + j] = _dot(ws, logits, U1, used + _feature(ws, lane, j), d, k,
                                      initial)
                j += Q
            if cosine:
                gamma = _dot(ws, logits, U1, visible_dot, U1, k, gamma)
        _lane_barrier()


@cuda.jit(device=True)
def _lane(X, order, hidden, fill, start_from_fill, r, first, b, n_rows, ws, lay, parts,
          base, doubles, dlay, counts, constants, beta, cosine, clip, n_steps, slot,
          q, Q, tid):
    """Loss and gradients of the b-th point of the batch (inactive past the batch's
    end: it only meets the barriers and shuffles); its results go to ``_lane_parts(b)``, its
    gradient norm (for clipping) to the float64 scratch."""
    d, h = np.uint32(X.shape[1]), np.uint32(hidden.shape[2])
    k = lay[W_P_NORMS] - lay[W_OFFSET]
    zero = constants[5]
    active = b < n_rows
    position = first + b
    lane = _lane_parts(lay, b, h, k, d)
    if active:
        _gather(X, order[position], hidden, r, position, fill, start_from_fill, ws, base,
                parts, lane, zero, q, Q)
    _lane_barrier()
    target, visible_dot, states, attraction = parts[0], parts[1], parts[2], parts[3]
    sq_visible = zero  # ||x_V||^2, in every thread of the lane
    if active:
        c = q
        while c < d:
            sq_visible += ws[base + c] * ws[base + c]
            c += Q
    sq_visible = _group_sum(sq_visible, Q, ws, lay, tid)
    if active:
        mu = q
        while mu < k:  # A = P_V x_V
            ws[visible_dot + mu] = _dot(ws, lay[W_P_USED] + mu * d, U1, base, U1, d, zero)
            mu += Q
    _forward(ws, lay, parts, lane, h, constants, cosine, active, sq_visible, n_steps, q, Q,
             tid)
    last_state = states + n_steps * h
    if active:  # loss sum_H (x - z_T)^2 and its gradient d mean_B / d z_T
        j = q
        while j < h:
            ws[parts[8] + j] = (ws[target + j] - ws[last_state + j]) * (-2.0 / n_rows)
            j += Q
        if q == U0:
            loss = zero
            j = U0
            while j < h:
                error = ws[target + j] - ws[last_state + j]
                loss += error * error
                j += U1
            ws[lane[3]] = loss
            last = attraction + (n_steps - U1) * k
            best = U0
            mu = U1
            while mu < k:
                if ws[last + mu] > ws[last + best]:
                    best = mu
                mu += U1
            # the most attracting prototype's count: integers, in any order
            cuda.atomic.add(counts, (r, np.int64(best)), 1)
    _lane_barrier()
    _backward(ws, lay, parts, lane, h, constants, cosine, active, sq_visible, n_steps, q,
              Q, tid)
    if clip > 0.0:
        _lane_norm(ws, lay, parts, lane, h, doubles, dlay, constants, beta, cosine, active,
                   sq_visible, b, slot, q, Q)


@cuda.jit(device=True)
def _lane_norm(ws, lay, parts, lane, h, doubles, dlay, constants, beta, cosine, active,
               sq_visible, b, slot, q, Q):
    """The norm of the lane's gradient of the prototypes as used (``_clip_lanes``): a
    float64 partial sum per prototype, then their sum by the lane's first thread."""
    k = lay[W_P_NORMS] - lay[W_OFFSET]
    d = lay[W_OFFSET] // k
    partial = dlay[D_PARTIAL] + slot * k
    if active:
        mu = q
        while mu < k:
            visible = constants[0] * ws[lane[1] + mu]
            radial = 0.0 if cosine else -2.0 * beta * ws[lane[2] + mu]
            total = (visible * visible * sq_visible
                     + radial * radial * doubles[dlay[D_SQ_RHO] + mu]
                     + 2.0 * visible * radial * ws[parts[1] + mu])
            row = lay[W_P_USED] + mu * d
            j = U0
            while j < h:
                g = ws[lane[0] + j * k + mu]
                total += g * (g + 2.0 * radial * ws[row + _feature(ws, lane, j)])
                j += U1
            doubles[partial + mu] = total
            mu += Q
    _lane_barrier()
    if active and q == U0:
        total = 0.0
        mu = U0
        while mu < k:
            total += doubles[partial + mu]
            mu += U1
        # +0.0 rather than -0.0 or NaN, as the median needs
        doubles[dlay[D_NORMS] + b] = math.sqrt(total) if total > 0.0 else 0.0


@cuda.jit(device=True)
def _clip_factors(doubles, dlay, n_rows, clip, tid, n_threads):
    """Each lane's factor: 1, or its gradient scaled down to ``clip`` times the
    batch's median norm (``_kernels._clip_lanes``). The median is the sorted norms'
    middle (the mean of the two middles for an even count), as numpy's; each lane
    finds its rank in the sort (ties by position). Ends on a barrier."""
    norms, ranked = dlay[D_NORMS], dlay[D_SORTED]
    factors = dlay[D_FACTORS]
    if clip > 0.0:
        b = tid
        while b < n_rows:
            value, rank = doubles[norms + b], U0
            i = U0
            while i < n_rows:
                other = doubles[norms + i]
                if other < value or (other == value and i < b):
                    rank += U1
                i += U1
            doubles[ranked + rank] = value
            b += n_threads
    cuda.syncthreads()
    bound = 0.0
    if clip > 0.0:
        middle = (n_rows - U1) // np.uint32(2)
        median = doubles[ranked + middle]
        if n_rows % np.uint32(2) == U0:
            median = 0.5 * (median + doubles[ranked + middle + U1])
        bound = clip * median
    b = tid
    while b < n_rows:
        value = doubles[norms + b]
        doubles[factors + b] = _smaller(bound / _larger(value, bound), 1.0) if bound > 0.0 else 1.0
        b += n_threads
    cuda.syncthreads()


@cuda.jit(device=True)
def _batch_gradients(hidden, n_rows, ws, lay, doubles, dlay, constants, beta, cosine, tid,
                     n_threads):
    """The batch's gradients of the prototypes (as used) and of the offsets
    (``_kernels._scatter_gradients``): a thread per parameter sums the lanes' in the
    CPU's order (hidden columns of every lane, then visible parts), each lane's
    gradient times its clipping factor rounded to the working precision. Ends on a
    barrier."""
    h = np.uint32(hidden.shape[2])
    k = lay[W_P_NORMS] - lay[W_OFFSET]
    d = lay[W_OFFSET] // k
    to_working = ws.dtype.type
    scale, factors = constants[0], dlay[D_FACTORS]
    e = tid
    while e < k * d:
        mu = e // d
        c = e - mu * d
        grad = constants[5]
        b = U0
        while b < n_rows:
            lane = _lane_parts(lay, b, h, k, d)
            j = int(ws[lane[5] + c])
            if j >= 0:
                grad += to_working(ws[lane[0] + np.uint32(j) * k + mu]
                                   * doubles[factors + b])
            b += U1
        total = 0.0
        b = U0
        while b < n_rows:
            lane = _lane_parts(lay, b, h, k, d)
            factor = doubles[factors + b]
            weight = scale * to_working(ws[lane[1] + mu] * factor)
            if ws[lane[5] + c] < 0:
                grad += weight * ws[lane[6] + c]
            total += to_working(ws[lane[2] + mu] * factor)
            b += U1
        if not cosine:  # offsets -beta ||rho||^2
            grad = to_working(grad - 2.0 * beta * total * ws[lay[W_P_USED] + e])
        ws[lay[W_GRAD_P] + e] = grad
        if c == U0:
            ws[lay[W_GRAD_W] + mu] = total
        e += n_threads
    cuda.syncthreads()


@cuda.jit(device=True)
def _adam_step(P, W, m_P, v_P, m_W, v_W, sum_P, sum_W, r, step_size, correction2,
               weighted, cosine, ws, lay, tid, n_threads):
    """Adam's step of restart r's parameters (``_optim.adam_update``), the gradient
    of unit prototypes taken back through the normalisation first
    (``_kernels._unproject_gradient``); adds the new parameters to their sums. Ends
    on a barrier."""
    k = np.uint32(W.shape[1])
    d = np.uint32(P.shape[1]) // k
    used, grads = lay[W_P_USED], lay[W_GRAD_P]
    to_working = ws.dtype.type
    e = tid
    while e < k * d:
        grad = ws[grads + e]
        if cosine:
            mu = e // d
            radial = _dot(ws, used + mu * d, U1, grads + mu * d, U1, d, 0.0)
            grad = to_working((grad - ws[used + e] * radial) / ws[lay[W_P_NORMS] + mu])
        _adam_update(P, grad, m_P, v_P, r, e, step_size, correction2)
        sum_P[r, e] += P[r, e]
        e += n_threads
    mu = tid
    while mu < k:
        if weighted:
            _adam_update(W, ws[lay[W_GRAD_W] + mu], m_W, v_W, r, mu, step_size, correction2)
        sum_W[r, mu] += W[r, mu]
        mu += n_threads
    cuda.syncthreads()


# -- the kernel -----------------------------------------------------------------------


@cuda.jit(**_KERNEL)
def train_batches_kernel(X, order, hidden, fill, start_from_fill, restarts, P, W, m_P, v_P,
                         m_W, v_W, lr, adam_steps, weighted, beta, cosine, n_steps,
                         constants, batch_size, clip, start, stop, epoch_loss, counts,
                         position_loss, sum_P, sum_W, layout, dlayout, ws_global,
                         doubles_global, in_shared, per_lane, n_slots):
    """The batches of an epoch that start at ``start``, ``start + batch_size``, ...
    before ``stop``, for restart ``restarts[block]`` (``_epoch._train_batches``).

    ``P``, ``m_P``, ``v_P`` and ``sum_P`` are (R, k d), the others of W (R, k);
    ``constants`` is ``device_constants``; ``adam_steps`` the steps taken before
    ``start``; ``layout`` and ``dlayout`` are uint32. Blocks of ``n_slots *
    per_lane`` threads. Updates the parameters, their moments and sums, the epoch's
    loss, counts and per-example losses in place.
    """
    block = cuda.blockIdx.x
    r = restarts[block]
    tid, n_threads = np.uint32(cuda.threadIdx.x), np.uint32(cuda.blockDim.x)
    ws = cuda.shared.array(0, float32) if in_shared else ws_global[block]
    doubles = doubles_global[block]
    h, d = np.uint32(hidden.shape[2]), np.uint32(X.shape[1])
    k = np.uint32(W.shape[1])
    Q, T = np.uint32(per_lane), np.uint32(n_steps)
    slot = tid // Q
    q = tid - slot * Q
    base = layout[W_SLOTS] + slot * layout[W_SLOT_SIZE]
    parts = _slot_parts(base, d, h, k, T)
    n_samples = order.shape[0]
    steps = adam_steps
    epoch_total = epoch_loss[r]
    for first in range(start, stop, batch_size):
        n_rows = np.uint32(_smaller(batch_size, n_samples - first))
        _prepare_prototypes(P, W, r, beta, cosine, clip, ws, layout, doubles, dlayout, tid,
                            n_threads)
        first_lane = U0
        while first_lane < n_rows:
            _lane(X, order, hidden, fill, start_from_fill, r, first, first_lane + slot,
                  n_rows, ws, layout, parts, base, doubles, dlayout, counts, constants,
                  beta, cosine, clip, T, slot, q, Q, tid)
            first_lane += np.uint32(n_slots)
        cuda.syncthreads()
        _clip_factors(doubles, dlayout, n_rows, clip, tid, n_threads)
        _batch_gradients(hidden, n_rows, ws, layout, doubles, dlayout, constants, beta,
                         cosine, tid, n_threads)
        if tid == U0:  # the losses, in the batch's order
            b = U0
            while b < n_rows:
                loss = ws[_lane_parts(layout, b, h, k, d)[3]]
                epoch_total += loss
                position_loss[r, first + b] = loss
                b += U1
        steps += 1
        correction1 = 1.0 - ADAM_BETA1**steps
        correction2 = 1.0 - ADAM_BETA2**steps
        _adam_step(P, W, m_P, v_P, m_W, v_W, sum_P, sum_W, r, lr[r] / correction1,
                   correction2, weighted, cosine, ws, layout, tid, n_threads)
    if tid == U0:
        epoch_loss[r] = epoch_total


def device_constants(dtype, beta, alpha, cosine):
    """The CPU kernels' working constants (``_kernels.working_constants``: scale,
    alpha, keep, logit floor, norm floor), then zero, one and minus infinity, in the working
    precision: a float64 literal would turn float32 arithmetic into float64."""
    from skdiffclust.clam._kernels import working_constants

    return np.concatenate([working_constants(dtype, beta, alpha, cosine),
                           np.array([0.0, 1.0, -np.inf], dtype=dtype)])

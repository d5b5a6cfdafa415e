"""One training epoch of ClAM on the CPU: the batch loop, Adam and the epoch's
records around the batch kernels of :mod:`skdiffclust.clam._kernels`
(vectorised over lanes) and :mod:`skdiffclust.clam._compact` (one lane at a time).

The two compute the same bits; they differ in the time they take to compile and
to run. With this loop, the vectorised kernel compiles in about 11 s of CPU on the
2-core machine (once: numba caches it), the compact one, compiled for size, in
about 5 s, and the vectorised one runs an epoch 2.5 to 3.5 times faster.
:func:`uses_compact_kernel` gives the compact kernel the epochs of small fits (at most
:data:`COMPACT_LANE_STEPS` lane-steps, about 20 ms each in it), whose whole
training then costs about what the compilation it saves does, or less.
"""

import numpy as np

from skdiffclust._training._optim import ADAM_BETA1, ADAM_BETA2, adam_update, integer_power
from skdiffclust._utils._numba import compile_for_size, jit
from skdiffclust._utils._packed import pack, unpacker
from skdiffclust.clam import _kernels as kernels
from skdiffclust.clam._compact import compact_batch
from skdiffclust.clam._kernels import ATTRACTION, _batch_loss_and_grads, _spherical


# Epochs of at most this many lane-steps (one example, one step of the recursion,
# weighted by its size: ``_kernels.lane_steps``) take the compact
# kernel: 200 points of 2 features in 3 clusters cost 2e4, the digits 2.3e6
COMPACT_LANE_STEPS = 1 << 20

# The epoch's scratch and result arrays, packed (``_utils._packed``) into three
# buffers: of the parameters' dtype (role 0), float64 (1) and int64 (2)
_F, _D, _I = 0, 1, 2
_WORK = (
    ((_I, 2), (_F, 3), (_F, 2), (_F, 2), (_F, 2), (_F, 2), (_F, 3), (_F, 3), (_F, 2),
     (_F, 2), (_F, 1), (_F, 3), (_F, 2), (_F, 2), (_F, 2), (_F, 2), (_F, 2), (_F, 2),
     (_F, 2), (_F, 2), (_F, 3)),  # the batch's workspace, kernels.new_workspace
    ((_F, 3), (_F, 2), (_F, 2)),  # kernels.new_prepared
    (_F, 3), (_F, 2), (_F, 2),  # gradients of P and W, each lane's loss
    (_D, 1), (_I, 2), (_D, 2),  # each restart's loss, attraction counts, position losses
    ((_D, 3), (_D, 2)),  # the sums of the iterates
    (_D, 2),  # kernels.new_clip_scratch
)
_unpack_work = unpacker(_WORK)


def uses_compact_kernel(n_lanes, n_clusters, n_hidden, n_steps):
    """Whether an epoch of ``n_lanes`` examples (points times restarts) takes the
    compact kernel (:data:`COMPACT_LANE_STEPS`)."""
    return kernels.lane_steps(n_lanes, n_clusters, n_hidden, n_steps) <= COMPACT_LANE_STEPS


@jit(error_model="numpy", nogil=True, _nrt=False)
def _train_batches(X, order, hidden, fill, start_from_fill, restarts, P, W, lr, adam_steps,
                   weighted, beta, cosine, n_steps, constants, batch_size, clip, start, stop,
                   position_start, buffers, layout, moments, compact, vectorised):
    """The batches of an epoch that start at ``start``, ``start + batch_size``, ...
    before ``stop``; returns the number of Adam steps taken so far (see
    :func:`train_epoch`, which packs the scratch and result arrays into ``buffers``:
    numba compiles code to unbox each array argument of a kernel called from
    Python, and these are about 40). One of ``compact`` and ``vectorised`` is True,
    the other None: the batch kernel taken. numba drops a branch on an argument
    that is None when it compiles, so a fit compiles one kernel (it keeps both
    branches on a bool).

    Each restart's prototypes and weights take the shared Adam step of
    ``skdiffclust._training._optim``. Besides the losses, records the sum of the
    parameters after each step (for their average over the epoch) and, for the
    re-seeding of dead prototypes (``_training``), each example's loss by position
    in the epoch (from ``position_start``) and how many examples each prototype
    attracts most at the last step of the dynamics.
    """
    ws, prepared, grad_P, grad_W, losses, epoch_loss, counts, position_loss, sums, \
        clip_scratch = _unpack_work(buffers, layout)
    m_P, v_P, m_W, v_W = moments
    sum_P, sum_W = sums
    k = P.shape[1]
    n_samples = order.shape[0]
    last = ws[ATTRACTION][n_steps - 1]
    compile_for_size(compact)  # small epochs: LLVM's size pipeline compiles faster
    for first in range(start, stop, batch_size):
        n_rows = n_samples - first if n_samples - first < batch_size else batch_size
        if compact is not None:
            compact_batch(X, order, first, n_rows, hidden, restarts, P, W, fill,
                          start_from_fill, beta, cosine, n_steps, constants, ws, prepared,
                          grad_P, grad_W, losses, clip, clip_scratch)
        if vectorised is not None:
            _batch_loss_and_grads(X, order, first, n_rows, hidden, restarts, P, W, fill,
                                  start_from_fill, beta, cosine, n_steps, constants, ws,
                                  prepared, grad_P, grad_W, losses, clip, clip_scratch)
        adam_steps += 1
        correction1 = 1.0 - integer_power(ADAM_BETA1, adam_steps)
        correction2 = 1.0 - integer_power(ADAM_BETA2, adam_steps)
        for slot in range(restarts.shape[0]):
            r = restarts[slot]
            for b in range(n_rows):
                lane = slot * n_rows + b
                epoch_loss[r] += losses[r, b]
                position_loss[r, position_start + first + b] = losses[r, b]
                strongest = 0
                for mu in range(1, k):
                    if last[mu, lane] > last[strongest, lane]:
                        strongest = mu
                counts[r, strongest] += 1
            step_size = lr[r] / correction1
            for mu in range(k):  # rows: the 1-D arrays of W[r], one compilation
                adam_update(P[r, mu], grad_P[r, mu], m_P[r, mu], v_P[r, mu], step_size,
                            correction2, for_size=compact)
            if weighted:
                adam_update(W[r], grad_W[r], m_W[r], v_W[r], step_size, correction2,
                            for_size=compact)
            # the sum of the iterates, for their average over the epoch
            for mu in range(k):
                sum_W[r, mu] += W[r, mu]
                for c in range(P.shape[2]):
                    sum_P[r, mu, c] += P[r, mu, c]
    return adam_steps


def _check_contiguous(arrays):
    for array in arrays:
        if not array.flags.c_contiguous:
            raise ValueError("ClAM's parameters and Adam moments must be C-contiguous arrays.")


def train_epoch(X, order, hidden, fill, start_from_fill, restarts, P, W, moments, lr,
                adam_steps, weighted, beta, cosine, n_steps, alpha, batch_size, clip=0.0,
                compact=None):
    """One epoch of mini-batch Adam for the given (active) restarts.

    ``compact`` chooses the kernel (the same bits): None for
    :func:`uses_compact_kernel`'s choice, True for the compact one
    (:mod:`skdiffclust.clam._compact`), False for the vectorised one.

    With ``clip > 0``, each point's gradient is clipped to ``clip`` times the
    median norm of its batch's (:func:`_clip_lanes`) before the batch's are
    averaged.

    ``X`` holds the points (an array), or gives them by ``X.take(indices)`` (rows
    made dense a call at a time: sparse input). ``order`` is the epoch's
    permutation of the points and ``hidden[r, i]`` the tracked features of the
    i-th example of the epoch for restart r. Updates ``P``, ``W`` and the Adam
    ``moments`` (m_P, v_P, m_W, v_W) in place; returns the number of Adam steps
    taken so far, each restart's summed loss, the examples each prototype attracts
    most (R, k), each example's loss by position in the epoch (R, n), and the
    average of the prototypes (R, k, d) and log-weights (R, k) over the epoch's
    steps (float64).
    """
    n_restarts, k, d = P.shape
    n_samples, n_hidden = order.shape[0], hidden.shape[2]
    _check_contiguous((P, W) + tuple(moments))
    buffers, layout, work = pack(_WORK, (
        kernels.new_workspace(restarts.shape[0] * batch_size, k, d, n_hidden, n_steps, P.dtype),
        kernels.new_prepared(P), np.zeros_like(P), np.zeros_like(W),
        np.zeros((n_restarts, batch_size), dtype=P.dtype), np.zeros(n_restarts),
        np.zeros((n_restarts, k), dtype=np.int64), np.zeros((n_restarts, n_samples)),
        (np.zeros(P.shape), np.zeros(W.shape)),
        kernels.new_clip_scratch(restarts.shape[0] * batch_size)), (P.dtype, np.float64, np.int64))
    constants = kernels.working_constants(P.dtype, beta, alpha, cosine)
    # the backward pass costs about twice the forward one
    step = kernels._points_per_call(3 * restarts.shape[0], k, n_hidden, n_steps, batch_size)
    dense = isinstance(X, np.ndarray)
    if compact is None:
        compact = uses_compact_kernel(n_samples * restarts.shape[0], k, n_hidden, n_steps)
    compact, vectorised = (True, None) if compact else (None, True)
    for start in range(0, n_samples, step):
        stop = min(start + step, n_samples)
        if dense:
            adam_steps = _train_batches(
                X, order, hidden, fill, start_from_fill, restarts, P, W, lr, adam_steps,
                weighted, beta, _spherical(cosine), n_steps, constants, batch_size,
                float(clip), start, stop, 0, buffers, layout, tuple(moments), compact,
                vectorised)
            continue
        # a dense block of this call's rows, in the order of the epoch
        rows = np.ascontiguousarray(X.take(order[start:stop]), dtype=P.dtype)
        adam_steps = _train_batches(
            rows, np.arange(stop - start), np.ascontiguousarray(hidden[:, start:stop]), fill,
            start_from_fill, restarts, P, W, lr, adam_steps, weighted, beta,
            _spherical(cosine), n_steps, constants, batch_size, float(clip), 0, stop - start,
            start, buffers, layout, tuple(moments), compact, vectorised)
    n_steps_taken = -(-n_samples // batch_size)
    epoch_loss, counts, position_loss, (sum_P, sum_W) = work[5], work[6], work[7], work[8]
    return (adam_steps, epoch_loss, counts, position_loss, sum_P / n_steps_taken,
            sum_W / n_steps_taken)

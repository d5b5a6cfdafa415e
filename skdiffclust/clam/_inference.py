"""ClAM's inference on the CPU: completion losses and converged points, in float64.

Two implementations of the forward pass give the same bits:

* the numba kernel ``_kernels._infer`` (lanes, the training kernels' code in
  float64), fast on large data;
* NumPy (:class:`_Slice`), which compiles nothing. Training runs in float32, so
  the kernel is a second compilation of the whole forward pass: about 4 s of CPU
  the first time, in a fresh environment, when inference on small data takes
  milliseconds in NumPy, but 3-5 times slower than the kernel on large data.

Inference whose work is at most :data:`NUMPY_WORK` runs in NumPy, larger
inference in numba; since both compute the same bits, the choice changes only
the time taken. The NumPy code performs the kernels' operations in the same
order (notation of :mod:`skdiffclust.clam._kernels`: ``P_H``, ``A``, offsets,
lanes), one operation on all the lanes of a slice (restarts times points) at a
time:

* every sum over prototypes, features or hidden coordinates adds one term at a
  time, in index order, from zero or from its first term as the kernels do (a
  NumPy reduction or a matrix product would add in another order);
* the attraction weights use the kernels' vectorisable exp
  (:func:`~skdiffclust.clam._fastexp.exp_weights_double`, a small numba kernel:
  ``np.exp`` rounds differently);
* each restart's loss is summed point by point in the order of the points
  within a slice, and the slices' sums in order.

``tests/test_numba_layer.py`` checks that the two agree bit for bit.
"""

import numpy as np

from skdiffclust.clam import _kernels as kernels
from skdiffclust.clam._fastexp import exp_weights_double
from skdiffclust.clam._kernels import (
    LOGIT_FLOOR,
    SMALLEST_NORMAL,
    _map_in_threads,
    _points_per_call,
)

# inference of at most this much work (lane-steps weighted by their size, the
# units of ``_kernels._points_per_call``) runs in NumPy: at most about 2 ms more
# than the kernel (a few percent of a fit of that size), which would take seconds
# to compile in a fresh environment. That is, for instance, 300 points of 2
# features in 3 clusters (3 restarts, 126,000), or 1,000 points of 8 features in
# 8 clusters (converged: 880,000)
NUMPY_WORK = 1 << 20


def _prepare_prototypes(P, W, beta, cosine):
    """The prototypes the dynamics use (unit rows for cosine) and the offsets
    (``-beta ||rho||^2 + log w``, or ``log w``), as ``_kernels._prepare_prototypes``."""
    total = np.zeros(P.shape[:2])
    for c in range(P.shape[2]):
        total += P[:, :, c] * P[:, :, c]
    if cosine:
        norms = np.maximum(np.sqrt(total), np.float64(SMALLEST_NORMAL))
        return P / norms[:, :, None], W.copy()
    return P, -beta * total + W


class _Slice:
    """The lanes of a slice of points (axes: restart, point), ready to run."""

    def __init__(self, rows, hidden, P_used, offset, fill, start_from_fill, scale):
        n_restarts, k, d = P_used.shape
        n_rows = rows.shape[0]
        # hidden: (R, n, h) features per point, or (R, 1, h) for every point
        points = np.broadcast_to(rows[None], (n_restarts, n_rows, d))
        target = np.take_along_axis(points, hidden, axis=2)
        # every array below has the lanes (R, n) as its last two axes
        self.target = np.ascontiguousarray(np.moveaxis(target, 2, 0))  # x_H (h, R, n)
        if start_from_fill:
            start = np.broadcast_to(fill[hidden], target.shape)
            self.start = np.ascontiguousarray(np.moveaxis(start, 2, 0))
        else:
            self.start = self.target.copy()
        # P_H (h, k, R, n or 1): the prototypes' hidden columns, per lane
        columns = np.take_along_axis(P_used[:, None], hidden[:, :, None, :], axis=3)
        self.PH = np.ascontiguousarray(columns.transpose(3, 2, 0, 1))
        self.scaled_PH = scale * self.PH
        # x_V: the point with zeros at its hidden features; ||x_V||^2 and A = P_V x_V
        # summed feature by feature from zero (the kernels' order)
        visible = points.copy()
        np.put_along_axis(visible, np.broadcast_to(hidden, target.shape), 0.0, axis=2)
        self.sq_visible = np.zeros((n_restarts, n_rows))
        self.A = np.zeros((k, n_restarts, n_rows))
        weights = P_used.transpose(1, 0, 2)[:, :, None, :]  # (k, R, 1, d)
        for c in range(d):
            self.sq_visible += visible[:, :, c] * visible[:, :, c]
            self.A += weights[..., c] * visible[:, :, c]
        self.offset = offset.T[:, :, None]  # (k, R, 1)

    def run(self, n_steps, scale, alpha, cosine):
        """The states after ``n_steps`` steps (h, R, n): ``_kernels._forward``.

        Operations write into buffers allocated once (``out=``): a temporary per
        operation costs more than the operation on arrays of this size."""
        k, n_hidden = self.A.shape[0], self.PH.shape[0]
        lanes = self.A.shape[1:]
        n_lanes = lanes[0] * lanes[1]
        z = self.start.copy()
        logits, p, scratch, term = (np.empty((k,) + lanes) for _ in range(4))
        pulled, move = np.empty(z.shape), np.empty(z.shape)
        largest, total = np.empty(lanes), np.empty(lanes)
        cs, norm = np.ones(lanes), np.empty(lanes)  # c: the scale of the visible part
        for _ in range(n_steps):
            # logits = offset + scale c A + (scale P_H) z; c = 1 in the Euclidean case
            if cosine:
                np.multiply(scale * cs, self.A, out=logits)
            else:
                np.multiply(scale, self.A, out=logits)
            np.add(self.offset, logits, out=logits)
            for j in range(n_hidden):
                np.multiply(self.scaled_PH[j], z[j], out=term)
                logits += term
            # softmax, the largest found as the kernels' comparisons find it
            largest[...] = logits[0]
            for mu in range(1, k):
                np.copyto(largest, logits[mu], where=logits[mu] > largest)
            total[...] = 0.0
            exp_weights_double(logits.reshape(k, n_lanes), largest.reshape(n_lanes),
                               LOGIT_FLOOR, n_lanes, p.reshape(k, n_lanes),
                               total.reshape(n_lanes), scratch.reshape(k, n_lanes))
            np.divide(1.0, total, out=total)
            p *= total
            np.multiply(self.PH[:, 0], p[0], out=pulled)  # P_H^T p, prototype by prototype
            for mu in range(1, k):
                np.multiply(self.PH[:, mu], p[mu], out=move)
                pulled += move
            if cosine:  # v + alpha P^T p, projected on the sphere
                pulled *= alpha
                z += pulled
                np.multiply(cs, cs, out=norm)
                norm *= self.sq_visible
                for j in range(n_hidden):
                    np.multiply(z[j], z[j], out=total)
                    norm += total
                np.sqrt(norm, out=norm)
                np.maximum(norm, np.float64(SMALLEST_NORMAL), out=norm)
                cs /= norm
                z /= norm
            else:  # v + alpha (P^T p - v)
                pulled -= z
                pulled *= alpha
                z += pulled
        return z

    def losses(self, final):
        """Each lane's loss ``sum_H (x - z_T)^2`` (R, n), term by term."""
        loss = np.zeros(final.shape[1:])
        for j in range(final.shape[0]):
            error = self.target[j] - final[j]
            loss += error * error
        return loss


def _work(n_samples, n_restarts, n_clusters, n_hidden, n_steps):
    """Inference work in the units of ``_kernels._points_per_call``."""
    return n_samples * n_restarts * n_steps * (n_clusters * (n_hidden + 2) + n_hidden)


def _run_inference(X, hidden, per_point, P, W, fill, start_from_fill, beta, cosine,
                   n_steps, alpha, chunk, final, n_threads=1, finish=None):
    """The forward dynamics of every point, slice by slice.

    ``X`` is an array, or gives its rows by ``X.block(start, stop)`` (sparse
    input, made dense a slice at a time). ``hidden`` holds the tracked features
    of each point (R, n, h), or (``per_point=False``) those of every point
    (R, 1, h). The slices (one kernel call each, for ``chunk`` points at a time)
    are independent (own workspace, own loss totals), so that they may run on
    ``n_threads`` threads (the kernels and NumPy release the GIL); their totals
    are summed in the order of the points, so that the result depends neither on
    the number of threads nor on the implementation. If ``final`` has rows, each
    point's final state goes there (one restart), and ``finish(start, stop,
    final_rows)``, if given, runs in the same thread after each slice (e.g.
    labels of the slice's final states). Returns the summed losses.
    """
    n_restarts, k, _ = P.shape
    dense = isinstance(X, np.ndarray)
    n_samples = X.shape[0] if dense else X.n_samples
    n_hidden = hidden.shape[2]
    step = _points_per_call(n_restarts, k, n_hidden, n_steps, chunk)
    if _work(n_samples, n_restarts, k, n_hidden, n_steps) <= NUMPY_WORK:
        run_slice = _numpy_slice(P, W, beta, cosine, n_steps, alpha)
    else:
        run_slice = _kernel_slice(P, W, beta, cosine, n_steps, alpha, chunk, per_point)

    def call(start):
        stop = min(start + step, n_samples)
        rows = X[start:stop] if dense else np.ascontiguousarray(X.block(start, stop),
                                                                dtype=np.float64)
        lanes = hidden[:, start:stop] if per_point else hidden[:, :1]
        out = final[start:stop] if final.shape[0] else final
        totals = run_slice(rows, np.ascontiguousarray(lanes), fill, start_from_fill, out)
        if finish is not None:
            finish(start, stop, out)
        return totals

    totals = np.zeros(n_restarts)
    for part in _map_in_threads(call, range(0, n_samples, step), n_threads):
        totals += part
    return totals


def _numpy_slice(P, W, beta, cosine, n_steps, alpha):
    """A slice's losses (and final states) by NumPy: ``run(rows, hidden, fill,
    start_from_fill, final)``."""
    n_restarts = P.shape[0]
    scale = beta if cosine else 2.0 * beta
    P_used, offset = _prepare_prototypes(P, W, beta, cosine)

    def run(rows, hidden, fill, start_from_fill, final):
        lanes = _Slice(rows, hidden, P_used, offset, fill, start_from_fill, scale)
        states = lanes.run(n_steps, scale, alpha, cosine)
        if final.shape[0]:  # one restart, every feature tracked in order
            final[...] = states[:, 0].T
        # each restart's losses added point by point to zero (the kernels' order)
        losses = np.concatenate([np.zeros((n_restarts, 1)), lanes.losses(states)], axis=1)
        return np.cumsum(losses, axis=1)[:, -1]

    return run


def _kernel_slice(P, W, beta, cosine, n_steps, alpha, chunk, per_point):
    """A slice's losses (and final states) by the kernel ``_kernels._infer``, ``chunk``
    points at a time: ``run(rows, hidden, fill, start_from_fill, final)``."""
    n_restarts, k, d = P.shape
    constants = kernels.working_constants(P.dtype, beta, alpha, cosine)

    def run(rows, hidden, fill, start_from_fill, final):
        if not per_point:  # the kernel reads the features of the b-th point of a chunk
            hidden = np.repeat(hidden, chunk, axis=1)
        ws = kernels.new_workspace(n_restarts * chunk, k, d, hidden.shape[2], n_steps,
                                   P.dtype)
        totals = np.zeros(n_restarts)
        kernels._infer(rows, np.arange(rows.shape[0]), 0, rows.shape[0], chunk, hidden,
                       per_point, P, W, fill, start_from_fill, beta,
                       kernels._spherical(cosine), n_steps, constants, ws,
                       kernels.new_prepared(P), totals, final)
        return totals

    return run


def completion_losses(X, hidden, P, W, fill, start_from_fill, beta, cosine, n_steps, alpha,
                      chunk, n_threads=1, per_point=True):
    """Summed completion loss of every restart over the points (forward only).

    ``hidden`` (R, n, h) holds the tracked features of each point, indexed by row
    of ``X``, or (``per_point=False``) those of every point (R, 1, h); the
    kernel takes the points ``chunk`` at a time (``R * chunk`` lanes).
    """
    return _run_inference(X, hidden, per_point, P, W, fill, start_from_fill, beta, cosine,
                          n_steps, alpha, chunk, np.empty((0, P.shape[2])), n_threads)


def converged_points(X, P, W, beta, cosine, n_steps, alpha, chunk, n_threads=1, finish=None):
    """``x^T`` for every point: T steps of the unmasked recursion from x itself, with
    one set of prototypes ``P`` (1, k, d) and log-weights ``W`` (1, k)."""
    n_samples = X.shape[0] if isinstance(X, np.ndarray) else X.n_samples
    d = P.shape[2]
    final = np.empty((n_samples, d))
    _run_inference(X, np.arange(d).reshape(1, 1, d), False, P, W, np.zeros(d), False, beta,
                   cosine, n_steps, alpha, chunk, final, n_threads, finish)
    return final

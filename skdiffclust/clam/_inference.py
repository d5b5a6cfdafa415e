"""ClAM's inference on the CPU: completion losses and converged points, in float64.

:func:`evaluate_loss` (the masked loss of each restart, for selection and
``score``) and :func:`converge` (labels, distances and soft assignments of
``predict``, ``transform`` and ``predict_proba``) are what the estimator calls;
the rest of this module computes them.

Two implementations of the forward pass give the same bits:

* the numba kernels of ``_inference_kernel``, fast on large data: ``_infer`` (lanes,
  the training kernels' code in float64) for masked losses, and
  ``_infer_unmasked``, the same arithmetic with the prototypes shared by the
  lanes, for the unmasked dynamics of ``converge`` (and the unmasked loss);
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
  (:func:`~skdiffclust.clam._fastexp.exp_weights_numpy`, the bits of the float64
  kernel: ``np.exp`` rounds differently);
* each restart's loss is summed point by point in the order of the points
  within a slice, and the slices' sums in order.

``tests/test_numba_layer.py`` checks that the two agree bit for bit.
"""

import numpy as np

from skdiffclust._utils._random import numpy_generator
from skdiffclust._utils._threads import host_threads
from skdiffclust.clam import _kernels as kernels
from skdiffclust.clam._data import squared_distances
from skdiffclust.clam._fastexp import exp_weights_numpy
from skdiffclust.clam._inference_kernel import _infer, _infer_unmasked
from skdiffclust.clam._kernels import (
    COSINE,
    LOGIT_FLOOR,
    SMALLEST_NORMAL,
    _map_in_threads,
    _points_per_call,
    hidden_count,
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
        z = self.start.copy()
        logits, p, term = (np.empty((k,) + lanes) for _ in range(3))
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
            exp_weights_numpy(logits, largest, LOGIT_FLOOR, p, total)
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
    """A slice's losses (and final states) by the kernel :func:`_infer`, ``chunk``
    points at a time (by :func:`_infer_unmasked` without ``per_point`` masks):
    ``run(rows, hidden, fill, start_from_fill, final)``."""
    n_restarts, k, d = P.shape
    constants = kernels.working_constants(P.dtype, beta, alpha, cosine)
    if not per_point:
        return _unmasked_slice(P, W, beta, cosine, n_steps, constants, chunk)

    def run(rows, hidden, fill, start_from_fill, final):
        ws = kernels.new_workspace(n_restarts * chunk, k, d, hidden.shape[2], n_steps,
                                   P.dtype)
        totals = np.zeros(n_restarts)
        _infer(rows, np.arange(rows.shape[0]), 0, rows.shape[0], chunk, hidden,
               True, P, W, fill, start_from_fill, beta,
               kernels._spherical(cosine), n_steps, constants, ws,
               kernels.new_prepared(P), totals, final)
        return totals

    return run


def _unmasked_slice(P, W, beta, cosine, n_steps, constants, chunk):
    """A slice's losses (and final states) of the unmasked dynamics, every feature
    tracked from the point itself, by the kernel :func:`_infer_unmasked`."""
    n_restarts, k, d = P.shape

    def run(rows, hidden, fill, start_from_fill, final):
        ws = (np.empty((2, d, chunk)), np.empty((k, chunk)), np.empty((k, chunk)),
              np.empty((3, chunk)), np.empty((k, chunk)), np.ones((n_steps + 1, chunk)),
              np.ones((n_steps, chunk)), np.zeros(chunk), np.empty((k, d)), np.empty((d, k)))
        totals = np.zeros(n_restarts)
        _infer_unmasked(rows, P, W, beta, kernels._spherical(cosine), n_steps, constants, ws,
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


# the inference kernels go through the points a chunk at a time, with a workspace
# of about this many floats (a few MB: it stays in cache)
INFERENCE_WORKSPACE = 1 << 18

# ... but with at least this many lanes: the kernels' inner loops run over the
# lanes, and shorter ones do not vectorise (2,000 points of 784 features, k=200:
# the masked loss took 1.5 s with the 3 lanes the workspace allows, 0.55 s with 16)
INFERENCE_MIN_LANES = 16


def _chunk_rows(n_restarts, n_clusters, n_features, n_hidden, n_steps, per_point=True):
    """Points per chunk of the inference kernels, for ``INFERENCE_WORKSPACE``: of
    :func:`_infer` (``R * chunk`` lanes, each with its copy of the prototypes'
    hidden columns), or of :func:`_infer_unmasked` (``per_point=False``: ``chunk``
    lanes, the restarts one after the other, the prototypes shared)."""
    if not per_point:  # _unmasked_slice's workspace
        per_lane = 2 * n_features + 3 * n_clusters + 2 * n_steps + 5
        return max(INFERENCE_MIN_LANES, min(1024, INFERENCE_WORKSPACE // per_lane))
    per_lane = (n_hidden * (3 * n_clusters + n_steps + 4) + 2 * n_features
                + n_clusters * (n_steps + 7) + 2 * n_steps + 7)  # new_workspace
    lanes = max(INFERENCE_MIN_LANES, min(1024, INFERENCE_WORKSPACE // per_lane))
    return max(1, lanes // n_restarts)


def _float64(array):
    return np.ascontiguousarray(array, dtype=np.float64)


def _shape(X):
    return X.shape if isinstance(X, np.ndarray) else (X.n_samples, X.n_features)


def _float64_rows(X):
    """Arrays as C-contiguous float64; row sources (float64 blocks) as they are."""
    return _float64(X) if isinstance(X, np.ndarray) else X


def evaluate_loss(X, fill, prototypes, log_weights, dynamics, mask_prob, seed, n_threads=1):
    """Mean completion loss of each restart on ``X``, with masks drawn from ``seed``.

    Every restart sees the same masks, so the losses compare the restarts; the same
    seed gives the same masks on the same data (``score`` uses this too).
    Computed on the CPU in float64 (see ``converge``); ``X`` is an array or a row
    source (``_data.ScaledData``).
    """
    n_restarts, k, n_features = prototypes.shape
    n_samples = _shape(X)[0]
    n_hidden = hidden_count(mask_prob, n_features)
    chunk = _chunk_rows(n_restarts, k, n_features, n_hidden or n_features, dynamics.n_steps,
                        per_point=n_hidden > 0)
    if n_hidden == 0:  # the unmasked loss of eq. 8: every feature of every point
        hidden = np.broadcast_to(np.arange(n_features), (n_restarts, 1, n_features))
    else:  # the same masks for every restart
        draws = numpy_generator(seed).random((1, n_samples, n_hidden))
        hidden = np.repeat(kernels.hidden_features(draws, n_features), n_restarts, axis=0)
    W = np.zeros((n_restarts, k)) if log_weights is None else _float64(log_weights)
    totals = completion_losses(
        _float64_rows(X), np.ascontiguousarray(hidden), _float64(prototypes), W,
        _float64(fill), n_hidden > 0, dynamics.beta, dynamics.metric == COSINE,
        dynamics.n_steps, dynamics.alpha, chunk, n_threads=n_threads,
        per_point=n_hidden > 0,
    )
    return totals / max(n_samples, 1)


def converge(X, prototypes, log_weights, dynamics, n_threads=1, proba=False):
    """Labels (nearest prototype of x^T) and distances of x^T to every prototype;
    with ``proba``, also eq. 13 at x^T, ``softmax_mu(-beta ||rho_mu - x^T||^2)``
    (``softmax_mu(beta cos)`` for the cosine metric), from the very numbers whose
    argmin (argmax) gives the label.

    Inference of algorithm 1 (lines 16-25), on the CPU, for one set of prototypes;
    ``X`` (an array or a row source) is prepared as for training (unit rows for the
    spherical variant). It runs in float64 (``_inference``: NumPy on small data, a
    numba kernel on large data, the same bits), and every point's arithmetic is
    its own (lanes, then direct differences rather than matrix products), so that
    the result of a point depends neither on the other points of its batch nor on
    the number of threads.
    """
    k, n_features = prototypes.shape
    n_samples = _shape(X)[0]
    labels = np.empty(n_samples, dtype=np.intp)
    distances = np.empty((n_samples, k))
    probabilities = np.empty((n_samples, k)) if proba else None
    outputs = (labels, distances) + ((probabilities,) if proba else ())
    if n_samples == 0:
        return outputs
    P = _float64(prototypes)
    W = np.zeros((1, k)) if log_weights is None else _float64(log_weights)[None]
    cosine = dynamics.metric == COSINE
    directions = _unit_rows(P)

    def nearest(start, stop, final):
        if cosine:
            similarity = np.einsum("ij,kj->ik", _unit_rows(final), directions)
            labels[start:stop] = similarity.argmax(1)
            distances[start:stop] = 1.0 - similarity
            logits = dynamics.beta * similarity if proba else None
        else:
            squared = squared_distances(final, P)
            labels[start:stop] = squared.argmin(1)
            distances[start:stop] = np.sqrt(squared)
            logits = -dynamics.beta * squared if proba else None
        if proba:
            exp = np.exp(logits - logits.max(1, keepdims=True))
            probabilities[start:stop] = exp / exp.sum(1, keepdims=True)

    converged_points(
        _float64_rows(X), P[None], W, dynamics.beta, cosine, dynamics.n_steps,
        dynamics.alpha, _chunk_rows(1, k, n_features, n_features, dynamics.n_steps, False),
        n_threads=n_threads, finish=nearest,
    )
    return outputs


def _unit_rows(X):
    return X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), np.finfo(X.dtype).tiny)


def fitted_masked_loss(model, X):
    """The masked completion loss of points X under a fitted ``ClAM``, in the
    squared units of the input (masks from a seed fixed at fit time: on the
    training points, ``loss_``); what :class:`~skdiffclust.torch.ClAMLayer`
    computes."""
    _, rows = model._scaled(X)
    log_weights = model._log_weights()
    losses = evaluate_loss(
        rows, model._mask_fill, model._prototypes[None],
        None if log_weights is None else log_weights[None],
        model._fit_dynamics, model._mask_prob, model._score_seed,
        host_threads(model.n_jobs))
    return float(losses[0]) * model._scale**2

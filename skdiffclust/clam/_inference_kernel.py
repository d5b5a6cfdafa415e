"""The numba kernels of ClAM's inference on the CPU, in float64, over the points a
chunk at a time. :mod:`skdiffclust.clam._inference` calls them on large data and
computes the same bits in NumPy on small data.

* :func:`_infer`: the training kernels' forward pass (:mod:`skdiffclust.clam._kernels`,
  their lanes and workspace), for masked completion losses, where each point hides
  features of its own.
* :func:`_infer_unmasked`: the unmasked dynamics (``converge``'s, and the loss of
  eq. 8), where every lane tracks every feature and the lanes share the
  prototypes. Copying them to each lane, as :func:`_infer` must, made a workspace
  of ``k d`` floats a lane, so that few lanes fitted in cache and the loops over
  them did not vectorise: on 2,000 points of 784 features in 200 clusters,
  ``transform`` took 23 s, against 1.3 s here (the same bits).
"""

import numpy as np

from skdiffclust._utils._numba import jit
from skdiffclust.clam._kernels import (
    GRAD_Z,
    LANE_SCALARS,
    LOSS,
    STATES,
    TARGET,
    _forward,
    _gather_lanes,
    _loss_and_seed_gradient,
    _prepare_prototypes,
    _project_to_sphere,
    _softmax_lanes,
)


@jit(error_model="numpy", nogil=True)
def _infer(X, order, start, stop, chunk, hidden, per_point, P, W, fill, start_from_fill,
           beta, cosine, n_steps, constants, ws, prepared, totals, final):
    """The forward dynamics of the points ``X[order[start:stop]]``, ``chunk`` at a time
    (``R * chunk`` lanes): adds each restart's summed loss to ``totals`` and, if
    ``final`` has rows, writes each point's final state there (one restart)."""
    n_restarts, k, d = P.shape
    restarts = np.arange(n_restarts)
    P_used, norms, offset = prepared
    _prepare_prototypes(P, W, restarts, beta, cosine, P_used, norms, offset)
    loss, states = ws[LANE_SCALARS][LOSS], ws[STATES]
    for first in range(start, stop, chunk):
        n_rows = min(chunk, stop - first)
        n_lanes = n_restarts * n_rows
        _gather_lanes(X, order, first, n_rows, hidden, per_point, restarts, P_used, offset,
                      fill, start_from_fill, ws)
        _forward(ws, n_lanes, n_steps, constants[0], constants[1], constants[3],
                 constants[4], cosine)
        _loss_and_seed_gradient(ws[TARGET], states, ws[GRAD_Z], loss, n_lanes, n_steps,
                                n_rows)
        for slot in range(n_restarts):
            for b in range(n_rows):
                totals[slot] += loss[slot * n_rows + b]
        if final.shape[0] > 0:
            for b in range(n_rows):
                for c in range(d):
                    final[order[first + b], c] = states[n_steps, c, b]


@jit(error_model="numpy", nogil=True)
def _infer_unmasked(X, P, W, beta, cosine, n_steps, constants, ws, prepared, totals, final):
    """The unmasked dynamics of every row of ``X`` from the row itself, ``L`` rows
    at a time (``ws[0]`` is (2, d, L)): adds each restart's summed loss to
    ``totals`` and, if ``final`` has rows, writes each point's final state there
    (one restart).

    Every lane tracks every feature, so all lanes of a restart share its
    prototypes: they are read from one (k, d) array instead of being copied to
    each lane as :func:`_infer` does for masks that differ from point to point,
    and a chunk of lanes stays in cache. Each lane's arithmetic is ``_forward``'s,
    term by term (same bits); with nothing visible, ``A = 0``.
    """
    zs, logits, p, scalars, exp_scratch, cs, norms, sq_visible, scaled, pulled_by = ws
    n_restarts, k, d = P.shape
    chunk = zs.shape[2]
    scale, alpha, floor, tiny = constants[0], constants[1], constants[3], constants[4]
    largest, total, loss = scalars[0], scalars[1], scalars[2]
    P_used, norms_of, offset = prepared
    _prepare_prototypes(P, W, np.arange(n_restarts), beta, cosine, P_used, norms_of, offset)
    for r in range(n_restarts):
        for mu in range(k):
            for c in range(d):
                scaled[mu, c] = scale * P_used[r, mu, c]
                pulled_by[c, mu] = P_used[r, mu, c]
        for first in range(0, X.shape[0], chunk):
            n_lanes = min(chunk, X.shape[0] - first)
            for c in range(d):
                for lane in range(n_lanes):
                    zs[0, c, lane] = X[first + lane, c]
            for lane in range(n_lanes):
                cs[0, lane] = 1.0
                sq_visible[lane] = 0.0
            for t in range(n_steps):
                z, z_next = zs[t % 2], zs[(t + 1) % 2]
                for mu in range(k):
                    # offset + scale c A with A = 0: adding 0.0 keeps _forward's bits
                    for lane in range(n_lanes):
                        logits[mu, lane] = (offset[r, mu] + scale * cs[t, lane] * 0.0
                                            + scaled[mu, 0] * z[0, lane])
                    for c in range(1, d):
                        for lane in range(n_lanes):
                            logits[mu, lane] += scaled[mu, c] * z[c, lane]
                _softmax_lanes(logits, p, n_lanes, floor, largest, total, exp_scratch)
                for c in range(d):  # pulled = P^T p
                    for lane in range(n_lanes):
                        total[lane] = pulled_by[c, 0] * p[0, lane]
                    for mu in range(1, k):
                        for lane in range(n_lanes):
                            total[lane] += pulled_by[c, mu] * p[mu, lane]
                    if cosine is not None:
                        for lane in range(n_lanes):
                            z_next[c, lane] = z[c, lane] + alpha * total[lane]
                    else:
                        for lane in range(n_lanes):
                            z_next[c, lane] = z[c, lane] + alpha * (total[lane] - z[c, lane])
                if cosine is not None:
                    _project_to_sphere(z_next, cs, norms, sq_visible, t, n_lanes, tiny,
                                       total)
            z = zs[n_steps % 2]
            for lane in range(n_lanes):
                loss[lane] = 0.0
            for c in range(d):
                for lane in range(n_lanes):
                    error = X[first + lane, c] - z[c, lane]
                    loss[lane] += error * error
            for lane in range(n_lanes):
                totals[r] += loss[lane]
            if final.shape[0] > 0:
                for lane in range(n_lanes):
                    for c in range(d):
                        final[first + lane, c] = z[c, lane]

"""The numba kernel of ClAM's inference on the CPU: the training kernels' forward
pass (:mod:`skdiffclust.clam._kernels`, their lanes and workspace) compiled in
float64, over the points a chunk at a time. :mod:`skdiffclust.clam._inference`
calls it on large data and computes the same bits in NumPy on small data.
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

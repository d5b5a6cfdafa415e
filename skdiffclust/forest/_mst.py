"""Numba kernels for minimum spanning trees: Prim's algorithm in O(n^2) time, O(n) memory.

Two inputs, one kernel each (a kernel compiles only what its input needs):

* a dense n x n **similarity** matrix (:func:`similarity_sweep`), whose maximum
  spanning tree is the minimum spanning tree of the distances ``-S``;
* feature vectors with a metric evaluated on the fly, so that no n x n matrix is
  ever allocated (:func:`feature_sweep`), one loop per metric, over the points held
  as columns.

The kernels run the sweep up to a given iteration and keep their state in arrays
(:func:`new_prim_state`): Python drivers call them in chunks of iterations, so that
Ctrl-C is seen between chunks, and kernels call them once for the whole tree. On
large inputs the feature sweep spreads each step's points over numba's threads
(:func:`feature_sweep_in_parts`); a point's distance is the sum of its terms in the
features' order, rounded as written (no ``fastmath``), in any part and on any
CPU, so the tree is the same bit for bit.

Distances are handled in a *reduced* form that preserves their order (squared
Euclidean for ``'euclidean'``, ``sum |x - y|^p`` for Minkowski): the tree only
depends on the order of the edges, and the caller maps the weights of the n - 1
tree edges back once at the end.
"""

import numpy as np
from numba import prange

from skdiffclust._utils._numba import jit

# Metrics evaluated inside the kernels; any other metric goes through the Python
# fallback in ``_solver.py``.
SQEUCLIDEAN, MANHATTAN, CHEBYSHEV, MINKOWSKI, COSINE = 0, 1, 2, 3, 4
NUMBA_METRICS = {
    "euclidean": SQEUCLIDEAN,
    "l2": SQEUCLIDEAN,
    "sqeuclidean": SQEUCLIDEAN,
    "manhattan": MANHATTAN,
    "cityblock": MANHATTAN,
    "l1": MANHATTAN,
    "chebyshev": CHEBYSHEV,
    "infinity": CHEBYSHEV,
    "minkowski": MINKOWSKI,
    "cosine": COSINE,
}
# positions in the ``counters`` array of a Prim state
ITERATION, FRONT_SIZE, CURRENT = 0, 1, 2

# The points are held as columns (``new_feature_front``: one row per feature, in
# groups of FEATURE_GROUP, zeros padding the last), and each metric's loop runs down
# a block of points, feature group after feature group, so that LLVM vectorises it
# over points with no ``fastmath``: every distance is the sum of its terms in the
# features' order, rounded as written, whatever the compiler, the CPU or the split
# over threads. A row-wise sum vectorised with ``fastmath`` was reordered
# differently in the serial and the parallel sweeps on one CI run (distances a unit
# in the last place apart between one and two threads). Against that row-wise
# sum, on one thread of the 2-core machine, Prim took 0.56 to 0.69 times its time
# on 20,000 points of 2 to 8 features, 0.82 to 0.87 times on 10,000 and 20,000 of
# 16, 0.95 to 1.13 times on 10,000 of 32, 1.16 to 1.32 on 10,000 of 64 and 1.34
# to 1.40 on 5,000 of 300 (eight features a pass gained 14% there and cost the
# few features their padding).
FEATURE_GROUP = 4  # features per pass over a block: one load and store of a sum
POINT_BLOCK = 1024  # points per block: their sums stay in the L1 cache


# Allocated by numba rather than NumPy: on 12000 x 16 points Prim ran 10-20% more
# slowly, in one process out of two, on arrays from NumPy
@jit
def new_prim_state(n):
    """State of a Prim sweep from point 0, and room for the n - 1 edges.

    Returns ``(state, tree)``: ``state = (idx, key, parent, buf, counters)``, where
    the points not yet in the tree are packed at the front of ``idx`` (the first
    ``counters[FRONT_SIZE]``) with their best distance ``key`` to the tree and the
    tree point ``parent`` that gives it; ``tree = (src, dst, dist)``, filled in the
    order Prim adds the edges.
    """
    n_edges = max(n - 1, 0)
    idx = np.arange(n)
    if n > 1:
        idx[0] = n - 1  # point 0 joins the tree: the last point takes its place
    counters = np.zeros(3, dtype=np.int64)
    counters[FRONT_SIZE] = n_edges
    state = (idx, np.full(n, np.inf), np.zeros(n, dtype=np.int64),
             np.empty(n, dtype=np.float64), counters)
    tree = (np.empty(n_edges, dtype=np.int64), np.empty(n_edges, dtype=np.int64),
            np.empty(n_edges, dtype=np.float64))
    return state, tree


@jit
def new_feature_front(X):
    """The points as Prim packs them, as columns (one row per feature, zero rows
    padding the features to a multiple of ``FEATURE_GROUP``; point 0 first out), and
    point 0 (padded alike)."""
    n, d = X.shape
    padded = -(-d // FEATURE_GROUP) * FEATURE_GROUP
    Xt = np.zeros((padded, n), dtype=X.dtype)
    for i in range(n):
        for t in range(d):
            Xt[t, i] = X[i, t]
    current = np.zeros(padded, dtype=X.dtype)
    if n > 0:
        current[:] = Xt[:, 0]
        for t in range(padded):
            Xt[t, 0] = Xt[t, n - 1]
    return Xt, current


@jit(inline="always")
def relax_keys(dist, key, parent, cur, m):
    """Lower ``key[:m]`` to ``dist[:m]`` where smaller; return the position of the minimum.

    Ties keep the earliest position, so the result only depends on the input.
    """
    best = np.inf
    best_pos = 0
    for r in range(m):
        k = key[r]  # kept in a register: the store to parent may alias key for LLVM
        if dist[r] < k:
            k = dist[r]
            key[r] = k
            parent[r] = cur
        if k < best:
            best = k
            best_pos = r
    return best_pos


@jit(inline="always")
def _add_to_tree(pos, state, tree):
    """Move the front point at ``pos`` into the tree; the last front point takes its
    place. Returns the new front size."""
    idx, key, parent, _, counters = state
    src, dst, dist = tree
    it = counters[ITERATION]
    m = counters[FRONT_SIZE] - 1
    cur = idx[pos]
    src[it] = parent[pos]
    dst[it] = cur
    dist[it] = key[pos]
    idx[pos] = idx[m]
    key[pos] = key[m]
    parent[pos] = parent[m]
    counters[ITERATION] = it + 1
    counters[FRONT_SIZE] = m
    counters[CURRENT] = cur
    return m


@jit(inline="always")
def _feature_step(Xt, current, state, tree):
    """Relax the keys with the distances in ``buf`` and add the nearest point."""
    idx, key, parent, buf, counters = state
    pos = relax_keys(buf, key, parent, counters[CURRENT], counters[FRONT_SIZE])
    m = _add_to_tree(pos, state, tree)
    for t in range(Xt.shape[0]):  # explicit loops: a slice copy compiles much more
        current[t] = Xt[t, pos]
        Xt[t, pos] = Xt[t, m]


@jit
def similarity_sweep(S, state, tree, stop):
    """Prim on a similarity matrix (maximum spanning tree) up to iteration ``stop``."""
    idx, key, parent, buf, counters = state
    while counters[ITERATION] < stop:
        cur, m = counters[CURRENT], counters[FRONT_SIZE]
        for r in range(m):
            buf[r] = -S[cur, idx[r]]
        pos = relax_keys(buf, key, parent, cur, m)
        _add_to_tree(pos, state, tree)


@jit
def prim_similarity(S):
    """Maximum spanning tree of a similarity matrix in one call: ``(src, dst, -S[src, dst])``."""
    state, tree = new_prim_state(S.shape[0])
    similarity_sweep(S, state, tree, S.shape[0] - 1)
    return tree


@jit(inline="always")
def _feature_group(Xt, c, t, start, stop):
    """The features ``t`` to ``t + 3``: their rows of the points ``start`` to ``stop``,
    then their values in ``c``."""
    return (Xt[t, start:stop], Xt[t + 1, start:stop], Xt[t + 2, start:stop],
            Xt[t + 3, start:stop], c[t], c[t + 1], c[t + 2], c[t + 3])


# Each adds a feature group's terms to the block's sums ``out``, in the features' order
@jit(inline="always")
def _sqeuclidean_group(x0, x1, x2, x3, c0, c1, c2, c3, p, out):
    for r in range(out.shape[0]):
        d0, d1, d2, d3 = x0[r] - c0, x1[r] - c1, x2[r] - c2, x3[r] - c3
        out[r] = out[r] + d0 * d0 + d1 * d1 + d2 * d2 + d3 * d3


@jit(inline="always")
def _manhattan_group(x0, x1, x2, x3, c0, c1, c2, c3, p, out):
    for r in range(out.shape[0]):
        out[r] = out[r] + abs(x0[r] - c0) + abs(x1[r] - c1) + abs(x2[r] - c2) \
            + abs(x3[r] - c3)


@jit(inline="always")
def _chebyshev_group(x0, x1, x2, x3, c0, c1, c2, c3, p, out):
    for r in range(out.shape[0]):
        out[r] = max(out[r], abs(x0[r] - c0), abs(x1[r] - c1), abs(x2[r] - c2),
                     abs(x3[r] - c3))


@jit(inline="always")
def _minkowski_group(x0, x1, x2, x3, c0, c1, c2, c3, p, out):
    for r in range(out.shape[0]):
        out[r] = out[r] + abs(x0[r] - c0) ** p + abs(x1[r] - c1) ** p \
            + abs(x2[r] - c2) ** p + abs(x3[r] - c3) ** p


@jit(inline="always")
def _dot_group(x0, x1, x2, x3, c0, c1, c2, c3, p, out):
    # cosine: the points and c are unit vectors (or zero), as sklearn's
    # cosine_distances; the block's distances are 1 - these sums (_metric_rows)
    for r in range(out.shape[0]):
        out[r] = out[r] + x0[r] * c0 + x1[r] * c1 + x2[r] * c2 + x3[r] * c3


@jit
def _metric_rows(code, Xt, c, lo, hi, p, out):
    """Reduced distances of the points ``lo`` to ``hi`` of the columns ``Xt`` to
    ``c``, into ``out[lo:hi]``, by metric ``code``.

    The branch is taken once per block and feature group, outside the loops over
    points.
    """
    for start in range(lo, hi, POINT_BLOCK):
        stop = min(hi, start + POINT_BLOCK)
        block = out[start:stop]
        block[:] = 0.0
        for t in range(0, Xt.shape[0], FEATURE_GROUP):
            x0, x1, x2, x3, c0, c1, c2, c3 = _feature_group(Xt, c, t, start, stop)
            if code == SQEUCLIDEAN:
                _sqeuclidean_group(x0, x1, x2, x3, c0, c1, c2, c3, p, block)
            elif code == MANHATTAN:
                _manhattan_group(x0, x1, x2, x3, c0, c1, c2, c3, p, block)
            elif code == CHEBYSHEV:
                _chebyshev_group(x0, x1, x2, x3, c0, c1, c2, c3, p, block)
            elif code == MINKOWSKI:
                _minkowski_group(x0, x1, x2, x3, c0, c1, c2, c3, p, block)
            else:
                _dot_group(x0, x1, x2, x3, c0, c1, c2, c3, p, block)
        if code == COSINE:
            for r in range(stop - start):
                block[r] = 1.0 - block[r]


@jit(parallel=True)
def _metric_rows_in_parts(code, Xt, c, m, p, out, n_parts):
    """:func:`_metric_rows` of the first ``m`` points cut into ``n_parts`` parts,
    one per thread. Each point's distance is computed as in one part: the tree is
    the same."""
    size = (m + n_parts - 1) // n_parts
    for part in prange(n_parts):
        start = part * size
        stop = min(m, start + size)
        if start < stop:
            _metric_rows(code, Xt, c, start, stop, p, out)


@jit
def feature_sweep_in_parts(code, Xt, current, p, state, tree, stop, n_parts, min_terms):
    """:func:`feature_sweep` whose steps with at least ``min_terms`` distance terms
    spread the rows over ``n_parts`` threads (a separate kernel: the parallel one
    compiles only for fits large enough to use it)."""
    while state[4][ITERATION] < stop:
        m = state[4][FRONT_SIZE]
        if m * Xt.shape[0] >= min_terms:
            _metric_rows_in_parts(code, Xt, current, m, p, state[3], n_parts)
        else:
            _metric_rows(code, Xt, current, 0, m, p, state[3])
        _feature_step(Xt, current, state, tree)


@jit
def feature_sweep(code, Xt, current, p, state, tree, stop):
    """Prim on feature vectors up to iteration ``stop``.

    ``code`` is the metric (``NUMBA_METRICS``). It is an integer, not the metric's loop
    itself: numba cannot cache a kernel that takes a function as an argument (every
    process recompiled it, and saving its cache index could fail with
    ``ReferenceError``). ``Xt`` and ``current`` come from ``new_feature_front``;
    ``p`` is the Minkowski power.
    """
    while state[4][ITERATION] < stop:
        _metric_rows(code, Xt, current, 0, state[4][FRONT_SIZE], p, state[3])
        _feature_step(Xt, current, state, tree)

"""Numba kernels for minimum spanning trees: Prim's algorithm in O(n^2) time, O(n) memory.

Two inputs, one kernel each (a kernel compiles only what its input needs):

* a dense n x n **similarity** matrix (:func:`similarity_sweep`), whose maximum
  spanning tree is the minimum spanning tree of the distances ``-S``;
* feature vectors with a metric evaluated on the fly, so that no n x n matrix is
  ever allocated (:func:`feature_sweep`), one row kernel per metric.

The kernels run the sweep up to a given iteration and keep their state in arrays
(:func:`new_prim_state`): Python drivers call them in chunks of iterations, so that
Ctrl-C is seen between chunks, and kernels call them once for the whole tree. On
large inputs the feature sweep spreads each step's rows over numba's threads
(:func:`feature_sweep_in_parts`); a row's distance is computed as in one thread,
so the tree is the same bit for bit.

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
    """The points as Prim packs them (a copy of X, point 0 first out) and point 0."""
    Xp = np.ascontiguousarray(X).copy()
    current = Xp[0].copy()
    last = Xp.shape[0] - 1
    for t in range(Xp.shape[1]):
        Xp[0, t] = Xp[last, t]
    return Xp, current


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
def _feature_step(Xp, current, state, tree):
    """Relax the keys with the distances in ``buf`` and add the nearest point."""
    idx, key, parent, buf, counters = state
    pos = relax_keys(buf, key, parent, counters[CURRENT], counters[FRONT_SIZE])
    m = _add_to_tree(pos, state, tree)
    for t in range(Xp.shape[1]):  # explicit loops: a slice copy compiles much more
        current[t] = Xp[pos, t]
        Xp[pos, t] = Xp[m, t]


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


# One row loop per metric: a shared loop that branches on the metric per pair (even
# inlined) ran Prim twice as slowly on 10000 x 16 points. Each takes the Minkowski
# power ``p`` (ignored by the others), so that one sweep serves them all.
# ``fastmath`` on the arithmetic only: the sweeps compare with infinity.
@jit(fastmath=True)
def _sqeuclidean_rows(Xp, c, m, p, out):
    d = Xp.shape[1]
    for r in range(m):
        s = 0.0
        for t in range(d):
            diff = Xp[r, t] - c[t]
            s += diff * diff
        out[r] = s


@jit(fastmath=True)
def _manhattan_rows(Xp, c, m, p, out):
    d = Xp.shape[1]
    for r in range(m):
        s = 0.0
        for t in range(d):
            s += abs(Xp[r, t] - c[t])
        out[r] = s


@jit(fastmath=True)
def _chebyshev_rows(Xp, c, m, p, out):
    d = Xp.shape[1]
    for r in range(m):
        s = 0.0
        for t in range(d):
            s = max(s, abs(Xp[r, t] - c[t]))
        out[r] = s


@jit(fastmath=True)
def _minkowski_rows(Xp, c, m, p, out):
    d = Xp.shape[1]
    for r in range(m):
        s = 0.0
        for t in range(d):
            s += abs(Xp[r, t] - c[t]) ** p
        out[r] = s


@jit(fastmath=True)
def _cosine_rows(Xp, c, m, p, out):
    # rows of Xp and c are unit vectors (or zero), as sklearn's cosine_distances
    d = Xp.shape[1]
    for r in range(m):
        s = 0.0
        for t in range(d):
            s += Xp[r, t] * c[t]
        out[r] = 1.0 - s


@jit
def _metric_rows(code, Xp, c, m, p, out):
    """Reduced distances of the first ``m`` rows of ``Xp`` to ``c``, by metric ``code``.

    The branch is taken once per Prim step, outside the loops over pairs.
    """
    if code == SQEUCLIDEAN:
        _sqeuclidean_rows(Xp, c, m, p, out)
    elif code == MANHATTAN:
        _manhattan_rows(Xp, c, m, p, out)
    elif code == CHEBYSHEV:
        _chebyshev_rows(Xp, c, m, p, out)
    elif code == MINKOWSKI:
        _minkowski_rows(Xp, c, m, p, out)
    else:
        _cosine_rows(Xp, c, m, p, out)


@jit(parallel=True)
def _metric_rows_in_parts(code, Xp, c, m, p, out, n_parts):
    """:func:`_metric_rows` with the rows cut into ``n_parts`` parts, one per thread.
    Each row's distance is computed as in one part: the tree is the same."""
    size = (m + n_parts - 1) // n_parts
    for part in prange(n_parts):
        start = part * size
        stop = min(m, start + size)
        if start < stop:
            _metric_rows(code, Xp[start:stop], c, stop - start, p, out[start:stop])


@jit
def feature_sweep_in_parts(code, Xp, current, p, state, tree, stop, n_parts, min_terms):
    """:func:`feature_sweep` whose steps with at least ``min_terms`` distance terms
    spread the rows over ``n_parts`` threads (a separate kernel: the parallel one
    compiles only for fits large enough to use it)."""
    while state[4][ITERATION] < stop:
        m = state[4][FRONT_SIZE]
        if m * Xp.shape[1] >= min_terms:
            _metric_rows_in_parts(code, Xp, current, m, p, state[3], n_parts)
        else:
            _metric_rows(code, Xp, current, m, p, state[3])
        _feature_step(Xp, current, state, tree)


@jit
def feature_sweep(code, Xp, current, p, state, tree, stop):
    """Prim on feature vectors up to iteration ``stop``.

    ``code`` is the metric (``NUMBA_METRICS``). It is an integer, not the row kernel
    itself: numba cannot cache a kernel that takes a function as an argument (every
    process recompiled it, and saving its cache index could fail with
    ``ReferenceError``). ``Xp`` and ``current`` come from ``new_feature_front``;
    ``p`` is the Minkowski power.
    """
    while state[4][ITERATION] < stop:
        _metric_rows(code, Xp, current, state[4][FRONT_SIZE], p, state[3])
        _feature_step(Xp, current, state, tree)

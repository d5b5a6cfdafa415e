"""Numba kernels for minimum spanning trees: Prim's algorithm in O(n^2) time, O(n) memory.

Two inputs share one driver:

* a dense n x n **similarity** matrix (``dense=True``), whose maximum spanning tree
  is the minimum spanning tree of the distances ``-S``;
* feature vectors with a metric evaluated on the fly (``dense=False``), so that no
  n x n matrix is ever allocated.

Distances are handled in a *reduced* form that preserves their order (squared
Euclidean for ``'euclidean'``, ``sum |x - y|^p`` for Minkowski): the tree only
depends on the order of the edges, and the caller maps the weights of the n - 1
tree edges back once at the end.
"""

import numpy as np
from numba import njit

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


# One loop per metric, on purpose: a shared loop that branches on the metric per
# pair (even inlined) ran Prim twice as slowly on 10000 x 16 points.
@njit(cache=True, fastmath=True)
def _sqeuclidean_rows(Xp, c, m, out):
    d = Xp.shape[1]
    for r in range(m):
        s = 0.0
        for t in range(d):
            diff = Xp[r, t] - c[t]
            s += diff * diff
        out[r] = s


@njit(cache=True, fastmath=True)
def _manhattan_rows(Xp, c, m, out):
    d = Xp.shape[1]
    for r in range(m):
        s = 0.0
        for t in range(d):
            s += abs(Xp[r, t] - c[t])
        out[r] = s


@njit(cache=True, fastmath=True)
def _chebyshev_rows(Xp, c, m, out):
    d = Xp.shape[1]
    for r in range(m):
        s = 0.0
        for t in range(d):
            s = max(s, abs(Xp[r, t] - c[t]))
        out[r] = s


@njit(cache=True, fastmath=True)
def _minkowski_rows(Xp, c, m, p, out):
    d = Xp.shape[1]
    for r in range(m):
        s = 0.0
        for t in range(d):
            s += abs(Xp[r, t] - c[t]) ** p
        out[r] = s


@njit(cache=True, fastmath=True)
def _cosine_rows(Xp, c, m, out):
    # rows of Xp and c are unit vectors (or zero), as sklearn's cosine_distances
    d = Xp.shape[1]
    for r in range(m):
        s = 0.0
        for t in range(d):
            s += Xp[r, t] * c[t]
        out[r] = 1.0 - s


@njit(cache=True)
def _distances_to_rows(Xp, c, m, metric, p, out):
    if metric == SQEUCLIDEAN:
        _sqeuclidean_rows(Xp, c, m, out)
    elif metric == MANHATTAN:
        _manhattan_rows(Xp, c, m, out)
    elif metric == CHEBYSHEV:
        _chebyshev_rows(Xp, c, m, out)
    elif metric == MINKOWSKI:
        _minkowski_rows(Xp, c, m, p, out)
    else:
        _cosine_rows(Xp, c, m, out)


@njit(cache=True)
def _negated_similarity_row(S, cur, idx, m, out):
    for r in range(m):
        out[r] = -S[cur, idx[r]]


@njit(cache=True)
def relax_keys(dist, key, parent, cur, m):
    """Lower ``key[:m]`` to ``dist[:m]`` where smaller; return the position of the minimum.

    Ties keep the earliest position, so the result only depends on the input.
    """
    best = np.inf
    best_pos = 0
    for r in range(m):
        s = dist[r]
        if s < key[r]:
            key[r] = s
            parent[r] = cur
        if key[r] < best:
            best = key[r]
            best_pos = r
    return best_pos


@njit(cache=True)
def prim_mst(data, dense, metric, p):
    """Minimum spanning tree of n points by Prim's algorithm, O(n^2) time, O(n) memory.

    Parameters
    ----------
    data : ndarray of shape (n, n) or (n, d)
        A similarity matrix (``dense=True``; the tree maximises similarity) or
        feature vectors (``dense=False``).
    dense : bool
    metric : int
        One of the metric codes of this module (ignored when ``dense``).
    p : float
        Minkowski power (ignored otherwise).

    Returns
    -------
    src, dst : ndarray of shape (n - 1,), int64
        The edges, in the order Prim added them.
    dist : ndarray of shape (n - 1,), float64
        Reduced distance of each edge (``-S[src, dst]`` when ``dense``).
    """
    n = data.shape[0]
    src = np.empty(max(n - 1, 0), dtype=np.int64)
    dst = np.empty(max(n - 1, 0), dtype=np.int64)
    dist = np.empty(max(n - 1, 0), dtype=np.float64)
    if n < 2:
        return src, dst, dist
    # Points not yet in the tree are packed at the front of ``idx`` (and of the
    # copy ``Xp`` for features) so that every sweep reads contiguous memory.
    idx = np.arange(n)
    key = np.full(n, np.inf)
    parent = np.zeros(n, dtype=np.int64)
    buf = np.empty(n, dtype=np.float64)
    if dense:
        Xp = np.empty((1, 1), dtype=data.dtype)
        c = np.empty(1, dtype=data.dtype)
    else:
        Xp = data.copy()
        c = Xp[0].copy()
    cur = 0
    m = n - 1
    idx[0] = idx[m]
    if not dense:
        Xp[0] = Xp[m]
    for it in range(n - 1):
        if dense:
            _negated_similarity_row(data, cur, idx, m, buf)
        else:
            _distances_to_rows(Xp, c, m, metric, p, buf)
        pos = relax_keys(buf, key, parent, cur, m)
        cur = idx[pos]
        src[it] = parent[pos]
        dst[it] = cur
        dist[it] = key[pos]
        m -= 1
        if not dense:
            c[:] = Xp[pos]
            Xp[pos] = Xp[m]
        idx[pos] = idx[m]
        key[pos] = key[m]
        parent[pos] = parent[m]
    return src, dst, dist

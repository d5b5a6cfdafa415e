"""PRCut's objective descended on the whole graph, one sample at a time.

At hard assignments PRCut's objective (``_graph.partition_objective``, the offline
form of the paper's eq. 7) is a sum of one term per cluster, of its cut and its
size: ``2 cut_l / (max(p_l, floor) vol) + gamma p_l log(max(p_l, floor) k)``, with
``p_l`` the cluster's share of the samples and ``vol`` the graph's total weight.
Moving sample i from cluster a to cluster b changes only the terms of a and b,
through i's weights to each (``w_ia``, ``w_ib``) and its degree:
``cut_a' = cut_a - (d_i - w_ia) + w_ia`` and ``cut_b' = cut_b + (d_i - w_ib) - w_ib``.
A sweep visits the samples in order and moves each to the neighbouring cluster
that lowers the objective most, if one does, among the clusters to which it has
more weight than to its own: the objective alone broke up 100 groups of 6
samples in 100 dimensions, each with half its neighbours outside its group,
where that condition leaves them whole. O(nnz) per sweep, and the objective
falls at every move, so that sweeps end at a local minimum, where no single move
lowers it. Clusters are never emptied. The sweeps run in one thread, in a fixed
order: the result does not depend on the thread count.
"""

import numpy as np
import scipy.sparse as sp

from skdiffclust._graphcut._graph import partition_objective, pbar_floor
from skdiffclust._utils._numba import jit

# the least fall of the objective (of order 1) for which a sample moves
MOVE_MARGIN = 1e-12


class ObjectiveDescent:
    """Sweeps of single-sample moves that lower PRCut's objective of ``labels`` on
    ``graph`` (CSR, symmetric, non-negative; the diagonal is ignored).

    Attributes
    ----------
    labels : ndarray of int64 of shape (n_samples,)
        The partition, updated by each :meth:`sweep`.
    moves : int
        Samples moved by the last sweep.
    """

    def __init__(self, graph, labels, n_clusters, gamma):
        self.graph = sp.csr_matrix(graph, dtype=np.float64)
        self.labels = np.array(labels, dtype=np.int64)
        self.n_clusters, self.gamma = int(n_clusters), float(gamma)
        self.moves = -1
        g = self.graph
        self._degree, self._cut, self._size = _cluster_state(
            g.indptr, g.indices, g.data, self.labels, self.n_clusters)

    def sweep(self):
        """One sweep over the samples; returns the objective after it."""
        g = self.graph
        self.moves = _sweep(g.indptr, g.indices, g.data, self.labels, self._degree,
                            self._cut, self._size, self.gamma, pbar_floor(self.n_clusters))
        return self.objective()

    def objective(self):
        """PRCut's objective of the present partition (as ``objective_`` reports it)."""
        return partition_objective(self.graph, self.labels, self.n_clusters, self.gamma)


@jit
def _cluster_state(indptr, indices, data, labels, n_clusters):
    """Each sample's degree, each cluster's cut and size."""
    n = labels.shape[0]
    degree = np.zeros(n)
    cut = np.zeros(n_clusters)
    size = np.zeros(n_clusters, np.int64)
    for i in range(n):
        size[labels[i]] += 1
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            if j != i:
                degree[i] += data[p]
                if labels[j] != labels[i]:
                    cut[labels[i]] += data[p]
    return degree, cut, size


@jit(inline="always")
def _term(cut, size, n, volume, gamma, floor, n_clusters):
    """One cluster's share of the objective."""
    share = size / n
    kept = max(share, floor)
    return 2.0 * cut / (kept * volume) + gamma * share * np.log(kept * n_clusters)


@jit
def _sweep(indptr, indices, data, labels, degree, cut, size, gamma, floor):
    """One sweep of moves (in place); the number of samples moved."""
    n, n_clusters = labels.shape[0], size.shape[0]
    volume = degree.sum()
    if volume <= 0.0:
        return 0
    weight_to = np.zeros(n_clusters)  # the sample's weight to each cluster
    touched = np.empty(n_clusters, np.int64)
    seen = np.full(n_clusters, -1, np.int64)  # the last sample that touched each cluster
    moves = 0
    for i in range(n):
        a = labels[i]
        n_touched = 0
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            if j != i:
                if seen[labels[j]] != i:
                    seen[labels[j]] = i
                    touched[n_touched] = labels[j]
                    n_touched += 1
                weight_to[labels[j]] += data[p]
        if size[a] > 1:
            cut_a = cut[a] - (degree[i] - weight_to[a]) + weight_to[a]
            leaving = (_term(cut_a, size[a] - 1, n, volume, gamma, floor, n_clusters)
                       - _term(cut[a], size[a], n, volume, gamma, floor, n_clusters))
            best, target = 0.0, -1
            for t in range(n_touched):
                b = touched[t]
                if b == a or weight_to[b] <= weight_to[a]:  # not its neighbours' majority
                    continue
                cut_b = cut[b] + (degree[i] - weight_to[b]) - weight_to[b]
                change = leaving + (
                    _term(cut_b, size[b] + 1, n, volume, gamma, floor, n_clusters)
                    - _term(cut[b], size[b], n, volume, gamma, floor, n_clusters))
                # a move must lower the objective by more than its rounding
                if change < best - MOVE_MARGIN:
                    best, target = change, b
            if target >= 0:
                cut[a] = cut_a
                cut[target] += degree[i] - 2.0 * weight_to[target]
                size[a] -= 1
                size[target] += 1
                labels[i] = target
                moves += 1
        for t in range(n_touched):
            weight_to[touched[t]] = 0.0
    return moves

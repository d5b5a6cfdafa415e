"""The graph's spanning tree cut into balanced clusters: Genie's rule on the
minimum spanning tree of the graph's edges (Gagolewski, Bartoszuk & Cena, 2016).

Single linkage merges along the tree's edges from the shortest; it follows
shapes of any kind (spirals, rings) but leaves outliers as clusters of their
own. Genie merges the same way while the Gini index of the cluster sizes is at
most ``threshold``; beyond it, the next merge must involve one of the smallest
clusters, along its shortest edge still unused. PRCut keeps this partition as its
start where its objective on the graph is lower than the spectral start's: the
spectral relaxation cuts long thin shapes across, the tree along their gaps.

The tree is the minimum spanning tree of the kNN graph's edges weighted by the
Euclidean distance of their ends (on the development batteries the same
partitions as the exact Euclidean tree's), so that it costs O(nnz log nnz), not
O(n^2). The merges run in one thread: the partition does not depend on the count.
"""

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import minimum_spanning_tree

from skdiffclust._utils._numba import jit
from skdiffclust._utils._union_find import (find_root, new_union_find, root_labels,
                                            union_roots)

# Genie's default Gini threshold (genieclust's ``gini_threshold``): not tuned here
GINI_THRESHOLD = 0.3
# explicit zeros are no edges to SciPy's spanning tree: an edge between copies
# (distance 0) is given the smallest positive length instead
ZERO_LENGTH = 1e-300


def tree_partition(graph, features, n_clusters, threshold=GINI_THRESHOLD):
    """Genie's partition of the graph's minimum spanning tree into ``n_clusters``.

    Parameters
    ----------
    graph : scipy.sparse.csr_matrix of shape (n_samples, n_samples)
        Symmetric; only its pattern (which pairs are edges) is read.
    features : ndarray or sparse matrix of shape (n_samples, n_features)
        The samples the graph was built from: its edges' lengths are their
        Euclidean distances.
    n_clusters : int
    threshold : float, default=GINI_THRESHOLD
        The largest Gini index of the cluster sizes at which the shortest edge
        merges whatever clusters it joins.

    Returns
    -------
    labels : ndarray of int64 of shape (n_samples,), or None
        None where the tree is a forest of more than ``n_clusters`` trees (the
        graph has more components than clusters).
    """
    src, dst = shortest_first_tree(graph, features)
    n = graph.shape[0]
    if n - src.shape[0] > n_clusters:
        return None
    return _genie_merges(n, src, dst, int(n_clusters), float(threshold))


def shortest_first_tree(graph, features):
    """The edges ``(src, dst)`` of the minimum spanning forest of the graph's edges,
    weighted by the distance between their ends, shortest first (ties in SciPy's
    order, stably)."""
    upper = sp.triu(sp.csr_matrix(graph), k=1).tocoo()
    lengths = edge_lengths(features, upper.row, upper.col)
    lengths[lengths <= 0.0] = ZERO_LENGTH
    tree = minimum_spanning_tree(
        sp.csr_matrix((lengths, (upper.row, upper.col)), shape=graph.shape)).tocoo()
    order = np.argsort(tree.data, kind="stable")
    return tree.row[order].astype(np.int64), tree.col[order].astype(np.int64)


def edge_lengths(features, rows, cols, block=1 << 16):
    """Euclidean distances between the samples ``rows[e]`` and ``cols[e]``, a block
    of edges at a time (sparse features stay sparse)."""
    lengths = np.empty(rows.shape[0])
    for start in range(0, rows.shape[0], block):
        stop = start + block
        difference = features[rows[start:stop]] - features[cols[start:stop]]
        if sp.issparse(difference):
            lengths[start:stop] = np.sqrt(np.asarray(
                difference.multiply(difference).sum(axis=1), dtype=np.float64).ravel())
        else:
            lengths[start:stop] = np.linalg.norm(
                np.asarray(difference, dtype=np.float64), axis=1)
    return lengths


@jit(inline="always")
def _distance_to_all(size, sizes, counts, n_distinct):
    """The sum of ``|size - s|`` over every cluster size s (the distinct sizes
    ``sizes[:n_distinct]``, each ``counts[s]`` times)."""
    total = 0
    for t in range(n_distinct):
        total += counts[sizes[t]] * abs(sizes[t] - size)
    return total


@jit(inline="always")
def _count_size(size, change, sizes, counts, slots, n_distinct):
    """One cluster of ``size`` more (``change`` 1) or fewer (-1) in the set of
    distinct sizes; the new number of distinct sizes."""
    if change > 0:
        if counts[size] == 0:
            slots[size] = n_distinct
            sizes[n_distinct] = size
            n_distinct += 1
        counts[size] += 1
        return n_distinct
    counts[size] -= 1
    if counts[size] == 0:
        last = sizes[n_distinct - 1]
        sizes[slots[size]] = last
        slots[last] = slots[size]
        n_distinct -= 1
    return n_distinct


@jit
def _genie_merges(n, src, dst, n_clusters, threshold):
    """Merge the n singletons along the tree's edges (shortest first) down to
    ``n_clusters`` clusters, the smallest clusters first while the Gini index of
    the sizes exceeds ``threshold``; labels numbered by first appearance."""
    parent, size = new_union_find(n)
    counts = np.zeros(n + 1, np.int64)  # clusters of each size
    sizes = np.zeros(n + 1, np.int64)  # the distinct sizes, in no order
    slots = np.zeros(n + 1, np.int64)  # where each size is in ``sizes``
    counts[1], sizes[0], n_distinct = n, 1, 1
    used = np.zeros(src.shape[0], np.bool_)
    first_unused = 0
    m = n
    differences = 0  # the sum of |a - b| over the pairs of clusters
    while m > n_clusters:
        edge = -1
        if m > 1 and differences / ((m - 1) * n) > threshold:
            smallest = n + 1
            for t in range(n_distinct):
                smallest = min(smallest, sizes[t])
            for e in range(first_unused, src.shape[0]):
                if not used[e] and (size[find_root(parent, src[e])] == smallest
                                    or size[find_root(parent, dst[e])] == smallest):
                    edge = e
                    break
        if edge < 0:
            edge = first_unused
        used[edge] = True
        while first_unused < src.shape[0] and used[first_unused]:
            first_unused += 1
        a, b = find_root(parent, src[edge]), find_root(parent, dst[edge])
        for root in (a, b):
            n_distinct = _count_size(size[root], -1, sizes, counts, slots, n_distinct)
            differences -= _distance_to_all(size[root], sizes, counts, n_distinct)
        merged = size[a] + size[b]
        differences += _distance_to_all(merged, sizes, counts, n_distinct)
        n_distinct = _count_size(merged, 1, sizes, counts, slots, n_distinct)
        union_roots(parent, size, a, b)
        m -= 1
    return root_labels(parent)[0]

"""Union-find in numba: the spanning forests' Kruskal (``forest._kruskal``) and
Genie's merges of the graph's spanning tree (``_graphcut._tree``)."""

import numpy as np

from skdiffclust._utils._numba import jit


@jit(inline="always")
def find_root(parent, i):
    """Root of ``i`` in a union-find forest, with path halving."""
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


@jit(inline="always")
def union_roots(parent, size, ra, rb):
    """Merge two distinct roots by size; return the new root."""
    if size[ra] < size[rb]:
        ra, rb = rb, ra
    parent[rb] = ra
    size[ra] += size[rb]
    return ra


@jit(inline="always")
def new_union_find(n):
    return np.arange(n), np.ones(n, dtype=np.int64)


@jit(inline="always")
def root_labels(parent):
    """Each element's set, numbered 0, 1, ... in the order of the sets' first
    elements, and the number of sets."""
    n = parent.shape[0]
    labels = np.full(n, -1, dtype=np.int64)
    root_label = np.full(n, -1, dtype=np.int64)
    n_labels = 0
    for i in range(n):
        r = find_root(parent, i)
        if root_label[r] < 0:
            root_label[r] = n_labels
            n_labels += 1
        labels[i] = root_label[r]
    return labels, n_labels

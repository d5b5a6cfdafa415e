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

"""Exact k-forests of one dense similarity matrix, as numba kernels.

Used as they are by exact inference on precomputed similarities and, for each
Monte-Carlo sample, by the perturbed solver.
"""

import numpy as np

from skdiffclust._utils._numba import jit
from skdiffclust.forest._kruskal import (
    forest_from_tree,
    forest_of_spanning_tree,
    greedy_forest_with_conflicts,
    tree_connectors,
)
from skdiffclust.forest._mst import prim_similarity


def kernel_constraints(constraints):
    """The constraint arrays of :func:`constrained_forest`.

    ``(group_ptr, group_members, group, rooted, conflict)``, with ``conflict=None``
    for constraints whose groups pairwise cannot link (partial labels): the kernels
    then never compile the greedy solver of general cannot-link structures.
    """
    group_ptr, group_members, group, rooted, general, conflict = constraints.kernel_arrays()
    return group_ptr, group_members, group, rooted, conflict if general else None


@jit
def upper_triangle_edges(S):
    """Every pair i < j as an edge, with distance ``-S[i, j]``."""
    n = S.shape[0]
    n_pairs = n * (n - 1) // 2
    src = np.empty(n_pairs, dtype=np.int64)
    dst = np.empty(n_pairs, dtype=np.int64)
    dist = np.empty(n_pairs, dtype=np.float64)
    e = 0
    for i in range(n):
        for j in range(i + 1, n):
            src[e], dst[e], dist[e] = i, j, -S[i, j]
            e += 1
    return src, dst, dist


@jit
def group_trees(S, group_ptr, group_members, wanted):
    """The maximum spanning tree inside each wanted must-link group (CSR layout)."""
    n_groups = group_ptr.shape[0] - 1
    n_edges = 0
    for g in range(n_groups):
        if wanted[g]:
            n_edges += max(group_ptr[g + 1] - group_ptr[g] - 1, 0)
    src = np.empty(n_edges, dtype=np.int64)
    dst = np.empty(n_edges, dtype=np.int64)
    dist = np.empty(n_edges, dtype=np.float64)
    e = 0
    for g in range(n_groups):
        members = group_members[group_ptr[g] : group_ptr[g + 1]]
        size = members.shape[0]
        if size < 2 or not wanted[g]:
            continue
        sub = np.empty((size, size), dtype=S.dtype)
        for a in range(size):
            for b in range(size):
                sub[a, b] = S[members[a], members[b]]
        s, d, w = prim_similarity(sub)
        for t in range(size - 1):
            src[e], dst[e], dist[e] = members[s[t]], members[d[t]], w[t]
            e += 1
    return src, dst, dist


@jit(inline="always")
def unconstrained_forest(tree_src, tree_dst, tree_dist, n_clusters):
    """The k-forest of a spanning tree: its edges but the heaviest ``n_clusters - 1``."""
    kept, n_reached = forest_of_spanning_tree(tree_src, tree_dst, tree_dist, n_clusters)
    return tree_src[kept], tree_dst[kept], tree_dist[kept], n_reached


@jit
def constrained_forest(S, n_clusters, tree_src, tree_dst, tree_dist, group_ptr,
                       group_members, group, rooted, conflict):
    """Constrained k-forest of a dense similarity matrix.

    Rooted constraints (``conflict=None``: groups that pairwise cannot link, as
    partial labels give): must-link edges are each group's paths in the spanning
    tree, or its own spanning tree when those paths cross another group; then
    Kruskal over the tree with the groups tied to a virtual root (exact for the
    matroid this defines). General constraints (``conflict``, the groups' cannot-link
    matrix): each group's own spanning tree, then the greedy over all pairs with
    per-component cannot-link tracking. ``conflict is None`` is decided when the
    kernel compiles: each case compiles only its own solver.
    """
    n = S.shape[0]
    n_groups = group_ptr.shape[0] - 1
    if conflict is None:
        path_src, path_dst, path_dist, needs_own_tree = tree_connectors(
            n, tree_src, tree_dst, tree_dist, group_ptr, group_members, group, n_clusters
        )
        own_src, own_dst, own_dist = group_trees(S, group_ptr, group_members, needs_own_tree)
        fixed_src = np.concatenate((path_src, own_src))
        fixed_dst = np.concatenate((path_dst, own_dst))
        fixed_dist = np.concatenate((path_dist, own_dist))
        src, dst, dist = tree_src, tree_dst, tree_dist
        kept, n_reached = forest_from_tree(
            n, src, dst, dist, fixed_src, fixed_dst, rooted, n_clusters
        )
    else:
        fixed_src, fixed_dst, fixed_dist = group_trees(
            S, group_ptr, group_members, np.ones(n_groups, dtype=np.bool_)
        )
        src, dst, dist = upper_triangle_edges(S)
        kept, n_reached = greedy_forest_with_conflicts(
            n, src, dst, dist, fixed_src, fixed_dst, group, conflict.copy(), n_clusters
        )
    return (
        np.concatenate((fixed_src, src[kept])),
        np.concatenate((fixed_dst, dst[kept])),
        np.concatenate((fixed_dist, dist[kept])),
        n_reached,
    )

"""Numba kernels on edge lists: deterministic edge order, k-forests (union-find:
``_utils._union_find``).

Everything here works on plain arrays (edge endpoints and reduced distances) so
that the same kernels serve feature input, precomputed similarities and the
perturbed solver.
"""

import numpy as np

from skdiffclust._utils._numba import jit
from skdiffclust._utils._union_find import (find_root, new_union_find, root_labels,
                                            union_roots)


@jit(inline="always")
def is_in_edge_order(src, dst, dist):
    for e in range(1, src.shape[0]):
        if dist[e] > dist[e - 1]:
            continue
        if dist[e] < dist[e - 1]:
            return False
        lo, hi = min(src[e], dst[e]), max(src[e], dst[e])
        lo0, hi0 = min(src[e - 1], dst[e - 1]), max(src[e - 1], dst[e - 1])
        if lo < lo0 or (lo == lo0 and hi < hi0):
            return False
    return True


@jit(inline="always")
def _merge_runs(keys, pairs, order, start, mid, stop, out_keys, out_pairs, out_order):
    """Merge the sorted runs [start, mid) and [mid, stop), the left one first on ties."""
    i, j = start, mid
    for t in range(start, stop):
        take_left = j >= stop or (i < mid and (
            keys[i] < keys[j] or (keys[i] == keys[j] and pairs[i] <= pairs[j])))
        source = i if take_left else j
        out_keys[t] = keys[source]
        out_pairs[t] = pairs[source]
        out_order[t] = order[source]
        if take_left:
            i += 1
        else:
            j += 1


@jit
def edge_order(src, dst, dist):
    """Order of edges by increasing distance, ties broken by (min, max) endpoint.

    This is the order quitefastmst uses too, so every backend cuts ties alike. A
    stable bottom-up merge sort on (distance, pair) that carries its keys along:
    one sort instead of two, and a small kernel to compile.
    """
    n_edges = src.shape[0]
    order = np.arange(n_edges)
    if is_in_edge_order(src, dst, dist):  # quitefastmst's trees already are
        return order
    n = 0
    for e in range(n_edges):
        n = max(n, src[e] + 1, dst[e] + 1)
    keys = dist.astype(np.float64)
    pairs = np.empty(n_edges, dtype=np.int64)
    for e in range(n_edges):
        pairs[e] = min(src[e], dst[e]) * n + max(src[e], dst[e])
    out_keys, out_pairs, out_order = np.empty_like(keys), np.empty_like(pairs), \
        np.empty_like(order)
    width = 1
    while width < n_edges:
        for start in range(0, n_edges, 2 * width):
            mid = min(start + width, n_edges)
            stop = min(start + 2 * width, n_edges)
            _merge_runs(keys, pairs, order, start, mid, stop, out_keys, out_pairs,
                        out_order)
        keys, out_keys = out_keys, keys
        pairs, out_pairs = out_pairs, pairs
        order, out_order = out_order, order
        width *= 2
    return order


@jit
def component_labels(n, src, dst):
    """Label the connected components of a graph on n nodes, 0, 1, ... by first node."""
    parent, size = new_union_find(n)
    for e in range(src.shape[0]):
        ra = find_root(parent, src[e])
        rb = find_root(parent, dst[e])
        if ra != rb:
            union_roots(parent, size, ra, rb)
    return root_labels(parent)


@jit
def forest_of_spanning_tree(tree_src, tree_dst, tree_dist, n_clusters):
    """:func:`forest_from_tree` without constraints, for a spanning tree (n - 1 edges).

    Kruskal over a tree accepts every edge, so the forest is the tree without its
    ``n_clusters - 1`` heaviest edges in :func:`edge_order`: no union-find (on
    1,000,000 points, 100 ms of a 1.2 s fit). Returns the kept edges' indices
    (increasing distance) and the number of clusters, as :func:`forest_from_tree`.
    """
    order = edge_order(tree_src, tree_dst, tree_dist)
    n_dropped = min(max(n_clusters - 1, 0), order.shape[0])
    return order[: order.shape[0] - n_dropped], 1 + n_dropped


@jit
def forest_from_tree(n, tree_src, tree_dst, tree_dist, fixed_src, fixed_dst,
                     rooted, n_clusters):
    """Maximum-weight k-forest from a spanning tree, must-link edges and a virtual root.

    ``fixed_*`` are must-link edges, always kept. ``rooted`` marks the points tied to
    a virtual root (node ``n``): points of must-link groups that pairwise cannot
    link, which the root keeps apart. With these extra edges the forests form a
    graphic matroid, so Kruskal over the tree alone is exact: adding edges to a
    graph only ever removes edges from its minimum spanning tree.

    Returns the indices of the kept tree edges (increasing distance) and the number
    of clusters reached, which differs from ``n_clusters`` only when the
    constraints make ``n_clusters`` infeasible.
    """
    parent, size = new_union_find(n + 1)
    n_rooted_groups = 0
    for e in range(fixed_src.shape[0]):
        ra = find_root(parent, fixed_src[e])
        rb = find_root(parent, fixed_dst[e])
        if ra != rb:
            union_roots(parent, size, ra, rb)
    for i in range(n):
        if rooted[i]:
            ri = find_root(parent, i)
            rr = find_root(parent, n)
            if ri != rr:
                n_rooted_groups += 1
                union_roots(parent, size, ri, rr)
    order = edge_order(tree_src, tree_dst, tree_dist)
    accepted = np.empty(order.shape[0], dtype=np.int64)
    n_accepted = 0
    for e in order:
        ra = find_root(parent, tree_src[e])
        rb = find_root(parent, tree_dst[e])
        if ra != rb:
            union_roots(parent, size, ra, rb)
            accepted[n_accepted] = e
            n_accepted += 1
    # With every accepted edge the augmented graph is connected: one cluster, or
    # one per rooted group. Each dropped edge (weakest first) adds one cluster.
    n_joined = max(n_rooted_groups, 1)
    n_dropped = min(max(n_clusters - n_joined, 0), n_accepted)
    return accepted[: n_accepted - n_dropped], n_joined + n_dropped


@jit
def greedy_forest_with_conflicts(n, src, dst, dist, fixed_src, fixed_dst, group,
                                 conflict, n_clusters):
    """Greedy (Kruskal) k-forest that never joins cannot-linked groups.

    The heuristic of Stewart et al. (2023, section 9.1) for arbitrary cannot-link
    structures: must-link edges first, then edges by decreasing similarity,
    skipping any edge that would put a cannot-link pair in one component, until
    ``n_clusters`` components remain. Conflicts are tracked per component: each
    root carries the must-link group it contains (``-1`` for none) and groups merge
    their rows of ``conflict``, which this function modifies.

    Returns the indices of the accepted edges among ``src, dst`` and the number of
    clusters reached.
    """
    parent, size = new_union_find(n)
    n_components = n
    for e in range(fixed_src.shape[0]):
        ra = find_root(parent, fixed_src[e])
        rb = find_root(parent, fixed_dst[e])
        if ra != rb:
            union_roots(parent, size, ra, rb)
            n_components -= 1
    root_group = np.full(n, -1, dtype=np.int64)
    for i in range(n):
        if group[i] >= 0:
            root_group[find_root(parent, i)] = group[i]
    order = edge_order(src, dst, dist)
    accepted = np.empty(min(order.shape[0], n), dtype=np.int64)
    n_accepted = 0
    n_groups = conflict.shape[0]
    for e in order:
        if n_components <= n_clusters:
            break
        ra = find_root(parent, src[e])
        rb = find_root(parent, dst[e])
        if ra == rb:
            continue
        ga = root_group[ra]
        gb = root_group[rb]
        if ga >= 0 and gb >= 0 and conflict[ga, gb]:
            continue
        merged_group = ga if ga >= 0 else gb
        if ga >= 0 and gb >= 0:
            for h in range(n_groups):
                conflict[ga, h] = conflict[ga, h] or conflict[gb, h]
                conflict[h, ga] = conflict[ga, h]
        r = union_roots(parent, size, ra, rb)
        root_group[r] = merged_group
        accepted[n_accepted] = e
        n_accepted += 1
        n_components -= 1
    return accepted[:n_accepted], n_components


@jit
def _root_tree(n, src, dst):
    """BFS order from node 0, parent and parent-edge of each node of a spanning tree."""
    degree = np.zeros(n + 1, dtype=np.int64)
    for e in range(src.shape[0]):
        degree[src[e] + 1] += 1
        degree[dst[e] + 1] += 1
    ptr = degree  # cumulated in place: v's neighbours are at ptr[v]:ptr[v + 1]
    fill = np.empty(n, dtype=np.int64)
    for v in range(n):
        ptr[v + 1] += ptr[v]
        fill[v] = ptr[v]
    neighbour = np.empty(2 * src.shape[0], dtype=np.int64)
    via = np.empty(2 * src.shape[0], dtype=np.int64)
    for e in range(src.shape[0]):
        a, b = src[e], dst[e]
        neighbour[fill[a]], via[fill[a]] = b, e
        fill[a] += 1
        neighbour[fill[b]], via[fill[b]] = a, e
        fill[b] += 1
    order = np.empty(n, dtype=np.int64)
    parent = np.full(n, -1, dtype=np.int64)
    parent_edge = np.full(n, -1, dtype=np.int64)
    seen = np.zeros(n, dtype=np.bool_)
    order[0], seen[0] = 0, True
    head, tail = 0, 1
    while head < tail:
        v = order[head]
        head += 1
        for t in range(ptr[v], ptr[v + 1]):
            w = neighbour[t]
            if not seen[w]:
                seen[w] = True
                parent[w], parent_edge[w] = v, via[t]
                order[tail] = w
                tail += 1
    return order[:tail], parent, parent_edge


@jit
def tree_connectors(n, tree_src, tree_dst, tree_dist, group_ptr, group_members, group,
                    n_clusters):
    """Must-link edges taken from the spanning tree itself.

    A group's connector is the subtree of the spanning tree that spans its members
    (their Steiner tree in it). It is used when it touches no sample of another
    group and no other group's connector; otherwise the group is flagged to use its
    own spanning tree instead. Taking the tree's own paths leaves the forest
    unchanged whenever the unconstrained forest already satisfies the constraints,
    so that the partial Fenchel-Young loss vanishes there. Free samples on these
    paths join their group; if that leaves fewer than ``n_clusters`` possible
    clusters, every group uses its own spanning tree instead.

    Returns the connector edges (src, dst, dist) and, per group, whether it needs
    its own spanning tree.
    """
    n_groups = group_ptr.shape[0] - 1
    order, parent, parent_edge = _root_tree(n, tree_src, tree_dst)
    used = np.zeros(n, dtype=np.bool_)
    needs_own_tree = np.zeros(n_groups, dtype=np.bool_)
    count = np.zeros(n, dtype=np.int64)
    # accepted connectors share no sample (at most n - 1 edges), plus the tentative
    # edges of the group being examined (at most n - 1 more)
    chosen = np.empty(2 * n, dtype=np.int64)
    n_chosen = 0
    for g in range(n_groups):
        size = group_ptr[g + 1] - group_ptr[g]
        if size < 2:
            continue
        count[:] = 0
        for t in range(group_ptr[g], group_ptr[g + 1]):
            count[group_members[t]] = 1
        for t in range(order.shape[0] - 1, 0, -1):
            v = order[t]
            count[parent[v]] += count[v]
        start = n_chosen
        clean = True
        for t in range(1, order.shape[0]):
            v = order[t]
            if 0 < count[v] < size:
                for end in (v, parent[v]):
                    if used[end] or (group[end] >= 0 and group[end] != g):
                        clean = False
                chosen[n_chosen] = parent_edge[v]
                n_chosen += 1
        if clean:
            for c in range(start, n_chosen):
                used[tree_src[chosen[c]]] = True
                used[tree_dst[chosen[c]]] = True
        else:
            n_chosen = start
            needs_own_tree[g] = True
    n_free = 0
    n_absorbed = 0
    for v in range(n):
        if group[v] < 0:
            n_free += 1
            if used[v]:
                n_absorbed += 1
    if n_free + n_groups - n_absorbed < n_clusters:
        n_chosen = 0
        needs_own_tree[:] = True
    picked = chosen[:n_chosen]
    return tree_src[picked], tree_dst[picked], tree_dist[picked], needs_own_tree

"""CUDA kernels (numba.cuda) of the perturbed spanning forests; see ``_gpu.py`` for the design.

Every kernel replicates, step for step, a CPU kernel of ``_perturbed.py``, ``_mst.py``,
``_kruskal.py`` and ``_dense.py``, so that each Monte-Carlo sample is the forest the
CPU solver returns for the same perturbed matrix, ties included:

* the noise is the CPU's: entry (i, j), i < j, of ``Z_s`` is a function of
  (seed, s, i, j, n) alone (:func:`noise`), evaluated where it is needed and never
  stored;
* Prim keeps the CPU's packed array of the vertices not yet in the tree, so that
  equal keys resolve to the same vertex (the earliest packed position);
* Kruskal visits the tree edges in ``edge_order`` (distance, then (min, max) pair).

Device code cannot allocate: every per-sample array is a row of a (n_samples, ...)
array passed in by the host. Block-wide loops that contain ``syncthreads`` are
uniform (all bounds are the same in every thread). The same code runs on the
numba CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``), which is how it is tested without a
GPU: hence explicit numpy scalar casts everywhere (the simulator evaluates the Python
code as it is). The simulator has no warp intrinsics: the one warp shuffle used
(:func:`shfl_xor_candidate`) has a simulator twin that exchanges through memory.
"""

import numpy as np
from numba import config, cuda, float64

from skdiffclust.forest._gpu_noise import (fill_row_keys, noise, perturbed,
                                           perturbed_from_row, splitmix64)

# the simulator's jit takes no max_registers; on a GPU, 64 registers per thread let
# a block of 1024 threads launch (65536 registers per SM)
_BLOCK_KERNEL = ({} if config.ENABLE_CUDASIM else {"max_registers": 64, "cache": True})
_KERNEL = {} if config.ENABLE_CUDASIM else {"cache": True}
# On numba's CUDA simulator every simulated thread swaps this module's ``cuda``
# global while iterating over the module's globals; the first warning raised here
# (numpy's uint64 overflow in splitmix64) would add ``__warningregistry__`` to them
# from another thread mid-iteration. Creating it up front keeps their size fixed.
__warningregistry__ = {}

REDUCTION_FIELDS = 3  # key, packed position, vertex
INF = np.float64(np.inf)
NO_POSITION = np.int32(2**31 - 1)
WARP = 32
FULL_WARP = np.int32(-1)  # the shuffles' member mask 0xFFFFFFFF, typed int32 as numba wants


# ------------------------------------------------------------------- the noise
@cuda.jit(**_KERNEL)
def sample_keys_kernel(seed, keys):
    """keys[s] = splitmix64(seed ^ splitmix64(s)), the CPU's per-sample key."""
    s = cuda.grid(1)
    if s < keys.shape[0]:
        keys[s] = splitmix64(np.uint64(seed[0]) ^ splitmix64(np.uint64(s)))


@cuda.jit(**_KERNEL)
def materialize_kernel(S, epsilon, single, sample_key, out):
    """out = S + epsilon Z_s for one sample (diagnostics and tests)."""
    j, i = cuda.grid(2)
    n = S.shape[0]
    if i < n and j < n:
        if i == j:
            out[i, j] = S[i, j]
        else:
            out[i, j] = perturbed(S, epsilon, single, sample_key[0], i, j)


@cuda.jit(**_KERNEL)
def score_kernel(keys, coefficients, scale, G):
    """G = scale * sum_s c_s Z_s, the noise regenerated entry by entry (i < j)."""
    j, i = cuda.grid(2)
    n = G.shape[0]
    if i >= n or j >= n:
        return
    if i == j:
        G[i, j] = 0.0
        return
    if j < i:
        return  # the thread of (j, i) writes both entries
    total = 0.0
    for s in range(coefficients.shape[0]):
        c = coefficients[s]
        if c != 0.0:
            total += c * np.float64(noise(keys[s], i, j, n))
    G[i, j] = total * scale
    G[j, i] = total * scale


# ------------------------------------------------------------ block primitives
@cuda.jit(device=True)
def block_sum(value, shm, tid, n_threads):
    """Sum of ``value`` over the block (every thread gets it); uses shm[:n_threads]."""
    shm[tid] = np.float64(value)
    cuda.syncthreads()
    half = n_threads // 2
    while half > 0:
        if tid < half:
            shm[tid] += shm[tid + half]
        cuda.syncthreads()
        half //= 2
    total = shm[0]
    cuda.syncthreads()
    return total


@cuda.jit(device=True)
def _comes_before(a, b, n_items, primary, secondary):
    """Strict order of items by (primary, secondary); items >= n_items go last."""
    if a >= n_items:
        return False
    if b >= n_items:
        return True
    pa = primary[a]
    pb = primary[b]
    if pa < pb:
        return True
    if pb < pa:
        return False
    return secondary[a] < secondary[b]


@cuda.jit(device=True)
def block_sort(order, n_items, primary, secondary, tid, n_threads):
    """order[:n_items] = items 0..n_items-1 by (primary, secondary): bitonic network.

    ``order`` has a power-of-two length; ``secondary`` keys are distinct, so the
    result is the unique sorted order (the CPU's stable argsorts give the same).
    """
    size = order.shape[0]
    for q in range(tid, size, n_threads):
        order[q] = q
    cuda.syncthreads()
    k = 2
    while k <= size:
        j = k // 2
        while j > 0:
            for t in range(tid, size // 2, n_threads):
                i = 2 * j * (t // j) + t % j
                low = order[i]
                high = order[i + j]
                if (i & k) == 0:
                    swap = _comes_before(high, low, n_items, primary, secondary)
                else:
                    swap = _comes_before(low, high, n_items, primary, secondary)
                if swap:
                    order[i] = high
                    order[i + j] = low
            cuda.syncthreads()
            j //= 2
        k *= 2


if config.ENABLE_CUDASIM:
    # The simulator runs one block at a time, so one buffer serves them all. (Not a
    # static cuda.shared.array: the simulator allocates those on first use without a
    # lock, and threads that race there get different arrays.)
    _SIMULATED_EXCHANGE = np.empty((REDUCTION_FIELDS, 1024))  # up to 1024 threads a block

    @cuda.jit(device=True)
    def shfl_xor_candidate(mask, key, pos, vertex, lane_mask):
        """The candidate of lane ``laneid ^ lane_mask``: ``cuda.shfl_xor_sync`` on each field.

        The simulator has no warp shuffles, so this twin exchanges through memory
        between two block-wide barriers: the same values, as long as every thread of
        the block calls it at the same point with the same ``lane_mask`` (< 32), which
        :func:`warp_argmin`'s uniform loops ensure.
        """
        exchange = _SIMULATED_EXCHANGE
        tid = cuda.threadIdx.x
        exchange[0, tid] = key
        exchange[1, tid] = pos
        exchange[2, tid] = vertex
        cuda.syncthreads()
        other = tid ^ lane_mask
        result = (exchange[0, other], np.int32(exchange[1, other]), np.int32(exchange[2, other]))
        cuda.syncthreads()
        return result
else:
    @cuda.jit(device=True)
    def shfl_xor_candidate(mask, key, pos, vertex, lane_mask):
        """The candidate of lane ``laneid ^ lane_mask`` (float64 key, int32 pos and vertex)."""
        return (cuda.shfl_xor_sync(mask, key, lane_mask),
                cuda.shfl_xor_sync(mask, pos, lane_mask),
                cuda.shfl_xor_sync(mask, vertex, lane_mask))


@cuda.jit(device=True)
def warp_argmin(key, pos, vertex, width, mask):
    """Lexicographic (key, pos) minimum over aligned groups of ``width`` lanes.

    ``width`` is a power of two up to 32, the same in every lane: a xor butterfly
    leaves every lane with its group's minimum, barrier-free. The order is total
    (positions are distinct, NO_POSITION only at +inf with vertex 0), so the winner
    is the block's minimum whatever the order of the comparisons: the same as the
    CPU's scan.
    """
    lane_mask = width // 2
    while lane_mask > 0:
        other_key, other_pos, other_vertex = shfl_xor_candidate(mask, key, pos, vertex,
                                                                np.int32(lane_mask))
        if other_key < key or (other_key == key and other_pos < pos):
            key = other_key
            pos = other_pos
            vertex = other_vertex
        lane_mask //= 2
    return key, pos, vertex


def prim_shared_floats(n_threads):
    """float64 slots of dynamic shared memory that :func:`block_prim` needs."""
    return 2 * REDUCTION_FIELDS * ((n_threads + WARP - 1) // WARP)


@cuda.jit(device=True)
def block_prim(S, epsilon, single, row_keys, verts, vstart, size, use_verts,
               idx, key, parent, out_src, out_dst, out_dist, out_start, shm, tid, n_threads):
    """Maximum spanning tree of ``size`` vertices of S + eps Z_s: the CPU's Prim, by a block.

    ``row_keys`` holds the keys of Z_s's rows (:func:`fill_row_keys`, behind a barrier).

    The vertices are ``verts[vstart:vstart + size]`` (``use_verts``) or 0..size-1. As
    in the CPU kernel, those not yet in the tree are packed in ``idx`` (removal swaps
    the last one in) and the minimum key wins, the earliest position on ties. The
    tree's ``size - 1`` edges go to ``out_*[out_start:]`` in the order Prim adds them,
    as global vertex ids with distance ``-(S + eps Z_s)``. ``shm`` holds
    :func:`prim_shared_floats` float64; ``n_threads`` is a power of two.

    One ``syncthreads`` per iteration. Position r belongs to thread r % n_threads,
    which relaxes it and keeps its best (key, position, vertex, parent) in registers;
    each warp reduces those by shuffles (:func:`warp_argmin`), its lane 0 writes the
    warp's winner to shared memory, and after the barrier every warp reduces the
    warps' winners itself, so that every thread knows the next vertex without a
    second barrier. The winner's owner writes the edge from its registers. The
    winning position is refilled from the last one by its owner at the start of the
    next iteration, so no thread reads a position another writes after the barrier;
    the shared slots alternate between iterations, so a fast warp's next writes
    never meet a slow warp's reads (those precede the next barrier).
    """
    n_warps = (n_threads + WARP - 1) // WARP
    width = n_threads if n_threads < WARP else WARP
    mask = FULL_WARP if n_threads >= WARP else np.int32((1 << n_threads) - 1)
    lane = tid % WARP
    m = size - 1
    for r in range(tid, m, n_threads):
        idx[r] = m if r == 0 else r
        key[r] = INF
        parent[r] = 0
    cuda.syncthreads()
    cur = 0
    refill = -1
    # the relaxation's positions as unsigned 32-bit offsets, stepped in a while loop:
    # numba wraps signed indices around at every access, and a range with a step
    # known at run time divides 64-bit integers (a subroutine) at every entry
    first, step = np.uint32(tid), np.uint32(n_threads)
    for it in range(size - 1):
        gcur = verts[np.uint32(vstart + cur)] if use_verts else cur
        if refill >= 0 and (refill & (n_threads - 1)) == tid:  # a power of two
            idx[refill] = idx[m]
            key[refill] = key[m]
            parent[refill] = parent[m]
        best = INF
        best_pos = NO_POSITION
        best_vertex = np.int32(0)
        best_parent = 0
        r = first
        while r < m:
            local = idx[r]
            g = verts[np.uint32(vstart + local)] if use_verts else local
            d = -perturbed_from_row(S, epsilon, single,
                                    row_keys[np.uint32(gcur if gcur < g else g)], gcur, g)
            k = key[r]
            if d < k:
                k = d
                key[r] = d
                parent[r] = cur
            # the first position a thread sees is a candidate even at +inf, as
            # position 0 is in the CPU's loop (no finite key: position 0 wins)
            if k < best or best_pos == NO_POSITION:
                best = k
                best_pos = np.int32(r)
                best_vertex = np.int32(local)
                best_parent = parent[r]
            r += step
        win_key, win_pos, win_vertex = warp_argmin(best, best_pos, best_vertex, width, mask)
        slots = (it % 2) * REDUCTION_FIELDS * n_warps
        if lane == 0:
            warp = tid // WARP
            shm[slots + warp] = win_key
            shm[slots + n_warps + warp] = np.float64(win_pos)
            shm[slots + 2 * n_warps + warp] = np.float64(win_vertex)
        cuda.syncthreads()
        # lane l takes warp l % n_warps's winner: every aligned group of n_warps lanes
        # holds them all, so the butterfly leaves the block's winner in every lane
        w = lane % n_warps
        win_key, win_pos, win_vertex = warp_argmin(
            shm[slots + w], np.int32(shm[slots + n_warps + w]),
            np.int32(shm[slots + 2 * n_warps + w]), n_warps, mask)
        if win_pos == best_pos:  # this thread owns the winning position
            out_src[out_start + it] = verts[vstart + best_parent] if use_verts else best_parent
            out_dst[out_start + it] = verts[vstart + best_vertex] if use_verts else best_vertex
            out_dist[out_start + it] = best
        cur = win_vertex
        m -= 1
        refill = win_pos
    cuda.syncthreads()


# ---------------------------------------------------------------- union-find
@cuda.jit(device=True)
def n_dropped_edges(n_clusters, n_joined, n_accepted):
    """``min(max(n_clusters - n_joined, 0), n_accepted)`` of ``forest_from_tree``.

    (Written out: the builtin min/max on integers failed to compile for the CUDA
    target of numba 0.68.)
    """
    wanted = n_clusters - n_joined
    if wanted < 0:
        wanted = 0
    return wanted if wanted < n_accepted else n_accepted


@cuda.jit(device=True)
def find_root(parent, i):
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


@cuda.jit(device=True)
def union_roots(parent, size, ra, rb):
    if size[ra] < size[rb]:
        ra, rb = rb, ra
    parent[rb] = ra
    size[ra] += size[rb]
    return ra


@cuda.jit(device=True)
def reset_union_find(parent, size, n):
    for i in range(n):
        parent[i] = i
        size[i] = 1


# ------------------------------------------------------------------- kernels
# One block per sample (blockIdx.x = s) unless said otherwise. Samples s >= n_noisy
# are unperturbed (epsilon = 0): the forest of S itself rides along with the noisy
# ones for the control variate.
@cuda.jit(**_BLOCK_KERNEL)
def prim_kernel(S, epsilon, single, n_noisy, keys, dummy_verts, idx, key, parent,
                tree_src, tree_dst, tree_dist, row_keys):
    """The maximum spanning tree of S + eps Z_s, in Prim's order from vertex 0.
    ``row_keys`` (uint64, samples x n) is scratch for the rows' keys."""
    s = cuda.blockIdx.x
    shm = cuda.shared.array(0, dtype=float64)
    eps = epsilon if s < n_noisy else 0.0
    fill_row_keys(row_keys[s], keys[s], S.shape[0], cuda.threadIdx.x, cuda.blockDim.x)
    cuda.syncthreads()
    block_prim(S, eps, single, row_keys[s], dummy_verts, 0, S.shape[0], False, idx[s],
               key[s], parent[s], tree_src[s], tree_dst[s], tree_dist[s], 0, shm,
               cuda.threadIdx.x, cuda.blockDim.x)


@cuda.jit(**_BLOCK_KERNEL)
def sort_edges_kernel(tree_src, tree_dst, tree_dist, pair_key, order):
    """order[s, :n-1] = the tree edges in ``edge_order`` (distance, then (min, max))."""
    s = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    n_threads = cuda.blockDim.x
    n = tree_src.shape[1] + 1
    for e in range(tid, n - 1, n_threads):
        a = tree_src[s, e]
        b = tree_dst[s, e]
        if a < b:
            pair_key[s, e] = np.int64(a) * n + b
        else:
            pair_key[s, e] = np.int64(b) * n + a
    cuda.syncthreads()
    block_sort(order[s], n - 1, tree_dist[s], pair_key[s], tid, n_threads)


@cuda.jit(**_BLOCK_KERNEL)
def free_forest_kernel(tree_src, tree_dst, tree_dist, order, n_clusters,
                       out_src, out_dst, n_edges, values, n_reached):
    """``forest_from_tree`` without constraints: the n - k strongest tree edges."""
    s = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    n_edges_tree = tree_src.shape[1]
    n_dropped = n_dropped_edges(n_clusters, 1, n_edges_tree)
    kept = n_edges_tree - n_dropped
    for q in range(tid, kept, cuda.blockDim.x):
        e = order[s, q]
        out_src[s, q] = tree_src[s, e]
        out_dst[s, q] = tree_dst[s, e]
    if tid == 0:
        total = 0.0
        for q in range(kept):  # the CPU's order of summation
            total -= tree_dist[s, order[s, q]]
        values[s] = 2.0 * total
        n_edges[s] = kept
        n_reached[s] = 1 + n_dropped


@cuda.jit(device=True)
def _preorder(tree_src, tree_dst, subtree, tin, next_tin, n):
    """Subtree sizes and preorder numbers of Prim's tree rooted at 0 (one thread).

    Prim adds every vertex after its parent, so one backward pass accumulates the
    sizes and one forward pass hands out the preorder intervals.
    """
    for it in range(n - 2, -1, -1):
        subtree[tree_src[it]] += subtree[tree_dst[it]]
    tin[0] = 0
    next_tin[0] = 1
    for it in range(n - 1):
        v = tree_dst[it]
        p = tree_src[it]
        tin[v] = next_tin[p]
        next_tin[p] += subtree[v]
        next_tin[v] = tin[v] + 1


@cuda.jit(device=True)
def _has_member_in(by_tin, tin, lo_q, hi_q, a, b):
    """Whether a member of a group (``by_tin[lo_q:hi_q]``, by preorder) is in [a, b]."""
    lo = lo_q
    hi = hi_q
    while lo < hi:
        mid = (lo + hi) // 2
        if tin[by_tin[mid]] < a:
            lo = mid + 1
        else:
            hi = mid
    return lo < hi_q and tin[by_tin[lo]] <= b


@cuda.jit(**_BLOCK_KERNEL)
def connectors_kernel(tree_src, tree_dst, group, group_ptr, n_groups, n_clusters,
                      tree_parent, parent_edge, subtree, tin, next_tin, primary, secondary, by_tin,
                      steiner, used, connector, needs_own_tree):
    """``tree_connectors``: each group's Steiner tree in the spanning tree, if clean.

    With the tree rooted at 0, the edge above v belongs to group g's Steiner tree
    when v's subtree (a preorder interval) holds some but not all of g's members;
    the members sorted by preorder make that a binary search, every vertex in
    parallel. Groups are then accepted in order, as the CPU does, when their Steiner
    tree touches no vertex used by an earlier connector nor any other group.
    ``connector[s, v] = 1`` keeps the edge above v; ``needs_own_tree[s, g] = 1``
    asks for the group's own spanning tree.
    """
    s = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    n_threads = cuda.blockDim.x
    shm = cuda.shared.array(0, dtype=float64)
    n = group.shape[0]
    G = n_groups[0]
    src = tree_src[s]
    dst = tree_dst[s]
    par = tree_parent[s]
    sub = subtree[s]
    pre = tin[s]
    order = by_tin[s]
    used_s = used[s]
    conn = connector[s]
    mark = steiner[s]
    for v in range(tid, n, n_threads):
        used_s[v] = 0
        conn[v] = 0
        mark[v] = -1
        sub[v] = 1
        par[v] = -1
    for g in range(tid, G, n_threads):
        needs_own_tree[s, g] = 0
    cuda.syncthreads()
    for it in range(tid, n - 1, n_threads):
        par[dst[it]] = src[it]
        parent_edge[s, dst[it]] = it
    if tid == 0:
        _preorder(src, dst, sub, pre, next_tin[s], n)
    cuda.syncthreads()
    for v in range(tid, n, n_threads):
        g = group[v]
        primary[s, v] = np.float64(g) * n + pre[v] if g >= 0 else INF
        secondary[s, v] = v
    cuda.syncthreads()
    block_sort(order, n, primary[s], secondary[s], tid, n_threads)
    for g in range(G):
        lo_q = group_ptr[g]
        hi_q = group_ptr[g + 1]
        if hi_q - lo_q < 2:
            continue
        first = pre[order[lo_q]]
        last = pre[order[hi_q - 1]]
        dirty = 0
        for v in range(1 + tid, n, n_threads):
            a = pre[v]
            b = a + sub[v] - 1
            if first >= a and last <= b:
                continue  # every member below v: the edge above v is not needed
            if _has_member_in(order, pre, lo_q, hi_q, a, b):
                mark[v] = g
                p = par[v]
                if used_s[v] != 0 or used_s[p] != 0:
                    dirty = 1
                if (group[v] >= 0 and group[v] != g) or (group[p] >= 0 and group[p] != g):
                    dirty = 1
        if cuda.syncthreads_or(dirty) == 0:
            for v in range(1 + tid, n, n_threads):
                if mark[v] == g:
                    used_s[v] = 1
                    used_s[par[v]] = 1
                    conn[v] = 1
        elif tid == 0:
            needs_own_tree[s, g] = 1
        cuda.syncthreads()
    n_free = 0
    n_absorbed = 0
    for v in range(tid, n, n_threads):
        if group[v] < 0:
            n_free += 1
            if used_s[v] != 0:
                n_absorbed += 1
    n_free = block_sum(n_free, shm, tid, n_threads)
    n_absorbed = block_sum(n_absorbed, shm, tid, n_threads)
    if n_free + G - n_absorbed < n_clusters:
        # too few clusters left: every group uses its own tree instead
        for v in range(tid, n, n_threads):
            conn[v] = 0
        for g in range(tid, G, n_threads):
            needs_own_tree[s, g] = 1


@cuda.jit(**_BLOCK_KERNEL)
def own_trees_kernel(S, epsilon, single, n_noisy, keys, group_ptr, group_members, n_groups,
                     needs_own_tree, idx, key, parent, fixed_src, fixed_dst, fixed_dist,
                     n_fixed, row_keys):
    """``group_trees``: Prim inside each group that needs its own spanning tree.
    ``row_keys`` (uint64, samples x n) is scratch for the rows' keys."""
    s = cuda.blockIdx.x
    shm = cuda.shared.array(0, dtype=float64)
    eps = epsilon if s < n_noisy else 0.0
    fill_row_keys(row_keys[s], keys[s], S.shape[0], cuda.threadIdx.x, cuda.blockDim.x)
    cuda.syncthreads()
    count = 0
    for g in range(n_groups[0]):
        start = group_ptr[g]
        size = group_ptr[g + 1] - start
        if needs_own_tree[s, g] == 0 or size < 2:
            continue
        block_prim(S, eps, single, row_keys[s], group_members, start, size, True, idx[s],
                   key[s], parent[s], fixed_src[s], fixed_dst[s], fixed_dist[s], count, shm,
                   cuda.threadIdx.x, cuda.blockDim.x)
        count += size - 1
    if cuda.threadIdx.x == 0:
        n_fixed[s] = count


@cuda.jit(device=True)
def _join(ufp, ufs, a, b):
    ra = find_root(ufp, a)
    rb = find_root(ufp, b)
    if ra != rb:
        union_roots(ufp, ufs, ra, rb)


@cuda.jit(**_KERNEL)
def rooted_forest_kernel(tree_src, tree_dst, tree_dist, order, parent_edge, connector,
                         fixed_src, fixed_dst, fixed_dist, n_fixed, rooted, n_clusters,
                         uf_parent, uf_size, accepted, out_src, out_dst, n_edges, values,
                         n_reached):
    """``forest_from_tree`` with must-link edges and the virtual root; one thread a sample.

    Output edges: the connectors (by vertex), the groups' own trees, then the kept
    tree edges by increasing distance.
    """
    s = cuda.grid(1)
    if s >= tree_src.shape[0]:
        return
    n = rooted.shape[0]
    ufp = uf_parent[s]
    ufs = uf_size[s]
    reset_union_find(ufp, ufs, n + 1)
    count = 0
    total = 0.0
    for v in range(1, n):
        if connector[s, v] != 0:
            e = parent_edge[s, v]
            _join(ufp, ufs, tree_src[s, e], tree_dst[s, e])
            out_src[s, count] = tree_src[s, e]
            out_dst[s, count] = tree_dst[s, e]
            count += 1
            total -= tree_dist[s, e]
    for q in range(n_fixed[s]):
        _join(ufp, ufs, fixed_src[s, q], fixed_dst[s, q])
        out_src[s, count] = fixed_src[s, q]
        out_dst[s, count] = fixed_dst[s, q]
        count += 1
        total -= fixed_dist[s, q]
    n_rooted = 0
    for i in range(n):
        if rooted[i] != 0:
            ri = find_root(ufp, i)
            rr = find_root(ufp, n)
            if ri != rr:
                n_rooted += 1
                union_roots(ufp, ufs, ri, rr)
    n_accepted = 0
    for q in range(n - 1):
        e = order[s, q]
        ra = find_root(ufp, tree_src[s, e])
        rb = find_root(ufp, tree_dst[s, e])
        if ra != rb:
            union_roots(ufp, ufs, ra, rb)
            accepted[s, n_accepted] = e
            n_accepted += 1
    n_joined = n_rooted if n_rooted > 1 else 1
    n_dropped = n_dropped_edges(n_clusters, n_joined, n_accepted)
    for q in range(n_accepted - n_dropped):
        e = accepted[s, q]
        out_src[s, count] = tree_src[s, e]
        out_dst[s, count] = tree_dst[s, e]
        count += 1
        total -= tree_dist[s, e]
    n_edges[s] = count
    values[s] = 2.0 * total
    n_reached[s] = n_joined + n_dropped


@cuda.jit(**_KERNEL)
def labels_kernel(out_src, out_dst, n_edges, uf_parent, uf_size, root_label, labels):
    """``component_labels``: clusters numbered 0, 1, ... by first vertex; one thread a sample."""
    s = cuda.grid(1)
    if s >= out_src.shape[0]:
        return
    n = labels.shape[1]
    ufp = uf_parent[s]
    ufs = uf_size[s]
    reset_union_find(ufp, ufs, n)
    for e in range(n_edges[s]):
        _join(ufp, ufs, out_src[s, e], out_dst[s, e])
    for i in range(n):
        root_label[s, i] = -1
    n_labels = 0
    for i in range(n):
        r = find_root(ufp, i)
        if root_label[s, r] < 0:
            root_label[s, r] = n_labels
            n_labels += 1
        labels[s, i] = root_label[s, r]

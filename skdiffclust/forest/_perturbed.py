"""Numba kernels of the perturbed spanning forests (Stewart et al., 2023, section 2.2).

Monte-Carlo samples of the forest of ``S + epsilon Z``, where Z is symmetric with
independent standard normal entries above the diagonal, are solved in parallel
(``prange`` over samples) by the same kernels as exact inference. The noise is
generated inside the kernels, in float32, from a counter-based generator keyed by
(seed, sample, row): every sample is reproducible whatever the number of threads,
rows can be regenerated independently for the score-function gradient, and no
``n_samples x n x n`` array ever exists.

The Python functions at the end run the kernels a chunk of samples (or rows) per
call, into arrays they allocate: the kernels return nothing, so that Ctrl-C, seen
between calls, raises ``KeyboardInterrupt`` cleanly (a kernel returning arrays
would have numba box them with the interrupt pending: the process crashed).
``parallel=True`` costs about 3 s more compilation than Python threads running
kernels that release the GIL, but these run in torch training loops, where
torch's OpenMP threads keep spinning after each operation: numba's OpenMP threads
share their team, Python threads would compete with them (30-50% slower).
"""

import numba
import numpy as np
from numba import prange, uint64

from skdiffclust._utils._numba import jit
from skdiffclust.forest._dense import constrained_forest, unconstrained_forest
from skdiffclust.forest._kruskal import component_labels
from skdiffclust.forest._mst import prim_similarity

_GOLDEN = uint64(0x9E3779B97F4A7C15)
_MIX1 = uint64(0xBF58476D1CE4E5B9)
_MIX2 = uint64(0x94D049BB133111EB)
_ONE = np.float32(1.0)
_ZERO = np.float32(0.0)
_LN2 = np.float32(np.log(2.0))
_SQRT2 = np.float32(np.sqrt(2.0))
_SQRT_HALF = np.float32(np.sqrt(0.5))
_HALF_PI = np.float32(np.pi / 2)


@jit(inline="always")
def _splitmix64(x):
    z = x + _GOLDEN
    z = (z ^ (z >> uint64(30))) * _MIX1
    z = (z ^ (z >> uint64(27))) * _MIX2
    return z ^ (z >> uint64(31))


@jit(inline="always")
def _row_key(seed, sample, row):
    return _splitmix64(_splitmix64(uint64(seed) ^ _splitmix64(uint64(sample))) + uint64(row))


@jit(error_model="numpy")
def _box_muller(radius_bits, angle_bits, z0, z1, m):
    """Box-Muller on 24-bit integers, in float32 arithmetic that vectorises.

    ``radius_bits`` in [1, 2^24] gives u1 = v / 2^24, ``angle_bits`` in [0, 2^24)
    gives the angle 2 pi c / 2^24. log, sin and cos are evaluated by polynomials
    (absolute error below 1e-6) instead of libm calls, which cannot vectorise:
    10x faster, and the noise generation dominated the solves. Without fastmath:
    with it, the vectorised loop and its scalar remainder rounded some values an
    ulp apart, so that a pair's normals depended on where it fell in the loop, and
    a row of Z made alone (:func:`noise_row`) differed from the same row in a block
    of rows (:func:`perturb`).
    """
    for p in range(m):
        # ln(u1): v = 2^e x with x in [sqrt(1/2), sqrt(2)), ln x by its atanh series
        x = np.float32(radius_bits[p])
        e = _ZERO
        for step, scale in ((16.0, 1.0 / 65536), (8.0, 1.0 / 256), (4.0, 1.0 / 16),
                            (2.0, 0.25), (1.0, 0.5)):
            big = x >= np.float32(1.0 / scale)
            x = x * np.float32(scale) if big else x
            e = e + (np.float32(step) if big else _ZERO)
        big = x > _SQRT2
        x = x * np.float32(0.5) if big else x
        e = e + (_ONE if big else _ZERO)
        t = (x - _ONE) / (x + _ONE)
        t2 = t * t
        series = _ONE + t2 * (np.float32(1 / 3) + t2 * (np.float32(1 / 5) + t2 * (
            np.float32(1 / 7) + t2 * np.float32(1 / 9))))
        log_u1 = np.float32(2.0) * t * series + (e - np.float32(24.0)) * _LN2
        radius = np.sqrt(np.float32(-2.0) * log_u1)
        # angle = quadrant * pi/2 + pi/4 + phi with phi in [-pi/4, pi/4)
        q = np.float32(angle_bits[p]) * np.float32(1.0 / (1 << 22))
        quadrant = _ZERO
        quadrant = _ONE if q >= _ONE else quadrant
        quadrant = np.float32(2.0) if q >= np.float32(2.0) else quadrant
        quadrant = np.float32(3.0) if q >= np.float32(3.0) else quadrant
        phi = (q - quadrant - np.float32(0.5)) * _HALF_PI
        phi2 = phi * phi
        sin_phi = phi * (_ONE + phi2 * (np.float32(-1 / 6) + phi2 * (np.float32(1 / 120) + phi2 * (
            np.float32(-1 / 5040) + phi2 * np.float32(1 / 362880)))))
        cos_phi = _ONE + phi2 * (np.float32(-0.5) + phi2 * (np.float32(1 / 24) + phi2 * (
            np.float32(-1 / 720) + phi2 * (np.float32(1 / 40320)
                                           + phi2 * np.float32(-1 / 3628800)))))
        a = (cos_phi - sin_phi) * _SQRT_HALF  # cos(pi/4 + phi)
        b = (cos_phi + sin_phi) * _SQRT_HALF  # sin(pi/4 + phi)
        cos_angle = a if quadrant == _ZERO else (
            -b if quadrant == _ONE else (-a if quadrant == np.float32(2.0) else b))
        sin_angle = b if quadrant == _ZERO else (
            a if quadrant == _ONE else (-b if quadrant == np.float32(2.0) else -a))
        z0[p] = radius * cos_angle
        z1[p] = radius * sin_angle


@jit(inline="always")
def _pair_bits(key, n_pairs, radius_bits, angle_bits, at):
    """The 24-bit integers of :func:`_box_muller` for the first ``n_pairs`` pairs of
    the row of ``key``, into ``radius_bits`` and ``angle_bits`` from ``at`` on."""
    for p in range(n_pairs):
        bits = _splitmix64(key + uint64(p))
        radius_bits[at + p] = np.int32((bits >> uint64(40)) + uint64(1))
        angle_bits[at + p] = np.int32((bits >> uint64(16)) & uint64(0xFFFFFF))


@jit(inline="always")
def new_noise_buffers(n):
    """Scratch space for :func:`noise_row`."""
    half = n // 2 + 1
    return (np.empty(half, dtype=np.int32), np.empty(half, dtype=np.int32),
            np.empty(half, dtype=np.float32))


@jit
def noise_row(seed, sample, row, n, out, buffers):
    """Fill ``out[row + 1:n]`` with row ``row`` (above the diagonal) of the noise Z.

    Each 64-bit draw gives two normals: the first half of the row takes the cosines,
    the second half the sines, so that every write is contiguous.
    """
    radius_bits, angle_bits, sines = buffers
    length = n - row - 1
    n_pairs = (length + 1) // 2
    key = _row_key(seed, sample, row)
    _pair_bits(key, n_pairs, radius_bits, angle_bits, 0)
    _box_muller(radius_bits, angle_bits, out[row + 1 : row + 1 + n_pairs], sines, n_pairs)
    for p in range(length - n_pairs):  # a loop: a slice copy compiles shape checks
        out[row + 1 + n_pairs + p] = sines[p]


@jit(inline="always")
def _mirror_upper_triangle(out):
    n = out.shape[0]
    tile = 32
    for bi in range(0, n, tile):
        for bj in range(bi, n, tile):
            for i in range(bi, min(bi + tile, n)):
                for j in range(max(bj, i + 1), min(bj + tile, n)):
                    out[j, i] = out[i, j]


# pairs of normals that perturb's Box-Muller pass takes at once: rows are gathered
# until they hold this many (its scratch stays in cache, its loop runs long). Row by
# row (noise_row), n = 64 took 18.6 us a sample, nine tenths of a perturbed forest
NOISE_BLOCK_PAIRS = 2048


@jit
def perturb(S, epsilon, seed, sample, out):
    """``out = S + epsilon * Z`` for one sample, Z symmetric with zero diagonal.

    Reads the upper triangle of S only: callers pass a symmetric S. Z's rows are
    :func:`noise_row`'s, bit for bit, but their pairs of draws go through the
    Box-Muller transform a block of rows at a time (a row of a small problem is a
    few pairs, too short a loop to vectorise).
    """
    n = S.shape[0]
    size = max(NOISE_BLOCK_PAIRS, n // 2 + 1)
    radius_bits = np.empty(size, dtype=np.int32)
    angle_bits = np.empty(size, dtype=np.int32)
    cosines = np.empty(size, dtype=np.float32)
    sines = np.empty(size, dtype=np.float32)
    first = 0
    while first < n:
        stop, total = first, 0  # rows first..stop-1, their pairs end to end
        while stop < n and total + (n - stop) // 2 <= size:
            _pair_bits(_row_key(seed, sample, stop), (n - stop) // 2, radius_bits,
                       angle_bits, total)
            total += (n - stop) // 2
            stop += 1
        _box_muller(radius_bits, angle_bits, cosines, sines, total)
        q = 0
        for i in range(first, stop):
            out[i, i] = S[i, i]
            n_pairs = (n - i) // 2  # of the row's n - i - 1 entries: cosines first
            for p in range(n_pairs):
                out[i, i + 1 + p] = S[i, i + 1 + p] + epsilon * cosines[q + p]
            for p in range(n - i - 1 - n_pairs):
                out[i, i + 1 + n_pairs + p] = S[i, i + 1 + n_pairs + p] + epsilon * sines[q + p]
            q += n_pairs
        first = stop
    _mirror_upper_triangle(out)


# ----------------------------------------------------- Monte-Carlo samples
# Kernels over samples or rows take about this many matrix entries per thread and
# call, then return to Python, which sees Ctrl-C between calls (tens of milliseconds)
ENTRIES_PER_CALL = 1 << 23


def _in_chunks(kernel, args, entries_each, n_items):
    """``kernel(*args, start, stop)`` over the n_items samples (or rows) of
    ``entries_each`` entries each, a chunk per call (parallel inside the kernel)."""
    n_threads = numba.get_num_threads()
    step = max(ENTRIES_PER_CALL // max(entries_each, 1), 1) * n_threads
    for start in range(0, n_items, step):
        kernel(*args, start, min(start + step, n_items))


def new_sample_set(n_samples, n, want_labels=True):
    """Room for the forests of ``n_samples`` samples of an n x n problem.

    ``(edges, n_edges, values, labels, n_reached)``: the edges (n_samples, n - 1, 2),
    the number of edges, the forest value <A_s, S + eps Z_s>, the cluster labels
    (n_samples, n; None unless ``want_labels``) and the number of clusters reached.
    """
    return (np.zeros((n_samples, max(n - 1, 1), 2), dtype=np.int32),
            np.zeros(n_samples, dtype=np.int64),
            np.zeros(n_samples, dtype=np.float64),
            np.zeros((n_samples, n), dtype=np.int64) if want_labels else None,
            np.zeros(n_samples, dtype=np.int64))


@jit
def _record_labels(s, n, src, dst, labels):
    """The sample's cluster labels into ``labels[s]``, if wanted (not None: decided
    when compiling)."""
    if labels is not None:
        sample_labels = component_labels(n, src, dst)[0]
        for i in range(n):
            labels[s, i] = sample_labels[i]


@jit(inline="always")
def _record(s, src, dst, dist, reached, n, sample_set):
    edges, n_edges, values, labels, n_reached = sample_set
    m = src.shape[0]
    for e in range(m):
        edges[s, e, 0] = src[e]
        edges[s, e, 1] = dst[e]
    n_edges[s] = m
    total = 0.0
    for e in range(m):
        total -= dist[e]
    values[s] = 2.0 * total  # <A, S> counts each edge in both triangles
    _record_labels(s, n, src, dst, labels)
    n_reached[s] = reached


@jit(inline="always")
def _solve_sample(S, n_clusters, epsilon, seed, s, buf, free, con, constraints):
    """The forests of sample ``s``, into the sample sets ``free`` (unconstrained) and
    ``con`` (constrained; ``constraints`` as ``_dense.kernel_constraints`` gives them).

    A set that is None is not computed, nor compiled: ``is None`` on an argument is
    decided when the kernel compiles.
    """
    n = S.shape[0]
    perturb(S, epsilon, seed, s, buf)
    tree_src, tree_dst, tree_dist = prim_similarity(buf)
    if free is not None:
        src, dst, dist, reached = unconstrained_forest(tree_src, tree_dst, tree_dist,
                                                       n_clusters)
        _record(s, src, dst, dist, reached, n, free)
    if con is not None:
        group_ptr, group_members, group, rooted, conflict = constraints
        src, dst, dist, reached = constrained_forest(
            buf, n_clusters, tree_src, tree_dst, tree_dist, group_ptr, group_members,
            group, rooted, conflict,
        )
        _record(s, src, dst, dist, reached, n, con)


@jit(parallel=True)
def _solve_samples(S, n_clusters, epsilon, seed, free, con, constraints, start, stop):
    """Samples ``start`` to ``stop - 1`` of :func:`_solve_sample`, in parallel."""
    n = S.shape[0]
    for s in prange(start, stop):
        buf = np.empty((n, n), dtype=S.dtype)
        _solve_sample(S, n_clusters, epsilon, seed, s, buf, free, con, constraints)


def perturbed_forests(S, n_clusters, epsilon, seed, n_samples, want_free, constraints,
                      want_labels=True):
    """Forests of ``n_samples`` perturbations ``S + epsilon Z_s``, S symmetric.

    Returns the unconstrained and the constrained sample sets (see
    :func:`new_sample_set`), None where not wanted: ``want_free``, and
    ``constraints`` (``_dense.kernel_constraints``) or None. Both problems see the
    same noise draw. Runs a chunk of samples per kernel call.
    """
    n = S.shape[0]
    free = new_sample_set(n_samples, n, want_labels) if want_free else None
    con = None if constraints is None else new_sample_set(n_samples, n, want_labels)
    _in_chunks(_solve_samples, (S, n_clusters, epsilon, seed, free, con, constraints), n * n,
               n_samples)
    return free, con


@jit
def _add_edges(edges, n_edges, out):
    """``out[i, j]`` and ``out[j, i]`` plus one for each edge (i, j) of each sample
    (whole numbers: exact in any order)."""
    for s in range(edges.shape[0]):
        for e in range(n_edges[s]):
            i, j = edges[s, e, 0], edges[s, e, 1]
            out[i, j] += 1.0
            out[j, i] += 1.0


def mean_adjacency(n, edges, n_edges):
    """Average adjacency matrix of the sampled forests, counted in place: 100
    samples in 15 us at n = 64 and 0.69 ms at 1,024, where two ``np.bincount`` of
    n * n bins took 43 us and 6.0 ms and four times the result's memory."""
    A = np.zeros((n, n))
    _add_edges(edges, n_edges, A)
    A /= max(edges.shape[0], 1)
    return A


@jit(parallel=True)
def _count_shared_trees(labels, M, start, stop):
    """``M[i, j] += number of samples where i and j share a tree``, rows start..stop-1."""
    n_samples, n = labels.shape
    for i in prange(start, stop):
        for s in range(n_samples):
            li = labels[s, i]
            for j in range(n):
                if labels[s, j] == li:
                    M[i, j] += 1.0


def mean_connectivity(labels):
    """Average connectivity matrix: fraction of samples where i and j share a tree."""
    n_samples, n = labels.shape
    M = np.zeros((n, n), dtype=np.float64)
    _in_chunks(_count_shared_trees, (labels, M), n_samples * n, n)
    return M / max(n_samples, 1)


@jit
def _adjacency_inner(G, edges, n_edges, out):
    for s in range(edges.shape[0]):
        total = 0.0
        for e in range(n_edges[s]):
            i, j = edges[s, e, 0], edges[s, e, 1]
            total += G[i, j] + G[j, i]
        out[s] = total


def adjacency_inner(G, edges, n_edges):
    """<G, A_s> for every sample s (each edge counted in both triangles)."""
    out = np.zeros(edges.shape[0], dtype=np.float64)
    _adjacency_inner(G, edges, n_edges, out)
    return out


@jit(parallel=True)
def _connectivity_inner(G, labels, out, start, stop):
    n = labels.shape[1]
    for s in prange(start, stop):
        total = 0.0
        for i in range(n):
            li = labels[s, i]
            for j in range(n):
                if labels[s, j] == li:
                    total += G[i, j]
        out[s] = total


def connectivity_inner(G, labels):
    """<G, M_s> for every sample s."""
    n_samples, n = labels.shape
    out = np.zeros(n_samples, dtype=np.float64)
    _in_chunks(_connectivity_inner, (G, labels, out), n * n, n_samples)
    return out


@jit(parallel=True)
def _score_rows(n, seed, coefficients, G, start, stop):
    """``G[i, j] += sum_s c_s Z_s[i, j]`` above the diagonal, rows start..stop-1."""
    n_samples = coefficients.shape[0]
    for i in prange(start, stop):
        z = np.empty(n, dtype=np.float32)
        buffers = new_noise_buffers(n)
        for s in range(n_samples):
            c = coefficients[s]
            if c == 0.0:
                continue
            noise_row(seed, s, i, n, z, buffers)
            for j in range(i + 1, n):
                G[i, j] += c * z[j]


def score_function_gradient(n, epsilon, seed, coefficients):
    """(1 / (2 eps N)) sum_s c_s Z_s: the score-function gradient w.r.t. S.

    For Gaussian noise, d E[Y(S + eps Z)] / d theta = E[Y Z] / eps for each
    upper-triangle parameter theta_ij; S_ij and S_ji share it, hence the 1/2.
    Rows are regenerated in parallel from the seed, without solving anything again.
    """
    n_samples = coefficients.shape[0]
    G = np.zeros((n, n), dtype=np.float64)
    _in_chunks(_score_rows, (n, seed, coefficients, G), n_samples * n, n)
    G *= 1.0 / (2.0 * epsilon * max(n_samples, 1))
    return G + G.T  # the lower triangle is zero

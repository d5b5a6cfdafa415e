"""Numba kernels of the perturbed spanning forests (Stewart et al., 2023, section 2.2).

Monte-Carlo samples of the forest of ``S + epsilon Z``, where Z is symmetric with
independent standard normal entries above the diagonal, are solved in parallel
(``prange`` over samples) by the same kernels as exact inference. The noise is
generated inside the kernels, in float32, from a counter-based generator keyed by
(seed, sample, row): every sample is reproducible whatever the number of threads,
rows can be regenerated independently for the score-function gradient, and no
``n_samples x n x n`` array ever exists.
"""

import numpy as np
from numba import njit, prange, uint64

from skdiffclust.forest._dense import constrained_forest, unconstrained_forest
from skdiffclust.forest._kruskal import component_labels
from skdiffclust.forest._mst import prim_mst

_GOLDEN = uint64(0x9E3779B97F4A7C15)
_MIX1 = uint64(0xBF58476D1CE4E5B9)
_MIX2 = uint64(0x94D049BB133111EB)
_ONE = np.float32(1.0)
_ZERO = np.float32(0.0)
_LN2 = np.float32(np.log(2.0))
_SQRT2 = np.float32(np.sqrt(2.0))
_SQRT_HALF = np.float32(np.sqrt(0.5))
_HALF_PI = np.float32(np.pi / 2)


@njit(cache=True)
def _splitmix64(x):
    z = x + _GOLDEN
    z = (z ^ (z >> uint64(30))) * _MIX1
    z = (z ^ (z >> uint64(27))) * _MIX2
    return z ^ (z >> uint64(31))


@njit(cache=True)
def _row_key(seed, sample, row):
    return _splitmix64(_splitmix64(uint64(seed) ^ _splitmix64(uint64(sample))) + uint64(row))


@njit(cache=True, fastmath=True, error_model="numpy")
def _box_muller(radius_bits, angle_bits, z0, z1, m):
    """Box-Muller on 24-bit integers, in float32 arithmetic that vectorises.

    ``radius_bits`` in [1, 2^24] gives u1 = v / 2^24, ``angle_bits`` in [0, 2^24)
    gives the angle 2 pi c / 2^24. log, sin and cos are evaluated by polynomials
    (absolute error below 1e-6) instead of libm calls, which cannot vectorise:
    10x faster, and the noise generation dominated the solves.
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


@njit(cache=True)
def new_noise_buffers(n):
    """Scratch space for :func:`noise_row`."""
    half = n // 2 + 1
    return (np.empty(half, dtype=np.int32), np.empty(half, dtype=np.int32),
            np.empty(half, dtype=np.float32))


@njit(cache=True)
def noise_row(seed, sample, row, n, out, buffers):
    """Fill ``out[row + 1:n]`` with row ``row`` (above the diagonal) of the noise Z.

    Each 64-bit draw gives two normals: the first half of the row takes the cosines,
    the second half the sines, so that every write is contiguous.
    """
    radius_bits, angle_bits, sines = buffers
    length = n - row - 1
    n_pairs = (length + 1) // 2
    key = _row_key(seed, sample, row)
    for p in range(n_pairs):
        bits = _splitmix64(key + uint64(p))
        radius_bits[p] = np.int32((bits >> uint64(40)) + uint64(1))
        angle_bits[p] = np.int32((bits >> uint64(16)) & uint64(0xFFFFFF))
    _box_muller(radius_bits, angle_bits, out[row + 1 : row + 1 + n_pairs], sines, n_pairs)
    out[row + 1 + n_pairs : n] = sines[: length - n_pairs]


@njit(cache=True)
def _mirror_upper_triangle(out):
    n = out.shape[0]
    tile = 32
    for bi in range(0, n, tile):
        for bj in range(bi, n, tile):
            for i in range(bi, min(bi + tile, n)):
                for j in range(max(bj, i + 1), min(bj + tile, n)):
                    out[j, i] = out[i, j]


@njit(cache=True)
def perturb(S, epsilon, seed, sample, out):
    """``out = S + epsilon * Z`` for one sample, Z symmetric with zero diagonal.

    Reads the upper triangle of S only: callers pass a symmetric S.
    """
    n = S.shape[0]
    z = np.empty(n, dtype=np.float32)
    buffers = new_noise_buffers(n)
    for i in range(n):
        out[i, i] = S[i, i]
        noise_row(seed, sample, i, n, z, buffers)
        for j in range(i + 1, n):
            out[i, j] = S[i, j] + epsilon * z[j]
    _mirror_upper_triangle(out)


# ----------------------------------------------------- Monte-Carlo samples
@njit(cache=True)
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
    labels[s] = component_labels(n, src, dst)[0]
    n_reached[s] = reached


@njit(cache=True)
def _new_sample_set(n_samples, n):
    return (np.zeros((n_samples, max(n - 1, 1), 2), dtype=np.int32),
            np.zeros(n_samples, dtype=np.int64),
            np.zeros(n_samples, dtype=np.float64),
            np.zeros((n_samples, n), dtype=np.int64),
            np.zeros(n_samples, dtype=np.int64))


@njit(cache=True, parallel=True)
def perturbed_forests(S, n_clusters, epsilon, seed, n_samples, want_free, want_constrained,
                      group_ptr, group_members, group, rooted, general, conflict):
    """Forests of ``n_samples`` perturbations ``S + epsilon Z_s``, S symmetric.

    Both problems see the same noise draw. Each of the two returned sample sets
    (unconstrained, constrained; empty when not wanted) holds the edges
    (n_samples, n - 1, 2), the number of edges, the forest value <A_s, S + eps Z_s>,
    the cluster labels (n_samples, n) and the number of clusters reached.
    """
    n = S.shape[0]
    free = _new_sample_set(n_samples if want_free else 0, n)
    con = _new_sample_set(n_samples if want_constrained else 0, n)
    for s in prange(n_samples):
        buf = np.empty((n, n), dtype=S.dtype)
        perturb(S, epsilon, seed, s, buf)
        tree_src, tree_dst, tree_dist = prim_mst(buf, True, 0, 2.0)
        if want_free:
            src, dst, dist, reached = unconstrained_forest(
                n, tree_src, tree_dst, tree_dist, n_clusters
            )
            _record(s, src, dst, dist, reached, n, free)
        if want_constrained:
            src, dst, dist, reached = constrained_forest(
                buf, n_clusters, tree_src, tree_dst, tree_dist, group_ptr,
                group_members, group, rooted, general, conflict,
            )
            _record(s, src, dst, dist, reached, n, con)
    return free, con


@njit(cache=True)
def mean_adjacency(n, edges, n_edges):
    """Average adjacency matrix of the sampled forests."""
    A = np.zeros((n, n), dtype=np.float64)
    n_samples = edges.shape[0]
    for s in range(n_samples):
        for e in range(n_edges[s]):
            i, j = edges[s, e, 0], edges[s, e, 1]
            A[i, j] += 1.0
            A[j, i] += 1.0
    return A / max(n_samples, 1)


@njit(cache=True, parallel=True)
def mean_connectivity(labels):
    """Average connectivity matrix: fraction of samples where i and j share a tree."""
    n_samples, n = labels.shape
    M = np.zeros((n, n), dtype=np.float64)
    for i in prange(n):
        for s in range(n_samples):
            li = labels[s, i]
            for j in range(n):
                if labels[s, j] == li:
                    M[i, j] += 1.0
    return M / max(n_samples, 1)


@njit(cache=True, parallel=True)
def adjacency_inner(G, edges, n_edges):
    """<G, A_s> for every sample s (each edge counted in both triangles)."""
    n_samples = edges.shape[0]
    out = np.zeros(n_samples, dtype=np.float64)
    for s in prange(n_samples):
        total = 0.0
        for e in range(n_edges[s]):
            i, j = edges[s, e, 0], edges[s, e, 1]
            total += G[i, j] + G[j, i]
        out[s] = total
    return out


@njit(cache=True, parallel=True)
def connectivity_inner(G, labels):
    """<G, M_s> for every sample s."""
    n_samples, n = labels.shape
    out = np.zeros(n_samples, dtype=np.float64)
    for s in prange(n_samples):
        total = 0.0
        for i in range(n):
            li = labels[s, i]
            for j in range(n):
                if labels[s, j] == li:
                    total += G[i, j]
        out[s] = total
    return out


@njit(cache=True, parallel=True)
def score_function_gradient(n, epsilon, seed, coefficients):
    """(1 / (2 eps N)) sum_s c_s Z_s: the score-function gradient w.r.t. S.

    For Gaussian noise, d E[Y(S + eps Z)] / d theta = E[Y Z] / eps for each
    upper-triangle parameter theta_ij; S_ij and S_ji share it, hence the 1/2.
    Rows are regenerated in parallel from the seed, without solving anything again.
    """
    n_samples = coefficients.shape[0]
    G = np.zeros((n, n), dtype=np.float64)
    for i in prange(n):
        z = np.empty(n, dtype=np.float32)
        buffers = new_noise_buffers(n)
        for s in range(n_samples):
            c = coefficients[s]
            if c == 0.0:
                continue
            noise_row(seed, s, i, n, z, buffers)
            for j in range(i + 1, n):
                G[i, j] += c * z[j]
    scale = 1.0 / (2.0 * epsilon * max(n_samples, 1))
    for i in range(n):
        for j in range(i + 1, n):
            G[i, j] *= scale
            G[j, i] = G[i, j]
    return G

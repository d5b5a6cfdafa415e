"""Numba kernels of the spanning forests: trees, edge order, union-find cuts."""

import itertools
import math

import numba
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.sparse.csgraph import minimum_spanning_tree
from sklearn.metrics import pairwise_distances

from skdiffclust.forest._kruskal import component_labels, edge_order, forest_from_tree
from skdiffclust.forest._solver import feature_tree, similarity_tree


def _tree_weight(dist):
    return float(np.sum(dist))


def _scipy_mst_weight(D):
    # scipy treats zeros as missing edges: shift so that every pair is an edge
    return float(minimum_spanning_tree(D + 1.0).sum()) - (D.shape[0] - 1)


def _is_spanning_tree(n, src, dst):
    labels, n_labels = component_labels(n, src, dst)
    return n_labels == 1 and src.shape[0] == n - 1


@pytest.mark.parametrize("metric,params", [
    ("euclidean", None), ("sqeuclidean", None), ("manhattan", None),
    ("chebyshev", None), ("minkowski", {"p": 3}), ("cosine", None),
    ("correlation", None), ("canberra", None),
])
@pytest.mark.parametrize("algorithm", ["prim", "auto"])
def test_feature_tree_is_a_minimum_spanning_tree(metric, params, algorithm):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((60, 5))
    src, dst, dist = feature_tree(X, metric=metric, metric_params=params, algorithm=algorithm)
    D = pairwise_distances(X, metric=metric, **(params or {}))
    assert _is_spanning_tree(60, src, dst)
    np.testing.assert_allclose(dist, D[src, dst], rtol=1e-9, atol=1e-9)
    assert _tree_weight(dist) == pytest.approx(_scipy_mst_weight(D), rel=1e-9)


@pytest.mark.parametrize("n_features", [1, 2, 5, 12])
def test_kd_tree_sort_and_prim_agree(n_features):
    rng = np.random.default_rng(n_features)
    X = rng.standard_normal((300, n_features))
    weights = {}
    for algorithm in ("prim", "auto") + (("kd_tree",) if n_features >= 2 else ()):
        src, dst, dist = feature_tree(X, algorithm=algorithm)
        assert _is_spanning_tree(300, src, dst)
        weights[algorithm] = _tree_weight(dist)
    assert len(set(np.round(list(weights.values()), 9))) == 1


def test_float32_features_give_the_same_tree():
    X = np.random.default_rng(2).standard_normal((200, 6))
    s64, d64, w64 = feature_tree(X, algorithm="prim")
    s32, d32, w32 = feature_tree(X.astype(np.float32), algorithm="prim")
    assert {frozenset(e) for e in zip(s64, d64)} == {frozenset(e) for e in zip(s32, d32)}
    np.testing.assert_allclose(w32, w64, rtol=1e-5)


def test_similarity_tree_maximises_similarity():
    rng = np.random.default_rng(3)
    W = rng.uniform(size=(40, 40))
    S = (W + W.T) / 2
    src, dst, neg = similarity_tree(S)
    assert _is_spanning_tree(40, src, dst)
    np.testing.assert_allclose(-neg, S[src, dst])
    # maximum spanning tree of S = minimum spanning tree of (max - S)
    assert _tree_weight(S.max() - S[src, dst]) == pytest.approx(
        _scipy_mst_weight(S.max() - S + np.eye(40) * 0), rel=1e-9
    )


def test_edge_order_breaks_ties_by_endpoints():
    src = np.array([3, 0, 2, 1, 0])
    dst = np.array([1, 4, 0, 2, 1])
    dist = np.array([1.0, 0.5, 1.0, 1.0, 2.0])
    order = edge_order(src, dst, dist)
    # dist 0.5 first, then the three ties by (min, max): (0,2), (1,2), (1,3)
    assert order.tolist() == [1, 2, 3, 0, 4]


@pytest.mark.parametrize("n_edges", [0, 1, 2, 7, 64, 1000])
def test_edge_order_is_a_stable_sort_by_distance_then_endpoints(n_edges):
    rng = np.random.default_rng(n_edges)
    src, dst = rng.integers(0, 40, n_edges), rng.integers(0, 40, n_edges)
    dist = rng.integers(0, 4, n_edges).astype(np.float64)  # many ties, duplicate edges
    lo, hi = np.minimum(src, dst), np.maximum(src, dst)
    expected = np.lexsort((np.arange(n_edges), hi, lo, dist))
    assert edge_order(src, dst, dist).tolist() == expected.tolist()


def test_component_labels_are_numbered_by_first_sample():
    labels, n_labels = component_labels(6, np.array([5, 1]), np.array([3, 4]))
    assert labels.tolist() == [0, 1, 2, 3, 1, 3]
    assert n_labels == 4


def test_forest_from_tree_drops_the_weakest_edges():
    # path 0-1-2-3-4 with distances 1, 5, 2, 4: two clusters cut the 5
    src = np.array([0, 1, 2, 3])
    dst = np.array([1, 2, 3, 4])
    dist = np.array([1.0, 5.0, 2.0, 4.0])
    empty = np.empty(0, dtype=np.int64)
    no_root = np.zeros(5, dtype=bool)
    kept, n_reached = forest_from_tree(5, src, dst, dist, empty, empty, no_root, 2)
    assert sorted(kept.tolist()) == [0, 2, 3] and n_reached == 2
    kept, n_reached = forest_from_tree(5, src, dst, dist, empty, empty, no_root, 3)
    assert sorted(kept.tolist()) == [0, 2] and n_reached == 3


# ----------------------------------------------------------------- brute force
def _max_forest_value(W, n_clusters):
    """Exact maximum-weight forest with n - k edges, by branch and bound."""
    n = W.shape[0]
    edges = sorted(itertools.combinations(range(n), 2), key=lambda e: -W[e])
    weights = np.array([W[e] for e in edges])
    need = n - n_clusters
    best = [-np.inf]

    def search(start, chosen, value, parent):
        if chosen == need:
            best[0] = max(best[0], value)
            return
        remaining = weights[start : start + need - chosen]
        if remaining.size < need - chosen or value + remaining.sum() <= best[0]:
            return
        for e in range(start, len(edges)):
            if value + weights[e : e + need - chosen].sum() <= best[0]:
                return
            i, j = edges[e]
            ri, rj = _root(parent, i), _root(parent, j)
            if ri == rj:
                continue
            new_parent = parent.copy()
            new_parent[ri] = rj
            search(e + 1, chosen + 1, value + weights[e], new_parent)

    search(0, 0, 0.0, np.arange(n))
    return best[0]


def _root(parent, i):
    while parent[i] != i:
        i = parent[i]
    return i


# random symmetric matrices: some are non-negative, smallest on their diagonal and
# metric under square roots, as distances plus a constant are, and rightly warned of
@pytest.mark.filterwarnings("ignore:S looks like a distance matrix")
@given(
    n=st.integers(2, 8),
    data=st.data(),
)
def test_forest_is_optimal_on_small_graphs(n, data):
    from skdiffclust import spanning_forest

    k = data.draw(st.integers(1, n))
    values = data.draw(
        st.lists(st.floats(-10, 10, allow_nan=False), min_size=n * n, max_size=n * n)
    )
    W = np.array(values).reshape(n, n)
    S = (W + W.T) / 2
    A, M = spanning_forest(S, k)
    labels, n_labels = component_labels(n, *np.nonzero(np.triu(A)))
    assert n_labels == k
    assert int(np.triu(A).sum()) == n - k
    np.testing.assert_array_equal(M, labels[:, None] == labels[None, :])
    value = float(np.sum(np.triu(A) * S))
    assert value == pytest.approx(_max_forest_value(S, k), abs=1e-9)


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs two numba threads")
@pytest.mark.parametrize("metric", ["euclidean", "cosine", "manhattan", "chebyshev"])
def test_prim_spread_over_threads_builds_the_same_tree_bit_for_bit(metric):
    # 2,000 x 40: Prim's first steps take the parallel rows (PARALLEL_PRIM_MIN_TERMS)
    from skdiffclust.forest._solver import PARALLEL_PRIM_MIN_TERMS

    X = np.random.default_rng(0).standard_normal((2000, 40))
    assert X.size >= PARALLEL_PRIM_MIN_TERMS
    previous = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = feature_tree(X, metric=metric, algorithm="prim")
        numba.set_num_threads(2)
        two = feature_tree(X, metric=metric, algorithm="prim")
    finally:
        numba.set_num_threads(previous)
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)
    expected = minimum_spanning_tree(pairwise_distances(X, metric=metric)).sum()
    assert one[2].sum() == pytest.approx(expected, rel=1e-9)


def _sum_in_feature_order(terms):
    """Each row's sum of ``terms``, added in the columns' order (no pairwise or
    vectorised reordering)."""
    total = np.zeros(terms.shape[0])
    for column in terms.T:
        total = total + column
    return total


@pytest.mark.parametrize("metric,params", [
    ("euclidean", None), ("manhattan", None), ("minkowski", {"p": 3}), ("cosine", None),
])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_prim_distances_are_their_terms_summed_in_feature_order(metric, params, dtype):
    # what makes the tree the same on any thread count and CPU: no compiler
    # reordering of a distance's sum (9 features: two groups and a padded one;
    # 2,000 points: two blocks)
    X = np.random.default_rng(3).standard_normal((2000, 9)).astype(dtype)
    src, dst, dist = feature_tree(X, metric=metric, metric_params=params, algorithm="prim")
    if metric == "cosine":
        unit = X / np.linalg.norm(X, axis=1, keepdims=True)
        expected = 1.0 - _sum_in_feature_order(unit[src] * unit[dst])
    else:
        diff = np.abs(X[src] - X[dst])
        p = {"euclidean": 2, "manhattan": 1, "minkowski": 3}[metric]
        # the C library's pow, as the kernel's (NumPy's may be vectorised otherwise)
        cube = np.vectorize(lambda x: math.pow(x, 3.0), otypes=[np.float64])
        terms = cube(diff.astype(np.float64)) if p == 3 else diff * diff if p == 2 else diff
        expected = _sum_in_feature_order(terms.astype(np.float64)) ** (1.0 / p)
    np.testing.assert_array_equal(dist, expected)


@given(n=st.integers(1, 260), seed=st.integers(0, 2**31 - 1), sample=st.integers(0, 500),
       epsilon=st.floats(1e-3, 10.0))
def test_perturbed_matrix_is_the_noise_rows_bit_for_bit(n, seed, sample, epsilon):
    # the solve perturbs S a block of rows at a time (several blocks from n = 91 on);
    # the score-function gradient regenerates each row of Z by itself: the same Z
    from skdiffclust.forest import _perturbed

    S = np.random.default_rng(n).standard_normal((n, n)).astype(np.float32)
    S = (S + S.T) / 2
    out = np.empty_like(S)
    _perturbed.perturb(S, epsilon, seed, sample, out)
    expected = np.empty_like(S)
    for i in range(n):
        expected[i, i:] = _perturbed_row(S, epsilon, seed, sample, i)
        expected[i:, i] = expected[i, i:]
    np.testing.assert_array_equal(out, expected)


def test_a_row_longer_than_a_noise_block_is_perturbed_whole():
    from skdiffclust.forest import _perturbed

    n = 2 * _perturbed.NOISE_BLOCK_PAIRS + 101  # row 0 alone overflows a block
    S = np.zeros((n, n), dtype=np.float32)
    out = np.empty_like(S)
    _perturbed.perturb(S, 0.5, 3, 1, out)
    for i in (0, 1, n // 2, n - 2, n - 1):
        np.testing.assert_array_equal(out[i, i:], _perturbed_row(S, 0.5, 3, 1, i))
    np.testing.assert_array_equal(out, out.T)


def _perturbed_row(S, epsilon, seed, sample, i):
    """Row i of S + epsilon Z from its diagonal on, Z's row by ``noise_row``."""
    from skdiffclust.forest import _perturbed

    n = S.shape[0]
    z = np.empty(n, dtype=np.float32)
    _perturbed.noise_row(seed, sample, i, n, z, _perturbed.new_noise_buffers(n))
    row = S[i, i:].copy()  # the kernel's arithmetic: float64, rounded once
    row[1:] = S[i, i + 1:].astype(np.float64) + epsilon * z[i + 1:].astype(np.float64)
    return row

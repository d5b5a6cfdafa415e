"""PRCut's graph code (NumPy/SciPy only): affinities, batch pairs, ratio cut."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st
from scipy.sparse.csgraph import laplacian
from sklearn.neighbors import kneighbors_graph

from skdiffclust import metrics
from skdiffclust.prcut import ratio_cut
from skdiffclust._graphcut._graph import (
    BatchPairExtractor,
    bipartite_objective,
    check_precomputed_affinity,
    connected_component_labels,
    degree_skewness,
    knn_affinity,
    mean_neighbourhood,
    n_connected_components,
    partition_objective,
    prcut_objective,
    shared_neighbor_graph,
)
from skdiffclust._graphcut._start import HUB_SKEWNESS, isolates_a_handful, resolve_start
from skdiffclust.prcut._inference import predict_probabilities


def _random_graph(n, density, seed):
    rng = np.random.default_rng(seed)
    A = sp.random(n, n, density=density, random_state=rng, format="csr")
    return check_precomputed_affinity(A + A.T)


def test_knn_graph_averages_both_directions_as_spectral_clustering_does():
    X = np.random.default_rng(0).normal(size=(80, 3))
    W = knn_affinity(X, 5)
    directed = kneighbors_graph(X, 5, include_self=False).toarray()
    # mutual neighbours 1, one-way neighbours 1/2: SpectralClustering's
    # symmetrisation (which also counts each sample among its own neighbours)
    np.testing.assert_array_equal(W.toarray(), (directed + directed.T) / 2)
    assert set(np.unique(W.data)) == {0.5, 1.0}
    assert W.diagonal().sum() == 0
    assert W.nnz <= 2 * 80 * 5


def test_rbf_weights_the_same_edges_with_a_gaussian():
    X = np.random.default_rng(1).normal(size=(60, 4))
    connectivity = knn_affinity(X, 6)
    W = knn_affinity(X, 6, kernel="rbf", rbf_gamma=0.5)
    rows, cols = connectivity.nonzero()
    # the connectivity weight (1 mutual, 1/2 one-way) times the Gaussian
    expected = np.asarray(connectivity[rows, cols]).ravel() * np.exp(
        -0.5 * ((X[rows] - X[cols]) ** 2).sum(1))
    np.testing.assert_array_equal(W.nonzero()[0], rows)
    np.testing.assert_allclose(np.asarray(W[rows, cols]).ravel(), expected, rtol=1e-12)


def test_rbf_default_bandwidth_survives_identical_samples():
    W = knn_affinity(np.ones((10, 2)), 3, kernel="rbf")
    assert np.all(np.isfinite(W.data)) and np.all(np.isin(W.data, [0.5, 1.0]))
    assert W.nnz >= 10 * 3


def test_knn_graph_rejects_too_many_neighbours():
    with pytest.raises(ValueError, match="n_neighbors=10 must be between 1 and"):
        knn_affinity(np.zeros((10, 2)), 10)


def test_precomputed_sparse_affinity_loses_its_diagonal():
    A = np.array([[5.0, 1.0, 0.0], [1.0, 2.0, 0.5], [0.0, 0.5, 0.0]])
    sparse = check_precomputed_affinity(sp.csr_matrix(A))
    np.testing.assert_array_equal(sparse.toarray(), A - np.diag(np.diag(A)))
    assert sparse.nnz == 4


def test_a_dense_affinity_is_kept_without_a_copy_unless_mostly_zeros():
    rng = np.random.default_rng(0)
    A = rng.random((40, 40))
    A = A + A.T
    assert check_precomputed_affinity(A) is A
    A[A < 1.9] = 0.0  # a few entries left: CSR takes less memory
    W = check_precomputed_affinity(A)
    assert sp.issparse(W)
    np.testing.assert_array_equal(W.toarray(), A - np.diag(np.diag(A)))


def test_dense_and_sparse_graphs_give_the_same_components_degrees_and_objective():
    W = _random_graph(60, 0.03, 7)
    dense = W.toarray() + np.diag(np.arange(60.0))  # the diagonal is ignored
    np.testing.assert_array_equal(connected_component_labels(dense),
                                  connected_component_labels(W))
    assert n_connected_components(W) == n_connected_components(dense) > 1
    P = np.random.default_rng(0).dirichlet(np.ones(3), size=60)
    np.testing.assert_allclose(prcut_objective(dense, P, 2.0), prcut_objective(W, P, 2.0))


def test_bipartite_objective_of_the_whole_graph_is_the_partition_objective():
    W = _random_graph(50, 0.2, 2)
    labels = np.random.default_rng(2).integers(0, 4, size=50)
    np.testing.assert_allclose(bipartite_objective(W, labels, labels, 4, 0.5),
                               partition_objective(W, labels, 4, 0.5))
    np.testing.assert_allclose(bipartite_objective(W.toarray(), labels, labels, 4, 0.5),
                               partition_objective(W, labels, 4, 0.5))


@pytest.mark.parametrize("A, message", [
    (np.ones((3, 4)), "square"),
    (np.array([[0.0, -1.0], [-1.0, 0.0]]), "Negative values in data"),
    (np.array([[0.0, np.nan], [np.nan, 0.0]]), "NaN"),
    (np.array([[0.0, 1.0], [0.5, 0.0]]), "symmetric"),
])
def test_precomputed_affinity_errors_are_clear(A, message):
    with pytest.raises(ValueError, match=message):
        check_precomputed_affinity(A)


@given(n=st.integers(2, 40), n_left=st.integers(1, 40), n_right=st.integers(1, 40),
       seed=st.integers(0, 2**16))
def test_batch_pair_equals_the_dense_block(n, n_left, n_right, seed):
    W = _random_graph(n, 0.3, seed)
    rng = np.random.default_rng(seed)
    left = rng.integers(0, n, size=n_left)  # the left batch may repeat samples
    right = rng.permutation(n)[: min(n_right, n)]
    rows, cols, weights = BatchPairExtractor(W)(left, right)
    block = np.zeros((left.size, right.size))
    np.add.at(block, (rows, cols), weights)
    np.testing.assert_array_equal(block, W.toarray()[np.ix_(left, right)])
    assert np.all(weights > 0)


def test_batch_pair_extractor_restores_its_position_array():
    W = _random_graph(30, 0.2, 0)
    extract = BatchPairExtractor(W)
    extract(np.arange(10), np.arange(5, 20))
    assert np.all(extract.position == -1)


def _ratio_cut_by_definition(W, labels):
    W = np.asarray(W)
    total = 0.0
    for cluster in np.unique(labels):
        inside = labels == cluster
        total += W[np.ix_(inside, ~inside)].sum() / inside.sum()
    return 0.5 * total


@given(n=st.integers(2, 30), k=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_ratio_cut_matches_its_definition_and_the_laplacian_form(n, k, seed):
    W = _random_graph(n, 0.4, seed)
    labels = np.random.default_rng(seed).integers(0, k, size=n)
    value = ratio_cut(W, labels)
    np.testing.assert_allclose(value, _ratio_cut_by_definition(W.toarray(), labels),
                               rtol=1e-12, atol=1e-12)
    # eq. 3: RatioCut = 1/2 Tr(F^T L F), F the ratio-assignment matrix
    clusters = np.unique(labels)
    F = np.stack([(labels == c) / np.sqrt(np.sum(labels == c)) for c in clusters], 1)
    trace = 0.5 * np.trace(F.T @ laplacian(W.toarray()) @ F)
    np.testing.assert_allclose(value, trace, rtol=1e-10, atol=1e-12)


def test_ratio_cut_ignores_label_names_and_accepts_dense_input():
    W = _random_graph(20, 0.3, 3)
    labels = np.random.default_rng(3).integers(0, 3, size=20)
    renamed = np.array([7, -1, 42])[labels]
    assert ratio_cut(W, labels) == pytest.approx(ratio_cut(W.toarray(), renamed))


def test_ratio_cut_is_zero_for_connected_components():
    W = sp.block_diag([np.ones((3, 3)), np.ones((4, 4))]).tocsr()
    assert ratio_cut(W, [0, 0, 0, 1, 1, 1, 1]) == 0.0
    # sample 2 moved to the second cluster: A = {0, 1}, B = {2, ..., 6}; the edges
    # 0-2 and 1-2 are cut, cut(A, B) = 2, so RatioCut = 1/2 (2 / |A| + 2 / |B|)
    assert ratio_cut(W, [0, 0, 1, 1, 1, 1, 1]) == pytest.approx(0.5 * (2 / 2 + 2 / 5))


def test_ratio_cut_checks_shapes():
    with pytest.raises(ValueError, match="labels must have shape"):
        ratio_cut(np.zeros((3, 3)), [0, 1])
    with pytest.raises(ValueError, match="square"):
        ratio_cut(np.zeros((3, 2)), [0, 1, 2])


@pytest.mark.parametrize("value, message", [
    (-1.0, "non-negative"), (np.nan, "NaN"), (np.inf, "infinite"),
])
@pytest.mark.parametrize("sparse", [False, True])
def test_ratio_cut_rejects_negative_weights_and_nan(value, message, sparse):
    W = np.ones((4, 4))
    W[0, 1] = W[1, 0] = value
    with pytest.raises(ValueError, match=message):
        ratio_cut(sp.csr_matrix(W) if sparse else W, [0, 0, 1, 1])
    with pytest.raises(ValueError, match=message):
        metrics.ratio_cut(sp.csr_matrix(W) if sparse else W, [0, 0, 1, 1])


def test_objective_of_hard_assignments_is_the_scaled_ratio_cut():
    W = _random_graph(40, 0.2, 5)
    labels = np.arange(40) % 4  # balanced: the P-bar floor is inactive
    P = np.eye(4)[labels]
    bound, kl = prcut_objective(W, P, gamma=1.0)
    assert bound == pytest.approx(4 * 40 / W.sum() * ratio_cut(W, labels))
    assert kl == pytest.approx(0.0, abs=1e-12)


def test_numpy_forward_is_a_softmax_and_reads_sparse_rows():
    rng = np.random.default_rng(0)
    coefs = [rng.normal(size=(5, 4)), rng.normal(size=(4, 3))]
    intercepts = [rng.normal(size=4), rng.normal(size=3)]
    X = sp.random(6, 5, density=0.5, random_state=0, format="csr")
    P = predict_probabilities(X, coefs, intercepts)
    np.testing.assert_allclose(P.sum(1), 1.0)
    np.testing.assert_allclose(P, predict_probabilities(X.toarray(), coefs, intercepts))


@given(n=st.integers(2, 40), density=st.floats(0.0, 0.5), seed=st.integers(0, 100),
       n_threads=st.sampled_from([1, 2, 3]))
def test_shared_neighbor_weights_are_the_cubed_jaccard_of_closed_neighbourhoods(
        n, density, seed, n_threads):
    W = _random_graph(n, density, seed)
    G = shared_neighbor_graph(W, n_threads=n_threads)
    closed = (W.toarray() > 0) | np.eye(n, dtype=bool)
    inter = closed.astype(int) @ closed.T.astype(int)
    union = closed.sum(1)[:, None] + closed.sum(1)[None, :] - inter
    expected = np.where(W.toarray() > 0, (inter / union) ** 3, 0.0)
    np.testing.assert_allclose(G.toarray(), expected, rtol=1e-12)
    # the same edges, so the same components; symmetric, like W
    assert (G != G.T).nnz == 0
    assert n_connected_components(G) == n_connected_components(W)


@pytest.mark.parametrize("n, density, seed",
                         [(1, 0.0, 0), (30, 0.0, 1), (30, 0.2, 2), (200, 0.05, 3)])
def test_shared_neighbor_weights_are_the_same_bits_from_scipy_and_the_kernel(
        n, density, seed, monkeypatch):
    # small graphs are counted by SciPy's sparse product, large ones by the numba
    # kernel: the same integers, so the same weights
    from skdiffclust._graphcut import _graph

    W = _random_graph(n, density, seed)
    by_scipy = shared_neighbor_graph(W)
    monkeypatch.setattr(_graph, "SNN_SCIPY_WORK", -1)
    by_kernel = shared_neighbor_graph(W, n_threads=2)
    for field in ("data", "indices", "indptr"):
        np.testing.assert_array_equal(getattr(by_scipy, field), getattr(by_kernel, field))


def test_degree_skewness_is_the_skewness_of_the_k_occurrences_of_a_knn_graph():
    # in the symmetrised kNN graph a sample's degree is (k + its k-occurrence) / 2:
    # the degrees' skewness is the hubness of Radovanovic et al. (2010)
    from scipy.stats import skew
    from sklearn.datasets import load_digits, make_blobs
    from threadpoolctl import threadpool_limits

    for X in (make_blobs(500, centers=3, random_state=0)[0], load_digits().data):
        W = knn_affinity(X, 10)
        # scikit-learn's graph on one thread: the neighbours the package's search
        # keeps among equally near digits on any number
        with threadpool_limits(1, user_api="openmp"):
            graph = kneighbors_graph(X, 10)
        occurrences = np.bincount(graph.indices, minlength=len(X))
        assert degree_skewness(W) == pytest.approx(skew(occurrences))
    assert degree_skewness(knn_affinity(make_blobs(500, random_state=0)[0], 10)) < HUB_SKEWNESS
    assert degree_skewness(knn_affinity(load_digits().data, 10)) > HUB_SKEWNESS
    ring = sp.diags([np.ones(9), np.ones(9)], [-1, 1], shape=(10, 10)).tolil()
    ring[0, 9] = ring[9, 0] = 1
    assert degree_skewness(ring.tocsr()) == 0.0  # equal degrees


class _Measured:
    """What a start's 'auto' values are resolved from (``_measures.GraphMeasures``'
    measures, without torch): the graph's skewness and neighbourhoods, and a given
    eigengap, whose questions are recorded."""

    def __init__(self, W, gap=(1.0, 1.5), components=1):
        self.W, self.gap, self.asked = W, gap, []
        self.n_samples, self.components = W.shape[0], components

    def n_components(self):
        return self.components

    def degree_skewness(self):
        return degree_skewness(self.W)

    def mean_neighbourhood(self):
        return mean_neighbourhood(self.W)

    def eigengap(self, shared_neighbours):
        self.asked.append(shared_neighbours)
        return self.gap


def test_init_auto_reads_shared_neighbours_only_of_a_graph_with_hubs_and_no_clear_eigengap():
    from sklearn.datasets import load_digits, make_blobs

    flat = _Measured(knn_affinity(make_blobs(500, centers=3, random_state=0)[0], 10))
    assert not resolve_start("auto", None, 3, flat).shared_neighbours
    assert flat.asked == []  # no hubs: no eigengap asked
    hubs = _Measured(knn_affinity(load_digits().data, 10))
    assert resolve_start("auto", None, 10, hubs).shared_neighbours
    assert hubs.asked == [False]  # the graph's own gap, asked once
    # ... unless its own spectrum has a clear gap after n_clusters
    clear = _Measured(hubs.W, gap=(1.0, 2.0))
    assert not resolve_start("auto", None, 10, clear).shared_neighbours


def test_a_handful_is_a_cluster_under_a_twentieth_of_the_mean_size():
    # 2 clusters of 1,991 images: under 49.8 is a handful (MNIST's 13 split-off 4s
    # and 9s); an empty cluster too
    assert isolates_a_handful(np.repeat([0, 1], [1942, 49]), 2)
    assert not isolates_a_handful(np.repeat([0, 1], [1941, 50]), 2)
    assert isolates_a_handful(np.zeros(100, dtype=np.int64), 2)
    assert not isolates_a_handful(np.repeat(np.arange(10), 10), 10)


def test_init_auto_keeps_the_graph_where_clusters_are_about_a_neighbourhood():
    # digits' 10-NN graph has hubs; its mean closed neighbourhood holds about 13
    # samples, so 1,797 samples in 10 clusters span many neighbourhoods and in 100
    # clusters (18 each) fewer than two: the shared-neighbour counts of clusters that
    # small mix them with their surroundings
    from sklearn.datasets import load_digits

    hubs = knn_affinity(load_digits().data, 10)
    neighbourhood = mean_neighbourhood(hubs)
    assert neighbourhood == 1 + hubs.nnz / hubs.shape[0]
    assert 10 < neighbourhood < 16
    assert resolve_start("auto", None, 10, _Measured(hubs)).shared_neighbours
    assert not resolve_start("auto", None, 100, _Measured(hubs)).shared_neighbours
    assert resolve_start("spectral_snn", None, 100, _Measured(hubs)).shared_neighbours


def test_n_eigenvectors_auto_widens_only_a_shared_neighbour_start_without_a_clear_gap():
    from sklearn.datasets import load_digits

    hubs = knn_affinity(load_digits().data, 10)
    plain = _Measured(hubs)
    assert resolve_start("spectral", "auto", 10, plain).widths == (10,)
    assert plain.asked == []
    shared = _Measured(hubs)
    assert resolve_start("spectral_snn", "auto", 10, shared).widths == (10, 15, 20, 25, 30)
    assert shared.asked == [True]  # the shared-neighbour graph's gap
    clear = resolve_start("spectral_snn", "auto", 10, _Measured(hubs, gap=(1.0, 2.0)))
    assert clear.widths == (10,)
    # ... the wide widths kept for a narrow partition that isolates a handful
    assert clear.fallback == (10, 15, 20, 25, 30)
    assert resolve_start("spectral_snn", "auto", 10, shared).fallback == ()
    # a graph of n_clusters components or more starts from them: no gap asked
    split = _Measured(hubs, components=10)
    assert resolve_start("spectral_snn", "auto", 10, split).widths == (10,)
    assert split.asked == []
    # an int (or None) is the width, at least n_clusters and at most the samples
    assert resolve_start("auto", 15, 10, _Measured(hubs, gap=(1.0, 2.0))).widths == (15,)
    assert resolve_start("spectral", None, 10, plain).widths == (10,)
    assert resolve_start("spectral", 5000, 10, plain).widths == (hubs.shape[0],)
    assert resolve_start("spectral_snn", "auto", 1000, _Measured(hubs)).widths[-1] == 1797

"""PRCut without a network (``solver='graph'``, the default up to 20,000 samples):
the spanning tree's Genie partition, the descent of the objective on the whole
graph, predict by the nearest training samples, and the path's choice."""

import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import adjusted_rand_score

from skdiffclust._graphcut._descent import MOVE_MARGIN, ObjectiveDescent
from skdiffclust._graphcut._graph import knn_affinity, partition_objective
from skdiffclust._graphcut._tree import _genie_merges, shortest_first_tree, tree_partition
from skdiffclust.prcut import _settings
from tests._data import SHARED_DATA, load_benchmark

torch = pytest.importorskip("torch", reason="PRCut's fit (its spectral start) needs torch")
from skdiffclust import PRCut  # noqa: E402


def _gini(sizes):
    sizes = np.asarray(sizes, dtype=float)
    m = sizes.size
    if m < 2:
        return 0.0
    return np.abs(sizes[:, None] - sizes[None, :]).sum() / 2 / ((m - 1) * sizes.sum())


def _genie_by_the_definition(n, src, dst, n_clusters, threshold):
    """Genie's rule, step by step from its definition (clusters as sets)."""
    cluster = list(range(n))
    used = [False] * len(src)
    while len(set(cluster)) > n_clusters:
        members = {c: cluster.count(c) for c in set(cluster)}
        candidates = [e for e in range(len(src)) if not used[e]]
        if _gini(list(members.values())) > threshold:
            smallest = min(members.values())
            candidates = [e for e in candidates if smallest in (
                members[cluster[src[e]]], members[cluster[dst[e]]])]
        edge = candidates[0]
        used[edge] = True
        a, b = cluster[src[edge]], cluster[dst[edge]]
        cluster = [a if c == b else c for c in cluster]
    return np.unique(cluster, return_inverse=True)[1]


@settings(max_examples=60, deadline=None)
@given(n=st.integers(2, 40), seed=st.integers(0, 10_000), threshold=st.sampled_from(
    [0.0, 0.1, 0.3, 0.5, 1.0]), data=st.data())
def test_the_kernel_merges_as_genies_rule_says(n, seed, threshold, data):
    rng = np.random.default_rng(seed)
    # a random tree: each vertex after the first hangs from an earlier one
    src = np.array([rng.integers(0, i) for i in range(1, n)], dtype=np.int64)
    dst = np.arange(1, n, dtype=np.int64)
    order = rng.permutation(n - 1)
    src, dst = src[order], dst[order]
    k = data.draw(st.integers(1, n))
    expected = _genie_by_the_definition(n, src, dst, k, threshold)
    found = _genie_merges(n, src, dst, k, threshold)
    assert adjusted_rand_score(expected, found) == 1.0
    assert np.unique(found).size == k


def test_without_the_balance_rule_it_is_single_linkage_on_the_tree():
    X, _ = make_blobs(300, centers=4, random_state=0)
    graph = knn_affinity(X, 10)
    labels = tree_partition(graph, X, 4, threshold=1.0)
    src, dst = shortest_first_tree(graph, X)
    kept = sp.coo_matrix((np.ones(len(src) - 3), (src[:-3], dst[:-3])), shape=(300, 300))
    _, components = sp.csgraph.connected_components(kept, directed=False)
    assert adjusted_rand_score(components, labels) == 1.0


def test_a_forest_of_more_trees_than_clusters_gives_no_tree_partition():
    graph = sp.block_diag([np.ones((3, 3)) - np.eye(3)] * 4, format="csr")
    assert tree_partition(graph, np.arange(12.0)[:, None], 2) is None


def _random_graph(seed, n=60):
    X = np.random.default_rng(seed).normal(size=(n, 2))
    return knn_affinity(X, 6)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("gamma", [0.0, 0.3, 3.0])
def test_the_descent_lowers_the_objective_to_a_local_minimum(seed, gamma):
    graph = _random_graph(seed)
    k = 4
    labels = np.random.default_rng(seed).integers(0, k, graph.shape[0])
    descent = ObjectiveDescent(graph, labels, k, gamma)
    curve = [descent.objective()]
    while descent.moves != 0:
        curve.append(descent.sweep())
        assert curve[-1] == pytest.approx(
            partition_objective(graph, descent.labels, k, gamma), rel=1e-12)
    assert np.all(np.diff(curve) <= 1e-12)
    assert np.unique(descent.labels).size == np.unique(labels).size  # none emptied
    # no allowed move (to a cluster it has more weight to than to its own) lowers it
    W = graph.toarray()
    final, best = descent.labels, curve[-1]
    for i in range(graph.shape[0]):
        weight = np.bincount(final, weights=W[i], minlength=k) - W[i, i] * np.eye(k)[final[i]]
        if np.sum(final == final[i]) == 1:
            continue
        for b in np.flatnonzero(weight > weight[final[i]]):
            moved = final.copy()
            moved[i] = b
            assert partition_objective(graph, moved, k, gamma) >= best - 2 * MOVE_MARGIN


def _fit(X, k, **params):
    return PRCut(n_clusters=k, random_state=0, device="cpu", **params).fit(X)


def test_the_default_fit_of_a_small_table_has_no_network():
    X, y = make_blobs(400, centers=[[0, 0], [3, 0], [0, 3]], cluster_std=0.7, random_state=0)
    model = _fit(X, 3, keep_components=False)
    assert model.solver_ == "graph"
    assert not hasattr(model, "coefs_") and isinstance(model.X_fit_, np.ndarray)
    assert model.n_iter_ == model.loss_curve_.size >= 1
    assert adjusted_rand_score(y, model.labels_) > 0.8  # k-means: 0.89
    np.testing.assert_array_equal(model.predict(X), model.labels_)
    proba = model.predict_proba(X[:50] + 0.1)
    np.testing.assert_allclose(proba.sum(1), 1.0)
    assert model.transform(X[:5].astype(np.float32)).dtype == np.float32
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(again.predict(X + 0.05), model.predict(X + 0.05))
    network = _fit(X, 3, solver="network")
    assert network.solver_ == "network" and not hasattr(network, "X_fit_")
    # a refit on the other path keeps only its own attributes
    assert not hasattr(network.set_params(solver="graph").fit(X), "coefs_")


@pytest.mark.filterwarnings("ignore:The affinity graph has 2 connected components:UserWarning")
def test_new_samples_take_their_neighbours_cluster():
    X, _ = make_blobs(300, centers=[[0, 0], [10, 0]], cluster_std=1.0, random_state=0)
    model = _fit(X, 2, keep_components=False)
    left, right = model.predict([[-0.5, 0.3], [10.4, -0.2]])
    assert left == model.labels_[np.argmin(X[:, 0])]
    assert right == model.labels_[np.argmax(X[:, 0])]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # max_iter=5
def test_the_path_is_chosen_by_size_and_by_what_only_a_network_reads(monkeypatch):
    X, _ = make_blobs(200, centers=3, random_state=1)
    monkeypatch.setattr(_settings, "GRAPH_SOLVER_MAX_SAMPLES", 199)
    assert _fit(X, 3, max_iter=5).solver_ == "network"
    monkeypatch.setattr(_settings, "GRAPH_SOLVER_MAX_SAMPLES", 200)
    assert _fit(X, 3).solver_ == "graph"
    assert _fit(X, 3, init="random", max_iter=5).solver_ == "network"
    assert PRCut(3, max_iter=5, random_state=0).fit(X, graph_input=X[:, :1]).solver_ == "network"


@pytest.mark.parametrize("params, named", [
    (dict(init="random"), "init='random'"),
    (dict(affinity="precomputed"), "affinity='precomputed'"),
])
def test_the_graph_path_refuses_what_only_the_network_has(params, named):
    X, _ = make_blobs(60, centers=2, random_state=0)
    if params.get("affinity") == "precomputed":
        X = knn_affinity(X, 5).toarray()
    with pytest.raises(ValueError, match=f"solver='graph' .*{named} needs the network"):
        _fit(X, 2, solver="graph", **params)


def test_too_few_sweeps_warn_and_all_are_counted():
    X, _ = make_blobs(500, centers=5, cluster_std=2.5, random_state=3)
    converged = _fit(X, 5, keep_components=False)
    assert converged.n_iter_ >= 2  # the descent moved samples
    with pytest.warns(ConvergenceWarning, match="max_iter=1 sweeps") as record:
        model = _fit(X, 5, keep_components=False, max_iter=1)
    assert model.n_iter_ == 1 and model.loss_curve_.shape == (1,)
    assert record[0].filename == __file__  # the caller's line


def test_copies_share_their_cluster():
    X, _ = make_blobs(200, centers=3, cluster_std=2.0, random_state=2)
    X = np.vstack([X, X[:40], X[:40]])
    model = _fit(X, 3, keep_components=False)
    for copy in (200, 240):
        np.testing.assert_array_equal(model.labels_[copy:copy + 40], model.labels_[:40])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # identical samples
        identical = _fit(np.ones((20, 3)), 3, n_neighbors=4)
    assert identical.n_clusters_ == 1


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="the Clustering Benchmarks suite is absent")
@pytest.mark.parametrize("battery, name, least", [
    # the tree's partition, whose objective is lower: the spectral start's ARI 0.39
    ("sipu", "flame", 0.9),
    # the spectral start (0.68), the tree (0.81), descended
    ("fcps", "engytime", 0.8),
])
def test_the_tree_start_where_its_objective_is_clearly_lower(battery, name, least):
    X, y, k = load_benchmark(SHARED_DATA, battery, name)
    assert adjusted_rand_score(y, _fit(X, k).labels_) >= least

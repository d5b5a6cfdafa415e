"""The stability of a graph's partitions (``_graphcut._stability``), the criterion of
``n_clusters='auto'`` on images: the agreement of k-means runs on the graph's
spectral embedding at each candidate number of clusters."""

import io
import itertools
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from sklearn.metrics import adjusted_rand_score

from skdiffclust._graphcut._count import count_clusters, stands_out

torch = pytest.importorskip("torch", reason="the embedding is computed with torch")
pytestmark = pytest.mark.torch

from skdiffclust._graphcut._graph import (  # noqa: E402
    affinity_from_neighbors, shared_neighbor_graph)
from skdiffclust._graphcut._stability import (  # noqa: E402
    STABILITY_RUNS, mean_pairwise_ari, partition_stability)


@given(st.lists(st.lists(st.integers(0, 4), min_size=12, max_size=12), min_size=2,
                max_size=5))
@settings(max_examples=60, deadline=None)
def test_the_mean_pairwise_ari_is_scikit_learns(labellings):
    partitions = [np.unique(np.array(labels), return_inverse=True)[1]
                  for labels in labellings]
    expected = np.mean([adjusted_rand_score(a, b)
                        for a, b in itertools.combinations(partitions, 2)])
    assert mean_pairwise_ari(partitions) == pytest.approx(expected, abs=1e-12)


def _blobs_graph(n_blobs, per_blob=60, seed=0):
    """The symmetric 10-NN graph of Gaussian blobs in 8-D, their centres 8 apart
    on the axes, joined by a few bridging points (one connected component)."""
    from sklearn.neighbors import NearestNeighbors

    rng = np.random.default_rng(seed)
    centres = 8.0 / np.sqrt(2.0) * np.eye(n_blobs, 8)
    X = np.concatenate([c + rng.normal(size=(per_blob, 8)) for c in centres])
    bridges = np.linspace(centres[:-1], centres[1:], 6)[1:-1].reshape(-1, 8)
    X = np.concatenate([X, bridges])
    _, neighbours = NearestNeighbors(n_neighbors=11).fit(X).kneighbors(X)
    graph = affinity_from_neighbors(np.zeros((len(X), 10)), neighbours[:, 1:])
    return shared_neighbor_graph(graph)


@pytest.mark.parametrize("n_blobs", [3, 6])
def test_the_number_of_blobs_is_the_most_stable(n_blobs):
    graph = _blobs_graph(n_blobs)
    candidates = np.arange(2, 13)
    stability = partition_stability(graph, candidates, device="cpu", seed=3)
    assert candidates[np.argmax(stability)] == n_blobs
    assert stability[n_blobs - 2] > 0.95
    assert np.all((stability >= -0.5) & (stability <= 1.0))


def test_the_measure_does_not_depend_on_the_threads_of_the_graphs_products():
    graph = _blobs_graph(4)
    candidates = np.arange(2, 9)
    one = partition_stability(graph, candidates, device="cpu", seed=5, n_threads=1)
    two = partition_stability(graph, candidates, device="cpu", seed=5, n_threads=2)
    np.testing.assert_array_equal(one, two)


def test_the_measure_is_the_same_in_a_process_started_with_one_thread():
    """OpenMP and BLAS threads set when the process starts change nothing."""
    graph = _blobs_graph(4)
    candidates = np.arange(2, 9)
    here = partition_stability(graph, candidates, device="cpu", seed=5, n_threads=2)
    code = ("import sys, numpy as np; from tests.prcut.test_prcut_stability import "
            "_blobs_graph; from skdiffclust._graphcut._stability import partition_stability; "
            "s = partition_stability(_blobs_graph(4), np.arange(2, 9), device='cpu', "
            "seed=5, n_threads=1); np.save(sys.stdout.buffer, s)")
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MKL_NUM_THREADS="1", NUMBA_NUM_THREADS="1")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True,
                         env=env, cwd=root).stdout
    np.testing.assert_array_equal(np.load(io.BytesIO(out)), here)


def test_runs_partition_a_sample_of_large_graphs(monkeypatch):
    """Above the sample's size, the runs partition a seeded sample of the rows."""
    import skdiffclust._graphcut._stability as stability_module

    graph = _blobs_graph(3, per_blob=100)
    seen = []
    run = stability_module._kmeans

    def spy(directions, n_clusters, seed):
        seen.append(directions.shape)
        return run(directions, n_clusters, seed)

    monkeypatch.setattr(stability_module, "_kmeans", spy)
    monkeypatch.setattr(stability_module, "STABILITY_SAMPLE", 120)
    stability = partition_stability(graph, np.array([2, 3, 4]), device="cpu", seed=0)
    assert {shape[0] for shape in seen} == {120}
    assert [shape[1] for shape in seen[::STABILITY_RUNS]] == [4, 6, 8]
    assert np.argmax(stability) == 1


def test_the_graph_measures_are_those_of_a_partition_of_every_sample():
    """Three blobs: their partition cuts only the bridges; noise is cut through."""
    from sklearn.neighbors import NearestNeighbors

    from skdiffclust._graphcut._stability import PartitionStability, graph_measures

    graph = _blobs_graph(3)
    measures = PartitionStability(graph, 4, device="cpu", seed=0)(np.array([2, 3, 4]))
    assert measures.cut[1] < 0.02 and measures.modularity[1] > 0.6
    labels = np.concatenate([np.repeat([0, 1, 2], 60), np.zeros(graph.shape[0] - 180, int)])
    dense = graph.toarray()
    within = sum(dense[np.ix_(labels == c, labels == c)].sum() for c in range(3))
    shares = np.array([dense[labels == c].sum() for c in range(3)]) / dense.sum()
    expected = (within / dense.sum() - np.sum(shares ** 2),
                (1 - within / dense.sum()) / (1 - np.sum(shares ** 2)))
    np.testing.assert_allclose(graph_measures(graph, labels, 3), expected)
    X = np.random.default_rng(0).normal(size=(400, 8))
    _, neighbours = NearestNeighbors(n_neighbors=11).fit(X).kneighbors(X)
    noise = shared_neighbor_graph(affinity_from_neighbors(np.zeros((400, 10)),
                                                          neighbours[:, 1:]))
    assert PartitionStability(noise, 2, device="cpu", seed=0)(np.array([2])).cut[0] > 0.1


class KnownStability:
    """A graph of given components whose candidates have given stabilities,
    modularities and relative cuts (0.05 unless given)."""

    def __init__(self, stability, components, modularity=None, cut=None):
        from skdiffclust._graphcut._stability import CandidateMeasures

        size = len(stability)
        self.measures = CandidateMeasures(
            np.asarray(stability, dtype=np.float64),
            np.asarray(modularity if modularity is not None else np.zeros(size)),
            np.asarray(cut if cut is not None else np.full(size, 0.05)))
        self.components = np.asarray(components)
        self.asked = []

    def stability(self, candidates, shared_neighbours):
        self.asked.append(shared_neighbours)
        return self.measures

    def spectrum(self, n_values, shared_neighbours):
        """A spectrum without a clear gap (the eigengap's fallback)."""
        return np.linspace(0.0, 1.0, n_values)


def test_the_most_stable_candidate_is_chosen_and_stands_out_or_not():
    one_component = np.zeros(100, dtype=np.int64)
    graph = KnownStability([0.5, 0.9, 0.8, 0.6], one_component)
    count = count_clusters(5, graph, shared_neighbours=True, criterion="stability")
    assert count.n_clusters == 3 and count.clear
    np.testing.assert_array_equal(count.candidates, [2, 3, 4, 5])
    np.testing.assert_array_equal(count.scores, [0.5, 0.9, 0.8, 0.6])
    assert graph.asked == [True]
    assert stands_out(0.9, 0.05) and not stands_out(0.6, 0.05)
    assert not stands_out(1.0, 0.2)  # reproducible, but a cut through the middle


def test_where_no_candidate_stands_out_the_modularity_decides():
    one_component = np.zeros(100, dtype=np.int64)
    modularity = [0.3, 0.5, 0.7, 0.6]
    unclear = count_clusters(5, KnownStability([0.5, 0.6, 0.55, 0.4], one_component,
                                               modularity), shared_neighbours=True,
                             criterion="stability")
    assert unclear.n_clusters == 4 and not unclear.clear
    np.testing.assert_array_equal(unclear.modularity, modularity)
    # the most stable cuts as much as chance would: not clear either
    cut_through = count_clusters(5, KnownStability([1.0, 0.6, 0.55, 0.4], one_component,
                                                   modularity, cut=[0.3, 0.1, 0.1, 0.1]),
                                 shared_neighbours=True, criterion="stability")
    assert cut_through.n_clusters == 4 and not cut_through.clear


def test_large_components_are_coarse_clusters_to_the_stability():
    """Large components decide the eigengap's count, not the stability's (the
    partitions may cut them further), unless the stability is unclear and the
    eigengap decides; more components than candidates: the largest candidate."""
    two = np.repeat([0, 1], 50)
    count = count_clusters(5, KnownStability([0.1, 0.9, 0.2, 0.3], two),
                           shared_neighbours=True, criterion="stability")
    assert count.n_clusters == 3 and count.clear
    unclear = count_clusters(5, KnownStability([0.1, 0.6, 0.2, 0.3], two),
                             shared_neighbours=True, criterion="stability",
                             unclear="eigengap")
    assert unclear.n_clusters == 2 and not unclear.clear
    crowded = np.arange(100) % 7  # seven components of 14 or 15
    count = count_clusters(5, KnownStability([0.1, 0.9, 0.2, 0.3], crowded),
                           shared_neighbours=True, criterion="stability")
    assert count.n_clusters == 5 and count.clear

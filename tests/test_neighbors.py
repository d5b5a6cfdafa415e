"""The kNN search behind every graph of the package (``skdiffclust._neighbors``)."""

import sys

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_blobs
from sklearn.neighbors import NearestNeighbors

from skdiffclust import _neighbors
from skdiffclust._neighbors import kneighbors, recall


def _int64_indices(X):
    X = sp.csr_matrix(X)
    X.indices = X.indices.astype(np.int64)
    X.indptr = X.indptr.astype(np.int64)
    return X


def _blobs(n_samples, seed=0):
    # the hard case: 10 isotropic blobs in 32 dimensions, overlapping
    X, _ = make_blobs(n_samples, 32, centers=10, cluster_std=6, random_state=seed)
    return (X - X.mean(0)) / X.std()


@pytest.mark.parametrize("kind", ["dense", "csr", "csr-int64", "csr-mixed"])
def test_the_exact_search_is_scikit_learns(kind):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 6))
    X[rng.random(X.shape) < 0.5] = 0.0
    data = X
    if kind != "dense":
        data = sp.csr_matrix(X)
        if kind == "csr-int64":
            data = _int64_indices(data)
        elif kind == "csr-mixed":  # only the indices set to int64
            data.indices = data.indices.astype(np.int64)
    distances, indices = kneighbors(data, 7, algorithm="exact")
    reference = X if kind == "dense" else sp.csr_matrix(X)  # int32 indices
    expected_distances, expected = NearestNeighbors(n_neighbors=7).fit(
        reference).kneighbors()
    np.testing.assert_array_equal(indices, expected)
    np.testing.assert_allclose(distances, expected_distances, rtol=1e-12)
    assert indices.dtype == np.int64 and distances.dtype == np.float64


def test_small_data_are_searched_exactly_by_auto():
    X = np.random.default_rng(1).normal(size=(300, 4))
    for algorithm in ("auto", "exact"):
        _, indices = kneighbors(X, 5, algorithm=algorithm, random_state=0)
        np.testing.assert_array_equal(
            indices, NearestNeighbors(n_neighbors=5).fit(X).kneighbors()[1])


@pytest.mark.parametrize("algorithm, n_neighbors, match", [
    ("brute", 3, "algorithm must be one of 'auto', 'exact', 'approximate'"),
    ("auto", 0, "n_neighbors=0 must be between 1 and n_samples - 1 = 9"),
    ("exact", 10, "n_neighbors=10 must be between 1 and n_samples - 1 = 9"),
])
def test_bad_parameters_are_named(algorithm, n_neighbors, match):
    with pytest.raises(ValueError, match=match):
        kneighbors(np.zeros((10, 2)), n_neighbors, algorithm=algorithm)


def test_without_self_drops_the_sample_or_else_its_farthest_candidate():
    found = np.array([[0, 4, 2], [3, 2, 5], [7, 1, 2]])
    np.testing.assert_array_equal(_neighbors._without_self(found, 2),
                                  [[4, 2], [3, 2], [7, 1]])


@pytest.mark.parametrize("block_rows", [None, 1, 7, 1000])
def test_blockwise_torch_search_finds_the_exact_neighbours(block_rows):
    # the CUDA fit builds its graph with this search; any block size, same result
    torch = pytest.importorskip("torch")
    X = np.random.default_rng(0).normal(size=(300, 5)) + 1e3  # a large offset too
    distances, neighbours = _neighbors.torch_kneighbors(X, 6, torch.device("cpu"),
                                                        block_rows=block_rows)
    expected_distances, expected = NearestNeighbors(n_neighbors=6).fit(X).kneighbors()
    np.testing.assert_array_equal(np.sort(neighbours, 1), np.sort(expected, 1))
    np.testing.assert_allclose(distances, expected_distances, rtol=1e-9)


def test_torch_blocks_grow_on_cuda_within_the_free_memory(monkeypatch):
    torch = pytest.importorskip("torch")
    rows = _neighbors._knn_block_rows
    assert rows(1_000_000, torch.device("cpu")) == 67
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (80 << 30, 80 << 30))
    assert rows(1_000_000, torch.device("cuda")) == 536
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (1 << 30, 80 << 30))
    assert rows(1_000_000, torch.device("cuda")) == 67
    assert rows(50, torch.device("cuda")) == 50


def test_the_approximate_search_refuses_sparse_input():
    X = sp.random(50, 8, density=0.3, format="csr", random_state=0)
    with pytest.raises(TypeError, match="approximate neighbour search needs dense"):
        kneighbors(X, 3, algorithm="approximate")


def test_approximate_recall_at_10_is_at_least_0_9_on_20000_points():
    # the acceptance test, on its hard case (isotropic blobs, 32 dimensions)
    X = _blobs(20_000)
    distances, indices = kneighbors(X, 10, algorithm="approximate", random_state=0)
    rows = np.random.default_rng(0).choice(X.shape[0], 2_000, replace=False)
    _, exact = NearestNeighbors(n_neighbors=11).fit(X).kneighbors(X[rows])
    exact = np.array([r[r != i][:10] for i, r in zip(rows, exact)])
    assert recall(indices[rows], exact) >= 0.9
    assert not np.any(indices == np.arange(X.shape[0])[:, None])  # self excluded
    np.testing.assert_allclose(  # exact distances of the pairs found, increasing
        distances, np.linalg.norm(X[:, None] - X[indices], axis=2), rtol=1e-12)
    assert np.all(np.diff(distances, axis=1) >= 0)


def test_approximate_search_is_deterministic_whatever_the_threads():
    X = _blobs(3_000, seed=1)
    first = kneighbors(X, 10, algorithm="approximate", n_jobs=1, random_state=3)
    again = kneighbors(X, 10, algorithm="approximate", n_jobs=1, random_state=3)
    threads = kneighbors(X, 10, algorithm="approximate", n_jobs=2, random_state=3)
    for other in (again, threads):
        np.testing.assert_array_equal(first[1], other[1])
        np.testing.assert_array_equal(first[0], other[0])


def test_the_same_random_state_gives_the_same_graph_in_another_process():
    # a fresh process with one numba thread and one BLAS thread against this one
    import os
    import subprocess

    X = _blobs(4_000, seed=2)
    distances, indices = kneighbors(X, 10, algorithm="approximate", n_jobs=2,
                                    random_state=7)
    code = ("import sys, numpy as np; from sklearn.datasets import make_blobs; "
            "from skdiffclust._neighbors import kneighbors; "
            "X, _ = make_blobs(4000, 32, centers=10, cluster_std=6, random_state=2); "
            "X = (X - X.mean(0)) / X.std(); "
            "d, i = kneighbors(X, 10, algorithm='approximate', n_jobs=1, random_state=7); "
            "np.save(sys.stdout.buffer, np.concatenate([d.ravel(), i.ravel()]))")
    env = dict(os.environ, NUMBA_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True,
                         env=env).stdout
    import io

    other = np.load(io.BytesIO(out))
    np.testing.assert_array_equal(other[:distances.size], distances.ravel())
    np.testing.assert_array_equal(other[distances.size:], indices.ravel())


def test_probing_every_cell_finds_the_exact_neighbours():
    from skdiffclust import _ivf

    X = np.random.default_rng(6).normal(size=(2_500, 20))
    n_cells = _ivf.cell_count(X.shape[0])
    distances, indices = _neighbors.approximate_kneighbors(X, 12, n_probe=n_cells, seed=1)
    expected_distances, expected = NearestNeighbors(n_neighbors=12).fit(X).kneighbors()
    np.testing.assert_array_equal(indices, expected)
    np.testing.assert_allclose(distances, expected_distances, rtol=1e-12)


def test_duplicates_filling_a_cell_beyond_one_chunk_are_searched_whole():
    # 2,500 copies of one sample make one cell of more rows than a chunk and a
    # product's block of columns, and empty the other centres drawn among them
    from skdiffclust import _ivf

    rng = np.random.default_rng(8)
    X = np.vstack([np.tile(rng.normal(size=(1, 5)), (2_500, 1)),
                   rng.normal(size=(600, 5))])
    assert 2_500 > max(_ivf.CHUNK_ROWS, _ivf.BLOCK_COLUMNS)
    distances, indices = kneighbors(X, 7, algorithm="approximate", random_state=0)
    assert np.all(distances[:2_500] == 0)
    assert np.all(indices[:2_500] < 2_500)
    assert not np.any(indices == np.arange(X.shape[0])[:, None])
    expected, _ = NearestNeighbors(n_neighbors=7).fit(X).kneighbors()
    assert np.mean(np.isclose(distances, expected, rtol=1e-12)) > 0.95


def test_identical_samples_are_each_others_neighbours_at_distance_zero():
    X = np.full((300, 4), 2.5)  # every feature constant
    distances, indices = kneighbors(X, 5, algorithm="approximate", random_state=0)
    assert np.all(distances == 0)
    assert all(np.unique(row).size == 5 and i not in row for i, row in enumerate(indices))


def test_approximate_recall_with_many_features_and_150_neighbours():
    # MNIST-like: clustered data in 300 dimensions, k = 150
    X, _ = make_blobs(6_000, 300, centers=20, cluster_std=8.0, random_state=3)
    _, indices = kneighbors(X, 150, algorithm="approximate", random_state=0)
    rows = np.random.default_rng(1).choice(X.shape[0], 300, replace=False)
    exact = NearestNeighbors(n_neighbors=150).fit(X).kneighbors(X[rows], 151,
                                                                return_distance=False)
    exact = np.array([r[r != i][:150] for i, r in zip(rows, exact)])
    assert recall(indices[rows], exact) >= 0.9


def test_auto_searches_approximately_above_the_threshold(monkeypatch):
    calls = []
    search = _neighbors._approximate
    monkeypatch.setattr(_neighbors, "_approximate",
                        lambda *args, **kwargs: calls.append(1) or search(*args, **kwargs))
    monkeypatch.setattr(_neighbors, "AUTO_EXACT_MAX_SAMPLES", 500)
    monkeypatch.setattr(_neighbors, "EXACT_COST_FACTOR", 0.0)  # exact never affordable
    X = np.random.default_rng(4).normal(size=(501, 3))
    kneighbors(X[:500], 5)
    assert not calls
    kneighbors(X, 5, random_state=0)
    kneighbors(sp.csr_matrix(X), 5)  # sparse: exact
    assert len(calls) == 1


def test_auto_searches_many_features_exactly_while_affordable():
    # the measured costs: MNIST's 60,000 x 784 pixels exactly (k=150 and 10),
    # 70,000 x 32 blobs and a million images approximately, anything up to
    # 20,000 samples exactly
    assert _neighbors.exact_is_affordable(60_000, 784, 150)
    assert _neighbors.exact_is_affordable(60_000, 784, 10)
    assert not _neighbors.exact_is_affordable(70_000, 32, 10)
    assert not _neighbors.exact_is_affordable(1_000_000, 784, 10)
    assert _neighbors.exact_is_affordable(20_000, 2, 10)


@pytest.mark.parametrize("n_threads", [1, 2])
def test_the_blockwise_cpu_search_is_exact_whatever_the_threads(n_threads):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    X = rng.normal(size=(700, 40))
    X[:, 5] = 2.0  # a constant feature, left out of the search
    found = _neighbors.torch_kneighbors(X, 8, torch.device("cpu"), block_rows=64,
                                        n_threads=n_threads)
    single = _neighbors.torch_kneighbors(X, 8, torch.device("cpu"), block_rows=64)
    expected_distances, expected = NearestNeighbors(n_neighbors=8).fit(X).kneighbors()
    np.testing.assert_array_equal(found[1], expected)
    np.testing.assert_allclose(found[0], expected_distances, rtol=1e-12)
    np.testing.assert_array_equal(found[1], single[1])
    np.testing.assert_array_equal(found[0], single[0])


def test_rows_whose_probed_cells_hold_too_few_samples_are_searched_exactly():
    X = np.random.default_rng(5).normal(size=(400, 3))
    # 10 cells of about 40 samples, one probed: 100 neighbours fit in none
    distances, indices = _neighbors.approximate_kneighbors(X, 100, n_probe=1, seed=0)
    assert not np.any(indices == np.arange(400)[:, None])
    assert all(np.unique(row).size == 100 for row in indices)
    expected, _ = NearestNeighbors(n_neighbors=100).fit(X).kneighbors()
    np.testing.assert_allclose(distances, expected, rtol=1e-12)


def test_prcut_finds_the_same_partition_on_the_approximate_graph():
    pytest.importorskip("torch")
    from sklearn.metrics import adjusted_rand_score

    from skdiffclust import PRCut

    X, _ = make_blobs(3_000, 8, centers=4, cluster_std=4.0, random_state=0)  # connected
    fits = {algorithm: PRCut(n_clusters=4, neighbors_algorithm=algorithm, device="cpu",
                             random_state=0).fit(X)
            for algorithm in ("exact", "approximate")}
    assert adjusted_rand_score(fits["exact"].labels_, fits["approximate"].labels_) > 0.99
    # score builds its graph the same way
    assert np.isfinite(fits["approximate"].score(X))


def test_prcut_names_a_bad_neighbors_algorithm():
    pytest.importorskip("torch")
    from skdiffclust import PRCut

    with pytest.raises(ValueError, match="neighbors_algorithm"):
        PRCut(neighbors_algorithm="brute").fit(np.zeros((10, 2)))


def test_importing_the_package_imports_neither_torch_nor_the_indexes():
    import subprocess

    code = ("import sys, skdiffclust, skdiffclust._neighbors; "
            "print('torch' in sys.modules, 'skdiffclust._ivf' in sys.modules, "
            "'skdiffclust._ivf_torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == ["False", "False", "False"]

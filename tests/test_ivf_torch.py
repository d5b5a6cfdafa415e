"""The inverted-file index in torch (``skdiffclust._ivf_torch``), the approximate
search of ``kneighbors`` on CUDA.

Run here on the CPU device (the same code as on CUDA); the routing of
``kneighbors`` to it on CUDA is checked with the search stood in for, and the
CUDA cases at the end are skipped without a CUDA device.
"""

import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.neighbors import NearestNeighbors

from skdiffclust import _neighbors
from skdiffclust._neighbors import approximate_kneighbors, kneighbors, recall

torch = pytest.importorskip("torch", reason="the device index is written in torch")

from skdiffclust import _ivf_torch  # noqa: E402  (after torch's check)
from skdiffclust._ivf_torch import device_ivf_kneighbors  # noqa: E402

pytestmark = pytest.mark.torch
CPU = torch.device("cpu")
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

# recall@10 on the 32-dimensional blobs: measured 0.9998 at 20,000 samples (the
# numba index: 0.9995) and 0.986 at 200,000 (the numba index: 0.986)
RECALL_AT_20_000 = 0.97
RECALL_AT_200_000 = 0.95


def _blobs(n_samples, seed=0):
    # the hard case of test_neighbors: 10 isotropic blobs in 32 dimensions, overlapping
    X, _ = make_blobs(n_samples, 32, centers=10, cluster_std=6, random_state=seed)
    return (X - X.mean(0)) / X.std()


def _points(X):
    """The float32 rows the index is given (centred, as ``kneighbors`` gives them)."""
    return _neighbors._centred_float32(X)[1]


def _exact(X, rows, n_neighbors):
    """The exact neighbours of ``rows``, each row itself left out."""
    _, found = NearestNeighbors(n_neighbors=n_neighbors + 1).fit(X).kneighbors(X[rows])
    return np.array([r[r != i][:n_neighbors] for i, r in zip(rows, found)])


def test_recall_at_10_on_20000_blobs_matches_the_numba_index():
    X = _blobs(20_000)
    distances, indices = approximate_kneighbors(X, 10, seed=0, device=CPU)
    rows = np.random.default_rng(0).choice(X.shape[0], 2_000, replace=False)
    exact = _exact(X, rows, 10)
    found = recall(indices[rows], exact)
    assert found >= RECALL_AT_20_000
    numba = approximate_kneighbors(X, 10, seed=0)[1]
    assert found >= recall(numba[rows], exact) - 0.01
    assert not np.any(indices == np.arange(X.shape[0])[:, None])  # self excluded
    assert indices.min() >= 0 and indices.max() < X.shape[0]
    assert all(np.unique(row).size == 10 for row in indices[rows])
    np.testing.assert_allclose(  # exact distances of the pairs found, increasing
        distances, np.linalg.norm(X[:, None] - X[indices], axis=2), rtol=1e-12)
    assert np.all(np.diff(distances, axis=1) >= 0)


def test_well_separated_clusters_are_found_whole():
    # 40 clusters far apart: each sample's neighbours are its cluster's (tighter
    # clusters further out lose neighbours to float32's rounding of the products,
    # in the numba index alike: 0.96 at cluster_std=0.1 in (-100, 100))
    X, _ = make_blobs(4_000, 8, centers=40, cluster_std=1.0, center_box=(-50, 50),
                      random_state=2)
    rows = np.arange(0, X.shape[0], 7)
    _, indices = approximate_kneighbors(X, 15, seed=1, device=CPU)
    assert recall(indices[rows], _exact(X, rows, 15)) >= 0.999


def test_the_raw_lists_are_row_numbers_other_than_the_row():
    X = _blobs(3_000, seed=1)
    found = device_ivf_kneighbors(_points(X), 12, seed=4, device=CPU)
    assert found.shape == (3_000, 12) and found.dtype == np.int64
    assert found.min() >= 0 and found.max() < 3_000  # every list complete
    assert not np.any(found == np.arange(3_000)[:, None])
    assert all(np.unique(row).size == 12 for row in found)


def test_the_same_seed_gives_the_same_neighbours():
    points = _points(_blobs(5_000, seed=2))
    first = device_ivf_kneighbors(points, 10, seed=7, device=CPU)
    np.testing.assert_array_equal(first, device_ivf_kneighbors(points, 10, seed=7,
                                                               device=CPU))
    X = _blobs(5_000, seed=2)
    for one, other in zip(approximate_kneighbors(X, 10, seed=7, device=CPU),
                          approximate_kneighbors(X, 10, seed=7, device="cpu")):
        np.testing.assert_array_equal(one, other)


def test_tiny_data_with_k_near_n_fall_back_to_the_exact_search():
    # 4 cells of about 40 samples: probing one, 150 neighbours fit in none
    X = np.random.default_rng(5).normal(size=(160, 3))
    raw = device_ivf_kneighbors(_points(X), 150, seed=0, device=CPU, n_probe=1)
    assert np.all((raw < 0).any(1))  # left incomplete: -1 where none was found
    assert not np.any(raw == np.arange(160)[:, None])
    distances, indices = approximate_kneighbors(X, 150, n_probe=1, seed=0, device=CPU)
    expected, _ = NearestNeighbors(n_neighbors=150).fit(X).kneighbors()
    np.testing.assert_allclose(distances, expected, rtol=1e-12)
    assert not np.any(indices == np.arange(160)[:, None])
    # every cell probed: 158 of the 159 others found by the index itself
    complete = device_ivf_kneighbors(_points(X), 158, seed=0, device=CPU)
    assert complete.min() >= 0 and not np.any(complete == np.arange(160)[:, None])


def test_duplicated_rows_find_their_copies():
    base = np.random.default_rng(6).normal(size=(600, 5))
    X = np.repeat(base, 4, axis=0)  # each row 4 times
    distances, indices = approximate_kneighbors(X, 3, seed=0, device=CPU)
    np.testing.assert_array_equal(distances, 0.0)  # its 3 copies
    np.testing.assert_array_equal(indices // 4, np.repeat(np.arange(2_400) // 4, 3).reshape(-1, 3))
    assert not np.any(indices == np.arange(2_400)[:, None])


def test_constant_features_are_left_out_and_all_constant_data_searched():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(2_000, 6))
    X[:, [1, 4]] = 3.5
    distances, indices = approximate_kneighbors(X, 8, seed=0, device=CPU)
    expected, _ = NearestNeighbors(n_neighbors=8).fit(X).kneighbors()
    np.testing.assert_allclose(distances, expected, rtol=1e-9)
    same = np.full((300, 4), 2.0)  # every feature constant: every distance 0
    distances, indices = approximate_kneighbors(same, 5, seed=0, device=CPU)
    np.testing.assert_array_equal(distances, 0.0)
    assert not np.any(indices == np.arange(300)[:, None])
    assert all(np.unique(row).size == 5 for row in indices)


def test_bad_points_and_counts_are_refused():
    points = _points(_blobs(200))
    with pytest.raises(ValueError, match="positive integer"):
        device_ivf_kneighbors(points, 0, seed=0, device=CPU)
    bad = points.copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match="finite"):
        device_ivf_kneighbors(bad, 5, seed=0, device=CPU)
    with pytest.raises(TypeError, match="float32"):
        device_ivf_kneighbors(points.astype(np.float64), 5, seed=0, device=CPU)


def test_blocks_fit_within_the_free_cuda_memory(monkeypatch):
    cuda = torch.device("cuda")
    assert _ivf_torch._block_entries(CPU) == _ivf_torch.BLOCK_ENTRIES
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (80 << 30, 80 << 30))
    assert _ivf_torch._block_entries(cuda) == _ivf_torch.BLOCK_ENTRIES
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (4 << 30, 80 << 30))
    assert _ivf_torch._block_entries(cuda) == 1 << 26  # a sixteenth, in float32
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (64 << 20, 80 << 30))
    assert _ivf_torch._block_entries(cuda) == _ivf_torch.MIN_BLOCK_ENTRIES


def test_small_blocks_give_the_same_neighbours(monkeypatch):
    points = _points(_blobs(3_000, seed=3))
    whole = device_ivf_kneighbors(points, 10, seed=1, device=CPU)
    # a cell's queries in pieces of a few rows, the centres' search too
    monkeypatch.setattr(_ivf_torch, "BLOCK_ENTRIES", 3_000)
    pieces = device_ivf_kneighbors(points, 10, seed=1, device=CPU)
    # the same up to the rounding of products of other shapes
    assert recall(pieces, whole) >= 0.99


def test_the_cpu_routing_is_unchanged():
    # above 20,000 samples at 32 features 'auto' is the numba index, on any CPU device
    X = _blobs(21_000, seed=4)
    assert not _neighbors.exact_is_affordable(*X.shape, 10)
    numba = approximate_kneighbors(X, 10, seed=_seed(0))
    for device in (None, "cpu", CPU):
        for one, other in zip(kneighbors(X, 10, device=device, random_state=0), numba):
            np.testing.assert_array_equal(one, other)


def _seed(random_state):
    from skdiffclust._utils._random import derive_seeds

    return derive_seeds(random_state, 1)[0]


@pytest.fixture
def searches_on_a_stand_in_device(monkeypatch):
    """'cuda' searched on the CPU: which search ``kneighbors`` calls, and on what."""
    calls = []

    def index(points, n_neighbors, *, seed, device, n_probe=None):
        calls.append(("index", str(device)))
        return device_ivf_kneighbors(points, n_neighbors, seed=seed, device=CPU,
                                     n_probe=n_probe)

    def exact(X, n_neighbors, device, **kwargs):
        calls.append(("exact", str(device)))
        return _neighbors._scikit_learn_search(X, n_neighbors)

    monkeypatch.setattr(_ivf_torch, "device_ivf_kneighbors", index)
    monkeypatch.setattr(_neighbors, "_torch_search", exact)
    return calls


def test_cuda_searches_with_the_device_index_where_exact_is_too_costly(
        searches_on_a_stand_in_device):
    X = _blobs(21_000, seed=5)
    kneighbors(X, 10, device="cuda", random_state=0)
    kneighbors(X[:3_000], 10, device="cuda", algorithm="approximate", random_state=0)
    kneighbors(X[:3_000], 10, device="cuda", random_state=0)  # affordable: exact
    kneighbors(X[:3_000], 10, device="cuda", algorithm="exact")
    assert searches_on_a_stand_in_device == [("index", "cuda"), ("index", "cuda"),
                                             ("exact", "cuda"), ("exact", "cuda")]


def test_cuda_stays_exact_while_affordable(searches_on_a_stand_in_device, monkeypatch):
    # as MNIST's 60,000 x 784 pixels (affordable): many features, above the samples
    # 'auto' always searches exactly (here lowered, to keep the test small)
    assert _neighbors.exact_is_affordable(60_000, 784, 10)
    monkeypatch.setattr(_neighbors, "AUTO_EXACT_MAX_SAMPLES", 1_000)
    X = np.random.default_rng(0).normal(size=(3_000, 784))
    assert _neighbors.exact_is_affordable(*X.shape, 10)
    kneighbors(X, 10, device="cuda")
    assert searches_on_a_stand_in_device == [("exact", "cuda")]


@CUDA
def test_cuda_auto_uses_the_device_index_on_200000_blobs(monkeypatch):
    calls = []
    real = _ivf_torch.device_ivf_kneighbors

    def spy(*args, **kwargs):
        calls.append(str(kwargs["device"]))
        return real(*args, **kwargs)

    monkeypatch.setattr(_ivf_torch, "device_ivf_kneighbors", spy)
    X = _blobs(200_000)
    _, indices = kneighbors(X, 10, device="cuda", random_state=0)
    assert calls == ["cuda"]
    rows = np.random.default_rng(0).choice(X.shape[0], 2_000, replace=False)
    assert recall(indices[rows], _exact(X, rows, 10)) >= RECALL_AT_200_000


@CUDA
def test_prcut_on_cuda_finds_the_cpu_partition_of_200000_blobs():
    from sklearn.metrics import adjusted_rand_score

    from skdiffclust import PRCut

    X, y = make_blobs(200_000, 32, centers=10, cluster_std=6, random_state=0)
    scores = [adjusted_rand_score(y, PRCut(n_clusters=10, device=device,
                                           random_state=0).fit(X).labels_)
              for device in ("cpu", "cuda")]
    assert abs(scores[0] - scores[1]) <= 0.005

"""PRCut reaches the cuts its graph offers, keeps its clusters, and follows conventions."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from sklearn.datasets import make_blobs, make_circles, make_moons
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import adjusted_rand_score
from sklearn.metrics.pairwise import rbf_kernel

from skdiffclust.prcut import PRCut, ratio_cut
from skdiffclust.prcut import _fit as _training
from skdiffclust._graphcut import _spectral
from tests._data import load_benchmark

pytestmark = pytest.mark.torch

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")


def _fit(X, k, **params):
    with warnings.catch_warnings():
        # disconnected graphs; max_iter too small in some tests
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", ConvergenceWarning)
        return PRCut(n_clusters=k, device="cpu", random_state=0, **params).fit(X)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("make", [
    pytest.param(lambda seed: make_moons(600, noise=0.05, random_state=seed), id="moons"),
    pytest.param(lambda seed: make_circles(600, noise=0.05, factor=0.5, random_state=seed),
                 id="circles"),
])
def test_moons_and_circles_are_separated_with_default_settings(make, seed):
    X, y = make(seed)
    assert adjusted_rand_score(y, _fit(X, 2).labels_) >= 0.95


@pytest.mark.parametrize("name", ["twodiamonds", "wingnut"])
def test_balanced_two_cluster_data_are_separated(shared_data, name):
    # one connected graph each; the paper's algorithm gave ARI 0.30 and 0.66
    X, y, k = load_benchmark(shared_data, "fcps", name)
    assert adjusted_rand_score(y, _fit(X, k).labels_) == 1.0


def test_a_disconnected_graph_gives_its_components_whatever_their_sizes():
    X, y = make_blobs([300, 60, 20], centers=[[0, 0], [20, 0], [0, 20]], random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # k components: nothing to warn about
        model = PRCut(n_clusters=3, device="cpu", random_state=0).fit(X)
    assert adjusted_rand_score(y, model.labels_) == 1.0
    assert ratio_cut(model.affinity_matrix_, model.labels_) == 0.0


def test_many_small_clusters_are_all_kept():
    # 15 blobs: the paper's algorithm (random start, gamma=100) returned 10 to 13
    X, y = make_blobs(600, centers=15, cluster_std=0.5, center_box=(-10, 10),
                      random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = PRCut(n_clusters=15, device="cpu", random_state=0).fit(X)
    lost = [w for w in caught if "non-empty clusters" in str(w.message)]
    assert model.n_clusters_ == 15 or lost
    assert model.n_clusters_ == 15
    assert adjusted_rand_score(y, model.labels_) > 0.9


def test_r15_keeps_its_fifteen_clusters(shared_data):
    X, y, k = load_benchmark(shared_data, "sipu", "r15")
    model = _fit(X, k)
    assert model.n_clusters_ == k
    assert adjusted_rand_score(y, model.labels_) > 0.95


def test_init_random_is_the_papers_algorithm(monkeypatch):
    X, _ = make_blobs(100, centers=2, random_state=0)
    calls = []
    for module, name in ((_spectral, "initial_partition"), (_training, "fit_to_partition")):
        original = getattr(module, name)
        monkeypatch.setattr(module, name, _recorded(original, name, calls))
    _fit(X, 2, init="random", max_iter=2)
    assert calls == []  # a random network, no partition to start from
    _fit(X, 2, max_iter=2, solver="network")
    assert calls == ["initial_partition", "fit_to_partition"]
    calls.clear()
    _fit(X, 2, max_iter=2)  # the graph path: the start, and no network
    assert calls == ["initial_partition"]


def _recorded(function, name, calls):
    def wrapper(*args, **kwargs):
        calls.append(name)
        return function(*args, **kwargs)
    return wrapper


def test_training_only_ever_improves_on_the_initial_partition():
    X, _ = make_moons(400, noise=0.08, random_state=3)
    model = _fit(X, 2)
    init = _fit(X, 2, max_iter=1)
    assert model.objective_ <= init.objective_ + 1e-12


def test_score_is_a_silhouette_and_chooses_the_number_of_blobs():
    from sklearn.metrics import silhouette_score

    from skdiffclust._graphcut._graph import graph_measures

    X, _ = make_blobs(240, n_features=4, centers=4, cluster_std=0.5, random_state=3)
    fits = {k: _fit(X, k) for k in (2, 4, 7)}
    assert fits[4].score(X) == pytest.approx(silhouette_score(X, fits[4].labels_))
    assert max(fits, key=lambda k: fits[k].score(X)) == 4
    # on the affinities to the training samples: Barber's bipartite modularity,
    # which on the whole graph is Newman's
    W = fits[4].affinity_matrix_
    precomputed = _fit(W, 4, affinity="precomputed")
    assert precomputed.score(W) == pytest.approx(
        graph_measures(W, precomputed.labels_, 4)[0])


def test_float32_input_gives_the_float64_partition():
    X, _ = make_blobs(300, centers=4, random_state=4)
    single = _fit(X.astype(np.float32), 4)
    double = _fit(X, 4)
    assert adjusted_rand_score(single.labels_, double.labels_) == 1.0
    assert single.predict(X.astype(np.float32)).dtype == np.int64


def test_sparse_features_are_never_densified(monkeypatch):
    X, _ = make_blobs(200, n_features=6, centers=3, random_state=5)
    X[np.abs(X) < 2] = 0.0
    sparse = sp.csr_matrix(X)
    monkeypatch.setattr(sp.csr_matrix, "toarray", _refuse)
    monkeypatch.setattr(sp.csr_matrix, "todense", _refuse)
    labels = _fit(sparse, 3).labels_
    monkeypatch.undo()
    assert adjusted_rand_score(labels, _fit(X, 3).labels_) == 1.0


def _refuse(*args, **kwargs):
    raise AssertionError("a sparse matrix was densified")


def test_a_dense_precomputed_affinity_is_used_in_place():
    X, y = make_blobs(300, centers=3, cluster_std=0.5, random_state=6)
    affinity = rbf_kernel(X, gamma=1.0)  # every entry positive
    affinity.setflags(write=False)  # read only, as a memory map is: still no copy
    model = _fit(affinity, 3, affinity="precomputed")
    assert model.affinity_matrix_ is affinity
    assert adjusted_rand_score(y, model.labels_) == 1.0
    np.testing.assert_array_equal(model.predict(affinity), model.labels_)


def test_a_failed_fit_in_training_leaves_the_fitted_state(monkeypatch):
    X, _ = make_blobs(120, centers=3, random_state=7)
    model = _fit(X, 3, solver="network")
    before = {name: value for name, value in vars(model).items() if name.endswith("_")}

    def fail(*args, **kwargs):
        raise FloatingPointError("diverged")

    monkeypatch.setattr(_training, "train_prcut", fail)
    with pytest.raises(FloatingPointError), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        model.fit(X[:, :1])
    assert model.n_features_in_ == 2
    np.testing.assert_array_equal(model.labels_, before["labels_"])
    np.testing.assert_array_equal(model.predict(X), before["labels_"])


@CUDA
def test_cuda_fit_gives_the_cpu_partition():
    X, y = make_moons(2000, noise=0.05, random_state=0)
    cpu = _fit(X, 2)
    cuda = PRCut(n_clusters=2, device="cuda", random_state=0).fit(X)
    assert adjusted_rand_score(cpu.labels_, cuda.labels_) > 0.99
    assert adjusted_rand_score(y, cuda.labels_) > 0.95

"""ClAM's starts (``init='k-means'``: Lloyd's iterations from k-means++ seeds) and
its clipped per-example gradients (``gradient_clip``). No torch needed."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.cluster import KMeans
from sklearn.datasets import load_wine, make_blobs
from sklearn.metrics import adjusted_rand_score
from sklearn.preprocessing import StandardScaler

from skdiffclust import ClAM
from skdiffclust.clam import _kernels, _lloyd, _selection
from skdiffclust.clam._data import ScaledData

# -- clipped gradients ---------------------------------------------------------------


def _batch(seed, n_rows=24, k=4, d=6, h=2, n_restarts=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, d))
    X[:3] *= 6.0  # a few far points: heavy-tailed gradients, as next to boundaries
    P = rng.normal(size=(n_restarts, k, d))
    W = np.zeros((n_restarts, k))
    hidden = np.stack([np.stack([rng.choice(d, h, replace=False) for _ in range(n_rows)])
                       for _ in range(n_restarts)]).astype(np.int64)
    return X, hidden, P, W, X.mean(axis=0)


def _gradients(X, hidden, P, W, fill, clip=0.0):
    return _kernels.batch_loss_and_grads(X, hidden, P, W, fill, start_from_fill=True,
                                         beta=2.0, cosine=False, n_steps=5, alpha=0.2,
                                         clip=clip)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_each_point_gradient_is_clipped_to_a_multiple_of_the_batch_median(seed):
    X, hidden, P, W, fill = _batch(seed)
    n_rows, clip = X.shape[0], 1.5
    # each point's own gradient: a batch of one
    per_point = [_gradients(X[i:i + 1], hidden[:, i:i + 1], P, W, fill) for i in range(n_rows)]
    grad_P = np.stack([g for _, g, _ in per_point])  # (B, R, k, d)
    grad_W = np.stack([g for _, _, g in per_point])  # (B, R, k)
    norms = np.sqrt((grad_P ** 2).sum(axis=(2, 3)))  # (B, R)
    factor = np.minimum(1.0, clip * np.median(norms, axis=0) / norms)
    assert (factor < 1).any(), "the batch has no point to clip: the test would prove nothing"
    _, clipped_P, clipped_W = _gradients(X, hidden, P, W, fill, clip=clip)
    np.testing.assert_allclose(clipped_P, (factor[..., None, None] * grad_P).mean(axis=0),
                               rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(clipped_W, (factor[..., None] * grad_W).mean(axis=0),
                               rtol=1e-10, atol=1e-12)


def test_a_bound_no_point_reaches_leaves_the_gradient_as_it_is():
    X, hidden, P, W, fill = _batch(3)
    losses, grad_P, grad_W = _gradients(X, hidden, P, W, fill)
    clipped = _gradients(X, hidden, P, W, fill, clip=1e6)
    np.testing.assert_array_equal(clipped[0], losses)
    np.testing.assert_allclose(clipped[1], grad_P, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(clipped[2], grad_W, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("scale", [1e-300, 1.0, 1e300])
def test_median_is_numpys(scale):
    rng = np.random.default_rng(0)
    for n in [1, 2, 3, 4, 7, 16, 33, 1024]:
        values = np.abs(rng.standard_cauchy(size=n + 5)) * scale  # gradient norms
        values[2: 2 + n // 3] = values[2]  # ties
        values[-1] = 0.0
        # the median of values[2:2 + n] (a restart's lanes within the batch's)
        assert _kernels._median(values, 2, 2 + n) == np.median(values[2:2 + n])
    assert _kernels._median(np.array([0.0, 0.0, 1.0, 3.0]), 0, 4) == 0.5
    assert _kernels._median(np.array([2.0, 2.0, 2.0, 3.0]), 0, 4) == 2.0


# -- Lloyd's iterations ------------------------------------------------------------------


def _scaled_blobs(n=3000, d=16, centers=8, seed=0):
    X, _ = make_blobs(n_samples=n, n_features=d, centers=centers, cluster_std=3.0,
                      random_state=seed)
    return X, ScaledData(X, False)


def _seeds(data, k, n_restarts, seed=0):
    rng = np.random.default_rng(seed)
    return np.stack([data.take(rng.choice(data.n_samples, k, replace=False))
                     for _ in range(n_restarts)])


@pytest.mark.parametrize("n", [500, 3000])  # the NumPy path, then the numba kernel
def test_lloyd_is_scikit_learns(n):
    X, data = _scaled_blobs(n=n)
    starts = _seeds(data, 8, 3)
    indices = np.arange(data.n_samples)
    centroids, inertia = _lloyd.refine_by_lloyd(data, indices, starts)
    rows = data.take(indices)
    for r in range(3):
        km = KMeans(8, init=starts[r], n_init=1, algorithm="lloyd", tol=0.0,
                    max_iter=_lloyd.MAX_ITER).fit(rows)
        np.testing.assert_allclose(centroids[r], km.cluster_centers_, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(inertia[r], km.inertia_, rtol=1e-9)


def test_lloyd_numpy_twin_computes_the_kernels_bits():
    X, data = _scaled_blobs(n=700)
    rows = data.take(np.arange(700))
    centroids = _seeds(data, 8, 1)[0]
    results = []
    for assign_and_sum in (_lloyd._assign_and_sum, _lloyd._assign_and_sum_numpy):
        labels = np.full(700, -1, dtype=np.int64)
        sums, counts, inertia = np.zeros((8, 16)), np.zeros(8, dtype=np.int64), np.zeros(1)
        changed = assign_and_sum(rows, centroids, labels, sums, counts, inertia,
                                 np.empty(0), np.empty(0))
        results.append((changed, labels, sums, counts, inertia))
    for kernel, twin in zip(*results):
        np.testing.assert_array_equal(kernel, twin)


@pytest.mark.parametrize("d, centers", [(16, 8), (3, 12)])
def test_lloyd_bounds_skip_distances_without_changing_a_bit(monkeypatch, d, centers):
    # Hamerly's bounds (the kernels, on large data) against every distance of every
    # pass (NumPy, forced): the same centroids and inertia, bit for bit, on blobs
    # and on overlapping clusters (many rows near a boundary)
    X, data = _scaled_blobs(n=3000, d=d, centers=centers)
    starts = _seeds(data, 8, 3)
    bounded = _lloyd.refine_by_lloyd(data, None, starts)
    monkeypatch.setattr(_lloyd, "NUMPY_WORK", np.inf)
    full = _lloyd.refine_by_lloyd(data, None, starts)
    np.testing.assert_array_equal(bounded[0], full[0])
    np.testing.assert_array_equal(bounded[1], full[1])


def test_lloyd_gives_the_same_bits_for_sparse_input_and_any_thread_count():
    X, data = _scaled_blobs(n=3000)
    X[np.abs(X) < 2.0] = 0.0
    dense, sparse = ScaledData(X, False), ScaledData(sp.csr_matrix(X), False)
    starts = _seeds(dense, 8, 4)
    indices = np.sort(np.random.default_rng(1).choice(3000, 2500, replace=False))
    reference = _lloyd.refine_by_lloyd(dense, indices, starts, n_threads=1)
    for data, n_threads in [(dense, 2), (sparse, 1), (sparse, 2)]:
        result = _lloyd.refine_by_lloyd(data, indices, starts, n_threads=n_threads)
        np.testing.assert_array_equal(result[0], reference[0])
        np.testing.assert_array_equal(result[1], reference[1])


# -- the starts ----------------------------------------------------------------------


def test_starts_that_reach_one_minimum_are_trained_once():
    X, _ = make_blobs(n_samples=600, n_features=3, centers=4, cluster_std=0.3,
                      random_state=0)
    starts = _selection.initial_prototypes(ScaledData(X, False), 0, n_clusters=4,
                                           init="k-means", n_init=3, cosine=False)
    assert starts.shape == (1, 4, 3)  # every seed reaches the four blobs' centres


def test_starts_on_large_data_are_minima_of_all_the_points_as_good_as_kmeans(monkeypatch):
    # beyond LLOYD_POINTS rows, the minima of the sample go on to minima of every
    # row, the best of 10 seeds: as good a start as KMeans(n_init=10)'s (refined on
    # the sample alone, from 5 seeds, the start was 3% to 6% worse on these blobs)
    monkeypatch.setattr(_selection, "LLOYD_POINTS", 300)
    X, _ = make_blobs(n_samples=2000, n_features=6, centers=10, cluster_std=3.0,
                      random_state=0)
    data = ScaledData(X, False)
    starts = _selection.initial_prototypes(data, 0, n_clusters=8, init="k-means",
                                           n_init=1, cosine=False)
    again, _ = _lloyd.refine_by_lloyd(data, None, starts)
    np.testing.assert_array_equal(again, starts)  # a fixed point on every row
    rows = data.dense()
    kmeans = KMeans(8, n_init=10, random_state=0).fit(rows)
    inertia = ((rows[:, None] - starts[0][None]) ** 2).sum(-1).min(axis=1).sum()
    assert inertia <= 1.001 * kmeans.inertia_


def test_default_starts_from_a_minimum_as_good_as_kmeans_and_refines_it():
    X, _ = make_blobs(n_samples=400, n_features=4, centers=6, cluster_std=2.0,
                      random_state=0)
    clam = ClAM(6, random_state=0).fit(X)
    start = ClAM(6, max_iter=0, random_state=0).fit(X)
    kmeans = KMeans(6, n_init=10, random_state=0).fit(X)
    inertia = ((X[:, None] - start.cluster_centers_[None]) ** 2).sum(-1).min(axis=1).sum()
    assert inertia <= 1.001 * kmeans.inertia_
    # the trained prototypes keep the start's partition, refined
    assert adjusted_rand_score(start.labels_, clam.labels_) > 0.8


def test_distinct_best_keeps_the_lowest_inertia_of_each_minimum():
    a = np.array([[0.0, 0.0], [10.0, 0.0]])
    b = np.array([[0.0, 5.0], [10.0, 5.0]])
    starts = np.stack([a + 0.01, b, a, a[::-1]])  # a permuted is a too
    kept = _selection.distinct_best(starts, np.array([3.0, 2.0, 1.0, 0.5]), 3)
    np.testing.assert_array_equal(kept, np.stack([a[::-1], b]))


def test_k_means_starts_are_k_means_minima_on_wine():
    X = StandardScaler().fit_transform(load_wine().data)
    starts = _selection.initial_prototypes(ScaledData(X, False), 0, n_clusters=3,
                                           init="k-means", n_init=3, cosine=False)
    km = KMeans(3, n_init=10, random_state=0).fit(X)
    data = ScaledData(X, False)
    best = starts[0] * data.scale + data.shift
    labels = ((X[:, None] - best[None]) ** 2).sum(-1).argmin(1)
    assert adjusted_rand_score(labels, km.labels_) > 0.99


def test_paper_procedure_stays_reachable():
    X, y = make_blobs(n_samples=300, centers=4, cluster_std=0.6, random_state=0)
    paper = ClAM(4, init="random", gradient_clip=None, beta=1.0, learning_rate=0.1,
                 reseed=False, prune=False, n_init=10, tol=1e-3, random_state=0).fit(X)
    assert adjusted_rand_score(y, paper.labels_) > 0.9


@pytest.mark.parametrize("clip", [0.5, 0.0, -1.0, "1.5"])
def test_bad_gradient_clip_is_refused(clip):
    with pytest.raises((ValueError, TypeError), match="gradient_clip"):
        ClAM(2, gradient_clip=clip).fit(np.random.default_rng(0).normal(size=(20, 2)))


@pytest.mark.parametrize("method", ["fit", "partial_fit"])
def test_a_given_init_that_repeats_a_row_is_warned_about(method):
    # three memories at zero on three blobs: one cluster of 10 points, ARI 0.53
    X, _ = make_blobs(300, 4, centers=3, random_state=0)
    with pytest.warns(UserWarning, match="init holds 1 distinct rows for 3 prototypes") \
            as caught:
        getattr(ClAM(n_clusters=3, init=np.zeros((3, 4)), max_iter=3, random_state=0),
                method)(X)
    assert any(record.filename == __file__ for record in caught)  # at the user's call


def test_a_given_init_of_distinct_rows_fits_silently():
    X, y = make_blobs(300, 4, centers=3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        model = ClAM(n_clusters=3, init=X[[0, 1, 2]], random_state=0).fit(X)
    assert adjusted_rand_score(y, model.labels_) > 0.5

"""ClAM: reproducibility, stability under last-bit noise, no silent cluster loss,
scale-aware defaults, restarts (pruning, grouping), and input handling. The starts
(``init='k-means'``) and the clipped gradients: ``test_clam_starts.py``.

Needs no torch: the CPU path trains with numba kernels.
"""

import json
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import adjusted_rand_score
from sklearn.preprocessing import StandardScaler

from skdiffclust import ClAM
from skdiffclust.clam import _epoch, _kernels, _selection, _settings
from skdiffclust.clam._data import ScaledData
from skdiffclust.clam._inference import fitted_masked_loss
from tests._data import load_benchmark

# the paper's procedure: no re-seeding, every restart trained to the end
PAPER = dict(reseed=False, prune=False, learning_rate=0.1, beta=1.0)


def _quiet(estimator, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return estimator.fit(X)


# -- reproducibility ----------------------------------------------------------------


SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    from sklearn.datasets import make_blobs
    from sklearn.preprocessing import StandardScaler
    from skdiffclust import ClAM

    X, _ = make_blobs(n_samples=1500, n_features=6, centers=6, cluster_std=2.5,
                      random_state=3)
    X = StandardScaler().fit_transform(X * np.arange(1, 7))  # standardised here
    clam = ClAM(n_clusters=6, n_jobs=int(sys.argv[1]), random_state=0).fit(X)
    print(json.dumps([clam.labels_.tolist(), clam.cluster_centers_.tolist()]))
""")


def test_two_processes_with_other_thread_counts_give_identical_results(tmp_path):
    script = tmp_path / "fit.py"
    script.write_text(SCRIPT)
    outputs = []
    for n_jobs, threads in [(1, "1"), (2, "2")]:
        env = dict(os.environ, OMP_NUM_THREADS=threads, OPENBLAS_NUM_THREADS=threads,
                   MKL_NUM_THREADS=threads)
        done = subprocess.run([sys.executable, str(script), str(n_jobs)], env=env,
                              capture_output=True, text=True, timeout=300, check=True)
        outputs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert outputs[0] == outputs[1]


@pytest.mark.parametrize("name", ["ecoli", "yeast"])
def test_last_bit_noise_leaves_the_labels(shared_data, name):
    # the case: the same data standardised in two processes differ in the
    # last bits; ClAM centres and scales in float64 and trains in float32
    X, _, k = load_benchmark(shared_data, "uci", name)
    X = StandardScaler().fit_transform(X)
    noisy = X * (1.0 + 1e-12 * np.random.default_rng(0).standard_normal(X.shape))
    labels = ClAM(k, random_state=0).fit(X).labels_
    assert adjusted_rand_score(labels, ClAM(k, random_state=0).fit(noisy).labels_) >= 0.99


def test_blobs_survive_relative_noise_of_float32_rounding():
    X, _ = make_blobs(n_samples=600, n_features=5, centers=4, cluster_std=1.5,
                      random_state=1)
    noisy = X * (1.0 + 1e-7 * np.random.default_rng(1).standard_normal(X.shape))
    labels = ClAM(4, random_state=0).fit(X).labels_
    assert adjusted_rand_score(labels, ClAM(4, random_state=0).fit(noisy).labels_) >= 0.99


def test_restart_groups_compute_the_same_bits():
    # n_jobs runs groups of restarts on threads: a restart's lanes must not depend
    # on the group they are computed with
    rng = np.random.default_rng(0)
    n_samples, n_features, k, n_restarts = 301, 7, 4, 4
    X = rng.standard_normal((n_samples, n_features)).astype(np.float32)
    order = rng.permutation(n_samples)
    hidden = _kernels.hidden_features(rng.random((n_restarts, n_samples, 2)), n_features)
    initial = rng.standard_normal((n_restarts, k, n_features)).astype(np.float32)
    results = []
    for groups in ([np.arange(n_restarts)], [np.array([0]), np.array([1, 2, 3])]):
        P, W = initial.copy(), np.zeros((n_restarts, k), np.float32)
        moments = tuple(np.zeros_like(a) for a in (P, P, W, W))
        for group in groups:
            _epoch.train_epoch(X, order, hidden, np.zeros(n_features, np.float32), True,
                               group, P, W, moments, np.full(n_restarts, 0.01), 0, True,
                               0.5, False, 5, 0.2, 16)
        results.append((P, W))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])


def test_n_jobs_changes_no_bit_of_the_fit():
    X, _ = make_blobs(n_samples=500, n_features=5, centers=4, random_state=0)
    one = ClAM(4, n_jobs=1, random_state=0).fit(X)
    two = ClAM(4, n_jobs=2, random_state=0).fit(X)
    np.testing.assert_array_equal(one.cluster_centers_, two.cluster_centers_)
    np.testing.assert_array_equal(one.transform(X), two.transform(X))
    assert one.score(X) == two.score(X)


# -- no silent cluster loss ---------------------------------------------------------


def test_d31_keeps_its_31_clusters(shared_data):
    # the defaults lost 14 of d31's 31 clusters, silently
    X, y, k = load_benchmark(shared_data, "sipu", "d31")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clam = ClAM(k, random_state=0).fit(X)
    lost = [w for w in caught if "non-empty clusters" in str(w.message)]
    assert clam.n_clusters_ == k or lost
    assert clam.n_clusters_ == k and adjusted_rand_score(y, clam.labels_) > 0.9


def test_dead_prototypes_are_reseeded():
    X, _ = make_blobs(n_samples=300, centers=3, cluster_std=0.5, random_state=0)
    far = np.array([[100.0, 100.0], [X[0, 0], X[0, 1]], [X[1, 0], X[1, 1]]])
    clam = _quiet(ClAM(3, init=far, random_state=0), X)
    assert clam.n_clusters_ == 3 and np.unique(clam.labels_).size == 3


def test_the_papers_procedure_keeps_dead_prototypes_and_warns():
    X, _ = make_blobs(n_samples=300, centers=3, cluster_std=0.5, random_state=0)
    far = np.array([[100.0, 100.0], [X[0, 0], X[0, 1]], [X[1, 0], X[1, 1]]])
    with pytest.warns(UserWarning, match="found 2 non-empty clusters of the n_clusters=3"):
        clam = _quiet(ClAM(3, init=far, random_state=0, **PAPER), X)
    assert clam.n_clusters_ == 2
    np.testing.assert_array_equal(np.unique(clam.labels_), [0, 1])


# -- soft assignments ---------------------------------------------------------------


@pytest.mark.parametrize("params", [{}, {"metric": "cosine"}, {"weighted": True}])
def test_predict_proba_is_eq13_at_the_end_of_the_dynamics(params):
    X, _ = make_blobs(n_samples=300, centers=3, cluster_std=2.5, random_state=0)
    clam = _quiet(ClAM(3, random_state=0, **params), X)
    proba, distances = clam.predict_proba(X), clam.transform(X)
    # transform: distances of x^T to the prototypes (cosine: 1 - cos), in the
    # input's units like beta_
    logits = -clam.beta_ * (distances if params.get("metric") else distances**2)
    expected = np.exp(logits - logits.max(1, keepdims=True))
    np.testing.assert_allclose(proba, expected / expected.sum(1, keepdims=True),
                               rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(proba.sum(1), 1.0)
    np.testing.assert_array_equal(proba.argmax(1), clam.predict(X))


def test_predict_proba_is_sharp_in_a_basin_and_soft_between_two():
    X, _ = make_blobs(n_samples=200, centers=[[-4, 0], [4, 0]], random_state=0)
    clam = _quiet(ClAM(2, random_state=0), X)
    at_prototypes = clam.predict_proba(clam.cluster_centers_)
    midway = clam.predict_proba(clam.cluster_centers_.mean(0, keepdims=True))
    assert at_prototypes.max(1).min() > 0.99
    assert 0.3 < midway.max() < 0.7


# -- scale, shift, units and dtypes -------------------------------------------------


@pytest.mark.parametrize("scale, offset", [(1e-40, 0.0), (1e40, 0.0), (1.0, 1e10),
                                           (3.0, -7.0)])
def test_prototypes_and_distances_are_in_the_input_units(scale, offset):
    X, _ = make_blobs(n_samples=200, centers=3, random_state=2)
    reference = ClAM(3, random_state=0).fit(X)
    moved = ClAM(3, random_state=0).fit(X * scale + offset)
    np.testing.assert_array_equal(moved.labels_, reference.labels_)
    np.testing.assert_allclose(moved.cluster_centers_,
                               reference.cluster_centers_ * scale + offset,
                               rtol=1e-5, atol=1e-5 * scale)
    # X + 1e10 keeps 6 fewer digits, and a point near a basin's boundary ends its
    # dynamics where those digits send it (2e-5 apart, relatively, for one point)
    np.testing.assert_allclose(moved.transform(X * scale + offset),
                               reference.transform(X) * scale, rtol=1e-4, atol=1e-5 * scale)
    assert moved.beta_ == pytest.approx(reference.beta_ / scale**2, rel=1e-5)
    assert fitted_masked_loss(moved, X * scale + offset) == pytest.approx(
        fitted_masked_loss(reference, X) * scale**2, rel=1e-5)
    assert moved.score(X * scale + offset) == pytest.approx(reference.score(X), rel=1e-5)


def test_defaults_cluster_unscaled_data_like_standardised_data(shared_data):
    # beta and the learning rate follow the scale of the clusters: s1's coordinates
    # are in the hundreds of thousands (with beta=1 and lr=0.1 in absolute units,
    # the prototypes did not move: ARI 0.55, KMeans 0.99)
    X, y, k = load_benchmark(shared_data, "sipu", "s1")
    assert adjusted_rand_score(y, ClAM(k, random_state=0).fit(X).labels_) > 0.95


@pytest.mark.parametrize("method", ["predict", "transform", "score"])
def test_inference_on_values_whose_squares_overflow_raises(method):
    X, _ = make_blobs(n_samples=100, centers=2, random_state=0)
    clam = ClAM(2, random_state=0).fit(X)
    with pytest.raises(ValueError, match="overflow"):
        getattr(clam, method)(X * 1e300)


def test_inference_reads_the_fit_not_parameters_set_since():
    # predict, transform and score read metric, n_steps, step_size, weighted and
    # mask_prob: after set_params, answers of a model that was never fitted
    X, _ = make_blobs(n_samples=200, centers=3, random_state=0)
    clam = ClAM(3, random_state=0).fit(X)
    methods = ("predict", "predict_proba", "transform", "score")
    before = {name: getattr(clam, name)(X) for name in methods}
    clam.set_params(metric="cosine", n_steps=1, step_size=1.0, weighted=True,
                    mask_prob=0.5)
    for name in methods:
        np.testing.assert_array_equal(getattr(clam, name)(X), before[name], err_msg=name)


@pytest.mark.parametrize("to_input", [np.asarray, sp.csr_matrix])
def test_cosine_data_of_zero_vectors_only_are_refused_clearly(to_input):
    # training diverged, and the error said to lower the learning rate
    with pytest.raises(ValueError, match="zero vector.*cosine"):
        ClAM(3, metric="cosine", random_state=0).fit(to_input(np.zeros((20, 4))))
    X = np.random.default_rng(0).standard_normal((30, 3))
    X[0] = 0.0  # one zero vector among others is clustered, and said to have no direction
    with pytest.warns(UserWarning, match="1 of the 30 samples are zero vectors"):
        clam = ClAM(3, metric="cosine", random_state=0).fit(to_input(X))
    assert clam.n_clusters_ == 3
    # before: a zero query got a cluster with probability 1, silently
    for method in (clam.predict, clam.predict_proba, clam.transform):
        with pytest.warns(UserWarning, match="2 of the 3 samples are zero vectors"):
            method(to_input(np.r_[np.zeros((2, 3)), X[1:2]]))
    with pytest.warns(UserWarning, match="4 of the 10 samples"):
        clam.partial_fit(to_input(np.r_[np.zeros((4, 3)), X[1:7]]))


def test_float32_in_float32_out_and_feature_names():
    X, _ = make_blobs(n_samples=120, n_features=4, centers=3, random_state=0)
    clam = ClAM(3, random_state=0).fit(X.astype(np.float32))
    assert clam.cluster_centers_.dtype == np.float32
    assert clam.transform(X.astype(np.float32)).dtype == np.float32
    np.testing.assert_array_equal(clam.get_feature_names_out(), ["clam0", "clam1", "clam2"])


@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
def test_sparse_rows_give_the_dense_fit_bit_for_bit(metric):
    X, _ = make_blobs(n_samples=150, n_features=6, centers=3, random_state=0)
    X[X < 0] = 0.0  # sparse-looking data
    dense = ClAM(3, metric=metric, random_state=0).fit(X)
    sparse = ClAM(3, metric=metric, random_state=0).fit(sp.csr_matrix(X))
    np.testing.assert_array_equal(sparse.labels_, dense.labels_)
    np.testing.assert_array_equal(sparse.cluster_centers_, dense.cluster_centers_)
    np.testing.assert_array_equal(sparse.transform(sp.csr_matrix(X)), dense.transform(X))
    # score, a silhouette, reads sparse rows as given (dense ones centred): the same
    # up to rounding
    assert sparse.score(sp.csr_matrix(X)) == pytest.approx(dense.score(X), rel=1e-12)


def test_sparse_rows_are_made_dense_a_block_at_a_time():
    X = sp.random(50, 8, density=0.3, format="csr", random_state=0)
    data = ScaledData(X, cosine=False)
    assert data.dense() is None  # nothing dense as a whole
    expected = (X.toarray() - X.toarray().mean(0)) / data.scale
    np.testing.assert_allclose(data.take(np.arange(50)), expected, rtol=1e-12)
    np.testing.assert_array_equal(data.block(10, 20), data.take(np.arange(10, 20)))


# -- defaults that scale with the data ------------------------------------------------


def test_auto_patience_spans_a_number_of_steps():
    patience = _settings.steps_patience
    assert patience(300, 16, 2000, (2, 10)) == 10  # 19 steps per epoch
    assert patience(100_000, 16, 2000, (2, 10)) == 2  # 6,250 steps per epoch
    assert patience(3_200, 16, 2000, (2, 10)) == 10
    assert patience(20_000, 16, 2000, (2, 10)) == 2
    assert patience(3_200, 16, 1000, (1, 5)) == 5  # the paper's plateau patience


def test_restarts_that_found_the_same_prototypes_are_pruned():
    rng = np.random.default_rng(0)
    prototypes = rng.standard_normal((4, 3))
    shuffled = prototypes[[2, 0, 3, 1]] + 1e-3
    assert _selection.same_prototypes(prototypes, shuffled)
    moved = prototypes.copy()
    moved[0] = prototypes[1] + 0.01  # two prototypes in one place, one missing
    assert not _selection.same_prototypes(prototypes, moved)


def test_the_papers_procedure_is_reachable():
    X, _ = make_blobs(n_samples=200, n_features=8, centers=3, random_state=0)
    X = StandardScaler().fit_transform(X)
    clam = _quiet(ClAM(3, init="random", n_init=2, max_iter=20, n_iter_no_change=10,
                       random_state=0, **PAPER), X)
    assert clam.beta_ == pytest.approx(1.0, rel=1e-6)  # standardised: the paper's beta
    assert clam.n_clusters_ >= 2


# -- beta='auto': the basins of attraction are the Voronoi cells ----------------------


@pytest.mark.shared_data
@pytest.mark.parametrize("battery, name", [("sipu", "s3"), ("fcps", "atom"), ("uci", "wine")])
def test_auto_beta_makes_the_basins_the_voronoi_cells(shared_data, battery, name):
    # the paper's criterion for beta (section 3.3): at beta='auto' the attractors'
    # partition is the prototypes' Voronoi partition but for points at a boundary
    # (99.99% of the points of the 33 development datasets, at least 99.7% on each)
    from skdiffclust.clam._data import squared_distances

    X, y, k = load_benchmark(shared_data, battery, name)
    if battery == "uci":
        X = StandardScaler().fit_transform(X)
    clam = _quiet(ClAM(k, random_state=0), X)
    nearest = squared_distances(X, clam.cluster_centers_.astype(np.float64)).argmin(axis=1)
    assert np.mean(nearest == clam.labels_) >= 0.997
    # a soft beta (1/16 of it) lets the prototypes attract collectively instead: atom's
    # core and shell merge, as they did when the selection picked its soft candidate
    soft = _quiet(ClAM(k, random_state=0, beta=clam.beta_ * clam._scale**2 / 16), X)
    if name == "atom":
        assert adjusted_rand_score(y, soft.labels_) < 0.05 < adjusted_rand_score(
            y, clam.labels_)


def test_auto_beta_is_the_float_beta_it_reports():
    # beta_ is in the input's units, a float beta in ClAM's (data divided by their
    # root mean squared deviation, _scale): the same fit either way
    X, _ = make_blobs(n_samples=400, centers=4, cluster_std=2.0, random_state=1)
    auto = _quiet(ClAM(4, random_state=0), X)
    fixed = _quiet(ClAM(4, random_state=0, beta=auto.beta_ * auto._scale**2), X)
    np.testing.assert_array_equal(fixed.labels_, auto.labels_)
    np.testing.assert_allclose(fixed.cluster_centers_, auto.cluster_centers_, rtol=1e-12)


def _blobs_among_noise_features(noise=1.0):
    """8 blobs in 5 dimensions, among 95 features of pure noise: the squared
    distances to every prototype share the noise's large term."""
    X, y = make_blobs(1500, centers=8, n_features=5, cluster_std=1.5, random_state=0)
    return np.hstack([X, np.random.default_rng(0).normal(scale=noise, size=(1500, 95))]), y


def test_the_scale_of_beta_is_the_gap_between_prototypes_not_the_spread():
    from skdiffclust.clam._selection import scales_of

    rng = np.random.default_rng(0)
    flat, _ = make_blobs(600, centers=5, cluster_std=0.5, random_state=0)
    noisy, _ = _blobs_among_noise_features()
    for X in (flat, noisy):
        data = ScaledData(X, False)
        initial = data.take(rng.choice(X.shape[0], (2, 8), replace=False))
        distances = [np.sort(((data.dense()[:, None] - P[None]) ** 2).sum(-1), axis=1)
                     for P in initial]
        spread = np.mean([d[:, 0].mean() for d in distances])
        gap = np.mean([np.median(d[:, 1] - d[:, 0]) for d in distances])
        assert scales_of(data, initial) == pytest.approx((spread, min(spread, gap)))
    # in 2-D the gap exceeds the spread; among 95 noise features it is far smaller
    assert gap < 0.5 * spread


def test_auto_beta_is_sharp_enough_where_noise_features_dominate():
    # 8 blobs among 95 noise features: 0.997 (k-means 0.997; 0.77 when beta='auto'
    # was selected by silhouette among softer values, and when it was in units of
    # the spread)
    X, y = _blobs_among_noise_features()
    assert adjusted_rand_score(y, _quiet(ClAM(8, random_state=0), X).labels_) >= 0.99

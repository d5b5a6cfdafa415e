"""SpanningForestClustering: single-linkage equivalence, inputs, errors, predict."""

import pickle
import tracemalloc
import warnings

import numpy as np
import pytest
from scipy.spatial.distance import squareform
from sklearn.cluster import AgglomerativeClustering
from sklearn.metrics import adjusted_rand_score, pairwise_distances
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skdiffclust import SpanningForestClustering, spanning_forest
from tests._data import load_benchmark


def _single_linkage(X, k, metric="euclidean"):
    return AgglomerativeClustering(n_clusters=k, linkage="single", metric=metric).fit(X).labels_


@pytest.mark.parametrize("n_samples,n_features", [(300, 2), (300, 5), (200, 12), (150, 40)])
@pytest.mark.parametrize("n_clusters", [1, 2, 7])
def test_same_partition_as_single_linkage(n_samples, n_features, n_clusters):
    X = np.random.default_rng(n_features).standard_normal((n_samples, n_features))
    labels = SpanningForestClustering(n_clusters=n_clusters).fit(X).labels_
    assert adjusted_rand_score(labels, _single_linkage(X, n_clusters)) == 1.0


@pytest.mark.parametrize("metric", ["manhattan", "cosine", "chebyshev"])
def test_same_partition_as_single_linkage_for_other_metrics(metric):
    X = np.random.default_rng(5).uniform(size=(250, 4))
    labels = SpanningForestClustering(n_clusters=4, metric=metric).fit(X).labels_
    assert adjusted_rand_score(labels, _single_linkage(X, 4, metric)) == 1.0


@pytest.mark.shared_data
@pytest.mark.parametrize("battery,name", [
    ("fcps", "chainlink"), ("fcps", "atom"), ("fcps", "target"), ("fcps", "lsun"),
    ("wut", "smile"), ("wut", "circles"),
])
def test_shape_datasets_match_single_linkage_and_truth(shared_data, battery, name):
    X, truth, k = load_benchmark(shared_data, battery, name)
    labels = SpanningForestClustering(n_clusters=k).fit(X).labels_
    assert adjusted_rand_score(labels, _single_linkage(X, k)) == 1.0
    # these shapes are exactly what single linkage recovers
    assert adjusted_rand_score(labels, truth) == 1.0


@pytest.mark.parametrize("similarity", ["neg_sq", "neg", "gaussian"])
def test_precomputed_similarity_gives_the_feature_partition(similarity):
    X = np.random.default_rng(7).standard_normal((200, 3))
    D = pairwise_distances(X)
    S = {"neg_sq": -(D**2), "neg": -D, "gaussian": np.exp(-(D**2))}[similarity]
    pre = SpanningForestClustering(n_clusters=5, metric="precomputed").fit(S)
    feat = SpanningForestClustering(n_clusters=5).fit(X)
    np.testing.assert_array_equal(pre.labels_, feat.labels_)


def test_ties_are_broken_deterministically():
    # a regular grid: many equal distances
    g = np.arange(6, dtype=float)
    X = np.array([(a, b) for a in g for b in g])
    runs = [SpanningForestClustering(n_clusters=4, algorithm="prim").fit(X) for _ in range(3)]
    for est in runs[1:]:
        np.testing.assert_array_equal(est.labels_, runs[0].labels_)
        np.testing.assert_array_equal(est.forest_edges_, runs[0].forest_edges_)
    S = -pairwise_distances(X, metric="sqeuclidean")
    pre = SpanningForestClustering(n_clusters=4, metric="precomputed").fit(S)
    np.testing.assert_array_equal(pre.labels_, runs[0].labels_)


def test_forest_attributes_describe_the_forest():
    X = np.random.default_rng(8).standard_normal((50, 2))
    est = SpanningForestClustering(n_clusters=3).fit(X)
    assert est.n_clusters_ == 3
    assert est.forest_edges_.shape == (47, 2)
    D = pairwise_distances(X)
    i, j = est.forest_edges_.T
    np.testing.assert_allclose(est.forest_weights_, -D[i, j])
    # every edge joins two samples of the same cluster
    assert np.all(est.labels_[est.forest_edges_[:, 0]] == est.labels_[est.forest_edges_[:, 1]])
    assert set(np.unique(est.labels_)) == {0, 1, 2}


def test_float32_input_is_supported():
    X = np.random.default_rng(9).standard_normal((100, 3))
    l64 = SpanningForestClustering(n_clusters=3).fit(X).labels_
    l32 = SpanningForestClustering(n_clusters=3).fit(X.astype(np.float32)).labels_
    assert adjusted_rand_score(l64, l32) == 1.0


def test_predict_assigns_the_cluster_of_the_nearest_training_sample():
    rng = np.random.default_rng(10)
    X = np.concatenate([rng.normal(0, 0.1, (30, 2)), rng.normal(5, 0.1, (30, 2))])
    est = SpanningForestClustering(n_clusters=2).fit(X)
    np.testing.assert_array_equal(est.predict(X), est.labels_)
    new = np.array([[0.2, -0.1], [4.8, 5.3]])
    assert est.predict(new).tolist() == [est.labels_[0], est.labels_[30]]


def test_predict_with_precomputed_similarities():
    rng = np.random.default_rng(11)
    X = np.concatenate([rng.normal(0, 0.1, (20, 2)), rng.normal(5, 0.1, (20, 2))])
    new = np.array([[0.1, 0.1], [5.1, 4.9], [4.0, 4.0]])
    est = SpanningForestClustering(n_clusters=2, metric="precomputed").fit(-pairwise_distances(X))
    pred = est.predict(-pairwise_distances(new, X))
    assert pred.tolist() == [est.labels_[0], est.labels_[20], est.labels_[20]]
    with pytest.raises(ValueError, match="features"):
        est.predict(-pairwise_distances(new, X[:10]))


def test_pickle_round_trip_preserves_predictions():
    X = np.random.default_rng(12).standard_normal((80, 3))
    est = SpanningForestClustering(n_clusters=4).fit(X)
    clone = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(clone.predict(X[:10]), est.predict(X[:10]))


def test_pipeline_passes_partial_labels_to_the_forest():
    rng = np.random.default_rng(13)
    X = rng.standard_normal((40, 2)) * [1, 100]
    y = np.full(40, -1)
    y[:2] = [0, 1]
    pipe = make_pipeline(StandardScaler(), SpanningForestClustering(n_clusters=2))
    pipe.fit(X, spanningforestclustering__partial_labels=y)
    labels = pipe[-1].labels_
    assert labels[0] != labels[1]


# --------------------------------------------------------------------- errors
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_input_raises(bad):
    X = np.random.default_rng(0).standard_normal((10, 2))
    X[3, 1] = bad
    with pytest.raises(ValueError, match="NaN|infinity"):
        SpanningForestClustering().fit(X)


def test_more_clusters_than_samples_raises():
    X = np.random.default_rng(0).standard_normal((4, 2))
    with pytest.raises(ValueError, match="n_clusters=5 must be <= n_samples=4"):
        SpanningForestClustering(n_clusters=5).fit(X)


def test_non_square_precomputed_input_raises():
    with pytest.raises(ValueError, match="square"):
        SpanningForestClustering(metric="precomputed").fit(np.zeros((4, 3)))


def test_asymmetric_precomputed_input_raises():
    S = np.random.default_rng(0).uniform(size=(5, 5))
    with pytest.raises(ValueError, match="symmetric"):
        SpanningForestClustering(metric="precomputed").fit(S)


@pytest.mark.parametrize("params,match", [
    ({"n_clusters": 0}, "n_clusters"),
    ({"metric": "nope"}, "metric"),
    ({"algorithm": "nope"}, "algorithm"),
    ({"algorithm": "kd_tree", "metric": "manhattan"}, "kd_tree"),
])
def test_invalid_parameters_raise(params, match):
    X = np.random.default_rng(0).standard_normal((10, 2))
    with pytest.raises(ValueError, match=match):
        SpanningForestClustering(**params).fit(X)


def test_failed_fit_leaves_the_fitted_state_untouched():
    X = np.random.default_rng(0).standard_normal((10, 2))
    est = SpanningForestClustering(n_clusters=3).fit(X)
    before = est.labels_.copy(), est.forest_edges_.copy()
    with pytest.raises(ValueError, match="Contradictory"):
        est.fit(X, must_link=[[0, 1]], cannot_link=[[1, 0]])
    np.testing.assert_array_equal(est.labels_, before[0])
    np.testing.assert_array_equal(est.forest_edges_, before[1])


# --------------------------------------------------------------------- scale
def test_a_million_points_in_2d_fit_in_memory():
    # an n x n matrix would take 8 TB: finishing at all shows there is none
    n = 1_000_000
    X = np.random.default_rng(14).uniform(size=(n, 2))
    y = np.full(n, -1)
    y[:3] = [0, 1, 2]
    tracemalloc.start()
    est = SpanningForestClustering(n_clusters=3).fit(X, partial_labels=y)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 512 * 2**20
    assert len(np.unique(est.labels_[:3])) == 3


def test_constraints_from_many_labels_take_linear_memory():
    # 10,000 classes of two samples: no pair list, no class-by-class matrix
    n = 20_000
    rng = np.random.default_rng(15)
    X = rng.uniform(size=(n, 2))
    y = rng.permutation(np.arange(n) % 10_000)
    tracemalloc.start()
    est = SpanningForestClustering(n_clusters=10_000).fit(X, partial_labels=y)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 64 * 2**20  # was 2.5 GB
    assert est.n_clusters_ == 10_000
    assert np.all(est.labels_[np.argsort(y, kind="stable")][::2]
                  == est.labels_[np.argsort(y, kind="stable")][1::2])


# ---------------------------------------------------------------------- score
def _blobs(seed=16):
    rng = np.random.default_rng(seed)
    centers = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])
    return np.concatenate([c + rng.standard_normal((60, 2)) for c in centers])


def test_score_on_the_training_samples_compares_the_cut_and_the_kept_edges():
    X = _blobs()
    est = SpanningForestClustering(n_clusters=3).fit(X)
    kept = -est.forest_weights_.min()  # the longest edge the forest keeps
    D = pairwise_distances(X)
    between = D[est.labels_[:, None] != est.labels_[None, :]].min()  # the weakest cut
    assert est.score(X) == pytest.approx((between - kept) / (between + kept))
    assert 0 < est.score(X) < 1
    assert SpanningForestClustering(n_clusters=1).fit(X).score(X) == 0.0


@pytest.mark.parametrize("dataset,k", [("blobs", 3), ("moons", 2), ("circles", 2)])
def test_score_selects_the_number_of_clusters_without_a_scorer(dataset, k):
    from sklearn.datasets import make_blobs, make_circles, make_moons
    from sklearn.model_selection import GridSearchCV, KFold

    X, _ = {
        "blobs": lambda: make_blobs(300, centers=[[0, 0], [6, 0], [0, 6]], cluster_std=0.5,
                                    random_state=0),
        "moons": lambda: make_moons(300, noise=0.05, random_state=0),
        "circles": lambda: make_circles(300, noise=0.03, factor=0.4, random_state=0),
    }[dataset]()
    search = GridSearchCV(SpanningForestClustering(), {"n_clusters": [2, 3, 4, 5, 6]},
                          cv=KFold(3, shuffle=True, random_state=0)).fit(X)
    assert search.best_params_ == {"n_clusters": k}


def test_score_with_precomputed_similarities_is_the_feature_score():
    X = _blobs()
    new = np.random.default_rng(17).uniform(-2, 8, (20, 2))
    features = SpanningForestClustering(n_clusters=3).fit(X)
    pre = SpanningForestClustering(n_clusters=3, metric="precomputed").fit(-pairwise_distances(X))
    assert pre.score(-pairwise_distances(new, X)) == pytest.approx(features.score(new))
    # new samples between the clusters lower the score
    assert features.score(new) < features.score(X)


# -------------------------------------------------------------- robustness
def test_a_distance_matrix_given_as_similarities_warns():
    X = _blobs()
    D = pairwise_distances(X)
    with pytest.warns(UserWarning, match="distance matrix.*-D"):
        SpanningForestClustering(n_clusters=3, metric="precomputed").fit(D)
    with pytest.warns(UserWarning, match="distance matrix.*-D"):
        spanning_forest(D, 3)
    with pytest.warns(UserWarning, match="distance matrix.*-D"):  # squared distances
        SpanningForestClustering(n_clusters=3, metric="precomputed").fit(D**2)
    kernel = np.exp(-(D**2))
    np.fill_diagonal(kernel, 0.0)  # a kernel without self-similarity is no distance
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for S in (-D, -(D**2), np.exp(-(D**2)), kernel):
            SpanningForestClustering(n_clusters=3, metric="precomputed").fit(S)


@pytest.mark.parametrize("metric", ["euclidean", "manhattan", "chebyshev", "cosine"])
def test_values_whose_squared_differences_underflow_give_the_partition(metric):
    # the forest refused them ("Rescale the data") where PRCut and SparseGEMINI
    # cluster them (issue 45): it works on them times a power of two, exactly
    X = _blobs()
    tiny = SpanningForestClustering(n_clusters=3, metric=metric).fit(X * 1e-300)
    plain = SpanningForestClustering(n_clusters=3, metric=metric).fit(X)
    np.testing.assert_array_equal(tiny.labels_, plain.labels_)
    np.testing.assert_array_equal(tiny.forest_edges_, plain.forest_edges_)
    # the weights in the input's units (cosine: none)
    degree = 0 if metric == "cosine" else 1
    expected = plain.forest_weights_ * 1e-300**degree
    np.testing.assert_allclose(tiny.forest_weights_, expected, rtol=1e-12,
                               atol=1e-12 * np.abs(expected).max())
    np.testing.assert_array_equal(tiny.predict(X[:9] * 1e-300), plain.predict(X[:9]))
    assert tiny.score(X * 1e-300) == pytest.approx(plain.score(X), rel=1e-12)


@pytest.mark.parametrize("algorithm", ["auto", "prim"])
def test_values_whose_squares_overflow_raise_in_fit_and_predict(algorithm):
    X = _blobs()
    with pytest.raises(ValueError, match="overflow"):
        SpanningForestClustering(n_clusters=3, algorithm=algorithm).fit(X * 1e155)
    est = SpanningForestClustering(n_clusters=3, algorithm=algorithm).fit(X)
    with pytest.raises(ValueError, match="overflow"):
        est.predict(X * 1e155)


@pytest.mark.parametrize("algorithm", ["kd_tree", "prim"])
@pytest.mark.parametrize("transform", [lambda X: X + 1e10, lambda X: X * 1e-100,
                                       lambda X: X * 1e100])
def test_shifted_or_rescaled_data_give_the_same_forest(algorithm, transform):
    X = np.random.default_rng(18).standard_normal((200, 5))
    reference = SpanningForestClustering(n_clusters=4, algorithm=algorithm).fit(X).labels_
    labels = SpanningForestClustering(n_clusters=4, algorithm=algorithm).fit(transform(X)).labels_
    np.testing.assert_array_equal(labels, reference)


def test_predict_builds_its_neighbour_index_once_and_pickles_without_it():
    X = _blobs()
    est = SpanningForestClustering(n_clusters=3).fit(X)
    first = est.predict(X[:5])
    index = est._index._search
    np.testing.assert_array_equal(est.predict(X[:5]), first)
    assert est._index._search is index  # kept, not rebuilt
    clone = pickle.loads(pickle.dumps(est))
    assert clone._index._search is None  # not pickled: rebuilt on first use
    np.testing.assert_array_equal(clone.predict(X[:5]), first)


def test_n_jobs_restores_the_thread_counts():
    import numba
    import quitefastmst

    X = _blobs()
    before = numba.get_num_threads(), quitefastmst.omp_get_max_threads()
    labels = [SpanningForestClustering(n_clusters=3, n_jobs=n).fit(X).labels_
              for n in (1, 2, -1, None)]
    for other in labels[1:]:
        np.testing.assert_array_equal(other, labels[0])
    assert (numba.get_num_threads(), quitefastmst.omp_get_max_threads()) == before


def test_partial_labels_name_minus_one_and_self_pairs_are_rejected():
    X = _blobs()
    with pytest.raises(ValueError, match="only -1 marks unlabelled"):
        SpanningForestClustering(n_clusters=3).fit(X, partial_labels=np.r_[-3, [-1] * 179])
    with pytest.raises(ValueError, match="with itself"):
        SpanningForestClustering(n_clusters=3).fit(X, must_link=[(2, 2)])


@pytest.mark.parametrize("X, metric, match", [
    (np.ones((30, 3)), "euclidean", "All samples are identical"),
    (np.repeat(np.eye(3), 5, axis=0), "euclidean", "distance 0 from each other"),
    (np.ones((10, 10)), "precomputed", "All similarities in X are equal"),
])
def test_splitting_identical_samples_warns(X, metric, match):
    with pytest.warns(UserWarning, match=match):
        labels = SpanningForestClustering(n_clusters=4, metric=metric).fit(X).labels_
    assert np.unique(labels).size == 4  # still k trees, as asked


def test_duplicates_kept_together_or_split_by_a_constraint_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SpanningForestClustering(n_clusters=3).fit(np.repeat(np.eye(3), 5, axis=0))
        SpanningForestClustering(n_clusters=2).fit(np.ones((4, 2)), cannot_link=[[0, 1]])


@pytest.mark.parametrize("metric", ["seuclidean", "mahalanobis"])
def test_metrics_whose_parameters_come_from_the_data_match_scipy(metric):
    # scikit-learn derives V (VI) from X alone, but not for a second set of points:
    # every fit failed with "The 'V' parameter is required ... when Y is passed"
    from scipy.cluster.hierarchy import fcluster, linkage

    X = np.random.default_rng(0).random((60, 3))
    model = SpanningForestClustering(3, metric=metric).fit(X)
    reference = fcluster(linkage(X, "single", metric=metric), 3, "maxclust")
    assert adjusted_rand_score(reference, model.labels_) == 1.0
    np.testing.assert_array_equal(model.predict(X), model.labels_)


@pytest.mark.parametrize("power", [1, 1.5, 3, np.inf])
def test_minkowski_at_any_power_matches_scipy_and_predicts_silently(power):
    # p=inf, summed as powers, gave every pair the distance 1: an arbitrary forest;
    # the power in metric_params reached predict's index with a SyntaxWarning
    from scipy.cluster.hierarchy import fcluster, linkage

    X = np.random.default_rng(0).standard_normal((60, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = SpanningForestClustering(3, metric="minkowski",
                                         metric_params={"p": power}).fit(X)
        predicted = model.predict(X)
    distances = pairwise_distances(X, metric="minkowski", p=power)
    reference = fcluster(linkage(squareform(distances, checks=False), "single"), 3, "maxclust")
    assert adjusted_rand_score(reference, model.labels_) == 1.0
    np.testing.assert_array_equal(predicted, model.labels_)


@pytest.mark.parametrize("metric, params, where", [
    # SciPy's list of a C function's signatures, naming neither
    ("minkowski", {"q": 3}, "pairwise_distances"),
    ("euclidean", {"p": 3}, "pairwise_distances"),
    # fitted (SciPy's Chebyshev and Hamming take w), then failed at predict
    ("chebyshev", {"w": np.ones(3)}, "predict"),
    ("hamming", {"w": np.ones(3)}, "predict"),
])
def test_metric_params_the_metric_does_not_take_are_refused_at_fit(metric, params, where):
    model = SpanningForestClustering(3, metric=metric, metric_params=params)
    with pytest.raises(TypeError, match=f"metric_params=.*does not suit metric='{metric}'"
                                        f".*{where}"):
        model.fit(np.random.default_rng(0).random((30, 3)))
    assert not hasattr(model, "labels_")


def test_a_callable_metric_that_gives_negative_values_is_refused():
    # fitted the forest of the most distant samples, silently
    X = np.random.default_rng(0).random((30, 3))
    model = SpanningForestClustering(3, metric=lambda a, b: -np.linalg.norm(a - b))
    with pytest.raises(ValueError, match="gives negative distances on X"):
        model.fit(X)
    assert not hasattr(model, "labels_")


def test_metric_params_with_a_precomputed_matrix_are_refused():
    # they were ignored without a word: the matrix is the similarity itself
    S = -pairwise_distances(np.random.default_rng(0).random((30, 3)))
    model = SpanningForestClustering(3, metric="precomputed", metric_params={"p": 1})
    with pytest.raises(TypeError, match="not used with metric='precomputed'"):
        model.fit(S)
    assert not hasattr(model, "labels_")
    SpanningForestClustering(3, metric="precomputed", metric_params={}).fit(S)  # none given


@pytest.mark.parametrize("power", ["2", None, True])
def test_a_minkowski_power_that_is_not_a_number_is_refused(power):
    with pytest.raises(TypeError, match=r"metric_params\['p'\] must be a real number"):
        SpanningForestClustering(3, metric="minkowski", metric_params={"p": power}).fit(
            np.random.default_rng(0).random((30, 3)))


@pytest.mark.parametrize("params, X, match", [
    ({"metric": "minkowski", "metric_params": {"p": 0}}, None, "must be > 0"),  # 1/0
    ({"metric": "minkowski", "metric_params": {"p": -1}}, None, "must be > 0"),
    # NaN distances gave an arbitrary forest and a NaN score
    ({"metric": "correlation"}, np.ones((10, 3)) * np.arange(1, 11)[:, None], "NaN"),
    # NumPy's "Singular matrix", which named neither the metric nor a remedy
    ({"metric": "mahalanobis"}, np.c_[np.arange(30.0), np.arange(30.0) * 2, np.ones(30)],
     "mahalanobis.*singular"),
])
def test_metrics_that_cannot_measure_the_data_are_refused(params, X, match):
    X = np.random.default_rng(0).random((30, 3)) if X is None else X
    with pytest.raises(ValueError, match=match):
        SpanningForestClustering(3, **params).fit(X)

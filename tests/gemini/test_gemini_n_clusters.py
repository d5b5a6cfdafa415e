"""SparseGEMINI's n_clusters='auto': a fit per candidate, the partition of highest
silhouette in the GEMINI's geometry."""

import warnings

import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score, silhouette_score
from sklearn.metrics.pairwise import euclidean_distances, rbf_kernel
from sklearn.utils._param_validation import InvalidParameterError

from skdiffclust import SparseGEMINI
from skdiffclust.gemini._count import sample_rows, silhouette
from skdiffclust.gemini._data import Geometry, Standardisation
from skdiffclust.gemini._settings import COUNT_SAMPLE, GeminiSettings

FAST = dict(max_iter=30, n_init=2, random_state=0, n_jobs=1)
pytestmark = pytest.mark.filterwarnings("ignore:.*without converging")


def blobs(n_samples=240, centers=4, random_state=3):
    return make_blobs(n_samples, n_features=2, centers=centers, cluster_std=0.5,
                      center_box=(-10, 10), random_state=random_state)


# ---------------------------------------------------------------- the rule


def settings(**changes):
    base = dict(learning_rate=0.05, max_iter=10, tol=1e-4, path_tol=1e-2, n_iter_no_change=5,
                dropout=0.0, reseed=True, alpha=0.0, lambda_start=1.0, lambda_multiplier=1.05,
                n_features_stop=2, selection_threshold=0.9, relax=False)
    return GeminiSettings(**{**base, **changes})


def test_the_candidates_are_2_to_max_clusters_below_the_number_of_samples():
    auto = settings(n_clusters="auto", max_clusters=20)
    np.testing.assert_array_equal(auto.candidates(1000), np.arange(2, 21))
    np.testing.assert_array_equal(auto.candidates(6), np.arange(2, 6))
    np.testing.assert_array_equal(auto.candidates(2), [2])
    np.testing.assert_array_equal(settings(n_clusters=4).candidates(1000), [4])
    assert auto.counts and not settings(n_clusters=4).counts


def test_the_first_of_the_highest_silhouettes_is_chosen():
    count = settings(n_clusters="auto").counted(np.arange(2, 7), [0.1, 0.5, 0.3, 0.5, 0.2])
    assert count.n_clusters == 3
    np.testing.assert_array_equal(count.candidates, np.arange(2, 7))
    given = settings(n_clusters=5).counted(None, None)
    assert given.n_clusters == 5 and given.candidates is None and given.scores is None


def test_an_undefined_silhouette_is_the_lowest():
    distances = euclidean_distances(np.arange(4.0).reshape(-1, 1))
    assert silhouette(distances, np.zeros(4, dtype=int)) == -1.0
    assert silhouette(distances, np.arange(4)) == -1.0
    assert silhouette(distances, np.array([0, 0, 1, 1])) > 0


def test_the_sample_is_drawn_once_above_its_size():
    np.testing.assert_array_equal(sample_rows(50, 0), np.arange(50))
    rows = sample_rows(COUNT_SAMPLE + 500, 0)
    assert rows.size == COUNT_SAMPLE and np.unique(rows).size == COUNT_SAMPLE
    np.testing.assert_array_equal(rows, sample_rows(COUNT_SAMPLE + 500, 0))


@pytest.mark.parametrize("objective, kernel", [("mmd_ovo", "rbf"), ("mmd_ova", "linear"),
                                               ("mi", "rbf"), ("wasserstein_ovo", "rbf")])
def test_the_distances_are_those_of_the_geometry(objective, kernel):
    X = np.random.default_rng(0).normal(size=(30, 3)) * [1.0, 2.0, 3.0] + 5.0
    standardisation = Standardisation(X)
    geometry = Geometry(standardisation, objective, kernel, None, "euclidean", None)
    distances = geometry.distances(standardisation.inputs(X))
    scaled = (X - X.mean(axis=0)) / np.sqrt(np.mean(X.var(axis=0)))  # kernel coordinates
    expected = euclidean_distances(scaled)
    if objective.startswith("mmd") and kernel == "rbf":  # the feature space of exp(-|x-y|^2/6)
        expected = np.sqrt(np.maximum(2.0 - 2.0 * rbf_kernel(scaled, gamma=1 / 6), 0.0))
    np.testing.assert_allclose(distances, expected, atol=1e-7)


# ---------------------------------------------------------------- the estimator


def test_auto_finds_separated_blobs_and_keeps_the_fit_at_that_number():
    X, y = blobs()
    model = SparseGEMINI(n_clusters="auto", max_clusters=6, **FAST).fit(X)
    assert model.n_clusters_ == 4
    assert adjusted_rand_score(y, model.labels_) > 0.95
    np.testing.assert_array_equal(model.n_clusters_candidates_, np.arange(2, 7))
    assert model.n_clusters_candidates_[np.argmax(model.n_clusters_scores_)] == 4
    given = SparseGEMINI(n_clusters=4, **FAST).fit(X)  # the same fit, bit for bit
    np.testing.assert_array_equal(model.labels_, given.labels_)
    np.testing.assert_array_equal(model.loss_curve_, given.loss_curve_)
    for name, value in given.params_.items():
        np.testing.assert_array_equal(model.params_[name], value)
    assert model.predict_proba(X).shape == (X.shape[0], 4)


def test_the_scores_are_the_silhouettes_of_the_candidates_fits():
    X, _ = blobs(120, centers=3)
    model = SparseGEMINI(n_clusters="auto", max_clusters=4, kernel="linear", **FAST).fit(X)
    for k, score in zip(model.n_clusters_candidates_, model.n_clusters_scores_):
        labels = SparseGEMINI(n_clusters=int(k), kernel="linear", **FAST).fit(X).labels_
        assert score == pytest.approx(silhouette_score(X, labels))  # linear: Euclidean


@pytest.mark.parametrize("gemini", ["wasserstein_ovo", "wasserstein_ova"])
def test_a_wasserstein_gemini_counts_on_its_mmd_and_fits_the_number_found(gemini,
                                                                          monkeypatch):
    """A Wasserstein GEMINI's fits grow with the square of the number of clusters:
    'auto' took 56 s on 90 samples. The candidates train the MMD of the same kind
    (each scored in the Wasserstein distances); the number found is then fitted
    with the Wasserstein GEMINI, as given that number, bit for bit."""
    from skdiffclust.gemini import _fit

    trained = []
    real = _fit.train_at_penalty
    monkeypatch.setattr("skdiffclust.gemini._estimator.train_at_penalty",
                        lambda params, problem, *args: trained.append(problem.objective)
                        or real(params, problem, *args))
    X, y = blobs(90, centers=3)
    model = SparseGEMINI(n_clusters="auto", gemini=gemini, max_clusters=6, **FAST).fit(X)
    kind = gemini.rsplit("_", 1)[1]
    assert trained == [f"mmd_{kind}"] * 5 + [gemini]
    assert model.n_clusters_ == 3 and adjusted_rand_score(y, model.labels_) > 0.95
    given = SparseGEMINI(n_clusters=3, gemini=gemini, **FAST).fit(X)
    np.testing.assert_array_equal(model.labels_, given.labels_)
    np.testing.assert_array_equal(model.loss_curve_, given.loss_curve_)


def test_an_integer_n_clusters_clears_an_earlier_count():
    X, _ = blobs(120, centers=3)
    model = SparseGEMINI(n_clusters="auto", max_clusters=4, **FAST).fit(X)
    assert hasattr(model, "n_clusters_scores_")
    model.set_params(n_clusters=3).fit(X)
    assert not hasattr(model, "n_clusters_candidates_")
    assert not hasattr(model, "n_clusters_scores_")


def test_path_counts_first_then_runs_the_path_at_that_number():
    X, _ = blobs(150, centers=3)
    X = np.hstack([X, np.random.default_rng(0).normal(size=(150, 2))])  # two noise features
    model = SparseGEMINI(n_clusters="auto", max_clusters=5, lambda_multiplier=1.5, **FAST)
    model.path(X)
    assert model.n_clusters_ == 3
    np.testing.assert_array_equal(model.n_clusters_candidates_, np.arange(2, 6))
    assert model.params_["skip"].shape[1] == 3


def test_partial_fit_counts_on_the_first_chunk_and_keeps_the_number():
    X, _ = blobs(300, centers=3)
    model = SparseGEMINI(n_clusters="auto", max_clusters=5, **FAST)
    for chunk in np.array_split(X, 3):
        model.partial_fit(chunk)
        assert model.n_clusters_ == 3
        np.testing.assert_array_equal(model.n_clusters_candidates_, np.arange(2, 6))


def test_three_samples_have_one_candidate():
    X = np.array([[0.0, 0.0], [0.1, 0.0], [5.0, 5.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = SparseGEMINI(n_clusters="auto", **FAST).fit(X)
    np.testing.assert_array_equal(model.n_clusters_candidates_, [2])


@pytest.mark.parametrize("params, error, match", [
    (dict(n_clusters="many"), InvalidParameterError, "n_clusters"),
    (dict(n_clusters=2.5), InvalidParameterError, "n_clusters"),
    (dict(n_clusters="auto", max_clusters=1), InvalidParameterError, "max_clusters"),
    (dict(n_clusters="auto", max_clusters=2.5), InvalidParameterError, "max_clusters"),
    (dict(n_clusters="auto", max_clusters="auto"), InvalidParameterError, "max_clusters"),
])
def test_bad_counts_are_refused_by_name(params, error, match):
    X, _ = blobs(40, centers=2)
    with pytest.raises(error, match=match):
        SparseGEMINI(**params).fit(X)

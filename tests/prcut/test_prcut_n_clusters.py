"""PRCut's n_clusters='auto': the number of clusters read off the graph's spectrum."""

import numpy as np
import pytest
from sklearn.datasets import make_blobs, make_moons
from sklearn.metrics import adjusted_rand_score
from sklearn.utils._param_validation import InvalidParameterError

from skdiffclust import PRCut
from skdiffclust._graphcut._count import (COUNT_FLOOR, count_candidates, count_scores,
                                          large_components)


# ---------------------------------------------------------------- the rule (NumPy)


def test_the_score_of_k_is_the_log_ratio_of_eigenvalues_k_plus_1_and_k():
    values = np.array([0.0, 0.01, 0.02, 0.5, 0.6, 1.0])  # candidates 2, 3, 4, 5
    floor = COUNT_FLOOR * 1.0
    expected = np.log(np.maximum(values[2:], floor) / np.maximum(values[1:-1], floor))
    np.testing.assert_allclose(count_scores(values), expected)
    assert np.argmax(count_scores(values)) + 2 == 3  # the jump after three


def test_eigenvalues_below_the_floor_do_not_make_a_gap():
    """Tiny eigenvalues within clusters (ratio 2 between 1e-5 and 2e-5) score 0."""
    values = np.array([0.0, 1e-5, 2e-5, 0.2, 0.21, 0.22, 0.25])
    scores = count_scores(values)
    assert scores[0] == 0.0
    assert np.argmax(scores) + 2 == 3


def test_large_components_are_those_of_a_tenth_of_the_samples_or_more():
    components = np.repeat([0, 1, 2, 3], [45, 45, 9, 1])
    assert large_components(components) == 2
    assert large_components(np.zeros(50, dtype=np.int64)) == 1


def test_the_candidates_stop_below_the_number_of_samples():
    np.testing.assert_array_equal(count_candidates(20, 1000), np.arange(2, 21))
    np.testing.assert_array_equal(count_candidates(20, 6), np.arange(2, 6))
    assert count_candidates(20, 2).size == 0


# ---------------------------------------------------------------- the estimator

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


@pytest.mark.parametrize("n_centers", [3, 6])
def test_auto_finds_the_number_of_separated_blobs(n_centers):
    X, y = make_blobs(600, n_features=2, centers=n_centers, cluster_std=0.4,
                      center_box=(-15, 15), random_state=7)  # centres 7.6 apart or more
    model = PRCut(n_clusters="auto", random_state=0).fit(X)
    assert model.n_clusters_ == n_centers
    assert adjusted_rand_score(y, model.labels_) > 0.95
    np.testing.assert_array_equal(model.n_clusters_candidates_, np.arange(2, 51))
    assert model.predict_proba(X).shape == (600, n_centers)


def test_on_a_connected_graph_the_highest_score_is_chosen():
    """Touching blobs: one component, the number is the eigengap's."""
    X, y = make_blobs(800, centers=[[0, 0], [5, 0], [0, 5], [5, 5]], cluster_std=1.0,
                      random_state=1)
    model = PRCut(n_clusters="auto", random_state=0).fit(X)
    chosen = model.n_clusters_candidates_[np.argmax(model.n_clusters_scores_)]
    assert model.n_clusters_ == chosen == 4
    assert adjusted_rand_score(y, model.labels_) > 0.9


def test_auto_follows_shapes_that_are_not_blobs():
    X, y = make_moons(400, noise=0.05, random_state=0)
    model = PRCut(n_clusters="auto", random_state=0).fit(X)
    assert model.n_clusters_ == 2
    assert adjusted_rand_score(y, model.labels_) > 0.95


def test_max_clusters_bounds_the_candidates():
    X, _ = make_blobs(300, centers=8, cluster_std=0.3, center_box=(-20, 20), random_state=0)
    model = PRCut(n_clusters="auto", max_clusters=5, random_state=0).fit(X)
    np.testing.assert_array_equal(model.n_clusters_candidates_, np.arange(2, 6))
    assert 2 <= model.n_clusters_ <= 5


def test_more_components_than_candidates_give_the_largest_candidate():
    X, _ = make_blobs(200, centers=10, cluster_std=0.05, center_box=(-50, 50), random_state=1)
    model = PRCut(n_clusters="auto", max_clusters=4, n_neighbors=5, random_state=0)
    with pytest.warns(UserWarning):  # more components than clusters: grouped
        model.fit(X)
    assert model.n_clusters_ == 4


def test_an_integer_n_clusters_is_not_counted_and_clears_an_earlier_count():
    X, _ = make_blobs(200, centers=3, random_state=0)
    model = PRCut(n_clusters="auto", random_state=0, max_iter=20).fit(X)
    assert hasattr(model, "n_clusters_scores_")
    model.set_params(n_clusters=3).fit(X)
    assert not hasattr(model, "n_clusters_candidates_")
    assert not hasattr(model, "n_clusters_scores_")


def test_the_same_seed_finds_the_same_number_and_labels():
    X, _ = make_blobs(500, centers=4, random_state=5)
    first = PRCut(n_clusters="auto", random_state=0, max_iter=30).fit(X)
    second = PRCut(n_clusters="auto", random_state=0, max_iter=30).fit(X)
    np.testing.assert_array_equal(first.labels_, second.labels_)
    np.testing.assert_array_equal(first.n_clusters_scores_, second.n_clusters_scores_)


def test_a_precomputed_affinity_is_counted_too():
    X, _ = make_blobs(300, n_features=2, centers=3, cluster_std=0.4, center_box=(-15, 15),
                      random_state=7)
    graph = PRCut(n_clusters=3, random_state=0, max_iter=5).fit(X).affinity_matrix_
    model = PRCut(n_clusters="auto", affinity="precomputed", random_state=0).fit(graph)
    assert model.n_clusters_ == 3


def test_partial_fit_counts_on_the_first_chunk_and_keeps_the_number():
    X, _ = make_blobs(1200, n_features=2, centers=4, cluster_std=0.4, center_box=(-15, 15),
                      random_state=7)
    model = PRCut(n_clusters="auto", random_state=0)
    for chunk in np.array_split(X, 3):
        model.partial_fit(chunk)
        assert model.n_clusters_ == 4
        np.testing.assert_array_equal(model.n_clusters_candidates_, np.arange(2, 51))


@pytest.mark.parametrize("params, match", [
    (dict(n_clusters="many"), "n_clusters"),
    (dict(n_clusters="auto", max_clusters=1), "max_clusters"),
    (dict(n_clusters="auto", max_clusters=2.5), "max_clusters"),
])
def test_bad_counts_are_refused_by_name(params, match):
    X, _ = make_blobs(50, centers=2, random_state=0)
    with pytest.raises(InvalidParameterError, match=match):
        PRCut(**params).fit(X)


def test_auto_on_the_digits_finds_about_ten():
    """Scikit-learn's digits: hubs, so the stability of the partitions of the
    shared-neighbour weights decides (12: two digits' styles apart)."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    model = PRCut(n_clusters="auto", random_state=0).fit(X / 16.0)
    assert 9 <= model.n_clusters_ <= 12
    assert adjusted_rand_score(y, model.labels_) > 0.65  # KMeans by silhouette: 0.60

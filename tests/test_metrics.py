"""Metrics and scorers: brute force checks, model selection."""

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.cluster import AgglomerativeClustering, KMeans
from sklearn.datasets import make_blobs
from sklearn.metrics import calinski_harabasz_score, silhouette_score
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skdiffclust import SpanningForestClustering
from skdiffclust.metrics import (
    batch_clustering_error,
    calinski_harabasz_scorer,
    clustering_accuracy,
    pair_confusion_error,
    ratio_cut,
    silhouette_scorer,
)


def _brute_force_accuracy(y_true, y_pred):
    classes = np.unique(y_true)
    clusters = np.unique(y_pred)
    best = 0
    # every injective assignment of clusters to classes (or classes to clusters)
    if len(clusters) <= len(classes):
        for target in itertools.permutations(classes, len(clusters)):
            mapping = dict(zip(clusters, target))
            best = max(best, sum(mapping[p] == t for p, t in zip(y_pred, y_true)))
    else:
        for source in itertools.permutations(clusters, len(classes)):
            mapping = dict(zip(source, classes))
            best = max(best, sum(mapping.get(p, None) == t for p, t in zip(y_pred, y_true)))
    return best / len(y_true)


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 4)), min_size=1, max_size=25))
def test_clustering_accuracy_equals_brute_force(pairs):
    y_true, y_pred = (np.array(v) for v in zip(*pairs))
    expected = _brute_force_accuracy(y_true, y_pred)
    assert clustering_accuracy(y_true, y_pred) == pytest.approx(expected)


def test_clustering_accuracy_is_one_to_one():
    # majority mapping would give 1.0 here (both clusters to class 0)
    assert clustering_accuracy([0, 0, 0, 0], [0, 0, 1, 1]) == 0.5


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=30))
def test_pair_confusion_error_equals_connectivity_matrices(pairs):
    y_true, y_pred = (np.array(v) for v in zip(*pairs))
    M_true = y_true[:, None] == y_true[None, :]
    M_pred = y_pred[:, None] == y_pred[None, :]
    assert pair_confusion_error(y_true, y_pred) == pytest.approx(np.mean(M_true != M_pred))


def test_metrics_reject_inconsistent_lengths():
    with pytest.raises(ValueError):
        clustering_accuracy([0, 1], [0, 1, 1])
    with pytest.raises(ValueError):
        pair_confusion_error([0, 1], [0])


def test_scorers_work_with_and_without_predict():
    X, _ = make_blobs(n_samples=90, centers=3, cluster_std=0.5, random_state=0)
    kmeans = KMeans(n_clusters=3, n_init=4, random_state=0).fit(X)
    assert silhouette_scorer(kmeans, X) == pytest.approx(silhouette_score(X, kmeans.predict(X)))
    agglo = AgglomerativeClustering(n_clusters=3)  # no predict: fit_predict on X
    assert silhouette_scorer(agglo, X) > 0.5
    assert calinski_harabasz_scorer(agglo, X) > 10


def test_single_cluster_scores_worst():
    X, _ = make_blobs(n_samples=30, centers=3, random_state=0)
    one = SpanningForestClustering(n_clusters=1).fit(X)
    assert silhouette_scorer(one, X) == -1.0
    assert calinski_harabasz_scorer(one, X) == 0.0


def test_grid_search_picks_the_right_number_of_clusters():
    X, _ = make_blobs(n_samples=150, centers=4, cluster_std=0.5, random_state=1)
    X = X * [1.0, 50.0]  # scales differ: the pipeline's scaler matters
    search = GridSearchCV(
        make_pipeline(StandardScaler(), SpanningForestClustering()),
        {"spanningforestclustering__n_clusters": [2, 3, 4, 5, 6]},
        scoring=silhouette_scorer, cv=3,
    ).fit(X)
    assert search.best_params_["spanningforestclustering__n_clusters"] == 4


def test_batch_clustering_error_clusters_each_batch_by_single_linkage():
    from scipy.cluster.hierarchy import fcluster, linkage

    X, y = make_blobs(150, centers=4, cluster_std=1.5, random_state=0)
    wrong = pairs = 0
    for start in range(0, 150, 64):  # batches of 64, 64 and 22
        rows = slice(start, start + 64)
        single = fcluster(linkage(X[rows], "single"), 4, criterion="maxclust")
        n = y[rows].size
        wrong += pair_confusion_error(y[rows], single) * n**2
        pairs += n**2
    error = batch_clustering_error(y, X, n_clusters=4, batch_size=64)
    assert error == pytest.approx(wrong / pairs)
    assert 0 < error < 1
    assert batch_clustering_error(y, X, n_clusters=4, batch_size=150) != error


def test_batch_clustering_error_is_zero_on_separated_classes_and_checks_input():
    X, y = make_blobs(100, centers=3, cluster_std=0.1, random_state=1)
    assert batch_clustering_error(y, X, n_clusters=3, batch_size=64) == 0.0
    with pytest.raises(ValueError, match="inconsistent"):
        batch_clustering_error(y[:-1], X, n_clusters=3)
    with pytest.raises(ValueError, match="batch_size"):
        batch_clustering_error(y, X, n_clusters=3, batch_size=0)


def test_labels_with_nan_are_refused_by_every_label_metric():
    # clustering_accuracy matched the NaN class to a cluster: 1.0
    for metric in (clustering_accuracy, pair_confusion_error):
        with pytest.raises(ValueError, match="NaN"):
            metric([np.nan, np.nan, 1.0], [0, 0, 1])
    # ratio_cut counted the NaN labels as one cluster: 1.6
    W = np.array([[0, 1, .1, 0], [1, 0, 0, 0], [.1, 0, 0, 1], [0, 0, 1, 0]])
    with pytest.raises(ValueError, match="labels contain NaN"):
        ratio_cut(W, [0.0, np.nan, 1.0, np.nan])


def test_counts_given_as_booleans_are_refused():
    # True passed as 1: n_clusters=True gave 0.5, batch_size=True batches of one
    X = np.array([[0.0], [0.1], [5.0], [5.1]])
    for counts in ({"n_clusters": True}, {"n_clusters": 2, "batch_size": True}):
        with pytest.raises(TypeError, match="must be an int, got True"):
            batch_clustering_error([0, 0, 1, 1], X, **{"batch_size": 4, **counts})


def test_tensors_that_require_grad_are_named():
    # torch's "Can't call numpy() on Tensor that requires grad" before
    torch = pytest.importorskip("torch", reason="needs torch (the tensors to refuse)")
    W = torch.tensor([[0.0, 1.0], [1.0, 0.0]], requires_grad=True)
    with pytest.raises(ValueError, match="affinity is a torch tensor that requires grad"):
        ratio_cut(W, [0, 1])
    X = torch.tensor([[0.0], [5.0]], requires_grad=True)
    with pytest.raises(ValueError, match="X is a torch tensor that requires grad"):
        batch_clustering_error([0, 1], X, n_clusters=2)


@pytest.mark.parametrize("spoil, error, match", [
    (lambda X: np.where(X == X[0, 0], np.nan, X), ValueError, "NaN"),  # gave a number
    (lambda X: np.where(X == X[0, 0], np.inf, X), ValueError, "infinity"),  # a C++ assert
    (lambda X: X * 1e154, ValueError, "overflow"),  # the same assertion
    (lambda X: X[:, 0], ValueError, "2D"),
])
def test_batch_clustering_error_refuses_what_it_cannot_cluster(spoil, error, match):
    X, y = make_blobs(100, centers=3, random_state=1)
    with pytest.raises(error, match=match):
        batch_clustering_error(y, spoil(X), n_clusters=3)
    with pytest.raises(TypeError, match="n_clusters must be an instance of int"):
        batch_clustering_error(y, X, n_clusters=2.7)  # ran as 2


def test_batch_clustering_error_of_tiny_values_is_that_of_the_values():
    # squared distances that underflow to 0 made other single-linkage partitions
    X, y = make_blobs(100, centers=3, cluster_std=2.0, random_state=1)
    assert batch_clustering_error(y, X * 1e-200, n_clusters=3) == \
        batch_clustering_error(y, X, n_clusters=3)


class _Brightness:
    """A fitted clusterer of images (n, ...): cluster 1 for the brighter half."""

    def predict(self, X):
        means = np.asarray(X).reshape(len(X), -1).mean(1)
        return (means > np.median(means)).astype(int)


def test_scorers_read_images_as_rows_of_pixels():
    # images of 3 or 4 axes (grey, channels first or last) reached scikit-learn's
    # scores, which refuse arrays of more than 2 dimensions
    images = np.random.default_rng(0).random((30, 3, 5, 4))
    for X in (images, images.transpose(0, 2, 3, 1), images.tolist(), images[:, 0]):
        pixels = np.reshape(X, (30, -1))
        labels = _Brightness().predict(pixels)
        assert silhouette_scorer(_Brightness(), X) == pytest.approx(
            silhouette_score(pixels, labels), rel=1e-12)
        assert calinski_harabasz_scorer(_Brightness(), X) == pytest.approx(
            calinski_harabasz_score(pixels, labels), rel=1e-12)

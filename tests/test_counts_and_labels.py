"""Labels, counts, candidates and warnings agree with each other and with what the
user asked: labels run 0 .. n_clusters_ - 1, the candidates of ``'auto'`` hold the
number found, a warning names ``'auto'`` where the user passed it, and a
``partial_fit`` chunk too small to fill the clusters says nothing of them."""

import warnings

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from skdiffclust import PRCut, SparseGEMINI, SpanningForestClustering
from skdiffclust._utils._validation import warn_empty_clusters
from skdiffclust.exceptions import ClusterCountWarning
from tests._estimators import TORCH, each

STREAMING = each(lambda entry: entry.has_partial_fit)
# the estimators that count with n_clusters='auto' on tables (PRCut trains with torch)
COUNTING = [
    pytest.param(lambda: SpanningForestClustering(n_clusters="auto"),
                 id="SpanningForestClustering"),
    pytest.param(lambda: PRCut(n_clusters="auto", random_state=0), id="PRCut", marks=TORCH),
    pytest.param(lambda: SparseGEMINI(n_clusters="auto", random_state=0), id="SparseGEMINI"),
]
TWO = np.array([[0.0, 0.0], [1.0, 1.0]])


@pytest.mark.parametrize("make", COUNTING)
def test_the_candidates_hold_the_number_found_with_two_samples(make):
    """The forest and PRCut answered 2 among no candidates (empty arrays)."""
    estimator = make()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # n_neighbors lowered
        estimator.fit(TWO)
    assert estimator.n_clusters_ == 2
    assert estimator.n_clusters_ in estimator.n_clusters_candidates_
    assert estimator.n_clusters_scores_.shape == estimator.n_clusters_candidates_.shape


def test_the_empty_clusters_warning_names_auto_where_it_counted():
    with pytest.warns(UserWarning, match=r"found 2 non-empty clusters of the 3 that "
                                         r"n_clusters='auto' counted: "):
        warn_empty_clusters("PRCut", 2, 3, cause="c", remedy="r", counted=True)
    with pytest.warns(UserWarning, match=r"of the n_clusters=3 asked: "):
        warn_empty_clusters("PRCut", 2, 3, cause="c", remedy="r")


@pytest.mark.torch
def test_deep_labels_run_from_0_to_n_clusters_when_clusters_stay_empty():
    """Identical images: labels {4} with n_clusters_=1 before; now 0, and predict and
    predict_proba agree with them."""
    pytest.importorskip("torch", reason="DeepImageClustering trains with torch")
    from skdiffclust import DeepImageClustering

    images = np.ones((40, 8, 8))
    images[:, 2:5, 3] = 0.0
    model = DeepImageClustering(3, max_iter=1, n_heads=1, random_state=0)
    with pytest.warns(UserWarning, match="Labels are numbered 0 .. n_clusters_ - 1"):
        model.fit(images)
    assert model.n_clusters_ == 1
    np.testing.assert_array_equal(model.labels_, np.zeros(40))
    np.testing.assert_array_equal(model.predict(images), model.labels_)
    np.testing.assert_array_equal(model.predict_proba(images).argmax(1), model.labels_)


@pytest.mark.parametrize("entry", STREAMING)
def test_a_chunk_smaller_than_the_clusters_says_nothing_of_them(entry):
    """After a one-sample chunk ClAM and SparseGEMINI reported n_clusters_=1 and
    warned of empty clusters; PRCut, after a two-sample chunk, dropped a cluster of
    its network, and predict found two clusters where the model holds three."""
    X, _ = make_blobs(600, n_features=4, centers=3, random_state=0)
    estimator = entry.make(n_clusters=3).partial_fit(X[:300])
    assert estimator.n_clusters_ == 3
    small = X[300:301] if entry.name != "PRCut" else X[300:302]  # PRCut needs 2
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        warnings.filterwarnings("ignore", "n_neighbors=")  # the chunk's own graph
        estimator.partial_fit(small)
    assert estimator.n_clusters_ == 3
    assert np.unique(estimator.predict(X)).size == 3
    assert set(estimator.labels_) <= set(range(3))


def _blob(outlier=False):
    X = np.random.default_rng(0).standard_normal((90, 2))
    if outlier:
        X[0] = [40.0, 40.0]
    return X


@pytest.mark.parametrize("outlier", [False, True], ids=["one blob", "one blob, one outlier"])
@pytest.mark.parametrize("make", COUNTING)
def test_auto_says_so_when_the_data_show_no_cluster_structure(make, outlier):
    """One Gaussian blob of 90 points: the forest answered 6 (85 samples and five
    singletons), PRCut 4, SparseGEMINI 18, silently; with one far outlier, the
    forest and SparseGEMINI 2, the outlier alone."""
    estimator = make()
    with pytest.warns(ClusterCountWarning, match=r"\(n_clusters='auto'\) found no cluster "
                                                 r"structure: .*give n_clusters") as record:
        estimator.fit(_blob(outlier))
    assert record[0].filename == __file__


@pytest.mark.parametrize("make", COUNTING)
def test_auto_does_not_warn_where_there_are_clusters(make):
    estimator = make()
    X, _ = make_blobs(300, centers=[[0, 0], [6, 6], [12, 0]], random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ClusterCountWarning)
        estimator.fit(X)
    assert estimator.n_clusters_ == 3


def test_two_moons_show_structure_though_no_blob_does():
    """The neighbourhood cut reads shapes k-means cannot: two moons are structure."""
    from sklearn.datasets import make_moons

    from skdiffclust._utils._structure import structure_of

    X, y = make_moons(300, noise=0.05, random_state=0)
    assert structure_of(X, y, 0) is None
    halves = (_blob()[:, 0] > 0).astype(int)
    assert "cut the samples' neighbourhoods" in structure_of(_blob(), halves, 0)

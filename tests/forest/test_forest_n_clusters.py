"""SpanningForestClustering's n_clusters='auto': the largest gap of the tree's edges."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.cluster.hierarchy import fcluster, linkage
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score, pairwise_distances
from sklearn.utils._param_validation import InvalidParameterError

from skdiffclust import SpanningForestClustering
from skdiffclust.exceptions import InfeasibleConstraintsWarning
from skdiffclust.forest._settings import count_candidates, count_scores

# ---------------------------------------------------------------- the rule (NumPy)


def test_the_score_of_k_is_the_log_ratio_of_the_k_minus_1th_and_kth_heaviest_edges():
    lengths = np.array([10.0, 9.0, 1.0, 0.9, 0.8])  # heaviest first
    scores = count_scores(lengths, np.inf)  # one tree: no separation
    np.testing.assert_allclose(scores[1:], np.log(lengths[:-1] / lengths[1:]))
    candidates = count_candidates(20, 1, lengths.size)
    np.testing.assert_array_equal(candidates, [2, 3, 4, 5])
    assert candidates[np.argmax(scores[candidates - 1])] == 3  # cut 10 and 9, keep 1


def test_the_fewest_number_compares_the_widest_cut_with_the_heaviest_kept_edge():
    scores = count_scores(np.array([1.0, 0.9, 0.8]), 10.0)
    assert scores[0] == pytest.approx(np.log(10.0))
    assert np.argmax(scores) == 0


def test_zero_lengths_are_floored_and_ties_go_to_the_fewest_clusters():
    scores = count_scores(np.array([4.0, 2.0, 1.0, 0.0, 0.0]), np.inf)
    assert np.all(np.isfinite(scores[1:]))
    assert np.argmax(scores[1:]) == 2  # 1 against the floor: the largest gap
    equal = count_scores(np.array([2.0, 1.0, 0.5, 0.25]), np.inf)[1:]
    np.testing.assert_allclose(equal, np.log(2.0))
    assert np.argmax(equal) == 0  # smallest k of equal scores


def test_the_candidates_start_at_the_fewest_clusters_and_stop_below_n_samples():
    np.testing.assert_array_equal(count_candidates(20, 1, 999), np.arange(2, 21))
    np.testing.assert_array_equal(count_candidates(20, 1, 5), np.arange(2, 6))
    np.testing.assert_array_equal(count_candidates(20, 4, 100), np.arange(4, 21))
    np.testing.assert_array_equal(count_candidates(5, 8, 100), [8])
    assert count_candidates(20, 1, 1).size == 0  # two samples


# ---------------------------------------------------------------- the estimator


def _blobs(n_centers, n_samples=400, seed=7):
    return make_blobs(n_samples, n_features=2, centers=n_centers, cluster_std=0.3,
                      center_box=(-30, 30), random_state=seed)


@pytest.mark.parametrize("n_centers", [2, 4, 7])
def test_auto_finds_separated_blobs_exactly(n_centers):
    X, y = _blobs(n_centers)
    model = SpanningForestClustering(n_clusters="auto").fit(X)
    assert model.n_clusters_ == n_centers
    assert adjusted_rand_score(y, model.labels_) == 1.0


def test_attributes_are_the_candidates_and_their_log_gaps():
    X, _ = _blobs(3, n_samples=60)
    model = SpanningForestClustering(n_clusters="auto", max_clusters=8).fit(X)
    np.testing.assert_array_equal(model.n_clusters_candidates_, np.arange(2, 9))
    assert model.n_clusters_candidates_.dtype == np.int64
    assert model.n_clusters_scores_.shape == (7,)
    heights = np.sort(pairwise_distances(X)[tuple(model.forest_edges_.T)])  # kept edges
    lengths = linkage(X, "single")[::-1, 2]  # the tree's edges, heaviest first
    np.testing.assert_allclose(model.n_clusters_scores_, np.log(lengths[:7] / lengths[1:8]))
    assert heights[-1] == pytest.approx(lengths[2])  # 3 trees: the third heaviest kept
    tiny = SpanningForestClustering(n_clusters="auto").fit(X[:5])
    np.testing.assert_array_equal(tiny.n_clusters_candidates_, [2, 3, 4])


def test_an_integer_n_clusters_is_not_counted_and_clears_an_earlier_count():
    X, _ = _blobs(3, n_samples=60)
    model = SpanningForestClustering(n_clusters="auto").fit(X)
    model.set_params(n_clusters=3).fit(X)
    assert not hasattr(model, "n_clusters_candidates_")
    assert not hasattr(model, "n_clusters_scores_")


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(3, 60), st.integers(1, 4),
       st.integers(2, 20))
def test_auto_is_scipy_single_linkage_at_the_largest_gap(seed, n, d, max_clusters):
    X = np.random.default_rng(seed).standard_normal((n, d))
    model = SpanningForestClustering(n_clusters="auto", max_clusters=max_clusters).fit(X)
    heights = linkage(X, "single")[::-1, 2]
    ks = np.arange(2, min(max_clusters, n - 1) + 1)
    floor = 1e-12 * heights[0]
    gaps = np.log(np.maximum(heights[ks - 2], floor) / np.maximum(heights[ks - 1], floor))
    np.testing.assert_allclose(model.n_clusters_scores_, gaps, rtol=1e-9, atol=1e-9)
    k = model.n_clusters_
    assert model.n_clusters_scores_[k - 2] >= gaps.max() - 1e-9
    reference = fcluster(linkage(X, "single"), k, "maxclust")
    assert adjusted_rand_score(reference, model.labels_) == 1.0
    same = SpanningForestClustering(n_clusters=k).fit(X)
    np.testing.assert_array_equal(model.labels_, same.labels_)
    np.testing.assert_array_equal(model.forest_edges_, same.forest_edges_)


def test_a_precomputed_similarity_counts_as_its_distances():
    """S = -D: the lengths are max(S) - S = D, the features' count; an RBF
    similarity (lengths 1 - exp(-d^2)) finds the same blobs."""
    X, y = _blobs(4, n_samples=120)
    D = pairwise_distances(X)
    features = SpanningForestClustering(n_clusters="auto").fit(X)
    minus_d = SpanningForestClustering(n_clusters="auto", metric="precomputed").fit(-D)
    assert minus_d.n_clusters_ == features.n_clusters_ == 4
    np.testing.assert_allclose(minus_d.n_clusters_scores_, features.n_clusters_scores_,
                               rtol=1e-9)
    rbf = SpanningForestClustering(n_clusters="auto", metric="precomputed").fit(
        np.exp(-(D / 2.0) ** 2))
    assert rbf.n_clusters_ == 4
    assert adjusted_rand_score(y, rbf.labels_) == 1.0


def test_other_metrics_count_with_their_distances():
    X, y = _blobs(3, n_samples=90)
    model = SpanningForestClustering(n_clusters="auto", metric="manhattan").fit(X)
    assert model.n_clusters_ == 3
    lengths = linkage(X, "single", metric="cityblock")[::-1, 2]
    np.testing.assert_allclose(model.n_clusters_scores_[:3], np.log(lengths[:3] / lengths[1:4]))


def test_partial_labels_start_the_candidates_at_the_classes_they_keep_apart():
    X, y = _blobs(3, n_samples=90)
    first = np.flatnonzero(y == 0)
    partial = np.full(90, -1)
    partial[first[:2]] = [0, 1]  # two classes inside one blob
    partial[np.flatnonzero(y == 1)[0]] = 2
    partial[np.flatnonzero(y == 2)[0]] = 3
    model = SpanningForestClustering(n_clusters="auto").fit(X, partial_labels=partial)
    assert model.n_clusters_candidates_[0] == 4  # at least the four classes
    assert model.n_clusters_ == 4  # the blobs, the first one split
    same = SpanningForestClustering(n_clusters=model.n_clusters_).fit(X, partial_labels=partial)
    np.testing.assert_array_equal(model.labels_, same.labels_)


def test_labels_of_the_blobs_keep_their_number():
    X, y = _blobs(3, n_samples=90)
    partial = np.full(90, -1)
    for label in range(3):
        partial[np.flatnonzero(y == label)[:3]] = label
    model = SpanningForestClustering(n_clusters="auto").fit(X, partial_labels=partial)
    assert model.n_clusters_candidates_[0] == 3
    assert model.n_clusters_ == 3
    assert adjusted_rand_score(y, model.labels_) == 1.0


@pytest.mark.parametrize("pairs", ["must_link", "cannot_link"])
def test_must_and_cannot_link_pairs_count_on_the_constrained_forest(pairs):
    X, y = _blobs(3, n_samples=90)
    a, b, c = (np.flatnonzero(y == label)[0] for label in range(3))
    if pairs == "must_link":  # blobs 0 and 1 joined: their bridge is never cut
        model = SpanningForestClustering(n_clusters="auto").fit(X, must_link=[[a, b]])
        assert model.n_clusters_ == 2
        assert model.labels_[a] == model.labels_[b] != model.labels_[c]
    else:  # two samples of blob 0 apart: four clusters at least
        d = np.flatnonzero(y == 0)[1]
        model = SpanningForestClustering(n_clusters="auto").fit(
            X, cannot_link=[[a, d], [a, b], [b, c], [a, c], [d, b], [d, c]])
        assert model.n_clusters_candidates_[0] == 4
        assert model.n_clusters_ == 4
    same = SpanningForestClustering(n_clusters=model.n_clusters_).fit(
        X, **{pairs: [[a, b]] if pairs == "must_link" else
              [[a, d], [a, b], [b, c], [a, c], [d, b], [d, c]]})
    np.testing.assert_array_equal(model.labels_, same.labels_)


def test_auto_warns_when_the_constraints_need_more_than_max_clusters():
    """Cannot-link pairs that keep four clusters apart with max_clusters=3 returned
    four silently, where n_clusters=3 warns: 'auto' warns alike, naming max_clusters."""
    X, y = _blobs(3, n_samples=90)
    a, b, c = (np.flatnonzero(y == label)[0] for label in range(3))
    d = np.flatnonzero(y == 0)[1]
    apart = [[a, d], [a, b], [b, c], [a, c], [d, b], [d, c]]
    with pytest.warns(InfeasibleConstraintsWarning,
                      match=r"keep 4 clusters apart, more than max_clusters=3 "
                            r"\(n_clusters='auto'\); returning 4") as record:
        model = SpanningForestClustering(n_clusters="auto", max_clusters=3).fit(
            X, cannot_link=apart)
    assert record[0].filename == __file__
    assert model.n_clusters_ == 4 and np.unique(model.labels_).size == 4


def test_precomputed_with_partial_labels_is_the_features_count():
    X, y = _blobs(3, n_samples=60)
    partial = np.where(np.arange(60) % 7 == 0, y, -1)
    partial[np.flatnonzero(y == 2)[:2]] = 2
    features = SpanningForestClustering(n_clusters="auto").fit(X, partial_labels=partial)
    similarity = SpanningForestClustering(n_clusters="auto", metric="precomputed").fit(
        -pairwise_distances(X), partial_labels=partial)
    assert similarity.n_clusters_ == features.n_clusters_ == 3
    np.testing.assert_array_equal(similarity.n_clusters_candidates_,
                                  features.n_clusters_candidates_)
    np.testing.assert_allclose(similarity.n_clusters_scores_, features.n_clusters_scores_,
                               rtol=1e-9)


def test_max_clusters_bounds_the_candidates():
    X, _ = _blobs(8, n_samples=160)
    model = SpanningForestClustering(n_clusters="auto", max_clusters=5).fit(X)
    np.testing.assert_array_equal(model.n_clusters_candidates_, np.arange(2, 6))
    assert 2 <= model.n_clusters_ <= 5


def test_one_and_two_samples():
    assert SpanningForestClustering(n_clusters="auto").fit([[0.0], [1.0]]).n_clusters_ == 2
    assert SpanningForestClustering(n_clusters="auto").fit([[0.0]]).n_clusters_ == 1


@pytest.mark.parametrize("params, match", [
    (dict(n_clusters="many"), "n_clusters"),
    (dict(n_clusters="auto", max_clusters=1), "max_clusters"),
    (dict(n_clusters="auto", max_clusters=2.5), "max_clusters"),
    (dict(n_clusters="auto", max_clusters=None), "max_clusters"),
])
def test_bad_counts_are_refused_by_name(params, match):
    X, _ = _blobs(2, n_samples=20)
    with pytest.raises(InvalidParameterError, match=match):
        SpanningForestClustering(**params).fit(X)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_an_embedding_is_trained_for_the_number_counted_on_the_input():
    pytest.importorskip("torch")
    X, y = _blobs(3, n_samples=60)
    partial = np.where(np.arange(60) % 5 == 0, y, -1)
    model = SpanningForestClustering(n_clusters="auto", embedding="linear", max_iter=1,
                                     random_state=0, device="cpu").fit(X, partial_labels=partial)
    counted = SpanningForestClustering(n_clusters="auto").fit(X, partial_labels=partial)
    assert model.n_clusters_ == counted.n_clusters_ == 3
    np.testing.assert_array_equal(model.n_clusters_scores_, counted.n_clusters_scores_)
    same = SpanningForestClustering(n_clusters=3, embedding="linear", max_iter=1,
                                    random_state=0, device="cpu").fit(X, partial_labels=partial)
    np.testing.assert_array_equal(model.labels_, same.labels_)

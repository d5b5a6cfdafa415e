"""DeepImageClustering's n_clusters='auto': the spectrum of the images' graph,
its near ties broken by the modularity of the spectral start's partitions."""

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import normalized_mutual_info_score
from sklearn.utils._param_validation import InvalidParameterError

from skdiffclust.prcut._settings import count_clusters


class KnownSpectrum:
    """A graph of one component and a given spectrum, for the rule alone."""

    def __init__(self, values, n_samples=100):
        self.values = np.asarray(values, dtype=np.float64)
        self.components = np.zeros(n_samples, dtype=np.int64)

    def spectrum(self, n_values, shared_neighbours):
        return self.values[:n_values]


# eigenvalues 1 .. 21: jumps after 2 (x 5) and after 5 (x 4.8), nothing else (all
# above the floor, 3% of the 21st)
SPECTRUM = np.concatenate([[0.0, 1.0], [5.0, 5.1, 5.2], np.linspace(25.0, 26.0, 16)])


def test_without_a_tie_break_the_largest_jump_wins():
    count = count_clusters(20, KnownSpectrum(SPECTRUM), shared_neighbours=True)
    assert count.n_clusters == 2
    assert count.ties is None


def test_near_ties_are_broken_by_the_tie_break_and_only_they_are_asked():
    asked = []

    def prefer_more(k):
        asked.append(k)
        return float(k)

    count = count_clusters(20, KnownSpectrum(SPECTRUM), shared_neighbours=True,
                           tie_break=prefer_more, tie_share=0.8)
    assert sorted(asked) == [2, 5]
    assert count.n_clusters == 5
    np.testing.assert_array_equal(np.flatnonzero(~np.isnan(count.ties)) + 2, [2, 5])
    # a share of 1: only the best is tied
    count = count_clusters(20, KnownSpectrum(SPECTRUM), shared_neighbours=True,
                           tie_break=prefer_more, tie_share=1.0)
    assert count.n_clusters == 2


torch = pytest.importorskip("torch", reason="DeepImageClustering trains with torch")
pytestmark = pytest.mark.torch

from skdiffclust.deep import DeepImageClustering  # noqa: E402

DIGITS, TRUTH = load_digits(return_X_y=True)
IMAGES = (DIGITS / 16.0).reshape(-1, 8, 8)
FAST = dict(max_iter=2, batch_size=128, n_heads=2, device="cpu", random_state=0)


def fit(X, n_clusters, **changes):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return DeepImageClustering(n_clusters, **dict(FAST, **changes)).fit(X)


@pytest.fixture(scope="module")
def digits_auto():
    return fit(IMAGES, "auto")


def test_auto_finds_the_ten_digits_and_fits_as_ten_would(digits_auto):
    """On the 1,797 digits the spectrum jumps about as much after 8 as after 10;
    the modularity of the start's partitions chooses 10, and the fit is that of
    n_clusters=10, bit for bit."""
    model = digits_auto
    assert model.n_clusters_ == 10
    ten = fit(IMAGES, 10)
    np.testing.assert_array_equal(model.labels_, ten.labels_)
    np.testing.assert_array_equal(model.start_labels_, ten.start_labels_)
    assert normalized_mutual_info_score(TRUTH, model.labels_) > 0.85
    for name in ("n_clusters_candidates_", "n_clusters_scores_", "n_clusters_modularity_"):
        assert not hasattr(ten, name)


def test_auto_keeps_the_criterion_of_each_candidate(digits_auto):
    model = digits_auto
    np.testing.assert_array_equal(model.n_clusters_candidates_, np.arange(2, 21))
    scores, modularity = model.n_clusters_scores_, model.n_clusters_modularity_
    assert scores.shape == modularity.shape == (19,)
    tied = ~np.isnan(modularity)
    assert tied[10 - 2] and tied.sum() >= 2
    np.testing.assert_array_equal(tied, scores >= 0.8 * scores.max())
    assert np.nanargmax(modularity) + 2 == model.n_clusters_
    assert np.all((modularity[tied] > 0) & (modularity[tied] < 1))


def test_max_clusters_and_n_eigenvectors_bound_the_candidates():
    X = IMAGES[:150]
    model = fit(X, "auto", max_clusters=6)
    np.testing.assert_array_equal(model.n_clusters_candidates_, np.arange(2, 7))
    assert 2 <= model.n_clusters_ <= 6
    model = fit(X, "auto", n_eigenvectors=4)
    np.testing.assert_array_equal(model.n_clusters_candidates_, np.arange(2, 5))


def test_an_integer_fit_after_auto_clears_the_count():
    model = fit(IMAGES[:100], "auto", max_clusters=4)
    assert hasattr(model, "n_clusters_scores_")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.set_params(n_clusters=3).fit(IMAGES[:100])
    assert not hasattr(model, "n_clusters_scores_")


@pytest.mark.parametrize("params, name", [
    (dict(n_clusters="many"), "n_clusters"), (dict(n_clusters="auto", max_clusters=1),
                                              "max_clusters"),
    (dict(n_clusters="auto", max_clusters=2.5), "max_clusters"),
])
def test_bad_values_are_refused_by_name(params, name):
    with pytest.raises(InvalidParameterError, match=name):
        DeepImageClustering(**params).fit(IMAGES[:50])

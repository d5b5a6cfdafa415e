"""DeepImageClustering's n_clusters='auto': the number whose partitions of the
images' graph are the most stable (``_graphcut._stability``)."""

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import normalized_mutual_info_score
from sklearn.utils._param_validation import InvalidParameterError

from skdiffclust.exceptions import ClusterCountWarning

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


def test_auto_finds_about_ten_digits_and_fits_as_that_number_would(digits_auto):
    """On the 1,797 digits the most stable number is 11 (a digit's two styles
    apart); the fit is that of n_clusters=11, bit for bit."""
    model = digits_auto
    assert 9 <= model.n_clusters_ <= 12
    given = fit(IMAGES, model.n_clusters_)
    np.testing.assert_array_equal(model.labels_, given.labels_)
    np.testing.assert_array_equal(model.start_labels_, given.start_labels_)
    assert normalized_mutual_info_score(TRUTH, model.labels_) > 0.85
    for name in ("n_clusters_candidates_", "n_clusters_scores_"):
        assert not hasattr(given, name)


def test_auto_keeps_the_stability_of_each_candidate(digits_auto):
    model = digits_auto
    np.testing.assert_array_equal(model.n_clusters_candidates_, np.arange(2, 51))
    scores = model.n_clusters_scores_
    assert scores.shape == (49,)
    assert np.argmax(scores) + 2 == model.n_clusters_
    assert np.all((scores > -0.5) & (scores <= 1.0))
    # the digits' number stands out: no warning
    assert scores.max() >= 0.7


def test_images_without_structure_warn_that_no_number_stands_out():
    """Noise images: the most stable partition (a cut along the graph's longest
    axis) cuts the graph as chance would; the fit warns, and the modularity
    decides."""
    noise = np.random.default_rng(0).random((300, 8, 8))
    with pytest.warns(ClusterCountWarning, match="no number of clusters that stands out"):
        model = fit(noise, "auto", max_clusters=12)
    best = np.argmax(model.n_clusters_modularity_)
    assert model.n_clusters_ == model.n_clusters_candidates_[best]


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

"""DeepImageClustering's n_clusters='auto': the network trains on max_clusters
clusters, which are merged along the kNN graph of its embedding while they are
linked (``deep/_merge.py``, ``_graphcut/_merge.py``); a network is then trained
on the merged clusters (``deep/_fit.refit_network``), and the number refined by
the silhouette in its embedding (``deep/_centres.py``)."""

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
def digits_auto_and_merged():
    """The fit, and the merged partition its last network was trained from."""
    import skdiffclust.deep._fit as fit_module

    merged = []
    refit = fit_module.refit_network

    def recorded(images, settings, seeds, name, fitted, labels, *session):
        merged.append(labels.copy())
        return refit(images, settings, seeds, name, fitted, labels, *session)

    fit_module.refit_network = recorded
    try:
        model = fit(IMAGES, "auto")
    finally:
        fit_module.refit_network = refit
    return model, merged[0]


@pytest.fixture(scope="module")
def digits_auto(digits_auto_and_merged):
    return digits_auto_and_merged[0]


def test_auto_finds_about_ten_digits_and_trains_a_network_on_them(digits_auto_and_merged):
    """On the 1,797 digits the merges stop near ten (a digit's styles apart);
    a network with one output per cluster found is then trained from the merged
    partition, which it refines rather than replaces; the start is that of
    n_clusters=max_clusters."""
    from sklearn.metrics import adjusted_rand_score

    model, merged = digits_auto_and_merged
    assert 9 <= model.n_clusters_ <= 16
    assert abs(np.unique(merged).size - model.n_clusters_) <= max(3, np.unique(merged).size / 2)
    assert adjusted_rand_score(merged, model.labels_) > 0.8
    assert normalized_mutual_info_score(TRUTH, model.labels_) > 0.85
    given = fit(IMAGES, 50)
    np.testing.assert_array_equal(model.start_labels_, given.start_labels_)
    assert model.network_state_["heads.0.bias"].shape == (model.n_clusters_,)
    np.testing.assert_array_equal(model.output_clusters_, np.arange(model.n_clusters_))
    proba = model.predict_proba(IMAGES)
    assert proba.shape == (IMAGES.shape[0], model.n_clusters_)
    np.testing.assert_allclose(proba.sum(1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(proba.argmax(1), model.labels_)
    # the clusters are the nearest centres of the network's clusters in its embedding
    embedding = model.transform(IMAGES)
    centres = np.array([embedding[model.labels_ == j].mean(0)
                        for j in range(model.n_clusters_)])
    nearest = ((embedding[:, None, :] - centres[None]) ** 2).sum(2).argmin(1)
    assert np.mean(nearest == model.labels_) > 0.999
    assert model.loss_curve_.shape == (model.n_iter_,)
    for name in ("n_clusters_candidates_", "n_clusters_scores_", "n_clusters_silhouette_"):
        assert not hasattr(given, name)
    np.testing.assert_array_equal(given.output_clusters_, np.arange(50))


def test_auto_keeps_the_link_and_the_silhouette_at_each_number_of_clusters(
        digits_auto_and_merged):
    """The evidence: the strongest link between the clusters at every number the
    merges passed through, the merges' number the largest below the threshold;
    and the silhouette of the numbers near it, the number found the highest."""
    from skdiffclust._graphcut._merge import MERGE_LINK

    model, merged = digits_auto_and_merged
    candidates, links = model.n_clusters_candidates_, model.n_clusters_scores_
    assert candidates[0] == 2 and candidates[-1] <= 50
    np.testing.assert_array_equal(np.diff(candidates), 1)
    assert np.all((links >= 0) & (links <= 1))
    merges = np.unique(merged).size - 2
    assert links[merges] < MERGE_LINK
    assert np.all(links[merges + 1:] >= MERGE_LINK)
    silhouette = model.n_clusters_silhouette_
    assert silhouette.shape == candidates.shape
    window = np.abs(candidates - candidates[merges]) <= max(3, round(candidates[merges] / 2))
    assert np.isfinite(silhouette[window]).all() and np.isnan(silhouette[~window]).all()
    assert model.n_clusters_ == candidates[np.nanargmax(silhouette)]
    assert not hasattr(model, "n_clusters_modularity_")


def test_the_heads_probabilities_from_the_embedding_are_the_forward_passes(digits_auto):
    """After the head is replaced, the fit reads its probabilities from the
    embedding it holds rather than running the body again: the same bits as the
    whole forward pass (over several chunks), so that labels_ is what predict
    gives."""
    from skdiffclust.deep import _inference

    model = digits_auto
    images = model._scaled(IMAGES)
    assert images.shape[0] > 2 * _inference.CHUNK
    embedding, proba = _inference.forward(model.network_state_, images, model.input_side_,
                                          n_threads=2)
    np.testing.assert_array_equal(
        _inference.head_probabilities(model.network_state_, embedding), proba)
    np.testing.assert_array_equal(proba.argmax(1), model.labels_)


def test_images_without_structure_warn_that_no_number_stands_out():
    """Noise images: the network's clusters stay linked down to two; the fit
    warns rather than give the number as found."""
    noise = np.random.default_rng(0).random((300, 8, 8))
    with pytest.warns(ClusterCountWarning, match="no number of clusters that stands out"):
        model = fit(noise, "auto", max_clusters=12)
    assert model.n_clusters_ == 2


def test_max_clusters_and_n_eigenvectors_bound_the_clusters_trained():
    X = IMAGES[:150]
    model = fit(X, "auto", max_clusters=6)
    assert model.n_clusters_candidates_[-1] <= 6
    assert 2 <= model.n_clusters_ <= 6
    model = fit(X, "auto", n_eigenvectors=4)
    assert model.n_clusters_candidates_[-1] <= 4


def test_small_sets_merge_along_fewer_neighbours_than_their_clusters_images():
    """400 images on 50 clusters (of 8): the merge graph has 4 neighbours, not
    n_neighbors=10; 60,000 images keep 10; an integer n_clusters merges nothing."""
    auto = DeepImageClustering(n_clusters="auto", device="cpu")
    assert auto._settings(400).merge_neighbors == 4
    assert auto._settings(60_000).merge_neighbors == 10
    assert auto.set_params(n_neighbors=3)._settings(60_000).merge_neighbors == 3
    assert DeepImageClustering(n_clusters=10, device="cpu")._settings(400).merge_neighbors == 0


def test_the_first_networks_schedule_is_capped_and_the_seconds_is_not():
    """max_iter='auto' with n_clusters='auto': the network of max_clusters
    clusters runs at most 300 steps of its clustering phase (at least 15
    epochs), the network on the merged clusters the whole schedule; an integer
    max_iter, or a given number, is kept."""
    auto = DeepImageClustering(n_clusters="auto", device="cpu")
    settings = auto._settings(2550)  # 9 steps an epoch: a schedule of 112 epochs
    assert (settings.max_iter, settings.refit_max_iter) == (34, 112)
    settings = auto._settings(5000)  # 19 steps: 53 epochs, capped at 16
    assert (settings.max_iter, settings.refit_max_iter) == (16, 53)
    settings = auto._settings(400)  # 1 step: capped at 300 of the 1,000
    assert (settings.max_iter, settings.refit_max_iter) == (300, 1000)
    settings = auto._settings(60_000)  # 234 steps: 5 epochs, below the 15
    assert (settings.max_iter, settings.refit_max_iter) == (5, 5)
    settings = auto.set_params(max_iter=40)._settings(2550)
    assert (settings.max_iter, settings.refit_max_iter) == (40, 40)
    assert DeepImageClustering(n_clusters=6, device="cpu")._settings(2550).max_iter == 112


def test_the_second_network_trains_on_the_whole_schedule(monkeypatch):
    import skdiffclust.deep._fit as fit_module

    trained = []
    monkeypatch.setattr(fit_module, "_fit_network",
                        lambda images, settings, *args, **kwargs: trained.append(settings))
    settings = DeepImageClustering(n_clusters="auto", device="cpu")._settings(2550)
    fitted = fit_module.FittedNetwork(None, None, None, None, 0, False)
    fit_module.refit_network(None, settings, None, "DeepImageClustering", fitted,
                             np.array([0, 1, 2, 1]))
    assert (trained[0].max_iter, trained[0].n_clusters, trained[0].merge) == (112, 3, False)


def test_wider_views_count_fewer_clusters_and_narrower_views_more():
    """The user guide's claim: the weak views' ranges (max_rotation, max_scale,
    max_shift) set the count's scale, since images the views turn into one
    another are one cluster to the merges. 30 of each digit, default training."""
    rows = np.concatenate([np.random.default_rng(0).choice(np.flatnonzero(TRUTH == digit), 30,
                                                           replace=False)
                           for digit in range(10)])

    defaults = DeepImageClustering().get_params()

    def count(factor):
        ranges = {name: defaults[name] * factor
                  for name in ("max_rotation", "max_scale", "max_shift")}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ClusterCountWarning)
            return DeepImageClustering(n_clusters="auto", device="cpu", random_state=0,
                                       **ranges).fit(IMAGES[rows]).n_clusters_

    assert count(1.5) < count(1.0) < count(0.5)


def test_an_integer_fit_after_auto_clears_the_count():
    model = fit(IMAGES[:100], "auto", max_clusters=4)
    assert hasattr(model, "n_clusters_scores_")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.set_params(n_clusters=3).fit(IMAGES[:100])
    assert not hasattr(model, "n_clusters_scores_")
    assert not hasattr(model, "n_clusters_silhouette_")


@pytest.mark.parametrize("params, name", [
    (dict(n_clusters="many"), "n_clusters"), (dict(n_clusters="auto", max_clusters=1),
                                              "max_clusters"),
    (dict(n_clusters="auto", max_clusters=2.5), "max_clusters"),
])
def test_bad_values_are_refused_by_name(params, name):
    with pytest.raises(InvalidParameterError, match=name):
        DeepImageClustering(**params).fit(IMAGES[:50])

"""DeepImageClustering reads images in any usual layout: grey (n, H, W), channels
first (n, C, H, W), channels last (n, H, W, C) with 1, 3 or 4 channels (as PIL,
imageio and matplotlib give them), rows of pixels with ``image_shape``; a shape it
could read both ways is refused, never guessed. Its ``score``, and the package's
scorers on images."""

import copy
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="DeepImageClustering trains with torch")

from sklearn.metrics import calinski_harabasz_score, silhouette_score  # noqa: E402
from sklearn.model_selection import GridSearchCV  # noqa: E402

from skdiffclust import DeepImageClustering  # noqa: E402
from skdiffclust.deep._images import image_shape_of  # noqa: E402
from skdiffclust.metrics import calinski_harabasz_scorer, silhouette_scorer  # noqa: E402
from tests.deep.test_torch_deep import FAST, IMAGES, fit_fast  # noqa: E402

pytestmark = pytest.mark.torch

# 120 digits in colour, channels first: each channel the digit at its own brightness
RGB = np.repeat(IMAGES[:120, None], 3, axis=1) * np.array([1.0, 0.5, 0.2])[:, None, None]
RGB_LAST = RGB.transpose(0, 2, 3, 1).copy()
QUERIES = (np.repeat(IMAGES[300:340, None], 3, axis=1)
           * np.array([1.0, 0.5, 0.2])[:, None, None])
# a smaller fit still (4 channels, the grid search)
TINY = dict(n_clusters=3, max_iter=1, n_heads=1, batch_size=32, self_labelling=0)


@pytest.fixture(scope="module")
def first():
    return fit_fast(RGB)


@pytest.fixture(scope="module")
def last():
    return fit_fast(RGB_LAST)


@pytest.mark.parametrize("shape, expected", [
    ((8, 8), ((1, 8, 8), "first")),
    ((3, 8, 8), ((3, 8, 8), "first")),
    ((2, 8, 8), ((2, 8, 8), "first")),
    ((3, 11, 10), ((3, 11, 10), "first")),
    ((8, 8, 3), ((3, 8, 8), "last")),
    ((8, 8, 4), ((4, 8, 8), "last")),   # was read as 8 channels of 8 x 4 pixels
    ((8, 8, 1), ((1, 8, 8), "last")),
    ((32, 32, 3), ((3, 32, 32), "last")),  # was refused as 32 x 3 pixels
    ((64, 48, 4), ((4, 64, 48), "last")),
    # 5 or 6 channels last of square images: were read as 8 channels of 8 x 5 pixels
    ((8, 8, 5), ((5, 8, 8), "last")),
    ((16, 16, 6), ((6, 16, 16), "last")),
    ((5, 16, 16), ((5, 16, 16), "first")),
    ((64, 32, 32), ((64, 32, 32), "first")),
    ((8, 8, 8), ((8, 8, 8), "first")),
    ((4, 4, 3), ((3, 4, 4), "last")),
])
def test_auto_reads_the_channels_where_they_are(shape, expected):
    assert image_shape_of((5, *shape), None) == expected


@pytest.mark.parametrize("shape, readings", [
    ((3, 8, 3), "3 channels of 8 x 3 pixels (channels first) or as 3 channels of 3 x 8 "
                "pixels, channels last"),
    ((4, 4, 4), "4 channels of 4 x 4 pixels (channels first) or as 4 channels of 4 x 4 "
                "pixels, channels last"),
    ((3, 3, 3), "3 channels of 3 x 3 pixels (channels first) or as 3 channels of 3 x 3"),
    ((1, 8, 4), "1 channel of 8 x 4 pixels (channels first) or as 4 channels of 1 x 8"),
    # 6 channels of 4 x 4, or 4 channels of 6 x 4 (the signs disagree)
    ((6, 4, 4), "6 channels of 4 x 4 pixels (channels first) or as 4 channels of 6 x 4"),
    # neither sign, and the last axis could hold the channels
    ((28, 20, 6), "28 channels of 20 x 6 pixels (channels first) or as 6 channels of "
                  "28 x 20"),
])
def test_a_shape_read_both_ways_is_refused_naming_both(shape, readings):
    with pytest.raises(ValueError, match=r"X of shape \(20, .*can be read as ") as error:
        DeepImageClustering(**FAST).fit(np.zeros((20, *shape)))
    message = str(error.value)
    assert readings in message and "channels='first' or channels='last'" in message
    # and for rows of pixels with that image_shape
    with pytest.raises(ValueError, match=r"image_shape=\(.*\) can be read as "):
        DeepImageClustering(**FAST, image_shape=shape).fit(np.zeros((20, np.prod(shape))))


def test_channels_says_where_the_channels_are():
    assert image_shape_of((5, 4, 8, 4), None, "first") == ((4, 8, 4), "first")
    assert image_shape_of((5, 4, 8, 4), None, "last") == ((4, 4, 8), "last")
    assert image_shape_of((5, 8, 8, 4), None, "first") == ((8, 8, 4), "first")
    assert image_shape_of((5, 8, 8, 13), None, "last") == ((13, 8, 8), "last")
    assert image_shape_of((5, 192), (8, 8, 3), "auto") == ((3, 8, 8), "last")
    assert image_shape_of((5, 192), (3, 8, 8), "auto") == ((3, 8, 8), "first")
    # the channels of grey images and of rows of grey pixels need no saying
    assert image_shape_of((5, 8, 8), None, "last") == ((1, 8, 8), "first")
    with pytest.raises(ValueError, match="channels"):
        DeepImageClustering(channels="middle").fit(RGB)


def test_too_small_images_say_how_they_were_read():
    # 2 channels of 8 x 4 pixels, read as 4 channels of 2 x 8: channels='first' reads it
    with pytest.raises(ValueError, match=r"2 x 8 pixels; .* \(read as 4 channels of 2 x 8 "
                                         r"pixels, channels last; channels='first'"):
        DeepImageClustering(**FAST).fit(np.zeros((20, 2, 8, 4)))
    assert image_shape_of((20, 2, 8, 4), None, "first") == ((2, 8, 4), "first")


def test_channels_last_and_first_give_the_same_model(first, last):
    """The same images channels last and channels first give the same labels, to the
    bit, and the same predictions for new images, each in its fit's layout."""
    assert (first.channels_, last.channels_) == ("first", "last")
    assert first.image_shape_ == last.image_shape_ == (3, 8, 8)
    np.testing.assert_array_equal(last.labels_, first.labels_)
    np.testing.assert_array_equal(last.loss_curve_, first.loss_curve_)
    np.testing.assert_array_equal(last.predict_proba(QUERIES.transpose(0, 2, 3, 1)),
                                  first.predict_proba(QUERIES))
    # rows of pixels are read in the fit's layout
    np.testing.assert_array_equal(last.predict(QUERIES.transpose(0, 2, 3, 1).reshape(40, -1)),
                                  first.predict(QUERIES.reshape(40, -1)))
    assert len(np.unique(first.labels_)) > 5  # a partition, not a degenerate one


def test_rows_of_pixels_channels_last_with_image_shape(last):
    flat = fit_fast(RGB_LAST.reshape(120, -1), image_shape=(8, 8, 3))
    assert flat.channels_ == "last"
    np.testing.assert_array_equal(flat.labels_, last.labels_)


@pytest.mark.parametrize("n_channels", [4, 5])
def test_channels_last_and_first_give_the_same_labels(n_channels):
    """4 channels (RGBA) and 5 (read as 8 channels of 8 x 5 pixels before, silently)."""
    extra = [IMAGES[:60, None] * (0.3 + 0.1 * i) for i in range(n_channels - 3)]
    images = np.concatenate([RGB[:60], *extra], axis=1)  # (60, n_channels, 8, 8)
    first = fit_fast(images, **TINY)
    last = fit_fast(images.transpose(0, 2, 3, 1), **TINY)  # (60, 8, 8, n_channels)
    assert last.image_shape_ == first.image_shape_ == (n_channels, 8, 8)
    assert last.channels_ == "last"
    np.testing.assert_array_equal(last.labels_, first.labels_)
    np.testing.assert_array_equal(last.predict_proba(images.transpose(0, 2, 3, 1)),
                                  first.predict_proba(images))


def test_new_images_in_another_layout_are_refused(first, last):
    with pytest.raises(ValueError, match=r"shape \(3, 8, 8\), but DeepImageClustering was "
                       r"fitted on images of shape \(8, 8, 3\) \(channels last, 192 values\)"
                       r": X.transpose\(0, 2, 3, 1\) gives them"):
        last.predict(QUERIES)
    with pytest.raises(ValueError, match=r"fitted on images of shape \(3, 8, 8\) \(192 "
                       r"values\): X.transpose\(0, 3, 1, 2\) gives them"):
        first.predict_proba(QUERIES.transpose(0, 2, 3, 1))
    for model in (first, last):
        with pytest.raises(ValueError, match="fitted on images of shape"):
            model.transform(np.zeros((3, 8, 3, 8)))


def test_grey_images_in_any_layout_are_the_same_images():
    model = fit_fast(IMAGES[:120, :, :, None], **TINY)  # (n, 8, 8, 1)
    assert model.image_shape_ == (1, 8, 8)
    labels = model.predict(IMAGES[300:340])
    for layout in (IMAGES[300:340, None], IMAGES[300:340, :, :, None],
                   IMAGES[300:340].reshape(40, 64)):
        np.testing.assert_array_equal(model.predict(layout), labels)


def test_score_is_the_silhouette_of_the_partition_in_the_graph_features(first, last):
    """On the training images, score is the silhouette of labels_ in the graph's
    features (fit's), whatever set_params changes later; a partition's score is
    higher than that of a worse one."""
    from skdiffclust.deep._features import graph_features

    with torch.no_grad():
        features = graph_features(first._scaled(RGB), first._feature_seed)
    score = first.score(RGB)
    assert score == pytest.approx(silhouette_score(features, first.labels_), rel=1e-9)
    assert last.score(RGB_LAST) == score
    shuffled = np.random.default_rng(0).permutation(first.labels_)
    assert score > silhouette_score(features, shuffled)
    assert copy.deepcopy(first).set_params(balance=5.0, n_neighbors=3).score(RGB) == score
    assert np.isfinite(first.score(QUERIES))
    with pytest.raises(ValueError, match="at least 2 samples"):
        first.score(QUERIES[:1])


def test_score_warns_at_the_caller_s_line_on_another_scale(first):
    with pytest.warns(UserWarning, match="on another scale") as caught:
        first.score(QUERIES * 255.0)
    assert caught[0].filename == __file__


def test_grid_search_without_a_scorer_uses_score():
    grid = GridSearchCV(DeepImageClustering(**dict(FAST, **TINY)),
                        {"max_rotation": [0.0, 15.0]}, cv=2, refit=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        grid.fit(IMAGES[:80])
    scores = grid.cv_results_["mean_test_score"]
    assert np.all(np.isfinite(scores)) and np.all(np.abs(scores) <= 1)
    assert grid.best_params_["max_rotation"] in (0.0, 15.0)


def test_the_scorers_read_images_as_rows_of_pixels(first, last):
    labels = first.predict(QUERIES)
    pixels = QUERIES.reshape(40, -1)
    for model, images in ((first, QUERIES), (last, QUERIES.transpose(0, 2, 3, 1))):
        assert silhouette_scorer(model, images) == pytest.approx(
            silhouette_score(pixels, labels), rel=1e-12)
        assert calinski_harabasz_scorer(model, images) == pytest.approx(
            calinski_harabasz_score(pixels, labels), rel=1e-12)


@pytest.mark.parametrize("convert, dtype", [
    (lambda X: X, np.float64), (lambda X: X.astype(np.float32), np.float32),
    # read in float32, they came out in float32 (the docstring: float64 otherwise)
    (lambda X: X.astype(np.uint8), np.float64), (lambda X: X.astype(int), np.float64),
    (lambda X: X.tolist(), np.float64),
])
def test_the_embedding_is_float32_for_float32_images_only(first, convert, dtype):
    assert first.transform(convert(np.round(QUERIES[:4]))).dtype == dtype

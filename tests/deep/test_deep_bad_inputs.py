"""DeepImageClustering on unusual images: a clear error naming the problem, a
warning, or the right answer (hot pixels, float32 against float64 copies, new
images on another scale, non-finite pixels, wrong shapes and dtypes)."""

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="DeepImageClustering trains with torch")

from skdiffclust.deep import DeepImageClustering  # noqa: E402
from skdiffclust.metrics import clustering_accuracy  # noqa: E402
from tests.deep.test_torch_deep import FAST, IMAGES, SMALL, TRUTH, fit_fast  # noqa: E402

pytestmark = pytest.mark.torch


@pytest.fixture(scope="module")
def model():
    """A fit on SMALL: 200 digits, pixels in [0, 1]."""
    return fit_fast()


def test_one_hot_pixel_does_not_set_the_scale():
    """A pixel of 1e4 in images of 0 to 1 set the pixels' standard deviation and left
    every other pixel near 0: the network put 199 images in one cluster. It is named
    in a warning and clipped; the fit clusters the digits as the clean images'."""
    hot = SMALL.copy()
    hot[7, 3, 4] = 1e4
    with pytest.warns(UserWarning, match=r"1 pixel, 1e\+04 at image 7, row 3, column 4,"):
        fitted = fit_fast(hot)
    assert np.unique(fitted.labels_).size == 10
    assert clustering_accuracy(TRUTH[:200], fitted.labels_) > 0.8
    # the scale is the clean images' to a few percent, and predict clips as fit did
    assert fitted.pixel_scale_ == pytest.approx(np.std(SMALL), rel=0.05)
    with pytest.warns(UserWarning, match="1 pixel, 1e\\+04 at image 7"):
        np.testing.assert_array_equal(fitted.predict(hot), fitted.labels_)


def test_one_faulty_image_does_not_set_the_scale():
    """An image of 1e4 everywhere among 200 digits held more pixels than the pixels'
    percentiles leave out: it set the range and the scale, and the network put 199
    images in one cluster, under the generic warning of empty clusters. The image is
    named in a warning and clipped; the fit clusters the digits."""
    faulty = SMALL.copy()
    faulty[17] = 1e4
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fitted = fit_fast(faulty)
    named = [str(w.message) for w in caught if "far beyond" in str(w.message)]
    assert len(named) == 1 and "in 1 image most of whose pixels are (image 17)" in named[0]
    assert np.unique(fitted.labels_).size == 10
    assert clustering_accuracy(TRUTH[:200], fitted.labels_) > 0.8
    assert fitted.pixel_range_[1] == 1.0  # the other images' range


def test_outliers_are_counted_and_the_farthest_named():
    hot = np.repeat(SMALL[:40, None], 3, axis=1)
    hot[5, 2, 1, 6] = -300.0
    hot[9, 0, 0, 0] = 50.0
    fitted = DeepImageClustering(3, max_iter=1, n_heads=1, device="cpu", random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fitted.fit(hot)
    outliers = [w for w in caught if "far beyond" in str(w.message)]
    assert len(outliers) == 1
    assert "2 pixels (the farthest: -300 at image 5, channel 2, row 1, column 6)" \
        in str(outliers[0].message)
    assert outliers[0].filename == __file__  # the warning points at the caller's line


def test_ordinary_images_are_not_clipped(model):
    """No pixel of the digits lies beyond the outliers' bounds: the training pixels
    reach the network unclipped, and new digits give no warning, one by one or
    together, nor does a faint one (its range a third of the others')."""
    assert np.all(model.pixel_range_[:2] == [0.0, 1.0])
    narrowest = np.percentile(np.ptp(SMALL.reshape(200, -1), axis=1), 1)
    assert model.pixel_range_[2] == narrowest
    scaled = model._scaled(SMALL)
    np.testing.assert_array_equal(
        scaled, ((SMALL[:, None] - SMALL.mean()) / SMALL.std()).astype(np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.predict(IMAGES[200:])
        for image in IMAGES[200:500]:
            model.predict(image[None])
        model.predict(IMAGES[200:201] / 3.0)


def test_float32_and_float64_copies_give_the_same_model():
    """Pixels that float32 cannot hold exactly: the float64 images and their float32
    copy gave different labels (the float64 ones were scaled before their rounding
    to float32); both are now rounded to float32's precision first."""
    noisy = SMALL + np.random.default_rng(0).normal(0.0, 0.01, SMALL.shape)
    single = noisy.astype(np.float32)
    assert not np.array_equal(single, noisy)
    double_fit, single_fit = fit_fast(noisy), fit_fast(single)
    np.testing.assert_array_equal(single_fit.labels_, double_fit.labels_)
    np.testing.assert_array_equal(single_fit.loss_curve_, double_fit.loss_curve_)
    np.testing.assert_array_equal(single_fit.predict_proba(single),
                                  double_fit.predict_proba(noisy))
    np.testing.assert_array_equal(double_fit.transform(single), double_fit.transform(noisy))


@pytest.mark.parametrize("method", ["predict", "predict_proba", "transform"])
@pytest.mark.parametrize("change, shown", [
    (lambda X: X * 255.0, r"\[0, 255\]"),      # 0-255 pixels for a fit on 0-1
    (lambda X: X / 255.0, r"\[0, 0.003922\]"),  # and the reverse
    (lambda X: X + 10.0, r"\[10, 11\]"),       # shifted
], ids=["times_255", "over_255", "plus_10"])
def test_images_on_another_scale_than_the_fit_s_are_warned(model, method, change, shown):
    with pytest.warns(UserWarning, match=shown + r" .* fitted on images of pixels in "
                      r"\[0, 1\]: the network reads them on another scale") as caught:
        getattr(model, method)(change(IMAGES[200:260]))
    assert caught[0].filename == __file__


def test_a_hot_pixel_in_new_images_is_named_and_clipped(model):
    queries = IMAGES[200:260].copy()
    labels = model.predict(queries)
    queries[3, 4, 4] = 1e4
    with pytest.warns(UserWarning, match="1 pixel, 1e\\+04 at image 3, row 4, column 4"):
        hot = model.predict(queries)
    np.testing.assert_array_equal(np.delete(hot, 3), np.delete(labels, 3))


@pytest.mark.parametrize("X, changes, message", [
    (np.zeros(10), {}, "Expected 2D array|image"),
    (np.zeros((20, 10)), {}, "image_shape"),
    (np.zeros((20, 8, 8, 8, 8)), {}, "give images of shape"),
    (np.zeros((20, 3, 3)), {}, "at least 4 x 4"),
    (np.zeros((20, 1, 1)), {}, "1 x 1 pixels"),
    (np.zeros((20, 64)), {"image_shape": (7, 9)}, "holds 63 values"),
    (np.zeros((20, 64)), {"image_shape": (2, 2, 2, 8)}, "image_shape must be"),
    # truncated to 8 x 8, or failed inside; images read in another layout
    (np.zeros((20, 64)), {"image_shape": (8.9, 8.9)}, "image_shape must be"),
    (np.zeros((20, 64)), {"image_shape": [[8, 8]]}, "image_shape must be"),
    (np.zeros((20, 8, 8)), {"image_shape": (4, 16)}, "image_shape is for rows"),
    (np.full((20, 8, 8), np.nan), {}, "NaN"),
    (np.where(np.eye(8) > 0, np.inf, 0.0)[None].repeat(20, 0), {}, "infinity"),
    (np.full((20, 8, 8), 1e200), {}, "overflow"),
    (np.zeros((20, 8, 8), dtype=complex), {}, "Complex data not supported"),
    (np.full((20, 8, 8), "a", dtype=object), {}, "could not convert string to float"),
    (np.zeros((1, 8, 8)), {}, "minimum of 2"),
    (np.zeros((5, 8, 8)), {"n_clusters": 10}, "n_clusters=10 must be <= n_samples=5"),
    (np.zeros((20, 8, 8)), {"n_eigenvectors": 3, "n_clusters": 4}, "n_eigenvectors=3"),
])
def test_bad_input_is_refused_clearly(X, changes, message):
    with pytest.raises(ValueError, match=message):
        DeepImageClustering(**dict(FAST, **changes)).fit(X)


@pytest.mark.parametrize("X, message", [
    (np.full((3, 8, 8), np.nan), "NaN"),
    (np.full((3, 8, 8), -np.inf), "infinity"),
    (np.full((3, 8, 8), 1e200), "overflow"),
    (np.zeros((3, 8, 8), dtype=complex), "Complex data not supported"),
    (np.full((3, 8, 8), "a", dtype=object), "could not convert string to float"),
    (np.zeros((0, 8, 8)), "0 sample"),
    (np.zeros(64), "Expected 2D array"),
])
def test_bad_queries_are_refused_clearly(model, X, message):
    for method in (model.predict, model.predict_proba, model.transform):
        with pytest.raises(ValueError, match=message):
            method(X)


def test_queries_of_another_shape_are_refused(model):
    with pytest.raises(ValueError, match="64 values"):
        model.predict(np.zeros((3, 7, 7)))
    with pytest.raises(ValueError, match="features"):
        model.predict(np.zeros((3, 49)))
    # as many values in another layout gave other images, silently
    for shape in ((3, 16, 4), (3, 4, 4, 4), (3, 1, 1, 64)):
        with pytest.raises(ValueError, match="fitted on images of shape"):
            model.predict(np.zeros(shape))
    labels = model.predict(SMALL[:5])  # the same images, in every layout of them
    np.testing.assert_array_equal(model.predict(SMALL[:5, None]), labels)
    np.testing.assert_array_equal(model.predict(SMALL[:5].reshape(5, 64)), labels)


def test_numbers_of_another_dtype_are_read_as_their_values(model):
    # object arrays of numbers, integers and booleans are their values in float
    queries = IMAGES[200:230]
    labels = model.predict(queries)
    np.testing.assert_array_equal(model.predict(queries.astype(object)), labels)
    binary = queries > 0.5
    np.testing.assert_array_equal(model.predict(binary), model.predict(binary * 1.0))
    counts = (queries * 16).astype(np.uint8)
    np.testing.assert_array_equal(model.predict(counts / 16), labels)


def test_one_image_without_its_batch_axis_is_refused_naming_it(model):
    """predict(one image) said "X has 8 features, but ... 64"."""
    with pytest.raises(ValueError, match=r"X has shape \(8, 8\): one image, without the "
                                         r"batch axis. Pass X\[np.newaxis\]"):
        model.predict(SMALL[0])
    np.testing.assert_array_equal(model.predict(SMALL[:1]), model.labels_[:1])


def test_a_ragged_list_of_images_is_refused_clearly(model):
    with pytest.raises(ValueError, match="X is a ragged sequence"):
        model.predict([SMALL[0], SMALL[1][:7]])


def test_n_neighbors_above_the_number_of_images_is_lowered_with_a_warning():
    """It was lowered silently (PRCut warns)."""
    with pytest.warns(UserWarning, match=r"n_neighbors=10 >= n_samples=8; using "
                                         r"n_neighbors=7") as record:
        DeepImageClustering(2, max_iter=1, n_heads=1, random_state=0).fit(SMALL[:8])
    assert any(w.filename == __file__ for w in record if "n_neighbors" in str(w.message))

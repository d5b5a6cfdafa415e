"""DeepImageClustering: images in, clusters out; reproducible, the training
contract, bad input, pickling (on scikit-learn's 8 x 8 digits, no MNIST)."""

import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning

from skdiffclust.deep import DeepImageClustering
from skdiffclust.metrics import clustering_accuracy
from tests._torchless import run_without_torch

torch = pytest.importorskip("torch", reason="DeepImageClustering trains with torch")

pytestmark = pytest.mark.torch

DIGITS, TRUTH = load_digits(return_X_y=True)
IMAGES = (DIGITS / 16.0).reshape(-1, 8, 8)
# a small, fast fit: 200 images, a few steps
SMALL = IMAGES[:200]
FAST = dict(n_clusters=10, max_iter=3, batch_size=64, n_heads=2, self_labelling=1,
            device="cpu", random_state=0)


def fit_fast(X=SMALL, **changes):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return DeepImageClustering(**dict(FAST, **changes)).fit(X)


def test_clusters_digits_better_than_kmeans():
    """On the 1,797 digits, at the defaults, the partition agrees with the digits
    far better than k-means' on the pixels, and better than its spectral start."""
    X, y = IMAGES, TRUTH
    model = DeepImageClustering(10, device="cpu", random_state=0).fit(X)
    kmeans = KMeans(10, n_init=10, random_state=0).fit(X.reshape(len(X), -1))
    ours = clustering_accuracy(y, model.labels_)
    assert ours > clustering_accuracy(y, kmeans.labels_) + 0.05
    assert ours > clustering_accuracy(y, model.start_labels_)
    assert ours > 0.85
    # predict on the training images gives labels_
    np.testing.assert_array_equal(model.predict(X), model.labels_)


def test_the_start_reads_the_shared_neighbours_of_the_graph():
    """The spectral start reads the shared-neighbour weights of the histograms'
    graph: on the digits it agrees with them better than the kNN graph's own wide
    start (2 * n_clusters eigenvectors, this recipe's first start)."""
    from skdiffclust.deep._fit import start_of
    from skdiffclust._graphcut._spectral import initial_partition

    # on the CPU wherever it runs: on CUDA the graph's features are the exact
    # principal components, not the host's randomized ones, so another graph
    settings = DeepImageClustering(10, random_state=0, device="cpu")._settings(len(IMAGES))
    images = IMAGES[:, None].astype(np.float32)
    for feature_seed, start_seed in ((0, 1), (2, 3)):
        _, graph, start = start_of(images, settings, feature_seed=feature_seed,
                                   start_seed=start_seed)
        knn = initial_partition(graph, 10, device="cpu", seed=start_seed, widths=(20,))
        assert clustering_accuracy(TRUTH, start) > clustering_accuracy(TRUTH, knn) + 0.01
        assert clustering_accuracy(TRUTH, start) > 0.89


def test_the_device_features_are_the_host_features_principal_components():
    """The graph features a CUDA fit computes on the device (the exact principal
    components of the gradient histograms) against the host's (scikit-learn's
    randomized PCA), here on the CPU device: each leading component the same up to
    its sign, and the same neighbours."""
    from skdiffclust._neighbors import kneighbors, recall
    from skdiffclust.deep._features import _device_features, graph_features

    images = IMAGES[:, None].astype(np.float32)
    host = graph_features(images, 0)
    device = _device_features(images, torch.device("cpu"))
    assert device.shape == host.shape and device.dtype == np.float64
    for component in range(10):
        assert abs(np.corrcoef(host[:, component], device[:, component])[0, 1]) > 0.999
    _, host_neighbours = kneighbors(host, 10, algorithm="exact")
    _, device_neighbours = kneighbors(device, 10, algorithm="exact")
    assert recall(device_neighbours, host_neighbours) > 0.9


def test_the_pairs_graph_lives_on_the_images_device():
    """Every tensor of a step's pair graph is made on the images' device (its
    weights were made on the CPU: DeepImageClustering(device='cuda') crashed in its
    first step). Checked on torch's 'meta' device, which needs no GPU."""
    from types import SimpleNamespace

    from skdiffclust.deep._fit import PairTask

    settings = SimpleNamespace(n_clusters=3, gamma=1.0, n_heads=1)
    images = torch.zeros((5, 1, 8, 8), device="meta")
    block = PairTask(None, images, None, settings, None)._block(4)
    assert {block.rows.device.type, block.cols.device.type,
            block.weights.device.type} == {"meta"}


def test_same_random_state_same_labels_and_weights():
    first, second = fit_fast(), fit_fast()
    np.testing.assert_array_equal(first.labels_, second.labels_)
    np.testing.assert_array_equal(first.predict_proba(SMALL), second.predict_proba(SMALL))
    other = fit_fast(random_state=1)
    assert not np.array_equal(first.predict_proba(SMALL), other.predict_proba(SMALL))


CHILD = """
import sys, warnings
import numpy as np
from sklearn.datasets import load_digits
from skdiffclust.deep import DeepImageClustering
X = (load_digits().data[:200] / 16.0).reshape(-1, 8, 8)
warnings.simplefilter("ignore")
model = DeepImageClustering(10, max_iter=3, batch_size=64, n_heads=2, device="cpu",
                            random_state=0).fit(X)
sys.stdout.write(",".join(map(str, model.labels_)) + "|" + repr(float(model.loss_curve_[-1])))
"""


def test_same_labels_in_another_process():
    """A fresh interpreter (its own torch threads' default, its own global seeds)
    gives the same labels and the same last objective, to the bit."""
    with torch.random.fork_rng():  # the test's own global seeding, restored after
        torch.manual_seed(1234)  # global seeding here must not matter
        here = fit_fast(self_labelling=0)
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                         check=True).stdout
    labels, objective = out.split("|")
    np.testing.assert_array_equal(np.array(labels.split(","), dtype=np.int64), here.labels_)
    assert float(objective) == here.loss_curve_[-1]


def test_n_jobs_changes_no_fitted_bit():
    """The network trains and predicts on one thread whatever n_jobs: with torch on
    two threads the convolutions' weight gradients were summed in another order,
    and the loss curve and labels differed."""
    one, two = fit_fast(n_jobs=1), fit_fast(n_jobs=2)
    np.testing.assert_array_equal(one.loss_curve_, two.loss_curve_)
    np.testing.assert_array_equal(one.labels_, two.labels_)
    np.testing.assert_array_equal(one.predict_proba(SMALL), two.predict_proba(SMALL))


def test_global_random_state_untouched():
    # the fit neither reads nor advances the global generators (left as found)
    torch_state, numpy_state = torch.get_rng_state(), np.random.get_state()
    fit_fast()
    assert torch.equal(torch.get_rng_state(), torch_state)
    np.testing.assert_array_equal(np.random.get_state()[1], numpy_state[1])


@pytest.mark.filterwarnings("ignore:Only .* clusters hold training images:UserWarning")
def test_training_contract():
    model = fit_fast(max_iter=4, tol=0.0)
    assert model.n_iter_ == 4
    assert model.loss_curve_.shape == (4,) and np.all(np.isfinite(model.loss_curve_))
    with pytest.warns(ConvergenceWarning, match="max_iter=2"):
        DeepImageClustering(**dict(FAST, max_iter=2, tol=0.0)).fit(SMALL)
    # a generous tol stops on the patience, before max_iter and without a warning
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        stopped = DeepImageClustering(**dict(FAST, max_iter=50, tol=10.0,
                                             n_iter_no_change=2)).fit(SMALL)
    assert stopped.n_iter_ == 3


def test_verbose_shows_a_bar(capsys):
    fit_fast(verbose=True)
    assert "DeepImageClustering" in capsys.readouterr().err


def test_auto_max_iter_counts_about_a_thousand_steps():
    model = DeepImageClustering()
    # batches of 256: 234 steps an epoch of 60,000 images, 1 of 300
    assert model._settings(60_000).max_iter == 5
    assert model._settings(300).max_iter == 1000
    assert model.set_params(batch_size=64)._settings(60_000).max_iter == 3


def test_auto_max_iter_is_a_schedule_run_to_its_end_without_a_warning(monkeypatch):
    # 'auto' fixes the length of the training (as IIC's and SCAN's epochs); the
    # same number of epochs given as an int is a cap, warned about when reached
    from skdiffclust.deep import _settings

    monkeypatch.setattr(_settings, "CLUSTERING_STEPS", 8)  # 4 epochs of 2 steps
    settings = dict(FAST, tol=0.0, batch_size=100, n_iter_no_change=50)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        scheduled = DeepImageClustering(**dict(settings, max_iter="auto")).fit(SMALL)
    assert scheduled.n_iter_ == scheduled._settings(len(SMALL)).max_iter
    with pytest.warns(ConvergenceWarning):
        DeepImageClustering(**dict(settings, max_iter=scheduled.n_iter_)).fit(SMALL)


def test_image_layouts_give_the_same_partition():
    """(n, H, W), (n, 1, H, W) and rows of a square number of pixels are the same
    images; rows of another length need image_shape."""
    reference = fit_fast().labels_
    for X, changes in ((SMALL[:, None], {}), (SMALL.reshape(200, 64), {}),
                       (SMALL.reshape(200, 64), {"image_shape": (8, 8)}),
                       (SMALL.reshape(200, 64), {"image_shape": (1, 8, 8)})):
        np.testing.assert_array_equal(fit_fast(X, **changes).labels_, reference)


def test_colour_images():
    rgb = np.repeat(SMALL[:, None], 3, axis=1) * np.array([1.0, 0.5, 0.2])[:, None, None]
    model = fit_fast(rgb)
    assert model.image_shape_ == (3, 8, 8)
    assert model.predict(rgb[:5]).shape == (5,)
    flat = fit_fast(rgb.reshape(200, -1), image_shape=(3, 8, 8))
    np.testing.assert_array_equal(flat.labels_, model.labels_)


def test_outputs():
    model = fit_fast()
    proba = model.predict_proba(SMALL[:7])
    assert proba.shape == (7, 10) and proba.dtype == np.float64
    np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(model.predict(SMALL[:7]), proba.argmax(1))
    embedding = model.transform(SMALL[:7])
    assert embedding.shape == (7, 128) and np.all(np.isfinite(embedding))
    assert model.start_labels_.shape == (200,)
    assert model.affinity_matrix_.shape == (200, 200)
    assert isinstance(model.module_, torch.nn.Module) and not model.module_.training
    # this fit's epoch of self-labelling raised the objective on the graph: the
    # network before it is kept
    assert model.self_labelled_ is False


def test_the_fit_does_not_depend_on_the_pixels_units():
    """The network reads the pixels centred and scaled by the training images' mean
    and spread: a model fitted on a rescaled and shifted copy gives the same labels,
    and predicts the same for new images in its own units."""
    model = fit_fast()
    copy = fit_fast(SMALL * 255.0 + 3.0)
    np.testing.assert_array_equal(copy.labels_, model.labels_)
    np.testing.assert_array_equal(copy.predict(IMAGES[200:260] * 255.0 + 3.0),
                                  model.predict(IMAGES[200:260]))


def test_large_images_are_read_reduced_to_max_side():
    """The network reads images larger than ``max_side`` reduced to it on their
    longer side by area averaging (so that they cost what small ones do), in
    ``fit`` and ``predict`` alike; ``max_side=None`` reads them whole."""
    from skdiffclust.deep._images import reduced_side

    big = np.kron(SMALL[:120], np.ones((12, 12)))  # 96 x 96
    model = fit_fast(big, max_iter=1)
    images = torch.as_tensor(model._scaled(big[:10]))
    averaged = torch.nn.functional.avg_pool2d(images, 3)  # 32 x 32, 3 x 3 blocks
    layout = dict(memory_format=torch.channels_last)
    with torch.no_grad():
        read = model.module_.body(images.contiguous(**layout))
        read_reduced = model.module_.body[1:](averaged.contiguous(**layout))
    np.testing.assert_allclose(read.numpy(), read_reduced.numpy(), rtol=1e-4, atol=1e-5)
    larger = np.kron(SMALL[:40], np.ones((5, 5)))  # 40 x 40: read whole, at a cost
    whole = fit_fast(larger, max_iter=1, max_side=None, n_clusters=4)
    assert not isinstance(whole.module_.body[0], torch.nn.AdaptiveAvgPool2d)
    assert whole.predict(larger[:3]).shape == (3,)
    # the aspect is kept, and a short side stays readable
    assert reduced_side((1, 64, 48)) == (32, 24)
    assert reduced_side((1, 300, 20)) == (32, 4)
    assert reduced_side((3, 28, 28)) == (28, 28)


def test_identical_images_get_one_cluster_and_say_why():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = DeepImageClustering(3, max_iter=1, device="cpu", random_state=0).fit(
            np.full((30, 8, 8), 0.5))
    messages = [str(w.message) for w in caught if not issubclass(w.category,
                                                                 ConvergenceWarning)]
    assert len(messages) == 1, messages  # and no NumPy warning
    assert messages[0].startswith("DeepImageClustering found 1 non-empty clusters of the "
                                  "n_clusters=3 asked: the images are all identical.")
    assert np.unique(model.labels_).size == model.n_clusters_ == 1


def test_identical_images_counted_by_auto_are_one_cluster_said_plainly():
    # before: "found 1 non-empty clusters of the 2 that n_clusters='auto' counted
    # ... A larger balance may help", while the candidates were [1]
    with pytest.warns(UserWarning) as caught:
        model = DeepImageClustering("auto", max_iter=1, device="cpu", random_state=0).fit(
            np.full((30, 8, 8), 0.5))
    messages = [str(w.message) for w in caught if not issubclass(w.category,
                                                                 ConvergenceWarning)]
    assert messages == ["DeepImageClustering(n_clusters='auto') found 1 cluster(s): "
                        "the images are all identical."]
    assert model.n_clusters_ == 1 and model.n_clusters_candidates_.tolist() == [1]


def test_float32_images():
    model = fit_fast(SMALL.astype(np.float32))
    assert model.predict(SMALL[:5].astype(np.float32)).shape == (5,)


def test_the_numpy_forward_pass_is_the_networks():
    """predict, predict_proba and transform run the network in NumPy (no torch);
    torch's forward pass of module_ gives the same to float32's rounding, and
    labels_ is what predict gives for the training images."""
    from skdiffclust.deep._network import evaluate

    model = fit_fast()
    embedding, proba = evaluate(model.module_, torch.as_tensor(model._scaled(SMALL)))
    torch_embedding, torch_proba = embedding.numpy(), proba[0].numpy()
    np.testing.assert_allclose(model.predict_proba(SMALL), torch_proba, atol=1e-5)
    np.testing.assert_allclose(model.transform(SMALL), torch_embedding, atol=1e-4, rtol=1e-4)
    np.testing.assert_array_equal(model.predict(SMALL), model.labels_)
    assert all(isinstance(value, np.ndarray) for value in model.network_state_.values())


@pytest.mark.filterwarnings("ignore:Only .* clusters hold training images:UserWarning")
@pytest.mark.parametrize("shape", [(4, 4), (5, 9), (3, 11, 10), (2, 33, 40), (1, 64, 17)])
def test_the_numpy_forward_pass_reads_any_image_shape_as_torch(shape):
    # odd sides meet ceil_mode's lone last row and the adaptive poolings' overlapping
    # windows; larger images are reduced first (to 26 x 32 and 32 x 8 here)
    from skdiffclust.deep._network import evaluate

    X = np.random.default_rng(0).random((60, *shape)).astype(np.float32)
    model = fit_fast(X, n_clusters=3, max_iter=1, n_heads=1, batch_size=32,
                     self_labelling=0)
    embedding, proba = evaluate(model.module_, torch.as_tensor(model._scaled(X)))
    np.testing.assert_allclose(model.predict_proba(X), proba[0].numpy(), atol=1e-5)
    np.testing.assert_allclose(model.transform(X), embedding.numpy(), atol=1e-4, rtol=1e-4)


def test_a_pickled_model_predicts_without_torch(tmp_path):
    model = fit_fast()
    path = tmp_path / "model.pkl"
    path.write_bytes(pickle.dumps(model))
    np.save(tmp_path / "images.npy", IMAGES[200:260])
    code = (
        "import pickle, numpy as np\n"
        "model = pickle.loads(open(sys.argv[1], 'rb').read())\n"
        "images = np.load(sys.argv[2])\n"
        "np.save(sys.argv[3], np.column_stack([model.predict_proba(images), "
        "model.transform(images), model.predict(images)]))\n")
    result = run_without_torch(code, path, tmp_path / "images.npy", tmp_path / "out.npy")
    assert result.returncode == 0, result.stderr
    out = np.load(tmp_path / "out.npy")
    np.testing.assert_array_equal(out[:, :10], model.predict_proba(IMAGES[200:260]))
    np.testing.assert_array_equal(out[:, 10:-1], model.transform(IMAGES[200:260]))
    np.testing.assert_array_equal(out[:, -1], model.predict(IMAGES[200:260]))


def test_pickle_round_trip():
    model = fit_fast()
    restored = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(restored.predict_proba(IMAGES[200:260]),
                                  model.predict_proba(IMAGES[200:260]))
    np.testing.assert_array_equal(restored.transform(IMAGES[:3]), model.transform(IMAGES[:3]))


@pytest.mark.parametrize("param, value", [
    ("n_clusters", 0), ("balance", -1.0), ("confidence", 1.0), ("max_rotation", 200.0),
    ("max_iter", 0), ("batch_size", 1), ("device", "tpu"), ("n_heads", 0),
    ("self_labelling", -1), ("max_iter", "many"), ("max_side", 2),
])
def test_bad_parameters_are_refused(param, value):
    with pytest.raises(ValueError, match=param):
        DeepImageClustering(**{param: value}).fit(SMALL)


def test_the_caller_s_torch_modes_change_nothing():
    # inside torch.no_grad() fit failed with torch's "does not require grad"; with
    # float64 as torch's default dtype, inside the gradient histograms
    reference = fit_fast().labels_
    with torch.no_grad():
        np.testing.assert_array_equal(fit_fast().labels_, reference)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        np.testing.assert_array_equal(fit_fast().labels_, reference)
        assert torch.get_default_dtype() == torch.float64
    finally:
        torch.set_default_dtype(previous)
    with torch.inference_mode(), pytest.raises(RuntimeError, match="inference_mode"):
        fit_fast()


def test_tiny_pixel_values_give_the_same_partition():
    # their squares underflowed: a scale of 1, the images all zeros, one cluster
    np.testing.assert_array_equal(fit_fast(SMALL * 1e-200).labels_, fit_fast().labels_)


def test_the_embedding_has_feature_names_and_set_output():
    model = fit_fast()
    names = model.get_feature_names_out()
    assert names.shape == (model.transform(SMALL[:2]).shape[1],)
    assert names[0] == "deepimageclustering0"


def test_a_failed_fit_keeps_the_fitted_state():
    model = fit_fast()
    labels = model.labels_.copy()
    with pytest.raises(ValueError):
        model.set_params(n_clusters=500).fit(SMALL)
    np.testing.assert_array_equal(model.labels_, labels)
    assert model.image_shape_ == (1, 8, 8)


def test_not_fitted():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        DeepImageClustering().predict(SMALL)

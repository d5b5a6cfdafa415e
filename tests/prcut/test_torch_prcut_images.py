"""PRCut on images (issue 27): the module reads n-D samples as they are, and the graph
comes from other features (``fit(X, graph_input=...)``), on scikit-learn's digits
as a small stand-in for MNIST (tests never need ../shared/data/mnist).
"""

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from torch import nn

from skdiffclust.metrics import clustering_accuracy
from skdiffclust.prcut import PRCut
from skdiffclust._graphcut._graph import scaled_knn_graph, shared_neighbor_graph
from skdiffclust.prcut._scaling import FeatureScaling

pytestmark = [pytest.mark.torch,
              pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")]

FAST = dict(max_iter=30, device="cpu", random_state=0)


@pytest.fixture(scope="module")
def digits():
    data = load_digits()
    images = (data.images / 16.0).astype(np.float32)[:, None]  # (n, 1, 8, 8)
    features = PCA(20, random_state=0).fit_transform(data.data)
    return images, features, data.target


def image_cnn(seed=0):
    """A small CNN on (batch, 1, 8, 8) images, drawn from a local generator."""
    cnn = nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.GELU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.GELU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64, 32), nn.GELU(), nn.Linear(32, 10),
    )
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in cnn.parameters():
            parameter.uniform_(-0.3, 0.3, generator=generator)
    return cnn


def test_a_cnn_reads_images_as_they_are_with_the_graph_from_other_features(digits):
    images, features, y = digits
    model = PRCut(n_clusters=10, module=image_cnn(), **FAST).fit(images,
                                                                 graph_input=features)
    # the graph is the kNN graph of the PCA features, not of the pixels (with
    # the shared-neighbour weights its hubs call for, which the start read)
    expected = scaled_knn_graph(FeatureScaling(features), n_neighbors=10,
                                affinity="nearest_neighbors", rbf_gamma=None,
                                algorithm="auto", device=None, n_jobs=None,
                                random_state=0)
    assert (model.affinity_matrix_ != shared_neighbor_graph(expected)).nnz == 0
    assert clustering_accuracy(y, model.labels_) > 0.7
    assert model.n_features_in_ == 64
    np.testing.assert_array_equal(model.predict(images), model.labels_)
    proba = model.predict_proba(images[:5])
    assert proba.shape == (5, model.n_clusters_)
    np.testing.assert_allclose(proba.sum(1), 1.0)
    assert model.transform(images[:5]).dtype == np.float32
    assert np.isfinite(model.score(images, graph_input=features))


def test_images_without_graph_input_are_flattened_for_the_graph(digits):
    images, _, y = digits
    flat = images.reshape(len(images), -1)
    on_images = PRCut(n_clusters=10, module=image_cnn(), **FAST).fit(images)
    reads_rows = nn.Sequential(nn.Unflatten(1, (1, 8, 8)), *image_cnn())
    on_rows = PRCut(n_clusters=10, module=reads_rows, **FAST).fit(flat)
    assert (on_images.affinity_matrix_ != on_rows.affinity_matrix_).nnz == 0
    np.testing.assert_array_equal(on_images.labels_, on_rows.labels_)
    # (n, 8, 8) images work the same way, with a module that reads them
    squeezed = nn.Sequential(nn.Unflatten(1, (1, 8)), *image_cnn())
    model = PRCut(n_clusters=10, module=squeezed, **FAST).fit(images[:, 0])
    assert model.predict(images[:3, 0]).shape == (3,)


def test_nd_input_without_a_module_says_to_flatten_or_pass_one(digits):
    images, _, _ = digits
    with pytest.raises(ValueError, match=r"flatten each sample.*PRCut\(module=\.\.\.\)"):
        PRCut(n_clusters=10).fit(images)
    fitted = PRCut(n_clusters=10, **FAST).fit(images.reshape(len(images), -1)[:200])
    with pytest.raises(ValueError, match="flatten each sample"):
        fitted.predict(images[:3])


def test_queries_must_have_the_fitted_sample_shape(digits):
    images, _, _ = digits
    model = PRCut(n_clusters=10, module=image_cnn(), **FAST).fit(images[:300])
    with pytest.raises(ValueError, match=r"samples of shape \(8, 8\).*\(1, 8, 8\)"):
        model.predict(images[:3, 0])
    with pytest.raises(ValueError, match=r"samples of shape \(64,\).*\(1, 8, 8\)"):
        model.predict(images[:3].reshape(3, -1))


def test_partial_fit_streams_images_to_the_module(digits):
    images, _, y = digits
    model = PRCut(n_clusters=10, module=image_cnn(), batch_size=256, random_state=0,
                  device="cpu")
    for chunk in np.array_split(np.arange(len(images)), 3):
        model.partial_fit(images[chunk])
    assert model.n_iter_ == 3
    assert clustering_accuracy(y, model.predict(images)) > 0.5


def test_the_builtin_network_reads_x_with_the_graph_from_graph_input(digits):
    images, features, y = digits
    pixels = images.reshape(len(images), -1)
    model = PRCut(n_clusters=10, **FAST).fit(pixels, graph_input=features)
    on_features = PRCut(n_clusters=10, **FAST).fit(features)
    assert (model.affinity_matrix_ != on_features.affinity_matrix_).nnz == 0
    assert model.coefs_[0].shape[0] == 64  # the network reads the pixels
    assert clustering_accuracy(y, model.labels_) > 0.7
    with pytest.raises(ValueError, match="fitted with a graph_input"):
        model.score(pixels)


def test_a_precomputed_graph_input_with_features_for_the_network(digits):
    images, features, y = digits
    pixels = images.reshape(len(images), -1)
    graph = PRCut(n_clusters=10, **FAST).fit(features).affinity_matrix_
    model = PRCut(n_clusters=10, affinity="precomputed", module=image_cnn(),
                  **FAST).fit(images, graph_input=graph)
    assert (model.affinity_matrix_ != graph).nnz == 0
    assert clustering_accuracy(y, model.labels_) > 0.7
    np.testing.assert_array_equal(model.predict(images), model.labels_)
    # score takes the queries' affinities to the training samples
    assert np.isfinite(model.score(images[:50], graph_input=graph[:50]))
    builtin = PRCut(n_clusters=10, affinity="precomputed", **FAST).fit(
        pixels, graph_input=sp.csr_matrix(graph))
    assert builtin.coefs_[0].shape[0] == 64


@pytest.mark.parametrize("graph_input, match", [
    (np.zeros((5, 3)), "graph_input must describe the samples of X: it has 5 rows"),
    (np.full((1797, 2), np.nan), "graph_input"),
])
def test_bad_graph_inputs_are_named(digits, graph_input, match):
    images, _, _ = digits
    with pytest.raises(ValueError, match=match):
        PRCut(n_clusters=10, module=image_cnn(), **FAST).fit(images,
                                                             graph_input=graph_input)

"""The last steps of DeepImageClustering's n_clusters='auto' (``deep/_centres.py``):
the number is refined by the silhouette of k-means partitions near the merge's
count, and the clusters become the nearest centres in the network's embedding,
its head the linear map that gives them. NumPy only."""

import numpy as np
from scipy.special import softmax

from sklearn.metrics import adjusted_rand_score

from skdiffclust._utils._count import ClusterCount
from skdiffclust.deep import _centres
from skdiffclust.deep._centres import nearest_centre_head, silhouette_refined

RNG = np.random.default_rng(0)


def head_state(n_outputs, width):
    """A network state's head (what the function replaces), and one other array
    that must pass through untouched."""
    return {"heads.0.weight": np.zeros((n_outputs, width), dtype=np.float32),
            "heads.0.bias": np.zeros(n_outputs, dtype=np.float32),
            "body.weight": np.ones(3, dtype=np.float32)}


def head_labels(state, embedding):
    logits = embedding.astype(np.float32) @ state["heads.0.weight"].T + state["heads.0.bias"]
    return logits.argmax(1), logits


def three_blobs():
    """Two large blobs and a small one, far apart, in an embedding of 4
    dimensions."""
    centres = np.array([[0.0, 0, 0, 0], [8, 0, 0, 0], [0, 8, 0, 0]])
    sizes = [200, 20, 200]
    truth = np.repeat(np.arange(3), sizes)
    return centres[truth] + RNG.normal(size=(truth.size, 4)), truth


def test_a_small_class_the_head_joined_to_another_gets_its_centre_back():
    """A pull towards equal sizes can put most of a small class in the next
    cluster; the nearest centres give it back, and the head then says so."""
    embedding, truth = three_blobs()
    labels = truth.copy()
    small = np.flatnonzero(truth == 1)
    labels[small[:12]] = 0
    state = head_state(3, 4)
    fitted = nearest_centre_head(state, embedding, labels)
    np.testing.assert_array_equal(head_labels(fitted, embedding)[0], truth)
    assert fitted["body.weight"] is state["body.weight"]
    assert not state["heads.0.weight"].any(), "the state given must not change"
    assert fitted["heads.0.weight"].dtype == np.float32


def test_the_head_gives_spherical_gaussian_probabilities_around_the_centres():
    """predict_proba after the step: a mixture of equal weights of spherical
    Gaussians around the centres, whose variance is the mean squared distance to
    the centre per dimension."""
    embedding, truth = three_blobs()
    fitted = nearest_centre_head(head_state(3, 4), embedding, truth)
    centres = np.array([embedding[truth == j].mean(0) for j in range(3)])
    variance = np.mean((embedding - centres[truth]) ** 2)
    squared = ((embedding[:, None, :] - centres[None]) ** 2).sum(2)
    expected = softmax(-squared / (2 * variance), axis=1)
    np.testing.assert_allclose(softmax(head_labels(fitted, embedding)[1].astype(np.float64),
                                       axis=1), expected, atol=1e-4)


def test_empty_outputs_are_dropped_and_the_rest_kept_in_order():
    """Outputs no image chose get no centre: the head has one output per
    cluster, in the order of the outputs."""
    embedding, truth = three_blobs()
    outputs = np.array([0, 3, 5])[truth]  # a network of 6 outputs, 3 of them chosen
    fitted = nearest_centre_head(head_state(6, 4), embedding, outputs)
    assert fitted["heads.0.bias"].shape == (3,)
    np.testing.assert_array_equal(head_labels(fitted, embedding)[0], truth)


def test_a_cluster_the_centres_would_empty_keeps_the_networks_head():
    """Where the nearest centres would leave one of the clusters empty, the
    count stays the merge's: the network's head is kept."""
    embedding = np.concatenate([np.zeros((10, 2)), np.full((10, 2), 10.0),
                                [[0.1, 0.1], [9.9, 9.9]]])
    labels = np.repeat([0, 1, 2], [10, 10, 2])  # cluster 2's centre is nearest to none
    state = head_state(3, 2)
    assert nearest_centre_head(state, embedding, labels) is state


def test_identical_images_get_a_finite_head():
    embedding = np.ones((6, 3))
    fitted = nearest_centre_head(head_state(1, 3), embedding, np.zeros(6, dtype=np.int64))
    assert np.isfinite(fitted["heads.0.weight"]).all()
    assert np.isfinite(fitted["heads.0.bias"]).all()


def blobs(n_blobs, per_blob=60, width=6):
    """``n_blobs`` separate Gaussian blobs in ``width`` dimensions, and their
    labels."""
    centres = 10.0 * np.eye(width)[:n_blobs]
    truth = np.repeat(np.arange(n_blobs), per_blob)
    return centres[truth] + RNG.normal(size=(truth.size, width)), truth


def merge_count(n_clusters, largest=12):
    """The merges' count: ``n_clusters`` among 2 .. ``largest``."""
    candidates = np.arange(2, largest + 1)
    return ClusterCount(n_clusters, candidates, np.linspace(0.2, 0.0, candidates.size))


def test_two_classes_the_merges_joined_are_told_apart_by_the_silhouette():
    """Merges that stopped one cluster short (two blobs joined) are refined:
    the silhouette is highest at the blobs, within the window around the merge's
    count, and only there is it measured."""
    embedding, truth = blobs(6)
    joined = np.minimum(truth, 4)
    labels, count = silhouette_refined(embedding, joined, merge_count(5), seed=0)
    assert count.n_clusters == 6
    assert adjusted_rand_score(truth, labels) == 1.0
    measured = np.isfinite(count.silhouette)
    # the window: within max(3, 5 / 2) of 5
    np.testing.assert_array_equal(count.candidates[measured], np.arange(2, 9))
    assert count.candidates[np.nanargmax(count.silhouette)] == 6
    np.testing.assert_array_equal(count.scores, merge_count(5).scores)  # the merges' links


def test_the_merges_count_at_the_highest_silhouette_keeps_the_networks_clusters():
    embedding, truth = blobs(4)
    labels, count = silhouette_refined(embedding, truth, merge_count(4), seed=0)
    assert labels is truth
    assert count.n_clusters == 4


def test_the_silhouette_reads_a_sample_of_the_images(monkeypatch):
    """On more images than the sample, k-means and the silhouette read a
    sample; the clusters found are then settled on every image."""
    monkeypatch.setattr(_centres, "SILHOUETTE_SAMPLE", 100)
    embedding, truth = blobs(5)
    labels, count = silhouette_refined(embedding, np.minimum(truth, 3), merge_count(4),
                                       seed=1)
    assert count.n_clusters == 5 and labels.shape == truth.shape
    assert adjusted_rand_score(truth, labels) == 1.0


def test_the_same_seed_gives_the_same_count_and_labels():
    embedding, truth = blobs(6, per_blob=30)
    noisy = embedding + RNG.normal(scale=3.0, size=embedding.shape)
    first = silhouette_refined(noisy, np.minimum(truth, 4), merge_count(5), seed=3)
    second = silhouette_refined(noisy, np.minimum(truth, 4), merge_count(5), seed=3)
    np.testing.assert_array_equal(first[0], second[0])
    np.testing.assert_array_equal(first[1].silhouette, second[1].silhouette)


def test_too_few_distinct_images_keep_the_merges_count():
    """Where every k-means start empties a cluster (fewer distinct images than
    the candidates), no silhouette is measured and the count stays."""
    embedding = np.repeat(np.eye(3), 4, axis=0)
    labels = np.repeat(np.arange(3), 4)
    refined, count = silhouette_refined(embedding, labels, merge_count(3, largest=6), seed=0)
    assert refined is labels and count.n_clusters == 3
    assert np.isnan(count.silhouette[count.candidates > 3]).all()

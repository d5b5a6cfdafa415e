"""The last step of DeepImageClustering's ``n_clusters='auto'``: the clusters of
the network trained on the merged partition become the nearest centres in its
embedding (Lloyd's iterations from the network's own clusters), and its head the
map that gives them.

Why: the network's head is trained with a pull towards clusters of equal sizes
(``balance``), which keeps a class ten times smaller than the others joined to
a piece of another; k-means on the embedding has no such pull. Starting from
the network's clusters, the iterations move only the images near a boundary
(one to three iterations on the tuning half; see the user guide for the
figures). With an integer ``n_clusters`` the head is kept as trained.

A nearest-centre partition is a linear map of the embedding: the image with
embedding ``e`` is nearest to the centre ``c_j`` of largest ``e . c_j - |c_j|^2 /
2``, so the head becomes the weights ``c_j / s`` and biases ``-|c_j|^2 / (2 s)``
for a scale ``s``: ``predict`` gives the nearest centre, and ``predict_proba``
the probabilities of a mixture of spherical Gaussians of equal weights around
the centres, of variance ``s`` (the mean squared distance of an image to its
centre, per dimension of the embedding). Imports no torch.
"""

import numpy as np

from skdiffclust._utils._threads import one_blas_thread

# Lloyd's iterations stop here at the latest (the tuning half's fits converged
# in at most three)
MAX_ITERATIONS = 100


def nearest_centre_head(state, embedding, labels):
    """``state`` with its head (``heads.0``) replaced by the nearest centre of
    the clusters of ``labels`` in ``embedding`` (shape (n, d)), after Lloyd's
    iterations from them; one output per non-empty cluster, in their order.

    The head is replaced only where the iterations settle (no image changes
    cluster) within :data:`MAX_ITERATIONS` without emptying a cluster (the count
    is the merge's, not the iterations'); otherwise ``state`` is returned as it
    is. ``state`` itself is never changed.
    """
    embedding = np.asarray(embedding, dtype=np.float64)
    labels = np.unique(labels, return_inverse=True)[1].ravel()
    n_clusters = int(labels.max()) + 1
    with one_blas_thread():  # the same bits on any number of threads
        centres = _centres(embedding, labels)
        for _ in range(MAX_ITERATIONS):
            nearest = _squared_distances(embedding, centres).argmin(1)
            if np.unique(nearest).size < n_clusters:
                return state  # a cluster would empty: the count is the merge's
            if np.array_equal(nearest, labels):
                break
            labels = nearest
            centres = _centres(embedding, labels)
        else:
            return state  # not settled: the network's head is kept
        spread = float(np.mean((embedding - centres[labels]) ** 2))
    scale = spread if spread > 0 else 1.0  # identical images: any scale
    head = dict(state)
    dtype = state["heads.0.weight"].dtype
    head["heads.0.weight"] = np.ascontiguousarray(centres / scale, dtype=dtype)
    head["heads.0.bias"] = np.asarray(-(centres ** 2).sum(1) / (2 * scale), dtype=dtype)
    return head


def _centres(embedding, labels):
    """The mean embedding of each cluster 0 .. labels.max() (each non-empty)."""
    counts = np.bincount(labels).astype(np.float64)
    sums = np.column_stack([np.bincount(labels, weights=column, minlength=counts.size)
                            for column in embedding.T])
    return sums / counts[:, None]


def _squared_distances(embedding, centres):
    """Squared Euclidean distances (n, k) between the rows and the centres, up to
    each row's squared norm (which does not change the nearest)."""
    return (centres ** 2).sum(1)[None, :] - 2.0 * embedding @ centres.T

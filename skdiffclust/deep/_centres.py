"""The last steps of DeepImageClustering's ``n_clusters='auto'``, in the
embedding of the network trained on the merged partition: the number is refined
by the silhouette of k-means partitions near the merge's count
(:func:`silhouette_refined`), and the clusters become the nearest centres, the
head the map that gives them (:func:`nearest_centre_head`).

Why the silhouette: the network trained on the merged clusters separates the
classes more clearly than the first network did, and where the merges stopped a
cluster or two away from the classes (a class left in two pieces, two small
classes joined), k-means partitions of its embedding at the neighbouring numbers
show it. The candidates lie within half the merge's count of it (at least 3):
the merge tells the scale, the silhouette the number at that scale. The
partitions are k-means from k-means++ starts on a sample of the images, those at
the merge's count too, so that no candidate is favoured by its start.

Why the nearest centres: the network's head is trained with a pull towards
clusters of equal sizes (``balance``), which keeps a class ten times smaller
than the others joined to a piece of another; k-means on the embedding has no
such pull. Starting from the network's clusters, the iterations move only the
images near a boundary (one to three iterations on the tuning half; see the user
guide for the figures). With an integer ``n_clusters`` the head is kept as
trained.

A nearest-centre partition is a linear map of the embedding: the image with
embedding ``e`` is nearest to the centre ``c_j`` of largest ``e . c_j - |c_j|^2 /
2``, so the head becomes the weights ``c_j / s`` and biases ``-|c_j|^2 / (2 s)``
for a scale ``s``: ``predict`` gives the nearest centre, and ``predict_proba``
the probabilities of a mixture of spherical Gaussians of equal weights around
the centres, of variance ``s`` (the mean squared distance of an image to its
centre, per dimension of the embedding). Imports no torch.
"""

import numpy as np

from skdiffclust._utils._random import numpy_generator
from skdiffclust._utils._threads import one_blas_thread

# Lloyd's iterations stop here at the latest (the tuning half's fits converged
# in at most three)
MAX_ITERATIONS = 100
# the silhouette's candidates: within this share of the merge's count of it, and
# at least MIN_WINDOW (chosen on the tuning half among 0.15, 0.25, 0.5 and 1)
WINDOW_SHARE = 0.5
MIN_WINDOW = 3
# the images the silhouette and its k-means read (at most), and the k-means++
# starts of each candidate, the one of least inertia kept
SILHOUETTE_SAMPLE = 5000
N_STARTS = 10


def silhouette_refined(embedding, labels, count, seed):
    """The clusters at the number of highest silhouette near the merge's, and the
    count with that number and the silhouettes.

    Each candidate of ``count`` (a :class:`ClusterCount` of the merges) within
    the window around ``count.n_clusters`` is scored by the silhouette of k-means
    (the best of :data:`N_STARTS` k-means++ starts) on at most
    :data:`SILHOUETTE_SAMPLE` rows of ``embedding`` drawn by ``seed``; the
    highest wins, the smallest number of equal scores. At the merge's count the
    clusters stay ``labels`` (the network's); at another, the sample's centres'
    nearest, settled by Lloyd's iterations on every row. Where they would empty a
    cluster or do not settle, ``labels`` and the merge's count are kept.
    Returns ``(labels, count)``, ``count.silhouette`` the score of each candidate
    (NaN outside the window, or where every start emptied a cluster).
    """
    from sklearn.metrics import silhouette_score

    embedding = np.asarray(embedding, dtype=np.float64)
    candidates = np.asarray(count.candidates, dtype=np.int64)
    rng = numpy_generator(seed)
    n_sample = min(embedding.shape[0], SILHOUETTE_SAMPLE)
    rows = embedding[np.sort(rng.choice(embedding.shape[0], n_sample, replace=False))]
    window = max(MIN_WINDOW, int(round(WINDOW_SHARE * count.n_clusters)))
    silhouettes = np.full(candidates.size, np.nan)
    centres = {}
    with one_blas_thread():  # the same bits on any number of threads
        for i, k in enumerate(candidates):
            if abs(k - count.n_clusters) <= window and 2 <= k < n_sample:
                found = _kmeans(rows, int(k), rng)
                if found is not None:
                    silhouettes[i] = silhouette_score(rows, found)
                    centres[int(k)] = _centres(rows, found)
        refined = labels
        if np.isfinite(silhouettes).any():
            best = int(candidates[np.nanargmax(silhouettes)])
            if best != count.n_clusters:
                nearest = _squared_distances(embedding, centres[best]).argmin(1)
                refined = _lloyd(embedding, nearest, best)
        if refined is None or refined is labels:
            return labels, count._replace(silhouette=silhouettes)
    return refined, count._replace(n_clusters=best, silhouette=silhouettes)


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
        labels = _lloyd(embedding, labels, n_clusters)
        if labels is None:  # a cluster would empty, or not settled: the count is kept
            return state
        centres = _centres(embedding, labels)
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


def _lloyd(embedding, labels, n_clusters):
    """Lloyd's iterations from ``labels`` (each of the ``n_clusters`` non-empty)
    until no row changes cluster: the settled labels, or None where a cluster
    would empty or :data:`MAX_ITERATIONS` pass first."""
    for _ in range(MAX_ITERATIONS):
        if np.unique(labels).size < n_clusters:
            return None
        nearest = _squared_distances(embedding, _centres(embedding, labels)).argmin(1)
        if np.array_equal(nearest, labels):
            return labels
        labels = nearest
    return None


def _kmeans(rows, n_clusters, rng):
    """The settled k-means labels of ``rows`` of least inertia over
    :data:`N_STARTS` k-means++ starts drawn from ``rng``; None where every start
    empties a cluster (fewer distinct rows than clusters)."""
    from sklearn.cluster import kmeans_plusplus

    best, least = None, np.inf
    for _ in range(N_STARTS):
        seeds, _ = kmeans_plusplus(rows, n_clusters, random_state=int(rng.integers(2 ** 31)))
        labels = _lloyd(rows, _squared_distances(rows, seeds).argmin(1), n_clusters)
        if labels is not None:
            inertia = float(((rows - _centres(rows, labels)[labels]) ** 2).sum())
            if inertia < least:
                best, least = labels, inertia
    return best

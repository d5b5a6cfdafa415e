"""Whether the clusters ``n_clusters='auto'`` found show any cluster structure.

Every count picks the best of its candidates, and some candidate is always best:
on one Gaussian blob the spanning forests split off its outermost samples, PRCut
and SparseGEMINI cut it into a few parts, all silently. After a count, the
partition found is compared with two signs of structure (on at most
:data:`SAMPLE` samples):

* its **neighbourhood cut**: the share of the samples' :data:`N_NEIGHBORS`
  nearest neighbours that lie in another cluster, against the same share for
  k-means' partition, into as many clusters, of a Gaussian blob of the data's
  size, mean and covariance (the mean over :data:`NULL_SAMPLES` such samples,
  whose cuts vary by some 15% from one to the next). A partition no better than
  :data:`NULL_CUT_RATIO` times the blob's cuts through the data as it would cut
  through a blob;
* a **density valley**: for each pair of the largest clusters, the samples of
  both projected on the line through their centres, and the density there (a
  Gaussian kernel estimate) at its lowest between the centres against its value
  at the centres; under :data:`FLAT_VALLEY` for some pair, a valley divides them.

A partition that cuts as a blob's and has no valley, or whose clusters beyond the
largest are tiny (outliers only: fewer than :data:`OUTLIER_SHARE` of the samples
and :data:`MIN_CLUSTER_SIZE` each), shows no cluster structure: a
:class:`~skdiffclust.exceptions.ClusterCountWarning` says so. The fit is not
changed. The thresholds were set on the development batteries (``sipu``,
``fcps``, ``uci``: 33 datasets) and on 20 structureless samples (Gaussian blobs
of 90 to 3,000 points in 2 to 10 dimensions, with and without one far outlier,
and uniform squares). On the structureless samples the forests warn on 20, PRCut
on 19, SparseGEMINI on 16 (it cuts the uniform squares into 17 to 19 parts, whose
neighbours' densities dip). On the development data the forests warn on the 18
sets where single linkage splits off outliers only; PRCut on 3, where its
numbers are far from the reference (2 and 3 of ``s3``'s and ``s4``'s 15, and
``yeast``'s outliers); SparseGEMINI on 3, ``sonar`` and ``wdbc`` (weakly
separated) and ``wingnut`` (two touching slabs: a miss).
"""

import math

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

from skdiffclust._utils._random import numpy_generator
from skdiffclust._utils._warn import warn_user
from skdiffclust.exceptions import ClusterCountWarning

SAMPLE = 4000
N_NEIGHBORS = 10
NULL_SAMPLES = 4
NULL_CUT_RATIO = 0.45
FLAT_VALLEY = 0.5
OUTLIER_SHARE = 0.02
MIN_CLUSTER_SIZE = 5
# pairs of clusters read for a valley: of the VALLEY_CLUSTERS largest, on a grid of
# VALLEY_GRID points between their centres
VALLEY_CLUSTERS = 10
VALLEY_GRID = 64


def outliers_only(labels):
    """Whether every cluster but the largest is tiny (:data:`OUTLIER_SHARE` of the
    samples and :data:`MIN_CLUSTER_SIZE`); the sizes, largest first."""
    sizes = np.sort(np.bincount(labels))[::-1]
    sizes = sizes[sizes > 0]
    tiny = max(MIN_CLUSTER_SIZE, OUTLIER_SHARE * labels.size)
    return sizes.size > 1 and bool(np.all(sizes[1:] < tiny)), sizes


def neighbourhood_cut(X, labels):
    """The share of the samples' nearest neighbours in another cluster."""
    from sklearn.neighbors import NearestNeighbors

    n_neighbors = min(N_NEIGHBORS, X.shape[0] - 1)
    _, neighbours = NearestNeighbors(n_neighbors=n_neighbors + 1).fit(X).kneighbors(X)
    return float(np.mean(labels[neighbours[:, 1:]] != labels[:, None]))


def blob_cut(X, n_clusters, rng):
    """:func:`neighbourhood_cut` of k-means' ``n_clusters`` clusters of a Gaussian
    sample of X's size, mean and covariance."""
    from sklearn.cluster import KMeans

    centred = X - X.mean(axis=0)
    _, spread, axes = np.linalg.svd(centred, full_matrices=False)
    blob = (rng.standard_normal((X.shape[0], spread.size))
            * (spread / math.sqrt(max(X.shape[0] - 1, 1)))) @ axes
    labels = KMeans(n_clusters, n_init=1, random_state=int(rng.integers(2**31))
                    ).fit_predict(blob)
    return neighbourhood_cut(blob, labels)


def deepest_valley(X, labels):
    """The lowest, over pairs of the largest clusters, of the density of their
    samples on the line through their centres, at its lowest between the centres,
    relative to the lower of its values at the centres (1: no valley)."""
    ids, counts = np.unique(labels, return_counts=True)
    ids = ids[np.argsort(-counts, kind="stable")][:VALLEY_CLUSTERS]
    lowest = 1.0
    for a in range(ids.size):
        for b in range(a + 1, ids.size):
            pair = X[(labels == ids[a]) | (labels == ids[b])]
            start, end = X[labels == ids[a]].mean(axis=0), X[labels == ids[b]].mean(axis=0)
            length = float(np.linalg.norm(end - start))
            if not length > 0:
                continue
            along = (pair - start) @ ((end - start) / length)
            width = 1.06 * along.std() * along.size ** -0.2  # Silverman's rule
            if not width > 0:
                continue
            grid = np.linspace(0.0, length, VALLEY_GRID)
            density = np.exp(-0.5 * ((grid[:, None] - along) / width) ** 2).sum(axis=1)
            lowest = min(lowest, float(density.min() / min(density[0], density[-1])))
    return lowest


def structure_of(X, labels, random_state):
    """Why the partition ``labels`` of X shows no cluster structure, in words, or
    None where it shows some (or cannot be read: one cluster; X None or sparse:
    the outliers only)."""
    labels = np.asarray(labels)
    if np.unique(labels).size < 2:
        return None
    outliers, sizes = outliers_only(labels)
    if outliers:
        others, held = sizes.size - 1, int(sizes[1:].sum())
        return (f"besides one cluster of {sizes[0]} samples, its {others} other "
                f"cluster{'s' if others > 1 else ''} hold{'' if others > 1 else 's'} "
                f"{held} sample{'s' if held > 1 else ''}{' in all' if others > 1 else ''}: "
                "outliers split off, not clusters")
    if X is None or sp.issparse(X) or np.ndim(X) != 2:
        return None
    rng = numpy_generator(random_state)
    if X.shape[0] > SAMPLE:  # sampled before the float64 copy: the rows read only
        rows = np.sort(rng.choice(X.shape[0], SAMPLE, replace=False))
        X, labels = X[rows], labels[rows]
    X = np.asarray(X, dtype=np.float64)
    with threadpool_limits(1):  # the same answer on any thread count
        cut = neighbourhood_cut(X, labels)
        blob = float(np.mean([blob_cut(X, np.unique(labels).size, rng)
                              for _ in range(NULL_SAMPLES)]))
    if cut < NULL_CUT_RATIO * blob or deepest_valley(X, labels) < FLAT_VALLEY:
        return None
    return (f"its {np.unique(labels).size} clusters cut the samples' neighbourhoods "
            f"({cut:.0%} of their {N_NEIGHBORS} nearest neighbours in another cluster) "
            f"as k-means cuts one Gaussian blob of the data's shape ({blob:.0%}), and "
            "no density valley divides them")


def warn_if_unstructured(name, X, labels, count, random_state):
    """Warn (:class:`~skdiffclust.exceptions.ClusterCountWarning`) when the
    clusters ``n_clusters='auto'`` found (``count``: a fit's ``ClusterCount``,
    counted where its ``candidates`` are not None) show no cluster structure
    (:func:`structure_of`; X None, a precomputed affinity: the outliers only)."""
    if getattr(count, "candidates", None) is None:
        return
    why = structure_of(X, labels, random_state)
    if why is not None:
        warn_user(
            f"{name}(n_clusters='auto') found no cluster structure: {why}. The data may "
            "hold a single cluster; n_clusters='auto' cannot answer 1. Look at the "
            "data (a plot of two principal components), or give n_clusters.",
            ClusterCountWarning)

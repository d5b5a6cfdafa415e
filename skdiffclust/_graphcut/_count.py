"""``n_clusters='auto'`` on a graph: PRCut's count (the eigengap of the normalised
Laplacian's spectrum, large connected components first) and DeepImageClustering's
(the stability of the graph's partitions), read from a ``_measures.GraphMeasures``.
Each method's settings record calls :func:`count_clusters` with its own criterion.
Imports no torch.
"""

import numpy as np

from skdiffclust._utils._count import ClusterCount

# n_clusters='auto': the candidate k after which the normalised Laplacian's
# spectrum jumps most in ratio, log(lambda_(k+1) / lambda_k) (von Luxburg, 2007,
# 8.3). Ratios, not differences: a k-NN graph's eigenvalues shrink with its size
# (a gap of 0.001 is large at 10,000 points and noise at 100). Eigenvalues below
# COUNT_FLOOR times lambda_21 (the 21st eigenvalue, whatever max_clusters, so that
# the number found does not depend on the candidates beyond it) are read as that:
# the tiny eigenvalues within a cluster (0.00002 to 0.00004) carry no information
# in their ratios, and the floor stands for the zeros of separate components. FLOOR
# was chosen on the development batteries (sipu, fcps, uci) among 0.003, 0.01,
# 0.015, 0.02, 0.03 and 0.1, by PRCut's mean ARI at the number chosen (see the
# user guide)
COUNT_FLOOR, COUNT_FLOOR_EIGENVALUE = 0.03, 21
# lambda_(max_clusters + 1) at most this: more components than candidates
COUNT_ZERO = 1e-10
# ... but a graph of two or more connected components of at least this share of
# the samples each has as many clusters (zero cuts; the smaller components are
# outliers, which PRCut's partition joins to others). On the development batteries
# the shares 0.05, 0.1 and 0.2 were tried (and none): 0.1 found the most numbers
# right, 15 of 33 against 12 by the eigengap alone (see the user guide). Where the
# degrees are skewed by hubs (HUB_SKEWNESS), the spectrum read is that of the
# shared-neighbour weights: on the development batteries' five such sets the mean
# ARI rose by 0.11 (wine found, ionosphere lost), on the digits from 0.05 to 0.76
COUNT_COMPONENT_SHARE = 0.1

# n_clusters='auto' by stability (images): the most stable candidate stands out
# when its k-means runs agree at least this much (mean adjusted Rand index
# between runs); else a second criterion decides (count_clusters' ``unclear``),
# with a warning. On the image battery's tuning half, the two sets of small
# classes (50 and 25 images) scored 0.70 and 0.72 at 4 and 2 clusters (10 and 40
# classes), the others 0.79 to 1.0 (see the user guide)
STABILITY_CLEAR = 0.75
# ... and when its partition keeps most of the graph's weight within clusters: it
# cuts at most this share of the weight a partition of the same cluster volumes
# would cut at random (of the shared-neighbour weights). Partitions of noise,
# reproducible at 2 clusters (a split along the graph's longest axis), cut 0.19
# (a Gaussian blob in 8-D) to 0.34 (noise images); the tuning half's partitions
# at the number found 0.001 to 0.048 (see the user guide)
CUT_CLEAR = 0.1


def count_clusters(max_clusters, graph, *, shared_neighbours, criterion="eigengap",
                   unclear="modularity"):
    """The number of clusters of ``graph`` (a ``_measures.GraphMeasures``), 2 to
    ``max_clusters`` (:func:`count_candidates`): the largest candidate where the
    graph has more components than candidates, else the candidate of highest
    score.

    ``criterion``: ``'eigengap'`` scores each candidate by :func:`count_scores`,
    read from the spectrum of the graph's normalised Laplacian (or of its
    shared-neighbour weights', ``shared_neighbours``), and where the graph has two
    or more large connected components (:func:`large_components`), their number
    is chosen; ``'stability'`` scores each candidate by the reproducibility of
    k-means partitions of its spectral embedding (``_stability.PartitionStability``,
    of the same weights; large components are coarse clusters there, which the
    partitions may cut further). Where the most stable does not stand out
    (:func:`stands_out`), the count is not ``clear`` and ``unclear`` decides:
    ``'modularity'``, the candidate whose partition has the highest modularity;
    ``'eigengap'``, the eigengap's candidate (large components first).

    Returns
    -------
    count : ClusterCount
    """
    components = graph.components
    candidates = count_candidates(max_clusters, components.shape[0])
    if candidates.size == 0:  # two samples: 2, the only number, unscored
        return ClusterCount(2, np.array([2]), np.full(1, np.nan))
    if criterion == "stability":
        measures = graph.stability(candidates, shared_neighbours=shared_neighbours)
        scores, modularity = measures.stability, measures.modularity
        best = int(np.argmax(scores))
        clear = stands_out(scores[best], measures.cut[best])
        if components.max() + 1 > candidates[-1]:
            return ClusterCount(int(candidates[-1]), candidates, scores, True, modularity)
        if clear or unclear == "modularity":
            best = best if clear else int(np.argmax(modularity))
            return ClusterCount(int(candidates[best]), candidates, scores, clear, modularity)
        fallback = count_clusters(max_clusters, graph, shared_neighbours=shared_neighbours)
        return ClusterCount(fallback.n_clusters, candidates, scores, False, modularity)
    scores, crowded = eigengap_scores(graph, candidates, shared_neighbours)
    chosen = large_components(components)
    if not 2 <= chosen <= candidates[-1]:
        chosen = int(candidates[-1] if crowded else candidates[int(np.argmax(scores))])
    return ClusterCount(chosen, candidates, scores)


def eigengap_scores(graph, candidates, shared_neighbours):
    """:func:`count_scores` of the candidates, read from the spectrum of the
    graph's normalised Laplacian (or of its shared-neighbour weights'), and
    whether the graph has more components than candidates (its eigenvalue after
    the largest candidate is 0)."""
    values = np.asarray(graph.spectrum(
        max(int(candidates[-1]) + 1, COUNT_FLOOR_EIGENVALUE),
        shared_neighbours=shared_neighbours), dtype=np.float64)
    return count_scores(values)[:candidates.size], values[candidates.size + 1] <= COUNT_ZERO


def stands_out(stability, cut):
    """Whether the most stable number of clusters stands out: its partitions
    reproduce with a mean adjusted Rand index (``_stability``) of at least
    :data:`STABILITY_CLEAR`, and cut at most :data:`CUT_CLEAR` of the graph's
    weight that random clusters of the same volumes would (``cut``)."""
    return bool(stability >= STABILITY_CLEAR and cut <= CUT_CLEAR)


def count_candidates(max_clusters, n_samples):
    """The numbers of clusters ``n_clusters='auto'`` chooses among: 2 to
    ``max_clusters``, at most ``n_samples - 1`` (one eigenvalue beyond each)."""
    return np.arange(2, min(max_clusters, n_samples - 1) + 1)


def large_components(components):
    """How many connected components hold :data:`COUNT_COMPONENT_SHARE` of the
    samples or more (``components``: each vertex's component)."""
    sizes = np.bincount(components)
    return int(np.count_nonzero(sizes >= COUNT_COMPONENT_SHARE * components.shape[0]))


def count_scores(laplacian_values):
    """The score of each candidate k = 2 .. m - 1 from the normalised
    Laplacian's m smallest eigenvalues (increasing): ``log(lambda_(k+1) /
    lambda_k)``, the eigenvalues raised to :data:`COUNT_FLOOR` times
    eigenvalue :data:`COUNT_FLOOR_EIGENVALUE` (the last, if fewer; all scores 0
    where it is 0: more components than candidates)."""
    values = np.asarray(laplacian_values, dtype=np.float64)
    reference = values[min(COUNT_FLOOR_EIGENVALUE, values.size) - 1]
    floored = np.maximum(values, max(COUNT_FLOOR * reference, COUNT_ZERO))
    return np.log(floored[2:] / floored[1:-1])

"""The spectral start's ``'auto'`` rules, shared by PRCut and DeepImageClustering:
which graph the start reads (the graph, or its shared-neighbour weights) and how
many eigenvectors (:func:`resolve_start`), from what a ``_measures.GraphMeasures``
measures of the graph. Imports no torch.
"""

from dataclasses import dataclass
from typing import Protocol

import numpy as np

# init='auto': the shared-neighbour start where the graph has hubs, i.e. where the
# skewness of its degrees (in a kNN graph, of the k-occurrences: how often each
# sample is among the others' k nearest, Radovanovic et al. 2010) exceeds this.
# Hubs come with high intrinsic dimension, where shared neighbours are the better
# similarity (Flexer and Schnitzer, 2013). Measured on 10-NN graphs: 2-D and 3-D
# data -0.76 to 0.41 (one set of 212 points 1.34); images 0.61 (MNIST-10k PCA-50)
# to 2.66 (Fashion-MNIST's pixels); see the user guide
HUB_SKEWNESS = 0.5

# ... and where its clusters are large against a sample's neighbourhood: the mean
# cluster (n_samples / n_clusters) at least this many times the graph's mean closed
# neighbourhood (a sample and its neighbours; 12 to 15 samples in a 10-NN graph).
# Shared neighbours measure how much two neighbourhoods overlap, which tells a
# cluster from its surroundings only where a cluster spans several neighbourhoods:
# in clusters of 6 to 24 images (40 to 200 clusters of 400 to 2,400 images, each an
# image under random small moves or rotations) the kNN graph's start was the better
# one in all five sets (NMI by 0.004 to 0.026), and on 100 separated groups of 6
# points in 100-D (hubs: skewness 9.7) its partition was exact, the shared
# neighbours' ARI 0.95; with 10 classes of 20 to 160 images the two were within
# 0.015 of each other
SNN_MIN_CLUSTER_NEIGHBOURHOODS = 2

# ... and where the Laplacian has no clear gap after n_clusters (eigenvalue k + 1
# less than this many times eigenvalue k): shared-neighbour 10-NN graphs of
# images 1.02 (MNIST-10k PCA-50) to 1.23 (MNIST's pixels); ten 32-D blobs 18.6,
# the uci sets with hubs 2.2 to 3.0. The same gap, on the shared-neighbour graph,
# keeps n_eigenvectors='auto' narrow: the wide eigenvectors of a graph with a clear
# gap cost much and gain nothing (1,000,000 blobs: 215 s for the start, not 15)
EIGENGAP_RATIO = 2.0

# n_eigenvectors='auto' on the shared-neighbour start: the widths tried, in
# multiples of n_clusters; the partition of lowest objective on the start's graph
# is kept (MNIST's and Fashion-MNIST's 10-NN shared-neighbour graphs: the best
# width of 8 k-means seeds ranged from 10 to 30 eigenvectors, see the user guide).
# On the graph itself, n_clusters: its wide partitions scored no lower and, chosen,
# lowered the evaluation batteries' NMI (see the user guide)
AUTO_WIDTH_FACTORS = (1.0, 1.5, 2.0, 2.5, 3.0)
# ... but a clear gap can come from a handful of samples nearly cut off from the
# rest: its narrow partition then holds a cluster of under this share of the mean
# cluster size, and the wide widths are tried after all (the lowest objective,
# balance included, decides). MNIST's test 4s and 9s: a clear gap after 2, whose
# partition split off 13 of 1,991 images (NMI 0.01 given 2); the wide partitions
# split the digits (0.85)
ISOLATED_SHARE = 0.05


@dataclass(frozen=True)
class ResolvedStart:
    """A fit's spectral start, its ``'auto'`` values resolved
    (:meth:`StartSettings.resolved_start`).

    Attributes
    ----------
    shared_neighbours : bool
        Whether the start reads the graph's shared-neighbour weights
        (``init='spectral_snn'``) rather than the graph (``'spectral'``).
    widths : tuple of int
        The widths (eigenvectors) of the embeddings partitioned, narrowest first:
        one, that embedding's partition; several, the partition of lowest
        objective (a wide one only by a margin).
    fallback : tuple of int
        The widths tried instead where the partition of ``widths`` isolates a
        handful of samples (:func:`isolates_a_handful`): those of a clear gap
        on the shared-neighbour weights; empty elsewhere.
    """

    shared_neighbours: bool
    widths: tuple
    fallback: tuple = ()


class StartGraph(Protocol):
    """What a start's ``'auto'`` values are resolved from: the measures of the
    graph (``_measures.GraphMeasures``), each taken when first asked."""

    n_samples: int

    def n_components(self):
        """The graph's connected components."""

    def degree_skewness(self):
        """The skewness of the graph's weighted degrees."""

    def mean_neighbourhood(self):
        """The mean closed neighbourhood: one plus the mean count of neighbours."""

    def eigengap(self, shared_neighbours):
        """Eigenvalues ``n_clusters`` and ``n_clusters + 1`` of the normalised
        Laplacian of the graph (or of its shared-neighbour weights), the first
        at least 1e-12; the second infinite where the graph has no more."""


def clear_eigengap(eigenvalues):
    """Whether the Laplacian's eigenvalue ``n_clusters + 1`` is at least
    :data:`EIGENGAP_RATIO` times eigenvalue ``n_clusters`` (von Luxburg's
    eigengap; ``eigenvalues``: the pair of :meth:`StartGraph.eigengap`): then the
    top ``n_clusters`` eigenvectors span the clusters."""
    lowest, following = eigenvalues
    return bool(following >= EIGENGAP_RATIO * lowest)


def auto_widths(n_clusters, n_samples):
    """The widths ``n_eigenvectors='auto'`` tries: ``n_clusters`` times
    :data:`AUTO_WIDTH_FACTORS` (distinct, at most ``n_samples``)."""
    widths = (int(round(factor * n_clusters)) for factor in AUTO_WIDTH_FACTORS)
    return tuple(sorted({min(max(width, n_clusters), n_samples) for width in widths}))


def resolve_start(init, n_eigenvectors, n_clusters, graph):
    """The spectral start of ``init`` ('spectral', 'spectral_snn' or 'auto') and
    ``n_eigenvectors`` (an int, None or 'auto') on ``graph`` (a :class:`StartGraph`).

    ``init='auto'``: the shared-neighbour weights where the graph has hubs (the
    skewness of its degrees above :data:`HUB_SKEWNESS`), its mean cluster spans
    :data:`SNN_MIN_CLUSTER_NEIGHBOURHOODS` neighbourhoods or more, and its
    Laplacian has no clear gap after ``n_clusters`` (:func:`clear_eigengap`, asked
    only then). ``n_eigenvectors='auto'``: ``n_clusters`` on the graph, on a graph
    of at least ``n_clusters`` components (whose start is the components) and
    where the shared-neighbour graph has a clear gap (then :func:`auto_widths` as
    its ``fallback``, where its partition isolates a handful of samples); else
    :func:`auto_widths`.
    """
    shared = init == "spectral_snn"
    if init == "auto":
        shared = _wants_shared_neighbours(n_clusters, graph)
    if n_eigenvectors != "auto":
        width = min(max(n_clusters, n_eigenvectors or n_clusters), graph.n_samples)
        return ResolvedStart(shared, (width,))
    if not shared or graph.n_components() >= n_clusters:
        return ResolvedStart(shared, (n_clusters,))
    widths = auto_widths(n_clusters, graph.n_samples)
    if clear_eigengap(graph.eigengap(shared_neighbours=True)):
        return ResolvedStart(shared, (n_clusters,), fallback=widths)
    return ResolvedStart(shared, widths)


def isolates_a_handful(labels, n_clusters):
    """Whether a partition into ``n_clusters`` holds a cluster (or leaves one
    empty) of under :data:`ISOLATED_SHARE` of the mean cluster size."""
    sizes = np.bincount(labels, minlength=n_clusters)
    return bool(sizes.min() < ISOLATED_SHARE * labels.shape[0] / n_clusters)


def _wants_shared_neighbours(n_clusters, graph):
    """``init='auto'``'s choice of the shared-neighbour start (:func:`resolve_start`)."""
    if graph.degree_skewness() <= HUB_SKEWNESS:
        return False
    if graph.n_samples / n_clusters < SNN_MIN_CLUSTER_NEIGHBOURHOODS * graph.mean_neighbourhood():
        return False
    return not clear_eigengap(graph.eigengap(shared_neighbours=False))

"""How PRCut's networks train, and how its graph is built and training started:
two frozen records, built once by ``PRCut.fit`` (or each ``partial_fit`` call)
from the parameters, and passed down whole to the start (``_start``), the
training (``_fit``) and the stream (``_stream``); ``FittedWith``, what a fit
keeps of them for ``score``. Imports no torch.

Every ``'auto'`` of PRCut's parameters is decided here, and only here:
``learning_rate`` and ``n_iter_no_change`` from the data's size when the
training's record is built (:meth:`PRCutSettings.of`), ``n_clusters`` from the
spectrum of the graph once it is built (:meth:`PRCutSettings.counted`), ``init`` and
``n_eigenvectors`` from what the graph measures (its hubs, its neighbourhoods,
its eigengap) by :meth:`StartSettings.resolved_start`, once per fit, which
returns a :class:`ResolvedStart` (DeepImageClustering's start reads the same
rule: :func:`resolve_start`). ``neighbors_algorithm`` and ``device`` are those of
the package's kNN search and torch plumbing, which every estimator shares.
"""

from dataclasses import dataclass, replace
from typing import NamedTuple, Protocol

import numpy as np

from skdiffclust._utils._count import ClusterCount

# learning_rate='auto': Adam's step size with mini-batches, whose noise makes larger
# steps chaotic (fits on copies of the data differing in their last digits
# disagreed on up to 15% of the pairs at the paper's 1e-2), and with one batch of
# every sample (small data: the whole graph at each step, no noise)
AUTO_LEARNING_RATE, AUTO_LEARNING_RATE_WHOLE_BATCH = 3e-3, 3e-3

# n_iter_no_change='auto': the epochs of about this many batch pairs, within bounds;
# the lower bound is at most the epochs of MIN_PATIENCE_STEPS batch pairs (10
# epochs up to 32 batch pairs an epoch, 32,768 samples; 5 at 70,000): the mean
# objective of a long epoch is not the noisy one of a short epoch, and ten of
# them were half of the training at 70,000 samples
PATIENCE_STEPS, PATIENCE_BOUNDS, MIN_PATIENCE_STEPS = 32, (10, 32), 320

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


@dataclass(frozen=True)
class PRCutSettings:
    """The training's settings, every ``'auto'`` resolved (:meth:`of`).

    ``module`` is the user's network (a copy is trained) or ``None`` for the
    built-in one (``hidden_layer_sizes``), whose first layer subtracts
    ``input_offset`` (the centring of sparse features) and reads its input divided
    by ``input_scale`` (a precomputed affinity's). ``share_inputs``: read a
    dense precomputed affinity in place on the CPU.
    """

    n_clusters: object  # an int, or 'auto' until counted
    hidden_layer_sizes: tuple
    batch_size: int
    learning_rate: float
    momentum: float
    gamma: float
    annealing: float
    max_iter: int
    tol: float
    n_iter_no_change: int
    device: object = "cpu"
    verbose: bool = False
    module: object = None
    input_offset: object = None
    share_inputs: bool = False
    input_scale: float = 1.0  # the built-in network reads X / input_scale
    max_clusters: int = 20

    @classmethod
    def of(cls, estimator, n_samples, *, hidden_layer_sizes, device, verbose=False):
        """A PRCut estimator's settings of the training on ``n_samples`` samples
        (``partial_fit``: its first chunk's), before the network's input is known
        (``_start.network_input`` completes them): ``learning_rate='auto'`` is
        :data:`AUTO_LEARNING_RATE` (:data:`AUTO_LEARNING_RATE_WHOLE_BATCH` with one
        batch of every sample), ``n_iter_no_change='auto'`` the epochs of about
        :data:`PATIENCE_STEPS` batch pairs, within :data:`PATIENCE_BOUNDS`."""
        batch_size = estimator.batch_size
        learning_rate = estimator.learning_rate
        if learning_rate == "auto":
            learning_rate = (AUTO_LEARNING_RATE_WHOLE_BATCH if batch_size >= n_samples
                             else AUTO_LEARNING_RATE)
        patience = estimator.n_iter_no_change
        if patience == "auto":  # the engine's epochs of PairedBatches
            n_batches = max(n_samples // min(batch_size, n_samples), 1)
            lowest = min(PATIENCE_BOUNDS[0], -(-MIN_PATIENCE_STEPS // n_batches))
            patience = np.clip(-(-PATIENCE_STEPS // n_batches), lowest, PATIENCE_BOUNDS[1])
        return cls(n_clusters=estimator.n_clusters, hidden_layer_sizes=hidden_layer_sizes,
                   batch_size=batch_size, learning_rate=float(learning_rate),
                   momentum=estimator.momentum, gamma=estimator.balance,
                   annealing=estimator.annealing, max_iter=estimator.max_iter,
                   tol=estimator.tol, n_iter_no_change=int(patience), device=device,
                   verbose=verbose, module=estimator.module,
                   max_clusters=estimator.max_clusters)

    def counted(self, graph):
        """These settings with ``n_clusters`` an integer, and how it was found.

        ``n_clusters='auto'``: the number of the graph's large connected
        components (:func:`large_components`) where there are two or more, else
        the candidate of highest score (:func:`count_clusters`): where the
        graph's degrees are skewed by hubs (as for ``init='auto'``), the
        stability of the partitions of its shared-neighbour weights; elsewhere
        :func:`count_scores`, read from the spectrum of its normalised
        Laplacian. The largest candidate where the graph has more components
        than candidates. ``graph``: a ``_start.CountedGraph``, asked only for
        ``'auto'``.

        Returns
        -------
        settings : PRCutSettings
        count : ClusterCount
        """
        if self.n_clusters != "auto":
            return self, ClusterCount(self.n_clusters)
        hubs = graph.degree_skewness() > HUB_SKEWNESS
        count = count_clusters(self.max_clusters, graph, shared_neighbours=hubs,
                               criterion="stability" if hubs else "eigengap",
                               unclear="eigengap")
        return self.but(n_clusters=count.n_clusters), count

    @property
    def annealing_epochs(self):
        """Epochs (passes, for ``partial_fit``) over which the bound hardens."""
        return int(round(self.annealing * self.max_iter))

    def but(self, **changes):
        """A copy with ``changes`` (e.g. ``max_iter=0`` to only fit the start)."""
        return replace(self, **changes)


def count_clusters(max_clusters, graph, *, shared_neighbours, criterion="eigengap",
                   unclear="modularity"):
    """The number of clusters of ``graph`` (a ``_start.CountedGraph``), 2 to
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
    """

    shared_neighbours: bool
    widths: tuple


class StartGraph(Protocol):
    """What a start's ``'auto'`` values are resolved from: the measures of the
    graph (``_spectral.StartGraph``), each taken when first asked."""

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
    where the shared-neighbour graph has a clear gap; else :func:`auto_widths`.
    """
    shared = init == "spectral_snn"
    if init == "auto":
        shared = _wants_shared_neighbours(n_clusters, graph)
    if n_eigenvectors != "auto":
        width = min(max(n_clusters, n_eigenvectors or n_clusters), graph.n_samples)
        return ResolvedStart(shared, (width,))
    if (not shared or graph.n_components() >= n_clusters
            or clear_eigengap(graph.eigengap(shared_neighbours=True))):
        return ResolvedStart(shared, (n_clusters,))
    return ResolvedStart(shared, auto_widths(n_clusters, graph.n_samples))


def _wants_shared_neighbours(n_clusters, graph):
    """``init='auto'``'s choice of the shared-neighbour start (:func:`resolve_start`)."""
    if graph.degree_skewness() <= HUB_SKEWNESS:
        return False
    if graph.n_samples / n_clusters < SNN_MIN_CLUSTER_NEIGHBOURHOODS * graph.mean_neighbourhood():
        return False
    return not clear_eigengap(graph.eigengap(shared_neighbours=False))


@dataclass(frozen=True)
class StartSettings:
    """How the graph is built (``n_neighbors`` to ``random_state``: the kNN graph
    of ``_graph.scaled_knn_graph``, also ``score``'s and the later chunks' of
    ``partial_fit``) and the training started on it (``init``,
    ``n_eigenvectors``, ``keep_components``; ``n_init`` trainings, whose seeds
    come first)."""

    n_neighbors: int
    affinity: str
    rbf_gamma: object
    algorithm: str
    n_jobs: object
    random_state: object
    init: str
    n_eigenvectors: object
    keep_components: bool
    n_init: int

    @classmethod
    def of(cls, estimator):
        """A PRCut estimator's settings of its graph and start (a ValueError where
        ``n_eigenvectors`` is below ``n_clusters``)."""
        n_eigenvectors = estimator.n_eigenvectors
        if (n_eigenvectors not in (None, "auto") and estimator.n_clusters != "auto"
                and n_eigenvectors < estimator.n_clusters):
            raise ValueError(
                f"n_eigenvectors={n_eigenvectors} is smaller than n_clusters="
                f"{estimator.n_clusters}: the spectral start needs at least one "
                "eigenvector per cluster (None uses n_clusters).")
        return cls(n_neighbors=estimator.n_neighbors, affinity=estimator.affinity,
                   rbf_gamma=estimator.rbf_gamma, algorithm=estimator.neighbors_algorithm,
                   n_jobs=estimator.n_jobs, random_state=estimator.random_state,
                   init=estimator.init, n_eigenvectors=estimator.n_eigenvectors,
                   keep_components=estimator.keep_components, n_init=estimator.n_init)

    def resolved_start(self, n_clusters, graph):
        """The spectral start of ``n_clusters`` clusters on ``graph`` (a
        :class:`StartGraph`), ``init`` and ``n_eigenvectors`` resolved
        (:func:`resolve_start`): asked once per fit, by ``_spectral.spectral_start``."""
        return resolve_start(self.init, self.n_eigenvectors, n_clusters, graph)


class FittedWith(NamedTuple):
    """What ``score`` and the queries read of a fit (``_fitted_with``), not the
    parameters, which ``set_params`` may have changed since: how the graph was
    built and the number of clusters fitted."""

    start: StartSettings
    n_clusters: int

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
returns a ``ResolvedStart``. The count's and the start's rules, which
DeepImageClustering shares, are the graph floor's (``_graphcut._count``,
``_graphcut._start``); the choices between them are made here.
``solver`` by :func:`resolved_solver` from the fit's inputs.
``neighbors_algorithm`` and ``device`` are those of the package's kNN search and
torch plumbing, which every estimator shares.
"""

from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from skdiffclust._graphcut._count import count_clusters
from skdiffclust._graphcut._start import HUB_SKEWNESS, resolve_start
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


# solver='auto' takes the graph path up to this many samples (as the exact
# neighbour search does): predict's search among the training samples stays cheap
GRAPH_SOLVER_MAX_SAMPLES = 20_000


def resolved_solver(solver, n_samples, *, module, graph_input, affinity, init):
    """``'graph'`` or ``'network'``: ``solver`` itself, ``'auto'`` resolved (the
    graph path with the built-in network's input, up to
    :data:`GRAPH_SOLVER_MAX_SAMPLES` samples); a ValueError where ``'graph'`` is
    asked with what only the network path has."""
    conflicts = [name for name, given in (
        ("module", module is not None), ("graph_input", graph_input is not None),
        ("affinity='precomputed'", affinity == "precomputed"),
        ("init='random'", init == "random")) if given]
    if solver == "graph" and conflicts:
        raise ValueError(
            f"solver='graph' assigns the training samples on the graph of X, from the "
            f"spectral start, without a network; {conflicts[0]} needs the network: "
            "use solver='network' (or 'auto').")
    if solver == "auto":
        return "graph" if not conflicts and n_samples <= GRAPH_SOLVER_MAX_SAMPLES else "network"
    return solver


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
        components (``_graphcut._count.large_components``) where there are two or more, else
        the candidate of highest score (``_graphcut._count.count_clusters``): where the
        graph's degrees are skewed by hubs (as for ``init='auto'``), the
        stability of the partitions of its shared-neighbour weights; elsewhere
        ``count_scores``, read from the spectrum of its normalised
        Laplacian. The largest candidate where the graph has more components
        than candidates. ``graph``: a ``_graphcut._measures.GraphMeasures``,
        asked only for ``'auto'``.

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
        ``_graphcut._measures.GraphMeasures``), ``init`` and ``n_eigenvectors`` resolved
        (``_graphcut._start.resolve_start``): asked once per fit, by
        ``_graphcut._measures.spectral_start``."""
        return resolve_start(self.init, self.n_eigenvectors, n_clusters, graph)


class FittedWith(NamedTuple):
    """What ``score`` and the queries read of a fit (``_fitted_with``), not the
    parameters, which ``set_params`` may have changed since: how the graph was
    built and the number of clusters fitted."""

    start: StartSettings
    n_clusters: int

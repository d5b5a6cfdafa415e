"""How PRCut's networks train, and how its graph is built and training started:
two frozen records, built once by ``PRCut.fit`` (or each ``partial_fit`` call)
from the parameters, and passed down whole to the start (``_start``), the
training (``_fit``) and the stream (``_stream``); ``FittedWith``, what a fit
keeps of them for ``score``. Imports no torch."""

from dataclasses import dataclass, replace
from typing import NamedTuple


@dataclass(frozen=True)
class PRCutSettings:
    """The training's settings.

    ``learning_rate`` and ``n_iter_no_change`` may still be ``'auto'`` (resolved by
    ``_fit.learning_rate_for`` and ``_fit.patience_for`` for the data's batches);
    ``module`` is the user's network (a copy is trained) or ``None`` for the
    built-in one (``hidden_layer_sizes``), whose first layer subtracts
    ``input_offset`` (the centring of sparse features) and reads its input divided
    by ``input_scale`` (a precomputed affinity's). ``share_inputs``: read a
    dense precomputed affinity in place on the CPU.
    """

    n_clusters: int
    hidden_layer_sizes: tuple
    batch_size: int
    learning_rate: object
    momentum: float
    gamma: float
    annealing: float
    max_iter: int
    tol: float
    n_iter_no_change: object
    device: object = "cpu"
    verbose: bool = False
    module: object = None
    input_offset: object = None
    share_inputs: bool = False
    input_scale: float = 1.0  # the built-in network reads X / input_scale

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
        """A PRCut estimator's settings of its graph and start."""
        return cls(n_neighbors=estimator.n_neighbors, affinity=estimator.affinity,
                   rbf_gamma=estimator.rbf_gamma, algorithm=estimator.neighbors_algorithm,
                   n_jobs=estimator.n_jobs, random_state=estimator.random_state,
                   init=estimator.init, n_eigenvectors=estimator.n_eigenvectors,
                   keep_components=estimator.keep_components, n_init=estimator.n_init)


class FittedWith(NamedTuple):
    """What ``score`` and the queries read of a fit (``_fitted_with``), not the
    parameters, which ``set_params`` may have changed since: how the graph was
    built, the objective's ``n_clusters`` and ``gamma``, and whether training
    read the graph's shared-neighbour weights."""

    start: StartSettings
    n_clusters: int
    gamma: float
    shared_neighbours: bool

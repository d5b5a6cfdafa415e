"""PRCut trained from chunks of the data (``partial_fit``): the state a call hands the next.

Each call builds the kNN graph of its chunk alone (edges join samples of the same
chunk), in the first chunk's units (:meth:`FeatureScaling.applied_to`: the
centring and scales of the first chunk are frozen, so that the graph's metric and
the network's input do not move from call to call), and makes one pass of
PRCut's batch objective over it (``_fit.stream_pass``), continuing the
network, Adam's moments and step counts, the moving average P-bar and the
annealing schedule of the previous calls. The first call starts as ``fit`` does:
the chunk's initial partition (spectral, or whole components), ``n_init``
networks fitted to it, each trained for one pass; the one ``fit`` would keep
(every cluster used, then the lowest objective on the chunk's graph) goes on.

The state is NumPy only (the network's ``state_dict``, Adam's ``state_dict``,
P-bar, a NumPy generator for the later calls' seeds), so that the estimator
pickles mid-stream without torch objects, and this module imports no torch:
training imports it when a call runs.
"""

from dataclasses import dataclass

import numpy as np

from skdiffclust._training._stream import StreamState, check_chunk_units
from skdiffclust._utils._random import MAX_SEED
from skdiffclust._graphcut._selection import check_finite, keep_best


@dataclass
class PRCutStream(StreamState):
    """What one ``partial_fit`` call hands the next (all NumPy: it pickles); the
    work done is counted by :class:`~skdiffclust._training._stream.StreamState`
    (``n_steps``: steps of the ratio-cut training, not those of the fit to the
    first chunk's initial partition)."""

    # the estimator's parameters frozen at the first call (not a field; not
    # ``module``: the state keeps no torch object, and a pickled one is a copy)
    FIXED_PARAMETERS = ("n_clusters", "n_init", "hidden_layer_sizes")

    scaling: object  # the first chunk's FeatureScaling, without its data
    network: dict  # the network's state_dict (float32 for the built-in one)
    optimizer: dict  # Adam's state_dict
    p_bar: np.ndarray  # the moving average of the cluster proportions
    rng: np.random.Generator  # the seeds of the later calls
    learning_rate: float  # resolved on the first chunk
    n_annealing_steps: int

    @classmethod
    def start(cls, inputs, graph, initial_labels, *, scaling, settings, seeds,
              stream_seed, fit_target):
        """The first call: ``n_init`` networks from ``seeds`` (an init and a batch seed
        each), fitted to ``initial_labels`` when given, trained for one pass each;
        the one ``fit`` would keep goes on.

        ``settings`` (a ``PRCutSettings``) stay from call to call; the learning
        rate is the first chunk's (resolved for its size), and the annealing
        lasts ``settings.annealing_epochs`` passes over a chunk of the first
        one's size.

        Returns the stream and the kept network's exported weights.
        """
        training = _training()
        n_samples, batch_size = inputs.shape[0], settings.batch_size
        learning_rate = settings.learning_rate  # resolved for the first chunk
        n_batches = max(n_samples // min(batch_size, n_samples), 1)
        n_annealing_steps = settings.annealing_epochs * n_batches

        def candidates():
            for init_seed, batch_seed in seeds:
                done = training.stream_pass(
                    inputs, graph, settings, learning_rate=learning_rate,
                    n_annealing_steps=n_annealing_steps, steps_done=0,
                    init_seed=init_seed, batch_seed=batch_seed,
                    initial_labels=initial_labels, fit_target=fit_target)
                yield done.weights, done.labels, done

        _, done = keep_best(candidates(), graph, settings.n_clusters, settings.gamma)
        stream = cls(scaling=scaling.without_data(), network=done.state,
                     optimizer=done.optimizer, p_bar=done.p_bar,
                     rng=np.random.default_rng(stream_seed), learning_rate=learning_rate,
                     n_annealing_steps=int(n_annealing_steps))
        stream.count_pass(done.objective, done.n_steps, n_samples)
        return stream, done.weights

    @classmethod
    def first_call(cls, X, settings, start, *, n_init, fit_target):
        """``partial_fit``'s first call on the chunk X (validated): its start as
        ``fit``'s (``_start.training_start``), then :meth:`start`. Returns the
        stream, the chunk's scaling, graph and ``ClusterCount``, and the kept
        network's exported weights (``fit_target``: the error the network fitted
        to the start reaches, 0 where the start is the graph's components)."""
        from skdiffclust.prcut._start import network_input, training_start

        begun = training_start(X, settings, start, n_seeds=2 * n_init + 2, stream=True)
        inputs, settings = network_input(X, begun.scaling, begun.settings)
        stream, weights = cls.start(
            inputs, begun.graph, begun.initial_labels, scaling=begun.scaling,
            settings=settings, stream_seed=begun.seeds[-1],
            seeds=[begun.seeds[2 * i:2 * i + 2] for i in range(n_init)],
            fit_target=0.0 if begun.whole else fit_target)
        return stream, begun.scaling, begun.graph, begun.count, weights

    def continued(self, X, start, settings):
        """A later call on the chunk X (validated): a copy of the stream that made
        one pass over it (:meth:`pass_over`), the chunk's scaling and graph (in the
        first chunk's units, with ``start``'s settings), the network's exported
        weights. A chunk those units cannot hold is refused first (a ValueError
        naming the call); this stream is left as it was."""
        from skdiffclust._graphcut._graph import build_graph
        from skdiffclust.prcut._inputs import flat
        from skdiffclust.prcut._start import network_input

        rows, first = flat(X), self.scaling
        # the graph reads the rows in one global scale, the built-in network per feature
        scale = first.metric_scale if settings.module is not None else \
            np.minimum(first.std, first.metric_scale)
        check_chunk_units(rows, first.mean, scale, stream=self, name="PRCut")
        scaling = first.applied_to(rows)
        graph = build_graph(scaling, start, settings.device)
        stream = self.copy()
        inputs, settings = network_input(X, scaling, settings)
        return stream, scaling, graph, stream.pass_over(inputs, graph, settings=settings)

    def pass_over(self, inputs, graph, *, settings):
        """A later call: one pass over the chunk (``inputs``, the network's input,
        and its graph), continuing the state in place, at the first call's
        learning rate and annealing. Returns the network's exported weights."""
        init_seed, batch_seed = (int(seed) for seed in self.rng.integers(MAX_SEED, size=2))
        done = _training().stream_pass(
            inputs, graph, settings, learning_rate=self.learning_rate,
            n_annealing_steps=self.n_annealing_steps, steps_done=self.n_steps,
            init_seed=init_seed, batch_seed=batch_seed, state=self.network,
            optimizer_state=self.optimizer, p_bar=self.p_bar)
        check_finite(done.weights)
        self.network, self.optimizer, self.p_bar = done.state, done.optimizer, done.p_bar
        self.count_pass(done.objective, done.n_steps, inputs.shape[0])
        return done.weights


def _training():
    from skdiffclust.prcut import _fit

    return _fit

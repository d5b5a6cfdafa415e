"""Re-seeding of empty clusters during the dense fit (the paper is silent on them).

A GEMINI model may stop assigning any sample to a cluster: its logits are beaten
everywhere, its gradient vanishes and it never comes back (the paper's MNIST
models end with 7 of 10 clusters). After an epoch that leaves a cluster empty,
it is re-seeded the way k-means relocates an empty centre, but as a split of an
existing cluster: a sample ``p`` is drawn with probability proportional to its
squared distance to the mean ``m`` of its own cluster ``a`` (k-means++'s D²
sampling, in the GEMINI's geometry), and the empty cluster becomes a copy of
``a`` plus the logit ``beta (|phi - m|^2 - |phi - p|^2)``, linear in the
coordinates ``phi``: it takes the samples of ``a`` closer to ``p`` than to
``m``. ``beta`` is the inverse of ``a``'s mean squared distance to ``m``, as in
the k-means++ initialisation. Each restart re-seeds at most ``n_clusters``
times, so that a cluster the objective really wants empty is eventually left so.
"""

import numpy as np

from skdiffclust._utils._random import draw_in_proportion
from skdiffclust.gemini._models import logits_of, output_parameters, restart, softmax


def cluster_counts(proba):
    """Samples whose most probable cluster is each cluster: (R, n, K) -> (R, K)."""
    R, _, K = proba.shape
    labels = proba.argmax(axis=2) + K * np.arange(R)[:, None]
    return np.bincount(labels.ravel(), minlength=R * K).reshape(R, K)


class EmptyClusterReseeder:
    """Re-seed the empty clusters of each restart after an epoch (module docstring)."""

    def __init__(self, problem, n_restarts, n_clusters, rng):
        self.problem = problem
        self.rng = rng
        self.budget = np.full(n_restarts, n_clusters)

    def __call__(self, params, optimizer, counts):
        for r in np.flatnonzero((counts == 0).any(axis=1) & (self.budget > 0)):
            # one per epoch: each split then sees a model trained with the previous
            first_empty = np.flatnonzero(counts[r] == 0)[:1]
            self.budget[r] -= self._reseed(params, optimizer, r, first_empty)

    def _reseed(self, params, optimizer, r, empty):
        inputs = self.problem.inputs
        weights = self.problem.standardisation.kernel_weights
        labels = softmax(logits_of(restart(params, r), inputs,
                                   self.problem.n_threads))[0].argmax(axis=1)
        n, K = labels.size, params[output_parameters(params)[0]].shape[-1]
        counts = np.bincount(labels, minlength=K)
        onehot = np.zeros((n, K))
        onehot[np.arange(n), labels] = 1.0
        means = inputs.tdot(onehot) / np.maximum(counts, 1) * weights[:, None]  # (d, K)
        mean_squares = (means**2).sum(axis=0)
        cross = inputs.dot(weights[:, None] * means)[np.arange(n), labels]
        squares = inputs.weighted_row_squares(weights)
        spread = np.maximum(squares - 2.0 * cross + mean_squares[labels], 0.0)
        chosen = draw_in_proportion(self.rng, spread, empty.size)
        n_new = chosen.size
        if n_new == 0:
            return 0
        within = np.bincount(labels, weights=spread, minlength=K) / np.maximum(counts, 1)
        for target, i in zip(empty[:n_new], chosen):
            source = labels[i]
            beta = 1.0 / max(within[source], 1e-300)
            point = inputs.rows(np.array([i])).dense()[0] * weights
            direction = 2.0 * beta * weights * (point - means[:, source])
            offset = -beta * (point @ point - mean_squares[source])
            _split(params, optimizer, r, source, target, direction, offset)
        return n_new


def _split(params, optimizer, r, source, target, direction, offset):
    """Cluster ``target`` := ``source`` plus the logit ``direction' z + offset``."""
    names = output_parameters(params)
    for name in names:
        params[name][r][..., target] = params[name][r][..., source]
        for state in _optimizer_states(optimizer):
            state[name][r][..., target] = 0.0
    skip, bias = names[0], names[-1]
    params[skip][r][:, target] += direction
    params[bias][r][target] += offset


def _optimizer_states(optimizer):
    """The per-parameter moment dicts of the engine's Adam (or SGD's velocity)."""
    return [getattr(optimizer, name) for name in ("m", "v", "velocity")
            if hasattr(optimizer, name)]

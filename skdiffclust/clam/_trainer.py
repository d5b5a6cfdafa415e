"""ClAM's CPU trainer: mini-batch Adam on all restarts at once by the numba kernels
of ``_kernels`` (algorithm 1 of Saha et al., 2023). Needs no torch.

The ``n_init`` restarts are independent problems stacked along a leading dimension:
prototypes of shape ``(R, k, d)``, one Adam state and one learning rate per
restart. :class:`CPUTrainer` trains them (a call per restart group and slice of an
epoch); ``_cuda_fit.CUDATrainer`` is the same trainer with its kernel on CUDA.
:class:`RestartGuard` is the engine's epoch function around a trainer; where the
paper is silent it

* **re-seeds dead prototypes**: after an epoch in which a prototype attracted no
  example most (at the last step of the dynamics), it moves to an example drawn
  with probability proportional to its completion loss (k-means++'s D² sampling,
  by the method's own loss), at most ``n_clusters`` times per restart;
* **prunes restarts**: from the third epoch, a restart whose epoch loss is more
  than :data:`~._settings.PRUNE_MARGIN` above the best one stops training, and
  from the first, so does a restart whose prototypes are those of a better one
  (two restarts that found the same solution); pruned restarts are not selected.

The trainer returns each restart's parameters **averaged over its last epoch**
(Polyak-Ruppert averaging), which removes most of the noise of the last
mini-batch steps. Each thread (``n_threads``) trains a group of restarts with one
kernel call per slice of the epoch; a restart's arithmetic is its own whatever its
group, so the result does not depend on the number of threads.
"""

from dataclasses import dataclass

import numpy as np

from skdiffclust._training import Cooldown
from skdiffclust._utils._random import draw_in_proportion, numpy_generator
from skdiffclust.clam import _kernels as kernels
from skdiffclust.clam._epoch import train_epoch
from skdiffclust.clam._kernels import COSINE, _map_in_threads, hidden_count
from skdiffclust.clam._selection import same_prototypes
from skdiffclust.clam._settings import (
    COOLDOWN_FACTOR,
    DUPLICATES_FROM_EPOCH,
    PRUNE_FROM_EPOCH,
    PRUNE_MARGIN,
)


class LearningRates:
    """The per-restart learning rates of an optimiser state, as one scheduled rate
    (every restart gets the same schedule)."""

    def __init__(self, optimizer):
        self.optimizer = optimizer

    @property
    def learning_rate(self):
        return float(self.optimizer.lr[0])

    @learning_rate.setter
    def learning_rate(self, value):
        self.optimizer.lr[:] = value


class RestartGuard:
    """The engine's epoch function for a :class:`CPUTrainer`: an epoch, then the
    re-seeding of dead prototypes and the pruning of clearly worse restarts (see
    the module docstring). Pruned restarts report their last loss."""

    def __init__(self, trainer, *, reseed, prune, budget=None):
        self.trainer = trainer
        n_restarts, k, _ = trainer.prototypes.shape
        self.reseed, self.prune = reseed, prune and n_restarts > 1
        self.active = np.ones(n_restarts, dtype=bool)
        self.last_loss = np.zeros(n_restarts)
        # re-seeds left per restart (updated in place: ``partial_fit`` carries it)
        self.budget = np.full(n_restarts, k) if budget is None else budget
        self.n_epochs = 0

    def cooldown(self, n_epochs):
        """The engine's cool-down: the learning rates of the restarts halved before
        each of its ``n_epochs`` epochs, and no more re-seeding."""
        def set_scale(multiplier):
            if self.rates is None:
                self.rates, self.reseed = self.trainer.optimizer.lr.copy(), False
            self.trainer.optimizer.lr[:] = self.rates * multiplier
        self.rates = None
        return Cooldown(n_epochs, COOLDOWN_FACTOR, set_scale)

    def epoch(self):
        trainer = self.trainer
        losses = trainer.epoch(self.active)
        self.n_epochs += 1
        self.last_loss[self.active] = losses[self.active]
        if self.reseed:
            for r in np.flatnonzero(self.active & (self.budget > 0)):
                self.budget[r] -= trainer.reseed_dead(r, self.budget[r])
        if self.prune and self.n_epochs >= PRUNE_FROM_EPOCH:
            best = self.last_loss[self.active].min()
            self.active &= ~(self.last_loss > best + PRUNE_MARGIN * abs(best))
        if self.prune and self.n_epochs >= DUPLICATES_FROM_EPOCH:
            self._prune_duplicates()
        return self.last_loss.copy()

    def _prune_duplicates(self):
        """Of restarts that found the same prototypes, keep the one of lowest loss."""
        averages = self.trainer.averages[0]
        ranked = sorted(np.flatnonzero(self.active), key=lambda r: self.last_loss[r])
        kept = []
        for r in ranked:
            if any(same_prototypes(averages[r], averages[q]) for q in kept):
                self.active[r] = False
            else:
                kept.append(r)


@dataclass
class AdamState:
    """Adam's moments (m_P, v_P, m_W, v_W), per-restart learning rates and step
    count, for the numba kernels (torch.optim.Adam holds them on CUDA, ``_torch_fit``)."""

    moments: tuple
    lr: np.ndarray
    steps: int = 0


@dataclass
class TrainerState:
    """What a :class:`CPUTrainer` updates in place: the restarts' parameters (the
    iterate), Adam's state and the random generator. ``partial_fit`` keeps one from
    call to call and builds each call's trainer from it."""

    prototypes: np.ndarray  # (R, k, d)
    log_weights: np.ndarray  # (R, k)
    optimizer: AdamState
    rng: np.random.Generator

    @classmethod
    def start(cls, init_prototypes, learning_rate, seed, dtype):
        """Fresh state: the initial prototypes, zero log-weights and moments."""
        prototypes = np.array(init_prototypes, dtype=dtype)
        n_restarts, k, _ = prototypes.shape
        log_weights = np.zeros((n_restarts, k), dtype=dtype)
        moments = tuple(np.zeros_like(p) for p in (prototypes, prototypes, log_weights,
                                                   log_weights))
        return cls(prototypes, log_weights,
                   AdamState(moments, np.full(n_restarts, float(learning_rate))),
                   numpy_generator(seed))


class CPUTrainer:
    """Mini-batch Adam by the numba kernels of ``_kernels``.

    Same algorithm and maths as ``_torch_fit.CompletionTask`` (``epoch_with``
    takes the same arguments), without its per-operation overhead, which is most
    of the cost of small batches on a CPU. Trains the parameters of ``state`` (a
    :class:`TrainerState`) in place, and draws the permutations, the masks and
    the re-seeded points from its generator. Each of up to ``n_threads`` threads
    trains a group of restarts, one kernel call per slice of the epoch.
    :meth:`start` builds a trainer with fresh state.
    """

    def __init__(self, X, fill, dynamics, state, *, weighted, mask_prob, batch_size,
                 n_threads=1, clip=0.0):
        self.X = np.ascontiguousarray(X) if isinstance(X, np.ndarray) else X
        self.n_samples, self.n_features = X.shape if isinstance(X, np.ndarray) else (
            X.n_samples, X.n_features)
        self.fill = np.asarray(fill, dtype=state.prototypes.dtype)
        self.state = state
        # the state's own arrays and objects, which the kernels update in place
        self.prototypes, self.log_weights = state.prototypes, state.log_weights
        self.optimizer, self.rng = state.optimizer, state.rng
        n_restarts, k, _ = self.prototypes.shape
        self.dynamics = dynamics
        self.weighted = weighted
        self.n_hidden = hidden_count(mask_prob, self.n_features)
        self.batch_size = min(batch_size, self.n_samples)
        self.clip = float(clip or 0.0)  # per-point gradient clipping (0: none)
        self.n_threads = max(int(n_threads), 1)
        self._every_feature = None  # the "hidden" features of the unmasked loss
        # of the last epoch, for re-seeding: its order, each prototype's examples
        # and each example's loss (by position in the order)
        self.order = None
        self.counts = np.zeros((n_restarts, k), dtype=np.int64)
        self.position_loss = np.zeros((n_restarts, 0))
        # each restart's parameters averaged over its last epoch (the current ones
        # before any): the trained parameters (Polyak-Ruppert averaging)
        self.averages = (self.prototypes.astype(np.float64),
                         self.log_weights.astype(np.float64))

    @classmethod
    def start(cls, X, fill, init_prototypes, dynamics, *, learning_rate, seed, weighted,
              mask_prob, batch_size, n_threads=1, clip=0.0):
        """A trainer of fresh state from ``init_prototypes`` (R, k, d), in the
        precision of ``X`` (float32 for a row source)."""
        dtype = X.dtype if isinstance(X, np.ndarray) else np.dtype(np.float32)
        state = TrainerState.start(init_prototypes, learning_rate, seed, dtype)
        return cls(X, fill, dynamics, state, weighted=weighted, mask_prob=mask_prob,
                   batch_size=batch_size, n_threads=n_threads, clip=clip)

    def epoch(self, active=None):
        """One epoch; returns each restart's mean loss (NaN for stopped restarts,
        which are not computed: they are left unchanged)."""
        n_restarts = self.prototypes.shape[0]
        active = np.ones(n_restarts, dtype=bool) if active is None else active
        order = self.rng.permutation(self.n_samples)
        return self.epoch_with(order, self._draw_hidden(active), active)

    def _draw_hidden(self, active):
        """Hidden features (R, n, h) of the active restarts' examples."""
        n_restarts = self.prototypes.shape[0]
        if self.n_hidden == 0:  # the unmasked loss: every coordinate evolves
            if self._every_feature is None:
                self._every_feature = np.broadcast_to(
                    np.arange(self.n_features),
                    (n_restarts, self.n_samples, self.n_features)).copy()
            return self._every_feature
        hidden = np.zeros((n_restarts, self.n_samples, self.n_hidden), dtype=np.int64)
        draws = self.rng.random((int(active.sum()), self.n_samples, self.n_hidden))
        hidden[active] = kernels.hidden_features(draws, self.n_features)
        return hidden

    def epoch_with(self, order, hidden, active=None):
        """One epoch on a given permutation and hidden features (R, n, h)."""
        n_restarts = self.prototypes.shape[0]
        active = np.ones(n_restarts, dtype=bool) if active is None else active
        order = np.asarray(order, dtype=np.int64)
        dynamics, state = self.dynamics, self.optimizer

        def train(restarts):
            return train_epoch(
                self.X, order, hidden, self.fill, self.n_hidden > 0, restarts,
                self.prototypes, self.log_weights, state.moments, state.lr, state.steps,
                self.weighted, dynamics.beta, dynamics.metric == COSINE, dynamics.n_steps,
                dynamics.alpha, self.batch_size, self.clip,
            )

        # a group of restarts per thread: the lanes of a restart compute the same
        # bits whatever the group (tests/clam/test_clam_robustness.py checks it)
        groups = [group for group in np.array_split(np.flatnonzero(active), self.n_threads)
                  if group.size]
        totals = np.full(n_restarts, np.nan)
        self.order = order
        self.counts = np.zeros_like(self.counts)
        self.position_loss = np.zeros((n_restarts, order.shape[0]))
        steps = state.steps
        for group, (steps, total, counts, position_loss, mean_P, mean_W) in zip(
                groups, _map_in_threads(train, groups, self.n_threads)):
            totals[group] = total[group] / self.n_samples
            self.counts[group] = counts[group]
            self.position_loss[group] = position_loss[group]
            self.averages[0][group], self.averages[1][group] = mean_P[group], mean_W[group]
        state.steps = steps
        return totals

    def reseed_dead(self, r, budget):
        """Move restart r's prototypes that attracted no example in the last epoch
        to examples drawn with probability proportional to their loss; returns how
        many moved (at most ``budget``)."""
        dead = np.flatnonzero(self.counts[r] == 0)[:budget]
        chosen = draw_in_proportion(self.rng, self.position_loss[r], dead.size)
        n_moved = chosen.size
        if n_moved == 0:
            return 0
        points = np.sort(self.order[chosen])
        rows = self.X[points] if isinstance(self.X, np.ndarray) else self.X.take(points)
        dead = dead[:n_moved]
        self.prototypes[r, dead] = rows
        self.averages[0][r, dead] = rows
        alive = np.setdiff1d(np.arange(self.counts.shape[1]), dead)
        if self.weighted and alive.size:
            self.log_weights[r, dead] = self.log_weights[r, alive].mean()
            self.averages[1][r, dead] = self.log_weights[r, dead]
        for moment in self.optimizer.moments:  # Adam starts afresh for them
            moment[r, dead] = 0.0
        return n_moved

    def parameters(self, averaged=False):
        """The current parameters, or their averages over each restart's last epoch."""
        if averaged:
            return self.averages[0].copy(), self.averages[1].copy()
        return self.prototypes.copy(), self.log_weights.copy()

"""ClAM trained from chunks of the data (``partial_fit``): the state a call hands the next.

Each call makes one pass of the CPU trainer's mini-batch Adam (``_training``) over
its chunk, continuing the prototypes, Adam's moments and learning rates, the
plateau schedule, the re-seeding budget and the random generator of the previous
calls. The chunk is centred and scaled as the first chunk was, and its hidden
features start from the first chunk's fill values: ClAM's coordinates do not move
from call to call. After the first pass only the restart ``fit`` would keep
(lowest masked loss on the chunk, on masks fixed by a seed) goes on, so that the
prototypes, hence the clusters, keep their numbers.
"""

from dataclasses import dataclass

import numpy as np

from skdiffclust._training._optim import ReduceOnPlateau
from skdiffclust._training._stream import StreamState
from skdiffclust.clam import _training as training
from skdiffclust.clam._data import ScaledData
from skdiffclust.clam._selection import best_restart, normalised_weights, unit_rows


@dataclass
class ClamStream(StreamState):
    """What one ``partial_fit`` call hands the next (all NumPy: it pickles); the
    work done is counted by :class:`~skdiffclust._training._stream.StreamState`."""

    shift: np.ndarray
    scale: float
    cosine: bool
    fill: np.ndarray  # the hidden features' start, in ClAM's units (float64)
    dynamics: training.Dynamics
    prototypes: np.ndarray  # (R, k, d) float32, the iterate
    log_weights: np.ndarray  # (R, k) float32
    optimizer: training.AdamState
    schedule: ReduceOnPlateau
    rng: np.random.Generator
    budget: np.ndarray  # re-seeds left per restart
    score_seed: int
    averages: tuple = None  # the parameters averaged over the last pass (float64)

    @classmethod
    def start(cls, data, initial, dynamics, fill, learning_rate, plateau_patience, *,
              seed, score_seed):
        """The state before the first pass: ``initial`` prototypes (R, k, d)."""
        n_restarts, k, _ = initial.shape
        prototypes = initial.astype(np.float32)
        log_weights = np.zeros((n_restarts, k), dtype=np.float32)
        moments = tuple(np.zeros_like(p) for p in (prototypes, prototypes, log_weights,
                                                   log_weights))
        optimizer = training.AdamState(moments, np.full(n_restarts, float(learning_rate)))
        schedule = ReduceOnPlateau(training._LearningRates(optimizer),
                                   **training.plateau_schedule(learning_rate,
                                                               plateau_patience))
        return cls(shift=data.shift, scale=data.scale, cosine=data.cosine, fill=fill,
                   dynamics=dynamics, prototypes=prototypes, log_weights=log_weights,
                   optimizer=optimizer, schedule=schedule,
                   rng=np.random.default_rng(seed), budget=np.full(n_restarts, k),
                   score_seed=score_seed)

    def data(self, X):
        """A chunk in the first chunk's coordinates."""
        return ScaledData(X, self.cosine, self.shift, self.scale)

    def pass_over(self, data, *, weighted, mask_prob, batch_size, reseed, n_threads):
        """One pass of mini-batch Adam over the chunk, continuing the state."""
        rows = data.float32_rows()
        trainer = training.CPUTrainer(
            data if rows is None else rows, self.fill.astype(np.float32), self.prototypes,
            self.dynamics, weighted=weighted, mask_prob=mask_prob, batch_size=batch_size,
            learning_rate=float(self.optimizer.lr[0]), seed=0, n_threads=n_threads)
        # the trainer continues this state: its arrays are updated in place
        trainer.prototypes, trainer.log_weights = self.prototypes, self.log_weights
        trainer.optimizer, trainer.rng = self.optimizer, self.rng
        guard = training.RestartGuard(trainer, reseed=reseed, prune=False)
        guard.budget = self.budget
        losses = guard.epoch()
        self.schedule.holder = training._LearningRates(self.optimizer)
        self.schedule.step(float(np.sum(losses)))
        self.averages = trainer.parameters(averaged=True)
        self.count_pass(np.asarray(losses, dtype=np.float64),
                        -(-data.n_samples // trainer.batch_size), data.n_samples)

    def keep_best_restart(self, rows, mask_prob, weighted, n_threads):
        """After the first pass: keep only the restart of lowest masked loss on the
        chunk (masks fixed by ``score_seed``), near-ties in their order."""
        if self.prototypes.shape[0] == 1:
            return
        prototypes, log_weights = self.averages
        losses = training.evaluate_loss(rows, self.fill, prototypes,
                                        log_weights if weighted else None, self.dynamics,
                                        mask_prob, self.score_seed, n_threads)
        r = best_restart(losses, prototypes)
        keep = slice(r, r + 1)
        self.prototypes = self.prototypes[keep].copy()
        self.log_weights = self.log_weights[keep].copy()
        self.optimizer = training.AdamState(
            tuple(m[keep].copy() for m in self.optimizer.moments),
            self.optimizer.lr[keep].copy(), self.optimizer.steps)
        self.budget = self.budget[keep].copy()
        self.averages = tuple(a[keep].copy() for a in self.averages)
        self.objectives = [values[keep] for values in self.objectives]

    def kept(self, rows, mask_prob, weighted, n_threads):
        """What the estimator stores after a call, in ClAM's units: the averaged
        prototypes of the one restart, its weights, the chunk's labels and loss,
        in the order of the prototypes (their numbers stay from call to call)."""
        prototypes = self.averages[0][0].astype(np.float64)
        if self.cosine:
            prototypes = unit_rows(prototypes)
        weights = normalised_weights(self.averages[1][0].astype(np.float64))
        log_weights = np.log(weights) if weighted else None
        labels, _ = training.converge(rows, prototypes, log_weights, self.dynamics,
                                      n_threads)
        loss = training.evaluate_loss(
            rows, self.fill, prototypes[None], None if log_weights is None
            else log_weights[None], self.dynamics, mask_prob, self.score_seed, n_threads)
        curve = self.curve()
        return {"prototypes": prototypes, "weights": weights, "labels": labels,
                "loss": float(loss[0]), "n_iter": len(self.objectives), "loss_curve": curve}

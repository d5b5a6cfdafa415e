"""ClAM trained from chunks of the data (``partial_fit``): the state a call hands the next.

Each call makes one pass of the CPU trainer's mini-batch Adam (``_fit``) over
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
from skdiffclust._training._stream import StreamState, check_chunk_units
from skdiffclust.clam._data import ScaledData
from skdiffclust.clam._trainer import (
    AdamState,
    CPUTrainer,
    LearningRates,
    RestartGuard,
    TrainerState,
)
from skdiffclust.clam._inference import converge, evaluate_loss
from skdiffclust.clam._settings import Dynamics, plateau_schedule
from skdiffclust.clam._selection import best_restart, normalised_weights, unit_rows


@dataclass
class ClamStream(StreamState):
    """What one ``partial_fit`` call hands the next (all NumPy: it pickles); the
    work done is counted by :class:`~skdiffclust._training._stream.StreamState`."""

    # the estimator's parameters frozen at the first call (not a field)
    FIXED_PARAMETERS = ("n_clusters", "n_init", "metric", "weighted", "beta", "n_steps",
                        "step_size")

    shift: np.ndarray
    scale: float
    cosine: bool
    fill: np.ndarray  # the hidden features' start, in ClAM's units (float64)
    dynamics: Dynamics
    trainer_state: TrainerState  # the iterate (R, k, d) float32, Adam's state, the rng
    schedule: ReduceOnPlateau
    budget: np.ndarray  # re-seeds left per restart
    score_seed: int
    averages: tuple = None  # the parameters averaged over the last pass (float64)

    @classmethod
    def start(cls, data, initial, dynamics, fill, learning_rate, plateau_patience, *,
              seed, score_seed):
        """The state before the first pass: ``initial`` prototypes (R, k, d)."""
        trainer_state = TrainerState.start(initial, learning_rate, seed, np.float32)
        schedule = ReduceOnPlateau(LearningRates(trainer_state.optimizer),
                                   **plateau_schedule(learning_rate, plateau_patience))
        return cls(shift=data.shift, scale=data.scale, cosine=data.cosine, fill=fill,
                   dynamics=dynamics, trainer_state=trainer_state, schedule=schedule,
                   budget=np.full(initial.shape[0], initial.shape[1]),
                   score_seed=score_seed)

    def check_chunk(self, X):
        """Refuse a later chunk (validated) that the first chunk's centring and scale
        cannot hold (:func:`~skdiffclust._training._stream.check_chunk_units`);
        unit rows (``cosine``) have no units."""
        if not self.cosine:
            check_chunk_units(X, self.shift, self.scale, stream=self, name="ClAM")

    def data(self, X):
        """A chunk in the first chunk's coordinates."""
        return ScaledData(X, self.cosine, self.shift, self.scale)

    def pass_over(self, data, *, weighted, mask_prob, batch_size, reseed, n_threads,
                  clip=None):
        """One pass of mini-batch Adam over the chunk, continuing the state."""
        trainer = CPUTrainer(
            data.training_rows(), self.fill.astype(np.float32), self.dynamics,
            self.trainer_state, weighted=weighted, mask_prob=mask_prob,
            batch_size=batch_size, n_threads=n_threads, clip=clip)
        guard = RestartGuard(trainer, reseed=reseed, prune=False, budget=self.budget)
        losses = guard.epoch()
        self.schedule.step(float(np.sum(losses)))
        self.averages = trainer.parameters(averaged=True)
        self.count_pass(np.asarray(losses, dtype=np.float64),
                        -(-data.n_samples // trainer.batch_size), data.n_samples)

    def keep_best_restart(self, rows, mask_prob, weighted, n_threads):
        """After the first pass: keep only the restart of lowest masked loss on the
        chunk (masks fixed by ``score_seed``), near-ties in their order."""
        if self.trainer_state.prototypes.shape[0] == 1:
            return
        prototypes, log_weights = self.averages
        losses = evaluate_loss(rows, self.fill, prototypes, log_weights if weighted else None,
                               self.dynamics, mask_prob, self.score_seed, n_threads)
        r = best_restart(losses, prototypes)
        keep = slice(r, r + 1)
        state = self.trainer_state
        optimizer = AdamState(tuple(m[keep].copy() for m in state.optimizer.moments),
                              state.optimizer.lr[keep].copy(), state.optimizer.steps)
        self.trainer_state = TrainerState(state.prototypes[keep].copy(),
                                          state.log_weights[keep].copy(), optimizer,
                                          state.rng)
        self.schedule.holder = LearningRates(optimizer)  # the kept restart's rate
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
        labels, _ = converge(rows, prototypes, log_weights, self.dynamics, n_threads)
        loss = evaluate_loss(
            rows, self.fill, prototypes[None], None if log_weights is None
            else log_weights[None], self.dynamics, mask_prob, self.score_seed, n_threads)
        curve = self.curve()
        return {"prototypes": prototypes, "weights": weights, "labels": labels,
                "loss": float(loss[0]), "n_iter": len(self.objectives), "loss_curve": curve}

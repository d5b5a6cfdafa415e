"""Training ClAM's prototypes (algorithm 1 of Saha et al., 2023), all restarts at once,
and inference. Needs no torch.

The ``n_init`` restarts are independent problems stacked along a leading dimension:
prototypes of shape ``(R, k, d)``, one Adam state and one learning rate per
restart. Two trainers run the same mini-batch Adam: :class:`CPUTrainer` by the
numba kernels of ``_kernels`` (a call per restart and slice of an epoch), and, for
CUDA, ``_torch_training`` in torch. Inference (labels, distances, loss) always
runs on the CPU in float64 (``_inference``).

Where the paper is silent, the CPU trainer also

* **re-seeds dead prototypes**: after an epoch in which a prototype attracted no
  example most (at the last step of the dynamics), it moves to an example drawn
  with probability proportional to its completion loss (k-means++'s D² sampling,
  by the method's own loss), at most ``n_clusters`` times per restart;
* **prunes restarts**: from the third epoch, a restart whose epoch loss is more
  than :data:`PRUNE_MARGIN` above the best one stops training, and from the
  first, so does a restart whose prototypes are those of a better one (two
  restarts that found the same solution); pruned restarts are not selected;
* returns each restart's parameters **averaged over its last epoch**
  (Polyak-Ruppert averaging), which removes most of the noise of the last
  mini-batch steps.

Each thread (``n_threads``) trains a group of restarts with one kernel call per
slice of the epoch; a restart's arithmetic is its own whatever its group, so the
result does not depend on the number of threads.
"""

from dataclasses import dataclass

import numpy as np

from skdiffclust._training import Cooldown, run_epochs
from skdiffclust._training._optim import ReduceOnPlateau
from skdiffclust._utils._random import numpy_generator
from skdiffclust.clam import _inference
from skdiffclust.clam import _kernels as kernels
from skdiffclust.clam._data import squared_distances
from skdiffclust.clam._kernels import COSINE, _map_in_threads, hidden_count

# learning-rate schedule of the paper (appendix B.1, table 5): x0.8 after more than 5
# epochs without a relative gain of 1e-3, down to 1e-5 (1e-4 times its 0.1)
PLATEAU_SCHEDULE = dict(factor=0.8, patience=5, threshold=1e-3, min_lr=1e-5)
MIN_LR_RATIO = 1e-4
# 'auto' patiences span about this many Adam steps (in epochs, within bounds): an
# epoch of 100,000 points is 6,250 steps, one of 300 points 19
STOPPING_STEPS, STOPPING_BOUNDS = 2000, (2, 10)
PLATEAU_STEPS, PLATEAU_BOUNDS = 1000, (1, 5)
# from this epoch on, restarts stop training when their epoch loss is this much
# (relative) above the best one, or when their prototypes (averaged over the
# epoch) are those of a better restart, each within this fraction of its distance
# to its nearest neighbour
PRUNE_MARGIN, PRUNE_FROM_EPOCH = 0.1, 3
DUPLICATE_TOLERANCE, DUPLICATES_FROM_EPOCH = 0.1, 1
# once converged, epochs of about this many Adam steps (within bounds) at a
# learning rate halved before each (down to 1/16 of where it was), without
# re-seeding: the averaged prototypes then rest near a minimum of the full
# objective instead of in the noise of the last steps
COOLDOWN_STEPS, COOLDOWN_BOUNDS, COOLDOWN_FACTOR = 1000, (1, 4), 0.5


def steps_patience(n_samples, batch_size, steps, bounds):
    """A patience in epochs spanning about ``steps`` Adam steps, within ``bounds``."""
    n_batches = -(-n_samples // max(min(batch_size, n_samples), 1))
    return int(np.clip(-(-steps // n_batches), *bounds))


def plateau_schedule(learning_rate, patience):
    """The paper's plateau schedule for an initial ``learning_rate``."""
    return dict(PLATEAU_SCHEDULE, patience=int(patience),
                min_lr=float(learning_rate) * MIN_LR_RATIO)


@dataclass
class Dynamics:
    """The fixed hyperparameters of the AM recursion."""

    beta: float
    n_steps: int
    alpha: float
    metric: str


@dataclass
class TrainedRestarts:
    prototypes: np.ndarray  # (R, k, d)
    log_weights: np.ndarray  # (R, k)
    n_iter: np.ndarray  # (R,) epochs run by each restart
    loss_curves: list  # R arrays of epoch losses
    selectable: np.ndarray = None  # (R,) bool: not pruned (default: all)

    def __post_init__(self):
        if self.selectable is None:
            self.selectable = np.ones(self.prototypes.shape[0], dtype=bool)


class _LearningRates:
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


def train_restarts(X, fill, init_prototypes, dynamics, *, weighted, mask_prob, batch_size,
                   max_iter, learning_rate, tol, n_iter_no_change, device, seed, verbose,
                   plateau_patience=PLATEAU_SCHEDULE["patience"], n_threads=1, reseed=True,
                   prune=True, cooldown_epochs=COOLDOWN_BOUNDS[1]):
    """Algorithm 1 for ``R`` restarts at once, on the engine's epoch loop.

    The restarts train together and stop together, when the sum of their epoch
    losses has converged (the engine's stopping rule; a pruned restart counts
    with its last loss); the learning rate follows the paper's plateau schedule
    (x0.8 after more than ``plateau_patience`` epochs without a relative gain of
    1e-3, down to 1e-4 times its initial value).

    Parameters
    ----------
    X : ndarray of shape (n, d), float32 or float64, or a row source
        Training points (centred and scaled, or unit rows for the spherical
        variant); a row source (``_data.ScaledData``) gives the rows of sparse
        input a slice at a time.
    fill : ndarray of shape (d,)
        Value given to hidden coordinates.
    init_prototypes : ndarray of shape (R, k, d)
    dynamics : Dynamics
    weighted : bool
        Learn per-prototype log-weights (eq. 10-11).
    device : str or torch.device
        The CPU trains with numba kernels (:class:`CPUTrainer`), CUDA with torch
        (``_torch_training``).
    reseed, prune : bool
        Re-seed dead prototypes, prune clearly worse restarts (module docstring).
    cooldown_epochs : int
        Epochs of cool-down once converged (module docstring).

    Returns
    -------
    TrainedRestarts
    """
    if getattr(device, "type", device) != "cpu":
        from skdiffclust.clam._torch_training import train_on_device

        return train_on_device(
            X, fill, init_prototypes, dynamics, weighted=weighted, mask_prob=mask_prob,
            batch_size=batch_size, max_iter=max_iter, learning_rate=learning_rate, tol=tol,
            n_iter_no_change=n_iter_no_change, device=device, seed=seed, verbose=verbose,
            plateau_patience=plateau_patience, cooldown_epochs=cooldown_epochs,
        )
    trainer = CPUTrainer(X, fill, init_prototypes, dynamics, weighted=weighted,
                         mask_prob=mask_prob, batch_size=batch_size,
                         learning_rate=learning_rate, seed=seed, device=device,
                         n_threads=n_threads)
    schedule = ReduceOnPlateau(_LearningRates(trainer.optimizer),
                               **plateau_schedule(learning_rate, plateau_patience))
    guard = RestartGuard(trainer, reseed=reseed, prune=prune)
    result = run_epochs(guard.epoch, max_iter=max_iter, tol=tol,
                        n_iter_no_change=n_iter_no_change, name="ClAM", verbose=verbose,
                        on_epoch_end=schedule.step, cooldown=guard.cooldown(cooldown_epochs))
    prototypes, log_weights = trainer.parameters(averaged=True)
    return trained_restarts(prototypes, log_weights, result, selectable=guard.active.copy())


def trained_restarts(prototypes, log_weights, result, selectable=None):
    """The restarts' parameters with the engine's record of their training."""
    n_restarts = prototypes.shape[0]
    curves = result.loss_curve.reshape(result.n_iter, n_restarts)
    return TrainedRestarts(prototypes=prototypes, log_weights=log_weights,
                           n_iter=np.full(n_restarts, result.n_iter),
                           loss_curves=[curves[:, r].copy() for r in range(n_restarts)],
                           selectable=selectable)


class RestartGuard:
    """The engine's epoch function for a :class:`CPUTrainer`: an epoch, then the
    re-seeding of dead prototypes and the pruning of clearly worse restarts (see
    the module docstring). Pruned restarts report their last loss."""

    def __init__(self, trainer, *, reseed, prune):
        self.trainer = trainer
        n_restarts, k, _ = trainer.prototypes.shape
        self.reseed, self.prune = reseed, prune and n_restarts > 1
        self.active = np.ones(n_restarts, dtype=bool)
        self.last_loss = np.zeros(n_restarts)
        self.budget = np.full(n_restarts, k)
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


def same_prototypes(A, B, tolerance=DUPLICATE_TOLERANCE):
    """Whether two sets of prototypes match one to one, each within ``tolerance``
    times its distance to the nearest other prototype of its set."""
    A, B = np.asarray(A, dtype=np.float64), np.asarray(B, dtype=np.float64)
    k = A.shape[0]
    if k < 2:
        return bool(squared_distances(A, B)[0, 0] <= 0.0)
    cross = squared_distances(A, B)
    match = cross.argmin(axis=1)
    if np.unique(match).size < k:
        return False
    spacing = squared_distances(A, A)
    spacing[np.arange(k), np.arange(k)] = np.inf
    return bool(np.all(cross[np.arange(k), match] <= tolerance**2 * spacing.min(axis=1)))


@dataclass
class AdamState:
    """Adam's moments (m_P, v_P, m_W, v_W), per-restart learning rates and step
    count, for the numba kernels (the state of ``_torch_training.BatchedAdam``)."""

    moments: tuple
    lr: np.ndarray
    steps: int = 0


class CPUTrainer:
    """Mini-batch Adam by the numba kernels of ``_kernels``.

    Same algorithm and maths as ``_torch_training.CompletionTask`` (``epoch_with``
    takes the same arguments), without its per-operation overhead, which is most
    of the cost of small batches on a CPU. Draws the permutations, the masks and
    the re-seeded points from a NumPy generator seeded with ``seed``. Each of up to
    ``n_threads`` threads trains a group of restarts, one kernel call per slice of
    the epoch. ``device`` is ignored (always the CPU).
    """

    def __init__(self, X, fill, init_prototypes, dynamics, *, weighted, mask_prob,
                 batch_size, learning_rate, seed, device="cpu", n_threads=1):
        dtype = X.dtype if isinstance(X, np.ndarray) else np.dtype(np.float32)
        self.X = np.ascontiguousarray(X) if isinstance(X, np.ndarray) else X
        self.n_samples, self.n_features = X.shape if isinstance(X, np.ndarray) else (
            X.n_samples, X.n_features)
        self.fill = np.asarray(fill, dtype=dtype)
        self.rng = numpy_generator(seed)
        self.prototypes = np.array(init_prototypes, dtype=dtype)
        n_restarts, k, _ = self.prototypes.shape
        self.log_weights = np.zeros((n_restarts, k), dtype=dtype)
        moments = tuple(np.zeros_like(p) for p in (self.prototypes, self.prototypes,
                                                   self.log_weights, self.log_weights))
        self.optimizer = AdamState(moments, np.full(n_restarts, float(learning_rate)))
        self.dynamics = dynamics
        self.weighted = weighted
        self.n_hidden = hidden_count(mask_prob, self.n_features)
        self.batch_size = min(batch_size, self.n_samples)
        self.n_threads = max(int(n_threads), 1)
        self._every_feature = None  # the "hidden" features of the unmasked loss
        # of the last epoch, for re-seeding: its order, each prototype's examples
        # and each example's loss (by position in the order)
        self.order = None
        self.counts = np.zeros((n_restarts, k), dtype=np.int64)
        self.position_loss = np.zeros((n_restarts, 0))
        # each restart's parameters averaged over its last epoch (the initial ones
        # before any): the trained parameters (Polyak-Ruppert averaging)
        self.averages = (self.prototypes.astype(np.float64),
                         self.log_weights.astype(np.float64))

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
            return kernels.train_epoch(
                self.X, order, hidden, self.fill, self.n_hidden > 0, restarts,
                self.prototypes, self.log_weights, state.moments, state.lr, state.steps,
                self.weighted, dynamics.beta, dynamics.metric == COSINE, dynamics.n_steps,
                dynamics.alpha, self.batch_size,
            )

        # a group of restarts per thread: the lanes of a restart compute the same
        # bits whatever the group (tests/test_clam_robustness.py checks it)
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
        weights = self.position_loss[r]
        candidates = np.flatnonzero(weights > 0)
        n_moved = min(dead.size, candidates.size)
        if n_moved == 0:
            return 0
        chosen = self.rng.choice(candidates, n_moved, replace=False,
                                 p=weights[candidates] / weights[candidates].sum())
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


# the inference kernels go through the points a chunk at a time, with a workspace
# of about this many floats (a few MB: it stays in cache)
INFERENCE_WORKSPACE = 1 << 18


def _chunk_rows(n_restarts, n_clusters, n_features, n_hidden, n_steps):
    """Points per chunk of the inference kernels, for ``INFERENCE_WORKSPACE``."""
    per_lane = (n_hidden * (3 * n_clusters + n_steps + 4) + 2 * n_features
                + n_clusters * (n_steps + 7) + 2 * n_steps + 7)  # new_workspace
    return max(1, min(1024, INFERENCE_WORKSPACE // per_lane) // n_restarts)


def _float64(array):
    return np.ascontiguousarray(array, dtype=np.float64)


def _shape(X):
    return X.shape if isinstance(X, np.ndarray) else (X.n_samples, X.n_features)


def _float64_rows(X):
    """Arrays as C-contiguous float64; row sources (float64 blocks) as they are."""
    return _float64(X) if isinstance(X, np.ndarray) else X


def evaluate_loss(X, fill, prototypes, log_weights, dynamics, mask_prob, seed, n_threads=1):
    """Mean completion loss of each restart on ``X``, with masks drawn from ``seed``.

    Every restart sees the same masks, so the losses compare the restarts; the same
    seed gives the same masks on the same data (``score`` uses this too).
    Computed on the CPU in float64 (see ``converge``); ``X`` is an array or a row
    source (``_data.ScaledData``).
    """
    n_restarts, k, n_features = prototypes.shape
    n_samples = _shape(X)[0]
    n_hidden = hidden_count(mask_prob, n_features)
    chunk = _chunk_rows(n_restarts, k, n_features, n_hidden or n_features, dynamics.n_steps)
    if n_hidden == 0:  # the unmasked loss of eq. 8: every feature of every point
        hidden = np.broadcast_to(np.arange(n_features), (n_restarts, 1, n_features))
    else:  # the same masks for every restart
        draws = numpy_generator(seed).random((1, n_samples, n_hidden))
        hidden = np.repeat(kernels.hidden_features(draws, n_features), n_restarts, axis=0)
    W = np.zeros((n_restarts, k)) if log_weights is None else _float64(log_weights)
    totals = _inference.completion_losses(
        _float64_rows(X), np.ascontiguousarray(hidden), _float64(prototypes), W,
        _float64(fill), n_hidden > 0, dynamics.beta, dynamics.metric == COSINE,
        dynamics.n_steps, dynamics.alpha, chunk, n_threads=n_threads,
        per_point=n_hidden > 0,
    )
    return totals / max(n_samples, 1)


def converge(X, prototypes, log_weights, dynamics, n_threads=1, proba=False):
    """Labels (nearest prototype of x^T) and distances of x^T to every prototype;
    with ``proba``, also eq. 13 at x^T, ``softmax_mu(-beta ||rho_mu - x^T||^2)``
    (``softmax_mu(beta cos)`` for the cosine metric), from the very numbers whose
    argmin (argmax) gives the label.

    Inference of algorithm 1 (lines 16-25), on the CPU, for one set of prototypes;
    ``X`` (an array or a row source) is prepared as for training (unit rows for the
    spherical variant). It runs in float64 (``_inference``: NumPy on small data, a
    numba kernel on large data, the same bits), and every point's arithmetic is
    its own (lanes, then direct differences rather than matrix products), so that
    the result of a point depends neither on the other points of its batch nor on
    the number of threads.
    """
    k, n_features = prototypes.shape
    n_samples = _shape(X)[0]
    labels = np.empty(n_samples, dtype=np.intp)
    distances = np.empty((n_samples, k))
    probabilities = np.empty((n_samples, k)) if proba else None
    outputs = (labels, distances) + ((probabilities,) if proba else ())
    if n_samples == 0:
        return outputs
    P = _float64(prototypes)
    W = np.zeros((1, k)) if log_weights is None else _float64(log_weights)[None]
    cosine = dynamics.metric == COSINE
    directions = _unit_rows(P)

    def nearest(start, stop, final):
        if cosine:
            similarity = np.einsum("ij,kj->ik", _unit_rows(final), directions)
            labels[start:stop] = similarity.argmax(1)
            distances[start:stop] = 1.0 - similarity
            logits = dynamics.beta * similarity if proba else None
        else:
            squared = squared_distances(final, P)
            labels[start:stop] = squared.argmin(1)
            distances[start:stop] = np.sqrt(squared)
            logits = -dynamics.beta * squared if proba else None
        if proba:
            exp = np.exp(logits - logits.max(1, keepdims=True))
            probabilities[start:stop] = exp / exp.sum(1, keepdims=True)

    _inference.converged_points(
        _float64_rows(X), P[None], W, dynamics.beta, cosine, dynamics.n_steps,
        dynamics.alpha, _chunk_rows(1, k, n_features, n_features, dynamics.n_steps),
        n_threads=n_threads, finish=nearest,
    )
    return outputs


def _unit_rows(X):
    return X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), np.finfo(X.dtype).tiny)

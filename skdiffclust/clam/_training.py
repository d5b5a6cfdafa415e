"""Training ClAM's prototypes (algorithm 1 of Saha et al., 2023), all restarts at once,
and inference. Needs no torch.

The ``n_init`` restarts are independent problems stacked along a leading dimension:
prototypes of shape ``(R, k, d)``, one Adam state and one learning rate per
restart. Two trainers run the same mini-batch Adam: :class:`CPUTrainer` by the
numba kernels of ``_kernels`` (one call per epoch), and, for CUDA,
``_torch_training.TorchTrainer`` in torch (one Python step per batch, whose
per-operation overhead would dominate on a CPU). Inference (labels, distances,
loss) always runs on the CPU, by the numba kernels, in float64.
"""

from dataclasses import dataclass

import numpy as np

from skdiffclust._training import run_epochs
from skdiffclust._training._optim import ReduceOnPlateau
from skdiffclust._utils._random import numpy_generator
from skdiffclust.clam import _kernels as kernels
from skdiffclust.clam._kernels import COSINE, hidden_count

# learning-rate schedule of the paper (appendix B.1, table 5)
PLATEAU_SCHEDULE = dict(factor=0.8, patience=5, threshold=1e-3, min_lr=1e-5)


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
                   max_iter, learning_rate, tol, n_iter_no_change, device, seed, verbose):
    """Algorithm 1 for ``R`` restarts at once, on the engine's epoch loop.

    The restarts train together and stop together, when the sum of their epoch
    losses has converged (the engine's stopping rule); the learning rate follows
    the paper's plateau schedule (x0.8 after more than 5 epochs without a
    relative gain of 1e-3, down to 1e-5).

    Parameters
    ----------
    X : ndarray of shape (n, d), float32 or float64
        Training points (unit rows for the spherical variant).
    fill : ndarray of shape (d,)
        Value given to hidden coordinates.
    init_prototypes : ndarray of shape (R, k, d)
    dynamics : Dynamics
    weighted : bool
        Learn per-prototype log-weights (eq. 10-11).
    device : str or torch.device
        The CPU trains with numba kernels (:class:`CPUTrainer`), CUDA with torch
        (``_torch_training``).

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
        )
    trainer = CPUTrainer(X, fill, init_prototypes, dynamics, weighted=weighted,
                         mask_prob=mask_prob, batch_size=batch_size,
                         learning_rate=learning_rate, seed=seed, device=device)
    schedule = ReduceOnPlateau(_LearningRates(trainer.optimizer), **PLATEAU_SCHEDULE)
    result = run_epochs(trainer.epoch, max_iter=max_iter, tol=tol,
                        n_iter_no_change=n_iter_no_change, name="ClAM", verbose=verbose,
                        on_epoch_end=schedule.step)
    prototypes, log_weights = trainer.parameters()
    return trained_restarts(prototypes, log_weights, result)


def trained_restarts(prototypes, log_weights, result):
    """The restarts' parameters with the engine's record of their training."""
    n_restarts = prototypes.shape[0]
    curves = result.loss_curve.reshape(result.n_iter, n_restarts)
    return TrainedRestarts(prototypes=prototypes, log_weights=log_weights,
                           n_iter=np.full(n_restarts, result.n_iter),
                           loss_curves=[curves[:, r].copy() for r in range(n_restarts)])


@dataclass
class AdamState:
    """Adam's moments (m_P, v_P, m_W, v_W), per-restart learning rates and step
    count, for the numba kernels (the state of ``_torch_training.BatchedAdam``)."""

    moments: tuple
    lr: np.ndarray
    steps: int = 0


class CPUTrainer:
    """Mini-batch Adam by the numba kernels of ``_kernels``, one call per epoch.

    Same algorithm and maths as ``_torch_training.TorchTrainer`` (``epoch_with`` takes the
    same arguments), but without its per-operation overhead, which is most of the
    cost of small batches on a CPU. Draws the permutations and masks from a NumPy
    generator seeded with ``seed``. ``device`` is ignored (always the CPU).
    """

    def __init__(self, X, fill, init_prototypes, dynamics, *, weighted, mask_prob,
                 batch_size, learning_rate, seed, device="cpu"):
        self.X = np.ascontiguousarray(X)
        self.fill = np.asarray(fill, dtype=X.dtype)
        self.rng = numpy_generator(seed)
        self.prototypes = np.array(init_prototypes, dtype=X.dtype)
        n_restarts, k, _ = self.prototypes.shape
        self.log_weights = np.zeros((n_restarts, k), dtype=X.dtype)
        moments = tuple(np.zeros_like(p) for p in (self.prototypes, self.prototypes,
                                                   self.log_weights, self.log_weights))
        self.optimizer = AdamState(moments, np.full(n_restarts, float(learning_rate)))
        self.dynamics = dynamics
        self.weighted = weighted
        self.n_hidden = hidden_count(mask_prob, X.shape[1])
        self.batch_size = min(batch_size, X.shape[0])
        self._every_feature = None  # the "hidden" features of the unmasked loss

    def epoch(self, active=None):
        """One epoch; returns each restart's mean loss (NaN for stopped restarts,
        which are not computed: their zero learning rate leaves them unchanged)."""
        order = self.rng.permutation(self.X.shape[0])
        return self.epoch_with(order, self._draw_hidden(), active)

    def _draw_hidden(self):
        n_restarts = self.prototypes.shape[0]
        n_samples, n_features = self.X.shape
        if self.n_hidden == 0:  # the unmasked loss: every coordinate evolves
            if self._every_feature is None:
                self._every_feature = np.broadcast_to(
                    np.arange(n_features), (n_restarts, n_samples, n_features)).copy()
            return self._every_feature
        draws = self.rng.random((n_restarts, n_samples, self.n_hidden))
        return kernels.hidden_features(draws, n_features)

    def epoch_with(self, order, hidden, active=None):
        """One epoch on a given permutation and hidden features (R, n, h)."""
        n_restarts = self.prototypes.shape[0]
        active = np.ones(n_restarts, dtype=bool) if active is None else active
        dynamics, state = self.dynamics, self.optimizer
        state.steps, totals = kernels.train_epoch(
            self.X, np.asarray(order, dtype=np.int64), hidden, self.fill,
            self.n_hidden > 0, np.flatnonzero(active), self.prototypes,
            self.log_weights, state.moments, state.lr, state.steps, self.weighted,
            dynamics.beta, dynamics.metric == COSINE, dynamics.n_steps, dynamics.alpha,
            self.batch_size,
        )
        return np.where(active, totals / self.X.shape[0], np.nan)

    def parameters(self):
        return self.prototypes.copy(), self.log_weights.copy()


# the inference kernels go through the points a chunk at a time, with a workspace
# of about this many floats (a few MB: it stays in cache)
INFERENCE_WORKSPACE = 1 << 18


def _chunk_rows(n_restarts, n_clusters, n_features, n_hidden, n_steps):
    """Points per chunk of the inference kernels, for ``INFERENCE_WORKSPACE``."""
    per_lane = (n_hidden * (3 * n_clusters + n_steps + 4) + 2 * n_features
                + n_clusters * (n_steps + 7) + 2 * n_steps + 7)  # allocate_workspace
    return max(1, min(1024, INFERENCE_WORKSPACE // per_lane) // n_restarts)


def _float64(array):
    return np.ascontiguousarray(array, dtype=np.float64)


def evaluate_loss(X, fill, prototypes, log_weights, dynamics, mask_prob, seed):
    """Mean completion loss of each restart on ``X``, with masks drawn from ``seed``.

    Every restart sees the same masks, so the losses compare the restarts; the same
    seed gives the same masks on the same data (``score`` uses this too).
    Computed on the CPU by the numba kernels, in float64 (see ``converge``).
    """
    n_restarts, k, n_features = prototypes.shape
    n_samples = X.shape[0]
    n_hidden = hidden_count(mask_prob, n_features)
    if n_hidden == 0:  # the unmasked loss of eq. 8
        hidden = np.broadcast_to(np.arange(n_features), (1, n_samples, n_features))
    else:
        draws = numpy_generator(seed).random((1, n_samples, n_hidden))
        hidden = kernels.hidden_features(draws, n_features)
    hidden = np.repeat(hidden, n_restarts, axis=0)  # the same masks for every restart
    W = np.zeros((n_restarts, k)) if log_weights is None else _float64(log_weights)
    totals = kernels.completion_losses(
        _float64(X), hidden, _float64(prototypes), W, _float64(fill), n_hidden > 0,
        dynamics.beta, dynamics.metric == COSINE, dynamics.n_steps, dynamics.alpha,
        _chunk_rows(n_restarts, k, n_features, hidden.shape[2], dynamics.n_steps),
    )
    return totals / max(n_samples, 1)


def converge(X, prototypes, log_weights, dynamics):
    """Labels (nearest prototype of x^T) and distances of x^T to every prototype.

    Inference of algorithm 1 (lines 16-25), on the CPU, for one set of prototypes;
    ``X`` is prepared as for training (unit rows for the spherical variant). It runs
    in float64, and every point's arithmetic is its own (the numba lanes), so that
    the result of a point does not depend on the other points of its batch.
    """
    k, n_features = prototypes.shape
    if X.shape[0] == 0:
        return np.empty(0, dtype=np.intp), np.empty((0, k))
    P = _float64(prototypes)
    W = np.zeros((1, k)) if log_weights is None else _float64(log_weights)[None]
    cosine = dynamics.metric == COSINE
    final = kernels.converged_points(
        _float64(X), P[None], W, dynamics.beta, cosine, dynamics.n_steps,
        dynamics.alpha, _chunk_rows(1, k, n_features, n_features, dynamics.n_steps),
    )
    if cosine:
        directions = _unit_rows(P)
        labels = (final @ directions.T).argmax(1)
        distances = 1.0 - _unit_rows(final) @ directions.T
    else:
        squared = ((final * final).sum(1)[:, None] + (P * P).sum(1)[None, :]
                   - 2.0 * final @ P.T)
        squared = np.maximum(squared, 0.0)
        labels = squared.argmin(1)
        distances = np.sqrt(squared)
    return labels.astype(np.intp), distances


def _unit_rows(X):
    return X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), np.finfo(X.dtype).tiny)

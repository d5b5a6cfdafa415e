"""Training ClAM's prototypes (algorithm 1 of Saha et al., 2023), all restarts at once.

The ``n_init`` restarts are independent problems stacked along a leading dimension:
prototypes of shape ``(R, k, d)``, one Adam state and one learning rate per
restart. On small data the cost of a step is torch's per-operation overhead, so
running the restarts together costs about as much as running one.
"""

from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch

from skdiffclust._utils._torch import make_generator, progress
from skdiffclust.clam._backprop import completion_loss_and_grads
from skdiffclust.clam._dynamics import Memories, completion_loss, draw_masks, recursion

# learning-rate schedule of the paper (appendix B.1, table 5)
PLATEAU_FACTOR = 0.8
PLATEAU_PATIENCE = 5
PLATEAU_THRESHOLD = 1e-3
MIN_LEARNING_RATE = 1e-5
EVAL_BATCH = 4096
# below this many multiply-adds per matrix product, torch's CPU threading costs
# more than it gains (and much more on a loaded machine): run on one thread
SMALL_WORK = 1 << 22


@contextmanager
def cpu_threads_for(work, device):
    """One torch thread for small CPU work, restored afterwards."""
    if torch.device(device).type != "cpu" or work >= SMALL_WORK:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


@dataclass
class Dynamics:
    """The fixed hyperparameters of the AM recursion."""

    beta: float
    n_steps: int
    alpha: float
    metric: str

    def memories(self, prototypes, log_weights=None):
        return Memories(prototypes, self.beta, self.metric, log_weights)


@dataclass
class TrainedRestarts:
    prototypes: np.ndarray  # (R, k, d)
    log_weights: np.ndarray  # (R, k)
    n_iter: np.ndarray  # (R,) epochs run by each restart
    loss_curves: list  # R lists of epoch losses


class BatchedAdam:
    """Adam (Kingma & Ba) on stacked restarts, with one learning rate per restart.

    Elementwise, hence exactly R independent Adam optimisers.
    """

    def __init__(self, params, learning_rate, n_restarts, betas=(0.9, 0.999),
                 eps=1e-8):
        self.params = params
        self.lr = np.full(n_restarts, float(learning_rate))
        self.betas = betas
        self.eps = eps
        self.t = 0
        self.moments = [(torch.zeros_like(p), torch.zeros_like(p)) for p in params]

    def step(self, grads):
        """Update the parameters in place from their gradients (same order)."""
        self.t += 1
        beta1, beta2 = self.betas
        correction1 = 1 - beta1**self.t
        correction2 = 1 - beta2**self.t
        for param, (m, v), grad in zip(self.params, self.moments, grads):
            m.mul_(beta1).add_(grad, alpha=1 - beta1)
            v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            lr = torch.as_tensor(self.lr / correction1, dtype=param.dtype,
                                 device=param.device).reshape((-1,) + (1,) * (param.dim() - 1))
            denom = (v / correction2).sqrt_().add_(self.eps)
            param.addcdiv_(m * lr, denom, value=-1.0)


class Plateau:
    """Per-restart reduce-on-plateau and early stopping on the epoch loss.

    The learning rate is multiplied by 0.8 after more than 5 epochs without a
    relative gain of 1e-3 (floor 1e-5); a restart stops after ``n_iter_no_change``
    epochs without a relative gain of ``tol``.
    """

    def __init__(self, n_restarts, tol, n_iter_no_change):
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.plateau_best = np.full(n_restarts, np.inf)
        self.plateau_bad = np.zeros(n_restarts, dtype=int)
        self.stop_best = np.full(n_restarts, np.inf)
        self.stop_bad = np.zeros(n_restarts, dtype=int)
        self.active = np.ones(n_restarts, dtype=bool)

    def update(self, losses, optimizer):
        improved = losses < self.plateau_best * (1 - PLATEAU_THRESHOLD)
        self.plateau_best = np.where(improved, losses, self.plateau_best)
        self.plateau_bad = np.where(improved, 0, self.plateau_bad + 1)
        reduce = self.plateau_bad > PLATEAU_PATIENCE
        reduced = np.maximum(optimizer.lr * PLATEAU_FACTOR, MIN_LEARNING_RATE)
        optimizer.lr = np.where(reduce, reduced, optimizer.lr)
        self.plateau_bad[reduce] = 0

        finite = np.isfinite(self.stop_best)
        margin = self.tol * np.abs(np.where(finite, self.stop_best, 0.0))
        gained = ~finite | (losses < self.stop_best - margin)
        self.stop_best = np.where(gained, losses, np.minimum(self.stop_best, losses))
        self.stop_bad = np.where(gained, 0, self.stop_bad + 1)
        self.active &= self.stop_bad < self.n_iter_no_change
        # a stopped restart is frozen: a zero learning rate leaves it unchanged
        optimizer.lr = np.where(self.active, optimizer.lr, 0.0)


@torch.no_grad()
def train_restarts(X, fill, init_prototypes, dynamics, *, weighted, mask_prob, batch_size,
                   max_iter, learning_rate, tol, n_iter_no_change, device, seed, verbose):
    """Algorithm 1 for ``R`` restarts at once.

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

    Returns
    -------
    TrainedRestarts
    """
    dtype = torch.float64 if X.dtype == np.float64 else torch.float32
    generator = make_generator(seed, device)
    X_t = torch.as_tensor(X, dtype=dtype, device=device)
    fill_t = torch.as_tensor(fill, dtype=dtype, device=device)
    n_restarts, k, _ = init_prototypes.shape
    prototypes = torch.tensor(init_prototypes, dtype=dtype, device=device)
    log_weights = torch.zeros((n_restarts, k), dtype=dtype, device=device)
    params = [prototypes, log_weights] if weighted else [prototypes]
    optimizer = BatchedAdam(params, learning_rate, n_restarts)
    schedule = Plateau(n_restarts, tol, n_iter_no_change)
    n_samples = X.shape[0]
    batch_size = min(batch_size, n_samples)
    n_iter = np.zeros(n_restarts, dtype=int)
    curves = [[] for _ in range(n_restarts)]
    for _ in progress(range(max_iter), verbose, "ClAM"):
        order = torch.randperm(n_samples, generator=generator, device=device)
        epoch_loss = torch.zeros(n_restarts, dtype=dtype, device=device)
        for start in range(0, n_samples, batch_size):
            batch = X_t[order[start : start + batch_size]]
            masks = draw_masks((n_restarts,) + batch.shape, mask_prob, generator, device)
            # restarts are independent: the gradient of their summed losses is
            # each restart's own gradient
            per_point, *grads = completion_loss_and_grads(
                prototypes, log_weights if weighted else None, batch, masks, fill_t,
                beta=dynamics.beta, metric=dynamics.metric, n_steps=dynamics.n_steps,
                alpha=dynamics.alpha,
            )
            optimizer.step(grads)
            epoch_loss += per_point.sum(-1)
        losses = (epoch_loss / n_samples).cpu().numpy().astype(np.float64)
        for r in np.flatnonzero(schedule.active):
            curves[r].append(float(losses[r]))
        n_iter += schedule.active
        schedule.update(losses, optimizer)
        if not schedule.active.any():
            break
    return TrainedRestarts(
        prototypes=prototypes.cpu().numpy(),
        log_weights=log_weights.cpu().numpy(),
        n_iter=n_iter,
        loss_curves=curves,
    )


def inference_work(X, prototypes):
    """Multiply-adds of one matrix product of inference (for ``cpu_threads_for``)."""
    n_restarts, k, d = prototypes.shape
    return n_restarts * min(X.shape[0], EVAL_BATCH) * k * d


def _tensor(array, dtype):
    return None if array is None else torch.as_tensor(np.asarray(array), dtype=dtype)


@torch.no_grad()
def evaluate_loss(X, fill, prototypes, log_weights, dynamics, mask_prob, seed):
    """Mean completion loss of each restart on ``X``, with masks drawn from ``seed``.

    Every restart sees the same masks, so the losses compare the restarts; the same
    seed gives the same masks on the same data (``score`` uses this too).
    Computed on the CPU, in float64 (see ``converge``).
    """
    dtype = torch.float64
    generator = make_generator(seed)
    memories = dynamics.memories(_tensor(prototypes, dtype), _tensor(log_weights, dtype))
    fill_t = _tensor(fill, dtype)
    total = torch.zeros(prototypes.shape[0], dtype=torch.float64)
    for start in range(0, X.shape[0], EVAL_BATCH):
        batch = _tensor(X[start : start + EVAL_BATCH], dtype)
        masks = draw_masks(batch.shape, mask_prob, generator, "cpu")
        if masks is not None:
            masks = masks.expand(prototypes.shape[0], *masks.shape)
        per_point = completion_loss(memories, batch, masks, fill_t,
                                    dynamics.n_steps, dynamics.alpha)
        total += per_point.sum(-1).to(torch.float64)
    return (total / max(X.shape[0], 1)).numpy()


@torch.no_grad()
def converge(X, prototypes, log_weights, dynamics):
    """Labels (nearest prototype of x^T) and distances of x^T to every prototype.

    Inference of algorithm 1 (lines 16-25), on the CPU, for one set of prototypes;
    ``X`` is prepared as for training (unit rows for the spherical variant). It runs
    in float64: in float32, BLAS kernels round a row differently depending on its
    position in the batch, and the result of a point would depend on its neighbours.
    """
    dtype = torch.float64
    memories = dynamics.memories(_tensor(prototypes, dtype), _tensor(log_weights, dtype))
    labels, distances = [], []
    for start in range(0, X.shape[0], EVAL_BATCH):
        batch = _tensor(X[start : start + EVAL_BATCH], dtype)
        final = recursion(memories, batch, dynamics.n_steps, dynamics.alpha)
        labels.append(memories.nearest(final).numpy())
        distances.append(memories.distances(final).to(torch.float64).numpy())
    if not labels:
        return np.empty(0, dtype=np.intp), np.empty((0, prototypes.shape[0]))
    return np.concatenate(labels).astype(np.intp), np.concatenate(distances)

"""The epoch loop every trained estimator runs: stopping rule, warning, progress bar.

Backend-agnostic: an *epoch function* does one pass over the training data (in
numba, NumPy or torch) and returns the training objective aggregated over the
epoch; this loop decides when to stop, records ``loss_curve``, shows the
progress bar and warns when ``max_iter`` ran out first. It never sees a tensor:
torch epochs hand it the objective read back once per epoch.
"""

import math
import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from skdiffclust._training._progress import EpochProgress


@dataclass
class TrainingResult:
    """What a training run reports to its estimator.

    Attributes
    ----------
    n_iter : int
        Epochs run.
    loss_curve : ndarray of shape (n_iter,) or (n_iter, n_restarts)
        The objective of each epoch (per restart when the epoch function returns
        one value per restart).
    converged : bool
        Whether the stopping rule ended training (False: ``max_iter`` ran out).
    validation_curve : ndarray of shape (n_iter,) or None
        The monitored validation error of each epoch (``run_epochs(monitor=...)``),
        None without one.
    """

    n_iter: int
    loss_curve: np.ndarray
    converged: bool
    validation_curve: np.ndarray = None


class StoppingRule:
    """Patience on the relative improvement of an epoch objective (lower is better).

    An epoch *improves* when its objective is below ``best - tol * scale``, with
    ``best`` the lowest objective so far and ``scale`` the larger of ``|best|``
    and the first epoch's ``|objective|``; training has converged after
    ``n_iter_no_change`` consecutive epochs without improvement. The first
    ``min_epochs`` epochs (a warm-up, such as an annealing schedule) never count
    as converged but still set ``best``. With a ``target``, training has also
    converged at the first epoch whose objective is at or below it (objectives
    with a known floor, such as an error rate).

    Relative, ``tol`` does not depend on the objective's units; relative to the
    larger of the two, a loss that decays geometrically towards 0 still
    converges once its gains are small next to where it started.
    """

    def __init__(self, tol, n_iter_no_change, min_epochs=0, target=None):
        self.tol = float(tol)
        self.target = target
        self.n_iter_no_change = int(n_iter_no_change)
        self.min_epochs = int(min_epochs)
        self.best = math.inf
        self.first = None
        self.n_bad = 0
        self.n_epochs = 0

    def update(self, objective):
        """Record one epoch's objective; return True once training has converged."""
        self.n_epochs += 1
        if self.first is None:
            self.first = abs(objective)
        scale = max(abs(self.best), self.first) if math.isfinite(self.best) else math.inf
        if not math.isfinite(self.best) or objective < self.best - self.tol * scale:
            self.n_bad = 0
        else:
            self.n_bad += 1
        self.best = min(self.best, objective)
        if self.n_epochs <= self.min_epochs:
            self.n_bad = 0
            return False
        reached = self.target is not None and objective <= self.target
        return reached or self.n_bad >= self.n_iter_no_change


def aggregate(objective):
    """The scalar the stopping rule watches: the sum over restarts, if several."""
    values = np.asarray(objective, dtype=np.float64)
    return float(values.sum()), values


def run_epochs(epoch, *, max_iter, tol, n_iter_no_change, name, verbose=False,
               min_epochs=0, on_epoch_end=None, check_finite=True, warn=True,
               progress=None, target=None, cooldown=None, settled=None, monitor=None):
    """Call ``epoch()`` until the stopping rule holds or ``max_iter`` epochs ran.

    Parameters
    ----------
    epoch : callable
        ``epoch() -> float or array of shape (n_restarts,)``: one pass over the
        data; returns the training objective aggregated over it (lower is better).
        Restarts trained together stop together, on the sum of their objectives.
    max_iter : int
        Maximum number of epochs (0: no training, ``n_iter = 0``).
    tol, n_iter_no_change, min_epochs, target :
        The :class:`StoppingRule`.
    name : str
        The estimator's name, for the progress bar and the warning.
    verbose : bool
        Show one tqdm progress bar over the epochs.
    on_epoch_end : callable, default=None
        ``on_epoch_end(aggregated_objective)`` after each epoch (learning-rate
        schedules).
    check_finite : bool, default=True
        Raise a ``FloatingPointError`` naming the estimator when an epoch's
        objective is not finite.
    warn : bool, default=True
        Issue the ``ConvergenceWarning`` (callers that run several trainings may
        collect ``converged`` and warn once themselves).
    cooldown : Cooldown, default=None
        Epochs run once the stopping rule holds, each after
        ``cooldown.start_epoch(i)`` (``i`` from 0), within ``max_iter``: a step
        size annealed towards zero brings stochastic training to rest near the
        minimum of its full objective, instead of where the last mini-batches put
        it (see :class:`Cooldown`).
    settled : callable, default=None
        ``settled() -> bool``, asked after an epoch at which the stopping rule
        holds: training converges only once it also answers True (a method whose
        result is a hard partition may ask that the partition stop changing, so
        that where the noisy objective happens to trip the rule does not decide
        the result).
    progress : EpochProgress, default=None
        A bar shared by several trainings (then ``verbose`` is ignored and the bar
        is left open); by default each run shows its own.
    monitor : callable, default=None
        ``monitor() -> float``, called after each epoch: an error on held-out data
        (lower is better) that the stopping rule watches instead of the training
        objective (early stopping); recorded in ``validation_curve``.

    Returns
    -------
    TrainingResult

    Warns
    -----
    ConvergenceWarning
        When ``max_iter`` epochs ran without the stopping rule being met.
    """
    rule = StoppingRule(tol, n_iter_no_change, min_epochs, target)
    curve, monitored = [], []
    converged = False
    own_bar = progress is None
    bar = EpochProgress(verbose, name, max_iter) if own_bar else progress

    def run_one():
        total, values = aggregate(epoch())
        if check_finite and not math.isfinite(total):
            raise FloatingPointError(
                f"{name}'s training diverged: the objective of epoch {len(curve) + 1} "
                "is not finite. Lower learning_rate, or check the input for "
                "extreme values."
            )
        curve.append(values)
        bar.update(total)
        return total

    try:
        for _ in range(max_iter):
            total = run_one()
            if on_epoch_end is not None:
                on_epoch_end(total)
            if monitor is not None:
                total = float(monitor())
                monitored.append(total)
            if rule.update(total) and (settled is None or settled()):
                converged = True
                break
        if converged and cooldown is not None:
            for i in range(min(cooldown.n_epochs, max_iter - len(curve))):
                cooldown.start_epoch(i)
                run_one()
    finally:
        if own_bar:
            bar.close()
    if warn and max_iter > 0 and not converged:
        warn_not_converged(name, max_iter, tol, n_iter_no_change)
    loss_curve = np.asarray(curve, dtype=np.float64) if curve else np.empty(0)
    return TrainingResult(n_iter=len(curve), loss_curve=loss_curve,
                          converged=converged or max_iter == 0,
                          validation_curve=(None if monitor is None
                                            else np.asarray(monitored, dtype=np.float64)))


class Cooldown:
    """The cool-down of a stochastic training: epochs at a geometrically shrinking step.

    Mini-batch training that has stopped improving still moves its parameters
    around the minimum by about a step size; where they end is where the last
    mini-batches put them, which is sensitive to the last bits of the data (the
    trajectories of slightly different data decorrelate within that noise ball).
    Once the stopping rule holds, ``n_epochs`` more epochs run with the step size
    multiplied by ``factor`` before each (``set_scale(factor ** (i + 1))`` is
    called with the multiplier of the initial step size): the parameters come to
    rest near the minimum of the full objective, a function of the data's
    structure. Methods average their parameters over the last epoch as well.

    Parameters
    ----------
    n_epochs : int
        Epochs of cool-down.
    factor : float in (0, 1)
        Multiplier of the step size per epoch.
    set_scale : callable
        ``set_scale(multiplier)``: scale the optimiser's step size (relative to
        its value when the cool-down starts).
    """

    def __init__(self, n_epochs, factor, set_scale):
        self.n_epochs, self.factor, self.set_scale = int(n_epochs), float(factor), set_scale

    def start_epoch(self, i):
        self.set_scale(self.factor ** (i + 1))


def warn_not_converged(name, max_iter, tol, n_iter_no_change):
    """scikit-learn's ConvergenceWarning, saying what to change."""
    warnings.warn(
        f"{name} ran max_iter={max_iter} epochs without converging: its objective "
        f"was still improving by more than tol={tol:g} (relative) within "
        f"n_iter_no_change={n_iter_no_change} epochs. Increase max_iter, or tol.",
        ConvergenceWarning,
        stacklevel=2,
    )

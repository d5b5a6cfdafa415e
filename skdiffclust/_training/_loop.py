"""The epoch loop every trained estimator runs: stopping rule, warning, progress bar.

Backend-agnostic: an *epoch function* does one pass over the training data (in
numba, NumPy or torch) and returns the training objective aggregated over the
epoch; this loop decides when to stop, records ``loss_curve``, shows the
progress bar and warns when ``max_iter`` ran out first. It never sees a tensor:
torch epochs hand it the objective read back once per epoch.

The loop is fixed; a method extends it with :class:`EpochHook` objects (a
learning-rate schedule, a model kept along the way, early stopping, a cool-down),
as skorch's fit loop is extended by callbacks, and runs the several trainings of
one fit in a :class:`TrainingSession` (one bar, at most one warning).
"""

import contextlib
import math
from dataclasses import dataclass

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from skdiffclust._training._progress import EpochProgress
from skdiffclust._utils._warn import warn_user


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
        The monitored validation error of each epoch (an :class:`EarlyStopping`
        hook), None without one.
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


class EpochHook:
    """What a method adds to the epoch loop, as skorch's callbacks do to its fit loop.

    The loop is fixed; a learning-rate schedule, a model kept along the way, early
    stopping on held-out data or a cool-down is an object whose methods it calls
    (``run_epochs(hooks=[...])``). Subclass and override what you need; the
    defaults do nothing. For each epoch the loop runs the epoch function, then:

    1. ``on_epoch_end(objective)`` of every hook, with the epoch's objective
       (summed over restarts);
    2. ``monitor()`` of the hook that ``monitors``, if any: the value the stopping
       rule watches instead of the objective (an error on held-out data, lower is
       better), recorded in ``validation_curve``;
    3. once the stopping rule holds, training converges when every hook is
       ``settled()`` (a method whose result is a hard partition may ask that it
       stop changing, so that where a noisy objective trips the rule does not
       decide the result).

    Once converged, ``cooldown_epochs`` more epochs run (the largest over the
    hooks, within ``max_iter``), each after ``on_cooldown_epoch(i)`` (``i`` from
    0) of every hook; they are recorded but not watched.
    """

    monitors = False
    cooldown_epochs = 0

    def on_epoch_end(self, objective):
        """After each epoch (not the cool-down's), with its objective."""

    def monitor(self):
        """The value the stopping rule watches (hooks whose ``monitors`` is True)."""
        raise NotImplementedError

    def settled(self):
        """Asked once the stopping rule holds; training converges only on True."""
        return True

    def on_cooldown_epoch(self, i):
        """Before the ``i``-th epoch of the cool-down."""


class EveryEpoch(EpochHook):
    """``function(objective)`` after each epoch (a schedule's step, a keeper)."""

    def __init__(self, function):
        self.function = function

    def on_epoch_end(self, objective):
        self.function(objective)


class EarlyStopping(EpochHook):
    """The stopping rule watches ``error()``, computed after each epoch on held-out
    data (lower is better), instead of the training objective."""

    monitors = True

    def __init__(self, error):
        self.error = error

    def monitor(self):
        return float(self.error())


class SettledWhen(EpochHook):
    """Training converges only once ``settled()`` also says so."""

    def __init__(self, settled):
        self.settled = settled


class TrainingSession:
    """Several trainings that make one fit, reported as one.

    One progress bar over the epochs of all of them (``total`` epochs, if known),
    and at most one ``ConvergenceWarning``: when it closes without an
    error, for the first of its trainings that ran out of ``max_iter`` (with its
    ``tol``), among those the fitted model rests on (all but those given to
    :meth:`discard`). ``run_epochs(session=...)`` records each training in it;
    without one, a training is its own ``TrainingSession``. ``warn=False`` reports no
    convergence (an auxiliary training, such as an initialisation, whose budget is
    internal). ``loss_scale``: the bar's objective in the units of the fitted
    attributes (:class:`~skdiffclust._training._progress.EpochProgress`).
    """

    def __init__(self, name, *, verbose=False, total=None, warn=True, loss_scale=1.0):
        self.name = name
        self.warn = warn
        self.progress = EpochProgress(verbose, name, total, scale=loss_scale)
        self.runs = []  # (TrainingResult, max_iter, tol, n_iter_no_change)

    def record(self, result, max_iter, tol, n_iter_no_change):
        """Record one training of this fit (``run_epochs`` calls it)."""
        self.runs.append((result, max_iter, tol, n_iter_no_change))

    def discard(self, results):
        """Trainings (their TrainingResult) the fitted model does not rest on, such
        as the steps of a path beyond the model it selects: their convergence is not
        reported."""
        discarded = {id(result) for result in results}
        self.runs = [run for run in self.runs if id(run[0]) not in discarded]

    def note(self, **fields):
        """Fields shown next to the progress bar (a path's step, its feature count)."""
        self.progress.note(**fields)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc_info):
        self.progress.close()
        if exc_type is None and self.warn:
            unconverged = next((run for run in self.runs if not run[0].converged), None)
            if unconverged is not None:
                warn_not_converged(self.name, *unconverged[1:])
        return False


def run_epochs(epoch, *, max_iter, tol, n_iter_no_change, name, verbose=False,
               min_epochs=0, target=None, hooks=(), session=None, loss_scale=1.0):
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
        The estimator's name, for the progress bar, the warning and the error of
        an objective that is not finite (``FloatingPointError``).
    verbose : bool
        Show one tqdm progress bar over the epochs (without a ``session``).
    hooks : sequence of EpochHook, default=()
        What the method adds to the loop (:class:`EpochHook`): schedules,
        keepers, early stopping, a cool-down.
    session : TrainingSession, default=None
        The fit this training is part of: its bar, and its warning when it closes.
        By default the training is its own ``TrainingSession`` (``verbose``'s bar,
        the warning when it returns).
    loss_scale : float, default=1.0
        The bar's objective in the units of the fitted attributes (without a
        ``session``; see :class:`TrainingSession`).

    Returns
    -------
    TrainingResult

    Warns
    -----
    ConvergenceWarning
        When ``max_iter`` epochs ran without the stopping rule being met (once the
        ``session`` closes, with a ``session``).
    """
    own_session = session is None
    if own_session:
        session = TrainingSession(name, verbose=verbose, total=max_iter,
                                  loss_scale=loss_scale)
    with session if own_session else contextlib.nullcontext():
        result = _run(epoch, max_iter, StoppingRule(tol, n_iter_no_change, min_epochs, target),
                      name, hooks, session.progress)
        session.record(result, max_iter, tol, n_iter_no_change)
    return result


def _run(epoch, max_iter, rule, name, hooks, bar):
    """The loop of :func:`run_epochs`: its TrainingResult."""
    curve, monitored = [], []
    converged = False
    monitor = next((hook for hook in hooks if hook.monitors), None)

    def run_one():
        total, values = aggregate(epoch())
        if not math.isfinite(total):
            raise FloatingPointError(
                f"{name}'s training diverged: the objective of epoch {len(curve) + 1} "
                "is not finite. Lower learning_rate, or check the input for "
                "extreme values."
            )
        curve.append(values)
        bar.update(values)
        return total

    for _ in range(max_iter):
        total = run_one()
        for hook in hooks:
            hook.on_epoch_end(total)
        if monitor is not None:
            total = monitor.monitor()
            monitored.append(total)
        if rule.update(total) and all(hook.settled() for hook in hooks):
            converged = True
            break
    if converged:
        n_cooldown = max((hook.cooldown_epochs for hook in hooks), default=0)
        for i in range(min(n_cooldown, max_iter - len(curve))):
            for hook in hooks:
                hook.on_cooldown_epoch(i)
            run_one()
    loss_curve = np.asarray(curve, dtype=np.float64) if curve else np.empty(0)
    return TrainingResult(n_iter=len(curve), loss_curve=loss_curve,
                          converged=converged or max_iter == 0,
                          validation_curve=(None if monitor is None
                                            else np.asarray(monitored, dtype=np.float64)))


class Cooldown(EpochHook):
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

    @property
    def cooldown_epochs(self):
        return self.n_epochs

    def on_cooldown_epoch(self, i):
        self.set_scale(self.factor ** (i + 1))


def warn_not_converged(name, max_iter, tol, n_iter_no_change):
    """scikit-learn's ConvergenceWarning, saying what to change."""
    warn_user(
        f"{name} ran max_iter={max_iter} epochs without converging: its objective "
        f"was still improving by more than tol={tol:g} (relative) within "
        f"n_iter_no_change={n_iter_no_change} epochs. Increase max_iter, or tol.",
        ConvergenceWarning,
    )

"""The training engine shared by every trained estimator.

* :func:`run_epochs` (``_loop``): the epoch loop — stopping rule (``tol``, a
  relative improvement of the epoch objective, with a patience of
  ``n_iter_no_change`` epochs), scikit-learn's ``ConvergenceWarning`` when
  ``max_iter`` runs out first, ``n_iter`` and ``loss_curve``, one progress bar;
  extended by a method's :class:`EpochHook` objects (schedules, keepers, early
  stopping, a cool-down), as skorch's fit loop by its callbacks; a
  :class:`TrainingSession` reports several trainings of one fit as one (one bar,
  at most one warning);
* ``_optim``: the NumPy / numba optimisers (one Adam, shared by ClAM's numba
  kernels and SparseGEMINI);
* ``_torch`` (imported only by training code, never by ``import skdiffclust``):
  the torch backend — batches drawn on the training device, ``torch.optim.Adam``,
  the objective read back once per epoch, CUDA graphs on CUDA.

A method plugs in only its loss and gradient: an epoch function for the NumPy /
numba backend, a task (parameters and per-batch loss) for torch.
"""

from skdiffclust._training._loop import (
    Cooldown,
    EarlyStopping,
    EpochHook,
    EveryEpoch,
    SettledWhen,
    StoppingRule,
    TrainingResult,
    TrainingSession,
    run_epochs,
    warn_not_converged,
)

__all__ = ["Cooldown", "EarlyStopping", "EpochHook", "EveryEpoch", "SettledWhen",
           "StoppingRule", "TrainingResult", "TrainingSession", "run_epochs",
           "warn_not_converged"]

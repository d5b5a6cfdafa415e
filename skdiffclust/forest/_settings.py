"""The settings of learning through clustering, in one frozen record (no torch import).

:class:`SpanningForestClustering` builds an :class:`EmbeddingSettings` once per
``fit`` (``_embedding_settings``), from its validated parameters and the values it
derives from them (the training seed, the resolved device, the solver's threads,
below), and passes it whole to :func:`skdiffclust.forest._embedding.train_embedding`.
"""

from dataclasses import dataclass

import numpy as np

from skdiffclust._utils._random import numpy_generator
from skdiffclust.forest._constraints import UNLABELLED


@dataclass(frozen=True)
class EmbeddingSettings:
    """How an embedding is trained with the perturbed partial Fenchel-Young loss.

    The estimator's parameters of the same names (``seed`` is the training seed
    derived from ``random_state``); ``device`` is resolved (``'cpu'``, ``'cuda'``
    or a ``torch.device``). ``device_solver``: solve the forests with the device
    solver (``_gpu``); ``None`` means when ``device`` is CUDA and the batch has
    ``DEVICE_SOLVER_MIN_BATCH_SIZE`` samples or more. On CPU tensors it
    runs on numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``), which is how the
    CUDA path is tested without a GPU. ``steps_per_epoch``: batches per epoch
    (``None``: ``ceil(n / batch_size)``). ``solver_threads``: numba's threads for
    the CPU solver (torch's CPU steps run on one thread,
    :func:`~skdiffclust._utils._torch.one_thread`).
    """

    n_clusters: int
    epsilon: float
    n_perturbations: int
    batch_size: int
    max_iter: int
    learning_rate: float
    tol: float
    n_iter_no_change: int
    device: object
    seed: int
    verbose: bool = False
    weight_decay: float = 0.0
    learning_rate_schedule: str = "constant"
    steps_per_epoch: int | None = None
    solver_threads: int = 1
    device_solver: bool | None = None


def hold_out(X, labels, fraction, seed):
    """Early stopping's split: ``fraction`` of the labelled samples, drawn at random,
    are held out of training; returns the training samples, their labels and the
    held-out ``(X_val, y_val)``."""
    labelled = np.flatnonzero(labels != UNLABELLED)
    n_held = int(np.ceil(fraction * labelled.size))
    if n_held < 2 or labelled.size - n_held < 2:
        raise ValueError(
            f"early_stopping holds out validation_fraction={fraction:g} of the "
            f"{labelled.size} labelled samples: it needs at least 2 held out and 2 "
            "left to train on. Label more samples, change validation_fraction, or "
            "set early_stopping=False.")
    held = np.zeros(labels.size, dtype=bool)
    held[numpy_generator(seed).choice(labelled, n_held, replace=False)] = True
    return X[~held], labels[~held], (X[held], labels[held])

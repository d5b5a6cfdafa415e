"""How a SparseGEMINI fit trains: its settings record, built once per call, and
its batches (:func:`fit_batch_size`, :func:`stream_batch_size`), where
``batch_size='auto'`` is decided."""

from dataclasses import dataclass

# batch_size='auto': all samples while the GEMINI needs no n x n matrix (the linear
# kernel, 'mi') or while that matrix stays within 128 MiB (n <= 4096); above,
# batches of AUTO_BATCH_SIZE samples (an 8 MiB matrix).
AUTO_FULL_BATCH_MAX = 4096
AUTO_BATCH_SIZE = 1024


def fit_batch_size(batch_size, n_samples, geometry):
    """The batches of ``fit`` and ``path`` for the ``batch_size`` parameter
    (``geometry``: the GEMINI's, whose ``needs_matrix`` says whether it reads an
    n x n matrix)."""
    if batch_size is None:
        return n_samples
    if batch_size == "auto":
        if not geometry.needs_matrix or n_samples <= AUTO_FULL_BATCH_MAX:
            return n_samples
        return AUTO_BATCH_SIZE
    return int(batch_size)


def stream_batch_size(batch_size, n_samples):
    """``partial_fit``'s batches: ``batch_size``, with 'auto' (and None) at most
    1,024 samples, so that a pass over a chunk takes several steps."""
    if batch_size in ("auto", None):
        return min(n_samples, AUTO_BATCH_SIZE)
    return int(batch_size)


@dataclass(frozen=True)
class GeminiSettings:
    """How a SparseGEMINI fit trains: the estimator's validated parameters, built once
    per call (``SparseGEMINI._settings``) and passed down whole."""

    learning_rate: float  # Adam's (dense fit) and SGD's (penalised steps) step size
    max_iter: int  # epochs of each training
    tol: float  # stopping rule of the dense fit
    path_tol: float  # stopping rule of the penalised trainings
    n_iter_no_change: int  # patience of both rules, in epochs
    dropout: float  # of the MLP's hidden units, in training steps only
    reseed: bool  # re-seed the clusters an epoch of the dense fit leaves empty
    alpha: float  # the fixed penalty of fit and partial_fit
    lambda_start: float  # the path's first penalty
    lambda_multiplier: float  # its growth between steps
    n_features_stop: int  # the path stops at this many features
    selection_threshold: float  # the path keeps the fewest features within this of the best
    relax: bool  # train the penalised model on without its penalty (relaxed lasso)

    @property
    def optimizer(self):
        """Of fit's penalised phase and of partial_fit: SGD with a penalty, Adam without."""
        return "sgd" if self.alpha > 0 else "adam"

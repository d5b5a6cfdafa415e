"""How a SparseGEMINI fit trains: its settings record, built once per call."""

from dataclasses import dataclass


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

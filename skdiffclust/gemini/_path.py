"""The regularisation path of :meth:`SparseGEMINI.path`: its public record
(:class:`GeminiPath`, exported by :mod:`skdiffclust.gemini`) and what is read from it.
The training along the path is :func:`skdiffclust.gemini._fit.run_path`'s."""

from dataclasses import dataclass

import numpy as np

from skdiffclust.gemini._models import fold_standardisation


@dataclass(repr=False)
class GeminiPath:
    """The regularisation path of :meth:`SparseGEMINI.path`.

    Attributes
    ----------
    lambdas : ndarray of shape (n_steps,)
        Penalty of each step (0 for the dense fit).
    n_features : ndarray of shape (n_steps,)
        Number of selected features after each step.
    masks : ndarray of shape (n_steps, n_features_in)
        Selected features after each step.
    gemini : ndarray of shape (n_steps,)
        GEMINI of the model after each step (computed with all features).
    n_epochs : ndarray of shape (n_steps,)
        Epochs run at each step.
    converged : ndarray of shape (n_steps,)
        Whether each step's training converged before ``max_iter`` epochs.
    models : dict of int to dict
        For each number of features reached, after any epoch of any step, the
        first model with that many features: its ``params`` (NumPy, on the raw
        features), ``gemini``, ``lambda``, ``step`` (index into the arrays above)
        and ``epoch`` (epochs of that step it had trained).
    selected : int
        Number of features of the model the estimator ends fitted on.
    """

    lambdas: np.ndarray
    n_features: np.ndarray
    masks: np.ndarray
    gemini: np.ndarray
    n_epochs: np.ndarray
    converged: np.ndarray
    models: dict
    selected: int

    def __repr__(self):
        # a summary: the models' weights would print thousands of lines in a REPL
        return (f"GeminiPath({self.lambdas.size} steps, features "
                f"{int(self.n_features[0])} -> {int(self.n_features[-1])}, "
                f"{len(self.models)} models kept, the selected one on {self.selected} features)")


def path_from_records(records, models, selected, standardisation):
    """The :class:`GeminiPath` of :func:`run_path`'s records and models, their
    parameters folded onto the raw features."""
    raw_models = {
        count: {**entry, "params": fold_standardisation(
            entry["params"], standardisation.mean, standardisation.scale)}
        for count, entry in models.items()
    }
    return GeminiPath(**{name: np.asarray(records[name]) for name in (
        "lambdas", "n_features", "masks", "gemini", "n_epochs", "converged")},
        models=raw_models, selected=selected)


def exit_lambdas(path):
    """Penalty at which each feature left the model: inf if it never did, the dense
    fit's 0 for a feature that model already leaves out (a constant feature)."""
    exits = np.full(path.masks.shape[1], np.inf)
    exits[~path.masks[0]] = path.lambdas[0]
    for lam, before, after in zip(path.lambdas[1:], path.masks[:-1], path.masks[1:]):
        exits[before & ~after] = lam
    return exits

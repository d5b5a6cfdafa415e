"""Training of Sparse GEMINI: epochs at a fixed penalty, and the lambda path.

Ohl et al. (2024, sections 4.1 and 5.2): a dense fit with Adam, then proximal SGD
(momentum 0.9) along geometrically increasing penalties. Each training runs on
the engine's epoch loop (:func:`skdiffclust._training.run_epochs`): it stops
when minus the penalised GEMINI has not improved by ``tol`` (relative) for
``n_iter_no_change`` epochs, or after ``max_iter`` epochs.
"""

from dataclasses import dataclass, field

import numpy as np
from sklearn.metrics import pairwise_distances, pairwise_kernels

from skdiffclust._training import run_epochs
from skdiffclust._training._optim import Adam, SGDMomentum
from skdiffclust.gemini._models import (
    SKIP,
    backward,
    copy_params,
    forward,
    softmax,
    softmax_backward,
)
from skdiffclust.gemini._objectives import gemini_value_and_grad
from skdiffclust.gemini._proximal import (
    group_norms,
    group_soft_threshold,
    hierarchical_prox,
)


@dataclass
class Problem:
    """Everything a training step needs besides the parameters."""

    X: np.ndarray
    objective: str
    kernel: object
    kernel_params: dict
    metric: str
    group: np.ndarray
    n_groups: int
    M: float
    batch_size: int
    tol: float
    n_iter_no_change: int
    _full_affinity: np.ndarray = field(default=None, repr=False)

    def affinity(self, rows):
        """Kernel (MMD) or distance (Wasserstein) matrix of the samples ``rows``."""
        if rows is None:
            if self._full_affinity is None:
                self._full_affinity = self._affinity_of(self.X)
            return self._full_affinity
        return self._affinity_of(self.X[rows])

    def _affinity_of(self, X):
        if self.objective.startswith("mmd"):
            return pairwise_kernels(X, metric=self.kernel, filter_params=True,
                                    **self.kernel_params)
        if self.objective.startswith("wasserstein"):
            return pairwise_distances(X, metric=self.metric)
        return None

    def batches(self, rng):
        n = self.X.shape[0]
        if self.batch_size >= n:
            return [None]
        order = rng.permutation(n)
        return [order[start : start + self.batch_size] for start in range(0, n, self.batch_size)]

    def penalty(self, params):
        return group_norms(params[SKIP], self.group, self.n_groups).sum()


def gemini_and_gradients(params, problem, rows):
    """GEMINI of a batch and the gradients of every parameter (ascent direction)."""
    X = problem.X if rows is None else problem.X[rows]
    logits, activations = forward(params, X)
    proba = softmax(logits)
    value, grad_proba = gemini_value_and_grad(proba, problem.affinity(rows), problem.objective)
    grads = backward(params, X, activations, softmax_backward(proba, grad_proba))
    return value, grads


def full_gemini(params, problem, rng):
    """GEMINI over the data: the full batch, or the mean over one pass of batches."""
    values = [gemini_and_gradients(params, problem, rows)[0] for rows in problem.batches(rng)]
    return float(np.mean(values))


def proximal_step(params, problem, threshold):
    """Apply the penalty's proximal operator in place (hierarchical with an MLP)."""
    if "W0" in params and problem.M > 0:
        params[SKIP], params["W0"] = hierarchical_prox(
            params[SKIP], params["W0"], problem.group, problem.n_groups, threshold, problem.M
        )
    else:
        params[SKIP] = group_soft_threshold(params[SKIP], problem.group, problem.n_groups,
                                            threshold)


def train_epochs(params, problem, *, penalty, optimizer, learning_rate, max_iter, rng,
                 warn=True, progress=None):
    """Train in place at a fixed penalty (ascending the penalised GEMINI).

    Returns the engine's TrainingResult (its ``loss_curve`` is minus the penalised
    GEMINI of each epoch) and the GEMINI of the last epoch.
    """
    optimizer = (Adam if optimizer == "adam" else SGDMomentum)(
        params, learning_rate, maximize=True)
    last = {"gemini": np.nan}

    def epoch():
        values = []
        for rows in problem.batches(rng):
            value, grads = gemini_and_gradients(params, problem, rows)
            optimizer.step(params, grads)
            if penalty > 0:
                proximal_step(params, problem, learning_rate * penalty)
            values.append(value)
        last["gemini"] = float(np.mean(values))
        return -(last["gemini"] - penalty * problem.penalty(params))

    result = run_epochs(epoch, max_iter=max_iter, tol=problem.tol,
                        n_iter_no_change=problem.n_iter_no_change, name="SparseGEMINI",
                        warn=warn, progress=progress)
    return result, last["gemini"]


def selected_groups(params, problem):
    return group_norms(params[SKIP], problem.group, problem.n_groups) > 0


@dataclass
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
        For each number of features reached, the first model with that many
        features (NumPy parameters) and its GEMINI.
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


def feature_mask(group_mask, problem):
    return group_mask[problem.group]


def run_path(params, problem, *, lambda_start, lambda_multiplier, n_features_stop,
             max_iter, learning_rate, rng, progress):
    """Dense Adam fit, then proximal SGD along lambda.

    Returns the path records (one entry per step: lambdas, n_features, masks,
    gemini, n_epochs, converged, loss_curve) and the first model reaching each
    number of features, with the index of its step.
    """
    records = {name: [] for name in ("lambdas", "n_features", "masks", "gemini",
                                     "n_epochs", "converged", "loss_curve")}
    models = {}

    def record(lam, result):
        mask = feature_mask(selected_groups(params, problem), problem)
        gemini = full_gemini(params, problem, rng)
        count = int(mask.sum())
        for name, value in (("lambdas", lam), ("n_features", count), ("masks", mask),
                            ("gemini", gemini), ("n_epochs", result.n_iter),
                            ("converged", result.converged),
                            ("loss_curve", result.loss_curve)):
            records[name].append(value)
        if count not in models:
            models[count] = {"params": copy_params(params), "gemini": gemini, "lambda": lam,
                             "step": len(records["lambdas"]) - 1}
        return count

    result, _ = train_epochs(params, problem, penalty=0.0, optimizer="adam",
                             learning_rate=learning_rate, max_iter=max_iter, rng=rng,
                             warn=False)
    count = record(0.0, result)
    lam = lambda_start
    while count > n_features_stop and count > 0:
        result, _ = train_epochs(params, problem, penalty=lam, optimizer="sgd",
                                 learning_rate=learning_rate, max_iter=max_iter, rng=rng,
                                 warn=False)
        count = record(lam, result)
        if progress is not None:
            progress.set_postfix(n_features=count, lam=f"{lam:.3g}")
            progress.update(1)
        lam *= lambda_multiplier
    return records, models


def select_model(models, selection_threshold):
    """The fewest features whose GEMINI is within ``selection_threshold`` of the best."""
    best = max(entry["gemini"] for entry in models.values())
    good = [count for count, entry in models.items()
            if count > 0 and entry["gemini"] >= selection_threshold * best]
    return min(good) if good else max(models)

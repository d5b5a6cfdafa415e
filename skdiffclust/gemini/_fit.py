"""Training of Sparse GEMINI: epochs at a fixed penalty, restarts, and the lambda path.

Ohl et al. (2024, sections 4.1 and 5.2): a dense fit with Adam, then proximal SGD
(momentum 0.9) along geometrically increasing penalties. Each training runs on
the engine's epoch loop (:func:`skdiffclust._training.run_epochs`): it stops
when minus the penalised GEMINI has not improved by ``tol`` (relative) for
``n_iter_no_change`` epochs, or after ``max_iter`` epochs. The dense fit trains
``n_init`` restarts as one batched model (one product with the data and one
kernel per batch for all of them) and keeps the one with the highest GEMINI.
"""

from dataclasses import dataclass, field

import numpy as np
from sklearn.metrics import adjusted_rand_score

from skdiffclust._training import run_epochs
from skdiffclust._training._optim import Adam, SGDMomentum
from skdiffclust._training._stream import StreamState
from skdiffclust.gemini._data import CHUNK
from skdiffclust.gemini._models import (
    SKIP,
    backward,
    copy_params,
    forward,
    restart,
    softmax,
    softmax_backward,
)
from skdiffclust.gemini._objectives import batched_gemini
from skdiffclust.gemini._proximal import (
    group_norms,
    group_soft_threshold,
    hierarchical_prox,
)
from skdiffclust.gemini._reseed import EmptyClusterReseeder, cluster_counts

# Evaluation passes (the GEMINI recorded along the path, restart selection,
# ``score``) use their own fixed batch order, so that they neither depend on nor
# consume the training's random stream.
EVALUATION_SEED = 0


@dataclass
class Problem:
    """Everything a training step needs besides the parameters."""

    inputs: object  # _data.Inputs: the standardised features
    geometry: object  # _data.Geometry: the GEMINI's kernel or distance
    objective: str
    group: np.ndarray
    n_groups: int
    M: float
    batch_size: int
    n_iter_no_change: int
    standardisation: object = None  # _data.Standardisation of the training data
    dropout: float = 0.0  # of the MLP's hidden units, in training steps only
    _full_affinity: object = field(default=None, repr=False)

    @property
    def n_samples(self):
        return self.inputs.n_samples

    def affinity(self, rows):
        """Kernel operator (MMD), distance matrix (Wasserstein) or None of ``rows``."""
        if rows is None:
            if self._full_affinity is None:
                self._full_affinity = self.geometry.affinity(self.inputs)
            return self._full_affinity
        return self.geometry.affinity(self.inputs.rows(rows))

    def batches(self, rng):
        n = self.n_samples
        if self.batch_size >= n:
            return [None]
        order = rng.permutation(n)
        return [order[start : start + self.batch_size] for start in range(0, n, self.batch_size)]

    def penalty(self, params):
        """The group-lasso penalty of each restart, shape (R,)."""
        return np.array([group_norms(skip, self.group, self.n_groups).sum()
                         for skip in params[SKIP]])


def gemini_and_gradients(params, problem, rows, rng=None):
    """GEMINI of a batch for each restart (R,), the gradients (ascent direction) and
    the predictions (R, n_batch, K); ``rng`` draws the dropout masks, if any."""
    inputs = problem.inputs.rows(rows)
    dropout = problem.dropout if rng is not None else 0.0
    logits, activations = forward(params, inputs, dropout, rng)
    proba = softmax(logits)
    values, grad_proba = batched_gemini(proba, problem.affinity(rows), problem.objective)
    grads = backward(params, inputs, activations, softmax_backward(proba, grad_proba),
                     dropout)
    return values, grads, proba


def full_gemini(params, problem):
    """GEMINI of each restart over the data: the full batch, or the mean over batches.

    The batches of an evaluation are drawn from a fixed seed (see EVALUATION_SEED).
    """
    values = []
    for rows in problem.batches(np.random.default_rng(EVALUATION_SEED)):
        proba = softmax(forward(params, problem.inputs.rows(rows))[0])
        values.append(batched_gemini(proba, problem.affinity(rows), problem.objective)[0])
    return np.mean(values, axis=0)


def proximal_step(params, problem, threshold):
    """Apply the penalty's proximal operator in place (hierarchical with an MLP)."""
    for r in range(params[SKIP].shape[0]):
        if "W0" in params and problem.M > 0:
            params[SKIP][r], params["W0"][r] = hierarchical_prox(
                params[SKIP][r], params["W0"][r], problem.group, problem.n_groups,
                threshold, problem.M)
        else:
            params[SKIP][r] = group_soft_threshold(params[SKIP][r], problem.group,
                                                   problem.n_groups, threshold)


def train_epochs(params, problem, *, penalty, optimizer, learning_rate, max_iter, tol, rng,
                 warn=True, progress=None, reseeder=None):
    """Train every restart in place at a fixed penalty (ascending the penalised GEMINI).

    ``reseeder`` (an ``EmptyClusterReseeder``), if given, re-seeds the clusters that
    an epoch left empty. Returns the engine's TrainingResult: its ``loss_curve``
    (n_iter, R) holds minus the penalised GEMINI of each restart at each epoch;
    restarts stop together.
    """
    optimizer = make_optimizer(optimizer, params, learning_rate)

    def epoch():
        return one_pass(params, problem, optimizer, rng, penalty=penalty,
                        reseeder=reseeder)[0]

    return run_epochs(epoch, max_iter=max_iter, tol=tol,
                      n_iter_no_change=problem.n_iter_no_change, name="SparseGEMINI",
                      warn=warn, progress=progress)


@dataclass
class GeminiStream(StreamState):
    """The state :meth:`SparseGEMINI.partial_fit` carries from a chunk to the next:
    every restart's parameters, the optimiser, the batch generator, the re-seeder,
    the first chunk's standardisation and geometry, and the work done
    (:class:`~skdiffclust._training._stream.StreamState`; ``objectives`` holds
    minus the GEMINI of each pass)."""

    params: dict
    optimizer: object
    rng: np.random.Generator
    reseeder: object
    standardisation: object
    geometry: object

    @classmethod
    def start(cls, params, problem, rng, optimizer, learning_rate, reseed):
        R, K = params[SKIP].shape[0], params[SKIP].shape[2]
        return cls(params=params, optimizer=make_optimizer(optimizer, params, learning_rate),
                   rng=rng, reseeder=EmptyClusterReseeder(problem, R, K, rng) if reseed
                   else None, standardisation=problem.standardisation,
                   geometry=problem.geometry)

    def problem(self, X, batch_size, estimator):
        """A chunk's problem, in the first chunk's standardisation and geometry."""
        group, n_groups = estimator._groups(X.shape[1])
        return Problem(inputs=self.standardisation.inputs(X), geometry=self.geometry,
                       objective=estimator.gemini, group=group, n_groups=n_groups,
                       M=float(estimator.M), batch_size=batch_size,
                       n_iter_no_change=int(estimator.n_iter_no_change),
                       standardisation=self.standardisation,
                       dropout=float(estimator.dropout))

    def pass_over(self, problem, penalty):
        if self.reseeder is not None:
            self.reseeder.problem = problem  # re-seed from this chunk's samples
        objective, n_steps = one_pass(self.params, problem, self.optimizer, self.rng,
                                      penalty=penalty, reseeder=self.reseeder)
        self.count_pass(objective, n_steps, problem.n_samples)

    def keep_best_restart(self, problem):
        """After the first pass: keep only the restart ``fit`` would keep, judged on
        the chunk, so that the clusters keep their numbers from call to call."""
        if self.params[SKIP].shape[0] == 1:
            return
        best = representative_restart(self.params, problem, full_gemini(self.params, problem))
        self.params.update(restart(self.params, best))
        for state in vars(self.optimizer).values():  # Adam's moments, SGD's velocity
            if isinstance(state, dict):
                state.update({name: value[best:best + 1].copy()
                              for name, value in state.items()})
        if self.reseeder is not None:
            self.reseeder.budget = self.reseeder.budget[best:best + 1].copy()
        self.objectives = [values[best:best + 1] for values in self.objectives]


def make_optimizer(name, params, learning_rate):
    """Adam (``'adam'``) or SGD with momentum (``'sgd'``), ascending the GEMINI."""
    return (Adam if name == "adam" else SGDMomentum)(params, learning_rate, maximize=True)


def one_pass(params, problem, optimizer, rng, *, penalty=0.0, reseeder=None):
    """One pass over the problem's samples in batches: a step per batch (and the
    penalty's proximal step), then the re-seeding of the clusters it left empty.

    Returns minus the penalised GEMINI of each restart (mean over the batches)
    and the number of steps taken.
    """
    values, counts, n_steps = [], 0, 0
    for rows in problem.batches(rng):
        value, grads, proba = gemini_and_gradients(params, problem, rows, rng)
        optimizer.step(params, grads)
        n_steps += 1
        if penalty > 0:
            proximal_step(params, problem, optimizer.learning_rate * penalty)
        values.append(value)
        if reseeder is not None:
            counts = counts + cluster_counts(proba)
    if reseeder is not None and np.any(counts == 0):
        reseeder(params, optimizer, counts)
    penalised = np.mean(values, axis=0)
    if penalty > 0:
        penalised = penalised - penalty * problem.penalty(params)
    return -penalised, n_steps


def train_restarts(params, problem, *, learning_rate, max_iter, tol, rng, reseed=True,
                   progress=None):
    """Dense Adam fit of every restart; returns the kept one's parameters and curve.

    The kept restart is the one of highest GEMINI whose partition another restart
    reproduces (:func:`representative_restart`).
    With ``reseed``, clusters left empty are re-seeded during training (``_reseed``).
    """
    reseeder = None
    if reseed:
        R, K = params[SKIP].shape[0], params[SKIP].shape[2]
        reseeder = EmptyClusterReseeder(problem, R, K, rng)
    result = train_epochs(params, problem, penalty=0.0, optimizer="adam",
                          learning_rate=learning_rate, max_iter=max_iter, tol=tol, rng=rng,
                          warn=False, progress=progress, reseeder=reseeder)
    best = representative_restart(params, problem, full_gemini(params, problem))
    curve = result.loss_curve[:, best] if result.n_iter else np.empty(0)
    return restart(params, best), curve, result.converged


# restarts whose GEMINI is within this fraction of the highest tie: the first wins
RESTART_MARGIN = 1e-3


def best_restart(scores):
    """The first restart within ``RESTART_MARGIN`` (relative) of the highest GEMINI:
    restarts that found the same partition differ in the data's last bits, and
    their order, not those bits, must break the tie."""
    scores = np.asarray(scores, dtype=float)
    best = scores.max()
    return int(np.flatnonzero(scores >= best - RESTART_MARGIN * abs(best))[0])


# a restart's partition is reproduced when another restart's agrees with it at
# least this much (adjusted Rand index)
REPRODUCED_ARI = 0.9


def representative_restart(params, problem, scores):
    """The restart of highest GEMINI among those whose partition another restart
    reproduces (:data:`REPRODUCED_ARI`); of all of them when none is reproduced.
    Near-ties (``RESTART_MARGIN``) go to the first.

    The highest GEMINI alone is decided by whichever restart was luckiest: a
    k-means++ seeding that hangs on the data's last bits can find, on one copy
    of the data and not on another, an optimum that no other restart reaches.
    """
    if params[SKIP].shape[0] == 1:
        return 0
    # by blocks of rows: the activations of every restart on all the samples at
    # once take R * n * (K + hidden) floats, 270 MB for 100,000 samples
    inputs = problem.inputs
    labels = np.concatenate([
        softmax(forward(params, inputs.rows(slice(i, i + CHUNK)))[0]).argmax(axis=2)
        for i in range(0, inputs.n_samples, CHUNK)], axis=1)
    return best_reproduced_restart(labels, scores)


def best_reproduced_restart(labels, scores):
    """:func:`representative_restart` from each restart's labels (R, n) and GEMINI."""
    n_restarts = len(labels)
    reproduced = np.array([
        any(adjusted_rand_score(labels[r], labels[q]) >= REPRODUCED_ARI
            for q in range(n_restarts) if q != r)
        for r in range(n_restarts)])
    if not reproduced.any():
        return best_restart(scores)
    return best_restart(np.where(reproduced, scores, -np.inf))


def selected_groups(params, problem):
    """Groups kept by the (single) model: a nonzero skip-connection block."""
    return group_norms(params[SKIP][0], problem.group, problem.n_groups) > 0


def feature_mask(group_mask, problem):
    return group_mask[problem.group]


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
        features (NumPy parameters, on standardised features) and its GEMINI.
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


# a path step after which more than half of the remaining features have left is
# redone from the model before it at the penalty halfway (geometrically) between
# the previous step's and its own, at most this many times: where features leave
# in a cascade (MNIST's 2 x 1,200-unit MLP: from 563 pixels to fewer than 50 in one
# 5% step), the selection then sees the models in between
PATH_REFINEMENTS = 4


def run_path(params, problem, *, lambda_start, lambda_multiplier, n_features_stop,
             max_iter, learning_rate, tol, path_tol, rng, progress, reseed=True):
    """Dense Adam fit (restarts, stopped by ``tol``), then proximal SGD along lambda on
    the best restart (each step stopped by ``path_tol``).

    Returns the path records (one entry per step: lambdas, n_features, masks,
    gemini, n_epochs, converged, loss_curve) and the first model reaching each
    number of features, with the index of its step.
    """
    records = {name: [] for name in ("lambdas", "n_features", "masks", "gemini",
                                     "n_epochs", "converged", "loss_curve")}
    models = {}

    def record(lam, curve, converged):
        mask = feature_mask(selected_groups(params, problem), problem)
        gemini = float(full_gemini(params, problem)[0])
        count = int(mask.sum())
        for name, value in (("lambdas", lam), ("n_features", count), ("masks", mask),
                            ("gemini", gemini), ("n_epochs", len(curve)),
                            ("converged", converged), ("loss_curve", curve)):
            records[name].append(value)
        if count not in models:
            models[count] = {"params": copy_params(params), "gemini": gemini, "lambda": lam,
                             "step": len(records["lambdas"]) - 1}
        return count

    params, curve, converged = train_restarts(params, problem, learning_rate=learning_rate,
                                              max_iter=max_iter, tol=tol, rng=rng,
                                              reseed=reseed)
    tol = path_tol
    count = record(0.0, curve, converged)
    lam, previous = lambda_start, None
    while count > n_features_stop and count > 0:
        before = copy_params(params)
        for refinement in range(PATH_REFINEMENTS + 1):
            result = train_epochs(params, problem, penalty=lam, optimizer="sgd",
                                  learning_rate=learning_rate, max_iter=max_iter, tol=tol,
                                  rng=rng, warn=False)
            left = int(feature_mask(selected_groups(params, problem), problem).sum())
            if previous is None or refinement == PATH_REFINEMENTS or 2 * left >= count:
                break
            # more than half of the features left at once: redo the step from the
            # model before it, at the penalty halfway (on the log scale)
            for name, value in before.items():
                params[name][...] = value
            lam = float(np.sqrt(previous * lam))
        count = record(lam, result.loss_curve[:, 0], result.converged)
        if progress is not None:
            progress.set_postfix(n_features=count, lam=f"{lam:.3g}")
            progress.update(1)
        previous, lam = lam, lam * lambda_multiplier
    return records, models


def select_model(models, selection_threshold):
    """The fewest features whose GEMINI is within ``selection_threshold`` of the best."""
    best = max(entry["gemini"] for entry in models.values())
    good = [count for count, entry in models.items()
            if count > 0 and entry["gemini"] >= selection_threshold * best]
    return min(good) if good else max(models)

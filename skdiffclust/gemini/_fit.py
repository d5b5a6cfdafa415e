"""Training of Sparse GEMINI: epochs at a fixed penalty, restarts, and the lambda path.

Ohl et al. (2024, sections 4.1 and 5.2): a dense fit with Adam, then proximal SGD
(momentum 0.9) along geometrically increasing penalties. Each training runs on
the engine's epoch loop (:func:`skdiffclust._training.run_epochs`): it stops
when minus the penalised GEMINI has not improved by ``tol`` (relative) for
``n_iter_no_change`` epochs, or after ``max_iter`` epochs. The dense fit trains
``n_init`` restarts as one batched model (one product with the data and one
kernel per batch for all of them) and keeps the one with the highest GEMINI.

The estimator builds one ``_settings.GeminiSettings`` per call from its parameters
and passes it down whole: every function here reads its knobs from it, and runs
its trainings in the estimator's ``TrainingSession`` (one progress bar, one
warning).
"""

import itertools
from dataclasses import dataclass, field

import numpy as np
from sklearn.metrics import adjusted_rand_score

from skdiffclust._training import EveryEpoch, run_epochs
from skdiffclust._training._optim import Adam, SGDMomentum
from skdiffclust._training._stream import StreamState, check_chunk_units
from skdiffclust.gemini._data import CHUNK
from skdiffclust.gemini._models import (
    SKIP,
    backward,
    copy_params,
    forward,
    logits_of,
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
    """The data side of a training: the standardised features, the GEMINI's
    geometry and the penalty's groups."""

    inputs: object  # _data.Inputs: the standardised features
    geometry: object  # _data.Geometry: the GEMINI's kernel or distance
    objective: str
    group: np.ndarray
    n_groups: int
    M: float
    batch_size: int
    standardisation: object = None  # _data.Standardisation of the training data
    n_threads: int = 1  # threads of the products with the data (same bits on any)
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


def gemini_and_gradients(params, problem, rows, rng=None, dropout=0.0):
    """GEMINI of a batch for each restart (R,), the gradients (ascent direction) and
    the predictions (R, n_batch, K); ``rng`` draws the dropout masks, if any."""
    inputs = problem.inputs.rows(rows)
    dropout = dropout if rng is not None else 0.0
    logits, activations = forward(params, inputs, dropout, rng, problem.n_threads)
    proba = softmax(logits)
    values, grad_proba = batched_gemini(proba, problem.affinity(rows), problem.objective)
    grads = backward(params, inputs, activations, softmax_backward(proba, grad_proba),
                     dropout, problem.n_threads)
    return values, grads, proba


def full_gemini(params, problem):
    """GEMINI of each restart over the data: the full batch, or the mean over batches.

    The batches of an evaluation are drawn from a fixed seed (see EVALUATION_SEED).
    """
    values = []
    for rows in problem.batches(np.random.default_rng(EVALUATION_SEED)):
        proba = softmax(logits_of(params, problem.inputs.rows(rows), problem.n_threads))
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


def train_epochs(params, problem, settings, *, penalty, optimizer, tol, rng, session,
                 reseeder=None, hooks=(), support=None):
    """Train every restart in place at a fixed penalty (ascending the penalised GEMINI).

    ``optimizer`` is ``'adam'`` or ``'sgd'``, ``tol`` the stopping rule's (the
    settings' ``tol`` or ``path_tol``, by phase); the training is one of
    ``session`` (the fit's ``TrainingSession``: its progress bar and warning).
    ``reseeder`` (an ``EmptyClusterReseeder``), if given, re-seeds the clusters
    that an epoch left empty. ``hooks``, the engine's ``EpochHook`` objects, extend
    the epoch loop (the path's keeper). ``support``, a boolean mask of the
    features, if given, keeps the others out: their weights get no gradient.
    Returns the engine's TrainingResult: its ``loss_curve`` (n_iter, R) holds
    minus the penalised GEMINI of each restart at each epoch; restarts stop
    together.
    """
    optimizer = make_optimizer(optimizer, params, settings.learning_rate)

    def epoch():
        return one_pass(params, problem, optimizer, rng, penalty=penalty,
                        dropout=settings.dropout, reseeder=reseeder, support=support)[0]

    return run_epochs(epoch, max_iter=settings.max_iter, tol=tol,
                      n_iter_no_change=settings.n_iter_no_change, name="SparseGEMINI",
                      hooks=hooks, session=session)


@dataclass
class GeminiStream(StreamState):
    """The state :meth:`SparseGEMINI.partial_fit` carries from a chunk to the next:
    every restart's parameters, the optimiser, the batch generator, the re-seeder,
    the first chunk's standardisation and geometry, and the work done
    (:class:`~skdiffclust._training._stream.StreamState`; ``objectives`` holds
    minus the GEMINI of each pass)."""

    # the estimator's parameters frozen at the first call (not a field)
    FIXED_PARAMETERS = ("n_clusters", "n_init", "hidden_layer_sizes", "gemini", "kernel",
                        "kernel_params", "n_kernel_features", "metric")

    params: dict
    optimizer: object
    rng: np.random.Generator
    reseeder: object
    standardisation: object
    geometry: object

    @classmethod
    def start(cls, params, problem, rng, settings):
        R, K = params[SKIP].shape[0], params[SKIP].shape[2]
        optimizer = make_optimizer(settings.optimizer, params, settings.learning_rate)
        return cls(params=params, optimizer=optimizer, rng=rng,
                   reseeder=EmptyClusterReseeder(problem, R, K, rng) if settings.reseed
                   else None, standardisation=problem.standardisation,
                   geometry=problem.geometry)

    def check_chunk(self, X):
        """Refuse a later chunk (validated) that the first chunk's units cannot hold
        (:func:`~skdiffclust._training._stream.check_chunk_units`): the model's
        (per feature) and the kernel's (one scale, for the features it reads)."""
        units = self.standardisation
        scale = np.where(units.kernel_weights > 0,
                         np.minimum(units.scale, units.global_scale), units.scale)
        check_chunk_units(X, units.mean, scale, stream=self, name="SparseGEMINI")

    def pass_over(self, problem, settings):
        """One pass over a chunk (``problem``, in the first chunk's standardisation and
        geometry) with this call's settings (its penalty ``alpha`` and dropout)."""
        if self.reseeder is not None:
            self.reseeder.problem = problem  # re-seed from this chunk's samples
        objective, n_steps = one_pass(self.params, problem, self.optimizer, self.rng,
                                      penalty=settings.alpha, dropout=settings.dropout,
                                      reseeder=self.reseeder)
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


def one_pass(params, problem, optimizer, rng, *, penalty=0.0, dropout=0.0, reseeder=None,
             support=None):
    """One pass over the problem's samples in batches: a step per batch (and the
    penalty's proximal step), then the re-seeding of the clusters it left empty.
    Features outside ``support`` (a boolean mask), if given, get no gradient.

    Returns minus the penalised GEMINI of each restart (mean over the batches)
    and the number of steps taken.
    """
    values, counts, n_steps = [], 0, 0
    for rows in problem.batches(rng):
        value, grads, proba = gemini_and_gradients(params, problem, rows, rng, dropout)
        if support is not None:
            leave_out_features(grads, ~support)
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


def leave_out_features(grads, dropped):
    """Zero the gradients of the ``dropped`` features' weights (their rows of the skip
    connection and of the first layer), in place: weights at zero stay there."""
    grads[SKIP][:, dropped] = 0
    if "W0" in grads:
        grads["W0"][:, dropped] = 0


def relax(params, problem, settings, rng, session):
    """The relaxed lasso (Meinshausen, 2007; glmnet's ``relax``): train a penalised
    model on, in place, without its penalty and on the features it kept (Adam,
    stopped by ``settings.path_tol``, as the trainings it continues). The penalty
    shrinks the weights it keeps as well as dropping features; this undoes the
    shrinkage. Returns the TrainingResult."""
    support = feature_mask(selected_groups(params, problem), problem)
    return train_epochs(params, problem, settings, penalty=0.0, optimizer="adam",
                        tol=settings.path_tol, rng=rng, session=session, support=support)


def train_restarts(params, problem, settings, rng, session):
    """Dense Adam fit of every restart (stopped by ``settings.tol``); returns the kept
    one's parameters, its curve and the training's TrainingResult.

    The kept restart is the one of highest GEMINI whose partition another restart
    reproduces (:func:`representative_restart`). With ``settings.reseed``, clusters
    left empty are re-seeded during training (``_reseed``).
    """
    reseeder = None
    if settings.reseed:
        R, K = params[SKIP].shape[0], params[SKIP].shape[2]
        reseeder = EmptyClusterReseeder(problem, R, K, rng)
    result = train_epochs(params, problem, settings, penalty=0.0, optimizer="adam",
                          tol=settings.tol, rng=rng, session=session, reseeder=reseeder)
    best = representative_restart(params, problem, full_gemini(params, problem))
    curve = result.loss_curve[:, best] if result.n_iter else np.empty(0)
    return restart(params, best), curve, result


def train_at_penalty(params, problem, settings, rng, session):
    """:meth:`SparseGEMINI.fit`'s training: the dense fit of every restart
    (:func:`train_restarts`), then, if ``settings.alpha > 0``, proximal SGD at that
    penalty on the restart kept (stopped by ``settings.path_tol``) and, with
    ``settings.relax``, its :func:`relax` training; each one of ``session``.

    Returns the kept restart's parameters and its loss curve over the phases.
    """
    params, curve, _ = train_restarts(params, problem, settings, rng, session)
    curves = [curve]
    if settings.alpha > 0:
        result = train_epochs(params, problem, settings, penalty=settings.alpha,
                              optimizer="sgd", tol=settings.path_tol, rng=rng,
                              session=session)
        curves.append(result.loss_curve[:, 0])
        if settings.relax:
            curves.append(relax(params, problem, settings, rng, session).loss_curve[:, 0])
    return params, np.concatenate(curves)


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
        softmax(logits_of(params, inputs.rows(slice(i, i + CHUNK)),
                          problem.n_threads)).argmax(axis=2)
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


def run_path(params, problem, settings, rng, session):
    """Dense Adam fit (restarts, stopped by ``settings.tol``), then proximal SGD along
    lambda on the best restart (each step stopped by ``settings.path_tol``); each
    training one of ``session``, whose bar shows the step's penalty and features.

    Returns the path records (one entry per step: lambdas, n_features, masks,
    gemini, n_epochs, converged, loss_curve and the TrainingResult, result) and
    the first model reaching each
    number of features, with the index of its step and its epochs in that step.
    As in the paper (section 4.1), a model is kept each time the number of
    features changes *during* a step (checked after every epoch), not only at
    its end: where features leave in a cascade within one step, the selection
    sees the models in between.
    """
    records = {name: [] for name in ("lambdas", "n_features", "masks", "gemini",
                                     "n_epochs", "converged", "loss_curve", "result")}
    models = {}

    def current_mask():
        return feature_mask(selected_groups(params, problem), problem)

    def keeper(lam):
        """The hook of a step at ``lam``: keeps the model after each epoch if its
        number of features is new."""
        epochs = itertools.count(1)
        return EveryEpoch(lambda objective: keep(int(current_mask().sum()), lam,
                                                 next(epochs)))

    def keep(count, lam, epoch, gemini=None):
        if count not in models:
            if gemini is None:
                gemini = float(full_gemini(params, problem)[0])
            models[count] = {"params": copy_params(params), "gemini": gemini, "lambda": lam,
                             "step": len(records["lambdas"]), "epoch": epoch}

    def record(lam, curve, result):
        mask = current_mask()
        gemini = float(full_gemini(params, problem)[0])
        count = int(mask.sum())
        keep(count, lam, len(curve), gemini)
        for name, value in (("lambdas", lam), ("n_features", count), ("masks", mask),
                            ("gemini", gemini), ("n_epochs", len(curve)),
                            ("converged", result.converged), ("loss_curve", curve),
                            ("result", result)):
            records[name].append(value)
        return count

    params, curve, result = train_restarts(params, problem, settings, rng, session)
    count = record(0.0, curve, result)
    lam = settings.lambda_start
    while count > settings.n_features_stop and count > 0:
        session.note(step=len(records["lambdas"]), lam=f"{lam:.3g}", n_features=count)
        result = train_epochs(params, problem, settings, penalty=lam, optimizer="sgd",
                              tol=settings.path_tol, rng=rng, session=session,
                              hooks=[keeper(lam)])
        count = record(lam, result.loss_curve[:, 0], result)
        lam *= settings.lambda_multiplier
    return records, models


def select_model(models, selection_threshold):
    """The fewest features whose GEMINI is within ``selection_threshold`` of the best."""
    best = max(entry["gemini"] for entry in models.values())
    good = [count for count, entry in models.items()
            if count > 0 and entry["gemini"] >= selection_threshold * best]
    return min(good) if good else max(models)


def selected_model(records, models, problem, settings, rng, session):
    """The model the path selects (:func:`select_model`), trained on by :func:`relax`
    with ``settings.relax`` (a copy: ``models`` keeps it as the path found it).

    Returns its feature count, its parameters and its loss curve (the dense fit's
    epochs, every step's before its own, its own up to the epoch at which it was
    kept, then the relaxed training's). The steps after its own are discarded from
    ``session``: whether they converged does not matter to the fitted model.
    """
    selected = select_model(models, settings.selection_threshold)
    entry = models[selected]
    curves = records["loss_curve"][: entry["step"] + 1]
    curves[-1] = curves[-1][: entry["epoch"]]
    session.discard(records["result"][entry["step"] + 1:])
    params = entry["params"]
    if settings.relax:
        params = copy_params(params)
        curves.append(relax(params, problem, settings, rng, session).loss_curve[:, 0])
    return selected, params, np.concatenate(curves)


def fitted_gemini(model, X):
    """The GEMINI of a fitted ``SparseGEMINI``'s predictions on X, computed as in
    training (the geometry of the training data; the mean over batches of the
    training's size, in a fixed order, if it used batches)."""
    inputs = model._inputs(X)
    problem = Problem(inputs=inputs, geometry=model._geometry,  # the fit's GEMINI
                      objective=model._geometry.objective, group=None, n_groups=0, M=0.0,
                      batch_size=min(model._batch, inputs.n_samples),
                      n_threads=model._n_threads())
    with model._threads():
        return float(full_gemini(model._model, problem)[0])

"""SparseGEMINI's fits at its candidate numbers of clusters: one fit at the given
``n_clusters``, or, for ``n_clusters='auto'``, one at each candidate, each scored by
the silhouette of its partition in the GEMINI's geometry; the rule that keeps one is
:meth:`_settings.GeminiSettings.counted`."""

from dataclasses import dataclass, replace

import numpy as np

from skdiffclust._training import TrainingSession
from skdiffclust._utils._count import COUNT_ATTRIBUTES, count_attributes  # noqa: F401
from skdiffclust._utils._count import fitted_count as count_of_fit
from skdiffclust._utils._threads import one_blas_thread
from skdiffclust.gemini._data import Geometry
from skdiffclust.gemini._fit import feature_mask, selected_groups, train_at_penalty
from skdiffclust.gemini._models import (SKIP, fold_standardisation, initial_params,
                                        predict_proba)
from skdiffclust.gemini._settings import COUNT_SAMPLE

# the Nystroem features of the MMD a Wasserstein GEMINI counts its clusters with
# (count_problem): the estimator's default
MMD_KERNEL_FEATURES = 100


@dataclass(frozen=True)
class FitStart:
    """What every fit of one call starts from, whatever its number of clusters:
    the initialisation (``init``, ``n_init`` restarts, the MLP's ``hidden`` layers)
    and the seeds of the initial weights, of the batches and of the silhouette's
    samples. A fit at k from here is the fit of ``n_clusters=k``."""

    init: str
    n_init: int
    hidden: tuple
    init_seed: int
    batch_seed: int
    sample_seed: int = 0

    def params(self, problem, n_clusters):
        """The restarts' initial parameters of a fit at ``n_clusters``."""
        return initial_params(self.init, problem.inputs,
                              problem.standardisation.kernel_weights, self.hidden,
                              n_clusters, self.n_init,
                              np.random.default_rng(self.init_seed))

    def rng(self):
        """The generator of a fit's batches (and dropout)."""
        return np.random.default_rng(self.batch_seed)


def counted_fit(problem, settings, start, train):
    """The fit kept, and its :class:`ClusterCount`.

    ``train(params, problem)`` trains from initial parameters
    (:meth:`FitStart.params`) on a problem and returns the trained parameters and
    a loss curve. With a given ``n_clusters`` it runs once; with ``'auto'`` once
    per candidate (:meth:`GeminiSettings.candidates`) on :func:`count_problem`,
    scored by :func:`silhouette` on the distances of a sample in the GEMINI's
    geometry (``Geometry.distances``) and kept by :meth:`GeminiSettings.counted`;
    where the count's problem is not ``problem`` (a Wasserstein GEMINI), the fit
    at the number kept is trained on ``problem`` once more.

    Returns
    -------
    fit : tuple
        ``train``'s result for the number kept.
    count : ClusterCount
    """
    candidates = settings.candidates(problem.n_samples)
    if not settings.counts:
        fit = train(start.params(problem, int(candidates[0])), problem)
        return fit, settings.counted(None, None)
    rows = sample_rows(problem.n_samples, start.sample_seed)
    distances = problem.geometry.distances(problem.inputs.rows(rows))
    counting = count_problem(problem, start)
    fits, scores = [], []
    for k in candidates:
        fit = train(start.params(counting, int(k)), counting)
        labels = predict_proba(fit[0], counting.inputs, counting.n_threads)[0].argmax(axis=1)
        fits.append(fit)
        scores.append(silhouette(distances, labels[rows]))
    count = settings.counted(candidates, scores)
    if counting is not problem:
        return train(start.params(problem, count.n_clusters), problem), count
    return fits[int(np.flatnonzero(candidates == count.n_clusters)[0])], count


def count_problem(problem, start):
    """The problem ``n_clusters='auto'`` fits its candidates on: ``problem``, or for a
    Wasserstein GEMINI its MMD of the same kind (one-vs-one or one-vs-all) with
    the default Gaussian kernel on Nyström features. A Wasserstein GEMINI solves
    a transport problem per pair of clusters at each step, so its fits grow with
    the square of their number (a fit at 20 clusters on 90 samples took 10 s, the
    19 candidates about a minute); the MMD's cost a linear kernel's. The partitions
    are still scored by their silhouette in the Wasserstein GEMINI's distances."""
    if problem.geometry.is_mmd or problem.objective == "mi":
        return problem
    kind = problem.objective.rsplit("_", 1)[1]
    geometry = Geometry(problem.standardisation, f"mmd_{kind}", "rbf", None,
                        problem.geometry.metric, MMD_KERNEL_FEATURES)
    geometry.fit(problem.inputs, start.sample_seed)
    return replace(problem, geometry=geometry, objective=f"mmd_{kind}", _full_affinity=None)


def n_trainings(problem, settings):
    """The trainings of a fit: one per candidate, and one more where the count's
    problem is another (:func:`count_problem`)."""
    n_fits = settings.candidates(problem.n_samples).size
    proxied = settings.counts and not (problem.geometry.is_mmd or problem.objective == "mi")
    return n_fits + int(proxied)


def dense_count(problem, settings, start, verbose=False):
    """The :class:`ClusterCount` of :meth:`SparseGEMINI.path` and of the first
    :meth:`SparseGEMINI.partial_fit` call: ``n_clusters``, or for ``'auto'`` the
    number that ``fit`` without penalty would choose on the problem's data."""
    if not settings.counts:
        return settings.counted(None, None)
    dense = replace(settings, alpha=0.0)
    with one_blas_thread(), TrainingSession("SparseGEMINI (n_clusters='auto')",
                                            verbose=verbose) as session:
        return counted_fit(problem, dense, start, lambda params, on: train_at_penalty(
            params, on, dense, start.rng(), session))[1]


def sample_rows(n_samples, seed):
    """The rows whose silhouette is measured: at most :data:`COUNT_SAMPLE`,
    drawn once per fit, the same for every candidate."""
    if n_samples <= COUNT_SAMPLE:
        return np.arange(n_samples)
    return np.sort(np.random.default_rng(seed).choice(n_samples, COUNT_SAMPLE,
                                                      replace=False))


def silhouette(distances, labels):
    """The mean silhouette of ``labels`` (Rousseeuw, 1987) under ``distances``;
    -1, the lowest, where it is undefined (one cluster, or as many as samples)."""
    from sklearn.metrics import silhouette_score

    if not 2 <= np.unique(labels).size < labels.size:
        return -1.0
    return float(silhouette_score(distances, labels, metric="precomputed"))


def fitted_state(params, problem, loss_curve, count):
    """The fitted attributes (by name, private ones included) of a trained model
    (``params`` of one restart) and its ``count``, and the training labels."""
    proba = predict_proba(params, problem.inputs, problem.n_threads)[0]
    if not np.all(np.isfinite(proba)):
        raise FloatingPointError(
            "SparseGEMINI diverged (non-finite predictions); lower learning_rate.")
    used = np.unique(proba.argmax(axis=1))
    order = np.concatenate([used, np.setdiff1d(np.arange(proba.shape[1]), used)])
    standardisation = problem.standardisation
    attributes = dict(
        _model=params, _standardisation=standardisation, _geometry=problem.geometry,
        _cluster_order=order,
        params_=fold_standardisation(params, standardisation.mean, standardisation.scale),
        n_clusters_=int(used.size),
        feature_importances_=np.sqrt((params[SKIP][0] ** 2).sum(axis=1)),
        _support=feature_mask(selected_groups(params, problem), problem),
        _batch=problem.batch_size, loss_curve_=loss_curve,
        n_iter_=int(loss_curve.shape[0]), _n_outputs=int(count.n_clusters))
    attributes.update(count_attributes(count))  # n_clusters='auto' only
    return attributes, np.argmax(proba[:, order], axis=1)


def fitted_count(estimator):
    """The ``ClusterCount`` of a fitted estimator (``partial_fit``'s later calls
    keep the first call's)."""
    return count_of_fit(estimator, estimator._n_outputs)

"""SparseGEMINI: discriminative clustering with feature selection (Ohl et al., 2024)."""

from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin, _fit_context
from sklearn.feature_selection import SelectorMixin
from sklearn.metrics.pairwise import PAIRWISE_KERNEL_FUNCTIONS
from sklearn.neighbors import VALID_METRICS
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

from skdiffclust._training import warn_not_converged
from skdiffclust._training._progress import EpochProgress
from skdiffclust._utils._random import derive_seeds
from skdiffclust.gemini._models import SKIP, init_params, predict_proba
from skdiffclust.gemini._objectives import OBJECTIVES
from skdiffclust.gemini._training import (
    GeminiPath,
    Problem,
    feature_mask,
    run_path,
    select_model,
    selected_groups,
    train_epochs,
)


class SparseGEMINI(ClusterMixin, SelectorMixin, BaseEstimator):
    """Sparse GEMINI: clustering by generalised mutual information, selecting features.

    A discriminative model p(y|x) (a sparse logistic regression, or an MLP with a
    linear skip connection as in LassoNet) is trained to maximise a generalised
    mutual information (GEMINI: MMD or Wasserstein, one-vs-all or one-vs-one),
    while a group-lasso penalty on the skip connection removes features
    (Ohl et al., 2024). :meth:`path` increases the penalty geometrically and keeps
    the model with the fewest features whose GEMINI stays within
    ``selection_threshold`` of the best. Forward and backward passes are written
    out in NumPy (no torch).

    As a feature selector, :meth:`transform` keeps the selected columns and
    :meth:`get_support` tells which they are.

    Parameters
    ----------
    n_clusters : int, default=3
        Number of clusters (model outputs). A model may use fewer.

    gemini : {'mmd_ovo', 'mmd_ova', 'wasserstein_ovo', 'wasserstein_ova', 'mi'}, \
default='mmd_ovo'
        The objective. ``'mi'`` is the classic mutual information (a baseline).

    kernel : str or callable, default='linear'
        Kernel of the MMD objectives, any of
        :func:`sklearn.metrics.pairwise.pairwise_kernels` (``'linear'``, ``'rbf'``,
        ...).

    kernel_params : dict, default=None
        Keyword arguments of the kernel (e.g. ``{'gamma': 0.1}``).

    metric : str, default='euclidean'
        Distance of the Wasserstein objectives.

    hidden_layer_sizes : tuple of int, default=(20,)
        Hidden layers of the MLP; ``()`` gives the sparse logistic regression (the
        paper's M = 0 case).

    M : float, default=10
        Hierarchy coefficient: the first-layer weights of a feature are bounded by
        M times the norm of its skip weights, so a dropped feature leaves the MLP.

    groups : array-like of shape (n_features,), default=None
        Group of each feature for the group-lasso (features of a group leave
        together); each feature alone by default.

    alpha : float, default=0.0
        Penalty used by :meth:`fit` (0: dense GEMINI).

    lambda_start : float, default=1.0
        First penalty of :meth:`path`.

    lambda_multiplier : float, default=1.05
        Growth of the penalty between path steps.

    max_iter : int, default=100
        Maximum number of epochs of each training (the dense fit, the penalised
        fit, each step of the path).

    batch_size : int, default=None
        Samples per batch; ``None`` uses all samples (the GEMINI then sees the whole
        dataset, which costs O(n_samples^2) memory for the affinity).

    learning_rate : float, default=1e-2
        Step size of Adam (dense fit) and of SGD with momentum 0.9 (penalised steps).
        The paper's 1e-3 goes with mini-batches; with full batches (the default)
        one step per epoch needs the larger step.

    n_features_stop : int, default=2
        :meth:`path` stops once at most this many features remain.

    selection_threshold : float, default=0.9
        :meth:`path` keeps the model with the fewest features whose GEMINI is at
        least this fraction of the best GEMINI along the path.

    tol : float, default=0.01
        A training (the dense fit, or one step of the path) stops when the
        penalised GEMINI has not improved by more than ``tol`` times its scale
        (the larger of its best and its first value) for ``n_iter_no_change``
        epochs; ``max_iter`` epochs without that give a ``ConvergenceWarning``.

    n_iter_no_change : int, default=10
        Patience of the stopping rule, in epochs.

    random_state : int, RandomState instance or None, default=None
        Seeds the initial weights and the batches.

    verbose : bool, default=False
        Show a progress bar (tqdm): over the epochs in :meth:`fit`, over the
        penalty steps in :meth:`path`.

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        Cluster of each training sample (clusters numbered 0, 1, ... without gaps).

    params_ : dict of str to ndarray
        The model's weights (``'skip'``: n_features x n_clusters skip connection).

    feature_importances_ : ndarray of shape (n_features,)
        Norm of each feature's skip weights (0 for a dropped feature).

    feature_exit_lambdas_ : ndarray of shape (n_features,)
        After :meth:`path`: the penalty at which each feature left the model
        (``inf`` for features still selected when the path stopped).

    path_ : GeminiPath
        After :meth:`path`: the recorded steps (see :meth:`path`).

    n_iter_ : int
        Training epochs of the fitted model: those of :meth:`fit` (the dense fit,
        then the penalised one if ``alpha > 0``), or, after :meth:`path`, those of
        the dense fit and of every step up to the selected model's.

    loss_curve_ : ndarray of shape (n_iter_,)
        Minus the penalised GEMINI of each of these epochs (lower is better).

    n_features_in_ : int
        Number of features seen during ``fit``.

    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during ``fit``, when they are all strings.

    See Also
    --------
    sklearn.cluster.KMeans : Centroid-based clustering, without feature selection.

    Notes
    -----
    Each epoch costs O(n_samples^2 n_clusters) for the MMD objectives (the kernel
    times the importance weights), and one exact optimal transport problem per
    cluster (one-vs-all) or per pair of clusters (one-vs-one) for Wasserstein,
    solved by POT's network simplex; use mini-batches for large datasets. The
    GEMINI is always computed with all features, as in the paper.

    References
    ----------
    .. [1] L. Ohl, P.-A. Mattei, C. Bouveyron, M. Leclercq, A. Droit, F. Precioso.
       "Sparse and geometry-aware generalisation of the mutual information for
       joint discriminative clustering and feature selection", Statistics and
       Computing 34:155, 2024.
    .. [2] I. Lemhadri, F. Ruan, L. Abraham, R. Tibshirani. "LassoNet: a neural
       network with feature sparsity", JMLR 22, 2021.

    Examples
    --------
    >>> from skdiffclust import SparseGEMINI
    >>> from skdiffclust.datasets import make_celeux_one
    >>> X, y, informative = make_celeux_one(scenario=4, random_state=0)
    >>> model = SparseGEMINI(n_clusters=3, random_state=0)
    >>> path = model.path(X)
    >>> [int(j) for j in model.get_support().nonzero()[0]]
    [0, 1, 2, 3, 4]
    """

    _parameter_constraints: dict = {
        "n_clusters": [Interval(Integral, 1, None, closed="left")],
        "gemini": [StrOptions(set(OBJECTIVES))],
        "kernel": [StrOptions(set(PAIRWISE_KERNEL_FUNCTIONS)), callable],
        "kernel_params": [dict, None],
        "metric": [StrOptions(set(VALID_METRICS["brute"]) - {"precomputed"}), callable],
        "hidden_layer_sizes": ["array-like"],
        "M": [Interval(Real, 0, None, closed="left")],
        "groups": ["array-like", None],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "lambda_start": [Interval(Real, 0, None, closed="neither")],
        "lambda_multiplier": [Interval(Real, 1, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "batch_size": [Interval(Integral, 2, None, closed="left"), None],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "n_features_stop": [Interval(Integral, 0, None, closed="left")],
        "selection_threshold": [Interval(Real, 0, 1, closed="both")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(self, n_clusters=3, *, gemini="mmd_ovo", kernel="linear", kernel_params=None,
                 metric="euclidean", hidden_layer_sizes=(20,), M=10.0, groups=None, alpha=0.0,
                 lambda_start=1.0, lambda_multiplier=1.05, max_iter=100, batch_size=None,
                 learning_rate=1e-2, n_features_stop=2, selection_threshold=0.9, tol=0.01,
                 n_iter_no_change=10, random_state=None, verbose=False):
        self.n_clusters = n_clusters
        self.gemini = gemini
        self.kernel = kernel
        self.kernel_params = kernel_params
        self.metric = metric
        self.hidden_layer_sizes = hidden_layer_sizes
        self.M = M
        self.groups = groups
        self.alpha = alpha
        self.lambda_start = lambda_start
        self.lambda_multiplier = lambda_multiplier
        self.max_iter = max_iter
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.n_features_stop = n_features_stop
        self.selection_threshold = selection_threshold
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.random_state = random_state
        self.verbose = verbose

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Train at the fixed penalty ``alpha`` (a dense Adam fit first).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : Ignored

        Returns
        -------
        self : object
        """
        X, problem, params, rng = self._setup(X)
        phases = [(0.0, "adam")] + ([(self.alpha, "sgd")] if self.alpha > 0 else [])
        curves = []
        with threadpool_limits(limits=1, user_api="blas"), EpochProgress(
                self.verbose, "SparseGEMINI", self.max_iter * len(phases)) as bar:
            for penalty, optimizer in phases:
                result, _ = train_epochs(params, problem, penalty=penalty,
                                         optimizer=optimizer,
                                         learning_rate=self.learning_rate,
                                         max_iter=self.max_iter, rng=rng, progress=bar)
                curves.append(result.loss_curve)
        self._set_fitted(X, params, problem, np.concatenate(curves))
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def path(self, X, y=None):
        """Train along growing penalties and select features (the paper's procedure).

        A dense fit (Adam, no penalty), then proximal SGD steps at penalties
        ``lambda_start * lambda_multiplier ** t`` until at most ``n_features_stop``
        features remain. Every step is recorded; the first model reaching each
        number of features is kept, and the estimator ends fitted on the one with
        the fewest features whose GEMINI is at least ``selection_threshold`` times
        the best.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : Ignored

        Returns
        -------
        path : GeminiPath
            The steps: ``lambdas``, ``n_features``, ``masks``, ``gemini``,
            ``n_epochs``, the kept ``models`` and the ``selected`` feature count.
            Also stored as ``path_``.
        """
        X, problem, params, rng = self._setup(X)
        bar = tqdm(desc="SparseGEMINI path", unit="step") if self.verbose else None
        try:
            with threadpool_limits(limits=1, user_api="blas"):
                records, models = run_path(
                    params, problem, lambda_start=self.lambda_start,
                    lambda_multiplier=self.lambda_multiplier,
                    n_features_stop=self.n_features_stop, max_iter=self.max_iter,
                    learning_rate=self.learning_rate, rng=rng, progress=bar,
                )
        finally:
            if bar is not None:
                bar.close()
        selected = select_model(models, self.selection_threshold)
        path = GeminiPath(
            lambdas=np.asarray(records["lambdas"]),
            n_features=np.asarray(records["n_features"]),
            masks=np.asarray(records["masks"]),
            gemini=np.asarray(records["gemini"]),
            n_epochs=np.asarray(records["n_epochs"]),
            converged=np.asarray(records["converged"]),
            models=models,
            selected=selected,
        )
        # the selected model's training: the dense fit and every step up to its own
        last_step = models[selected]["step"]
        if not path.converged[: last_step + 1].all():
            warn_not_converged("SparseGEMINI.path", self.max_iter, self.tol,
                               self.n_iter_no_change)
        self._set_fitted(X, models[selected]["params"], problem,
                         np.concatenate(records["loss_curve"][: last_step + 1]))
        self.path_ = path
        self.feature_exit_lambdas_ = _exit_lambdas(path)
        return path

    def _setup(self, X):
        X = validate_data(self, X, dtype=[np.float64, np.float32])
        X = X.astype(np.float64, copy=False)
        n_samples, n_features = X.shape
        if n_samples < self.n_clusters:
            raise ValueError(
                f"n_samples={n_samples} should be >= n_clusters={self.n_clusters}."
            )
        group, n_groups = _check_groups(self.groups, n_features)
        hidden = tuple(int(h) for h in np.atleast_1d(self.hidden_layer_sizes))
        if any(h < 1 for h in hidden):
            raise ValueError(
                f"hidden_layer_sizes must be positive, got {self.hidden_layer_sizes}.")
        init_seed, batch_seed = derive_seeds(self.random_state, 2)
        params = init_params(n_features, hidden, self.n_clusters,
                             np.random.default_rng(init_seed))
        problem = Problem(
            X=X, objective=self.gemini, kernel=self.kernel,
            kernel_params=dict(self.kernel_params or {}), metric=self.metric,
            group=group, n_groups=n_groups, M=float(self.M),
            batch_size=n_samples if self.batch_size is None else int(self.batch_size),
            tol=float(self.tol), n_iter_no_change=int(self.n_iter_no_change),
        )
        return X, problem, params, np.random.default_rng(batch_seed)

    def _set_fitted(self, X, params, problem, loss_curve):
        proba = predict_proba(params, X)
        if not np.all(np.isfinite(proba)):
            raise FloatingPointError(
                "SparseGEMINI diverged (non-finite predictions); lower learning_rate."
            )
        used = np.unique(proba.argmax(axis=1))
        unused = np.setdiff1d(np.arange(self.n_clusters), used)
        order = np.concatenate([used, unused])
        self.params_ = {name: value.copy() for name, value in params.items()}
        self._cluster_order = order
        self.labels_ = np.argmax(proba[:, order], axis=1)
        self.feature_importances_ = np.sqrt((params[SKIP] ** 2).sum(axis=1))
        self._support = feature_mask(selected_groups(params, problem), problem)
        self.loss_curve_ = loss_curve
        self.n_iter_ = int(loss_curve.shape[0])

    def predict_proba(self, X):
        """Cluster probabilities p(y=k|x), columns ordered like the labels.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_clusters)
        """
        check_is_fitted(self)
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        proba = predict_proba(self.params_, X.astype(np.float64, copy=False))
        return proba[:, self._cluster_order]

    def predict(self, X):
        """Most probable cluster of each sample.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        labels : ndarray of shape (n_samples,)
        """
        return np.argmax(self.predict_proba(X), axis=1)

    def _get_support_mask(self):
        check_is_fitted(self)
        return self._support

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


def _check_groups(groups, n_features):
    """Group index per feature, numbered 0 .. n_groups - 1."""
    if groups is None:
        return np.arange(n_features), n_features
    groups = np.asarray(groups)
    if groups.shape != (n_features,):
        raise ValueError(
            f"groups must give one group per feature: shape ({n_features},), "
            f"got {groups.shape}."
        )
    _, group = np.unique(groups, return_inverse=True)
    return group.astype(np.int64), int(group.max()) + 1


def _exit_lambdas(path):
    """Penalty at which each feature left the model (inf if it never did)."""
    exits = np.full(path.masks.shape[1], np.inf)
    for lam, before, after in zip(path.lambdas[1:], path.masks[:-1], path.masks[1:]):
        exits[before & ~after] = lam
    return exits

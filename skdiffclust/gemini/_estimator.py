"""SparseGEMINI: discriminative clustering with feature selection (Ohl et al., 2024)."""

import warnings
from numbers import Integral, Real

import numpy as np
from joblib import effective_n_jobs
from sklearn.base import BaseEstimator, ClusterMixin, _fit_context
from sklearn.feature_selection import SelectorMixin
from sklearn.metrics.pairwise import PAIRWISE_KERNEL_FUNCTIONS
from sklearn.neighbors import VALID_METRICS
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

from skdiffclust._training import warn_not_converged
from skdiffclust._training._progress import EpochProgress
from skdiffclust._training._stream import forget_stream, keep_stream
from skdiffclust._utils._random import derive_seeds
from skdiffclust._utils._state import keeps_state_on_failure
from skdiffclust._utils._validation import ANY_INTEGER, NumberInterval, check_magnitude
from skdiffclust.gemini._data import Geometry, Standardisation
from skdiffclust.gemini._models import (
    SKIP,
    fold_standardisation,
    init_kmeans_plusplus,
    init_random,
    predict_proba,
)
from skdiffclust.gemini._objectives import OBJECTIVES
from skdiffclust.gemini._fit import (
    GeminiPath,
    GeminiStream,
    Problem,
    feature_mask,
    full_gemini,
    run_path,
    select_model,
    selected_groups,
    train_epochs,
    train_restarts,
)

# batch_size='auto': all samples while the GEMINI needs no n x n matrix (the linear
# kernel, 'mi') or while that matrix stays within 128 MiB (n <= 4096); above,
# batches of AUTO_BATCH_SIZE samples (an 8 MiB matrix).
AUTO_FULL_BATCH_MAX = 4096
AUTO_BATCH_SIZE = 1024


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

    Each fit trains ``n_init`` restarts together, each starting from a k-means
    partition (k-means++ seeds refined by Lloyd's iterations), and keeps the best
    one (highest GEMINI) whose partition another restart reproduces;
    it returns ``n_clusters`` non-empty clusters or warns. The model reads
    standardised features and the kernel sees the data centred and globally
    scaled, so that the partition does not change under a shift or a global
    rescale of the data. :meth:`score` is the GEMINI of the predictions.

    As a feature selector, :meth:`transform` keeps the selected columns and
    :meth:`get_support` tells which they are.

    Read more in the :ref:`User Guide <sparse_gemini>`, which lists the defaults
    that differ from the paper and why (initialisation, restarts, re-seeding,
    kernel, standardisation, step size and tolerance).

    Parameters
    ----------
    n_clusters : int, default=3
        Number of clusters (model outputs). A model may leave some empty: the
        estimator then warns and ``n_clusters_`` says how many it found.

    gemini : {'mmd_ovo', 'mmd_ova', 'wasserstein_ovo', 'wasserstein_ova', 'mi'}, \
default='mmd_ovo'
        The objective. ``'mi'`` is the classic mutual information (a baseline).

    kernel : str or callable, default='rbf'
        Kernel of the MMD objectives, any of
        :func:`sklearn.metrics.pairwise.pairwise_kernels` (``'rbf'``, ``'linear'``,
        ...). It is evaluated on the data centred and divided by one global scale
        (their root mean squared deviation), so that the clusters found do not
        depend on the data's offset or units; kernel parameters refer to these
        scaled data (the rbf's default ``gamma = 1 / n_features`` makes the kernel
        of two typical points about exp(-2)). The paper uses ``'linear'``, whose
        MMD compares cluster means only; see the User Guide for why the default
        differs.

    kernel_params : dict, default=None
        Keyword arguments of the kernel (e.g. ``{'gamma': 0.1}``).

    n_kernel_features : int or None, default=100
        A non-linear kernel is approximated by this many Nyström features
        (landmarks drawn from the training data; exact when n_samples is at most
        this), so that its MMD costs O(n_samples n_kernel_features n_clusters) per
        epoch and no n x n matrix is built. ``None``: the exact kernel matrix of
        each batch (see ``batch_size``). The linear kernel is always exact and
        computed from the features.

    metric : str, default='euclidean'
        Distance of the Wasserstein objectives (on the same scaled data).

    hidden_layer_sizes : tuple of int, default=(20,)
        Hidden layers of the MLP; ``()`` gives the sparse logistic regression (the
        paper's M = 0 case).

    dropout : float in [0, 1), default=0.0
        Dropout rate of the MLP's hidden units during training steps (each unit
        zeroed with this probability, the others scaled up to keep its mean;
        evaluations and predictions use every unit). The paper uses 5% with its
        2 x 1,200-unit MLP on MNIST. Ignored without hidden layers.

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

    init : {'k-means++', 'random'}, default='k-means++'
        Initialisation of each restart. ``'k-means++'``: the output layer starts
        as the Voronoi partition of k-means++ seeds refined by at most 30 of
        Lloyd's iterations (in the GEMINI's geometry: nearby seedings, which
        hang on the data's last bits, end at the same centres), with a
        temperature set by their spread; the MLP's last
        layer starts at zero. ``'random'``: every layer drawn like torch's
        ``nn.Linear``, as in the paper.

    n_init : int, default=5
        Number of restarts of the dense fit, trained together as one batched
        model; the kept one has the highest GEMINI among the restarts whose
        partition another restart reproduces (adjusted Rand index at least 0.9;
        among all of them when none is), GEMINIs within 0.1% going to the first
        (and, in :meth:`path`, it is continued along the penalties). The highest
        GEMINI alone hangs on whichever restart was luckiest: on ``uci/statlog``
        one restart of five found a better optimum on one copy of the data
        jittered in its last digits and not on two others. ``n_init=1,
        init='random'`` (with ``reseed_empty_clusters=False``) is the paper's
        procedure.

    reseed_empty_clusters : bool, default=True
        During the dense fit, a cluster that an epoch leaves without samples is
        re-seeded as a split of a spread-out cluster (a sample drawn as in
        k-means++ takes the part of its cluster closer to it than to the
        cluster's mean), at most ``n_clusters`` times per restart. The paper is
        silent on empty clusters; ``False`` leaves them empty.

    max_iter : int, default=200
        Maximum number of epochs of each training (the dense fit, the penalised
        fit, each step of the path).

    batch_size : int, 'auto' or None, default='auto'
        Samples per batch; ``None`` uses all samples. ``'auto'`` uses all samples
        when the GEMINI needs no n x n matrix (the linear kernel, Nyström
        features, ``'mi'``) or when n_samples <= 4096; otherwise (an exact
        non-linear kernel, Wasserstein) batches of 1024 samples, whose GEMINI
        estimates the full one (an n x n matrix at n = 20,000 takes 3.2 GB).

    learning_rate : float, default=0.05
        Step size of Adam (dense fit) and of SGD with momentum 0.9 (penalised
        steps; the proximal threshold is ``learning_rate`` times the penalty). With
        full batches (the default) an epoch is one step; the paper's 1e-3 goes with
        mini-batches and a random initialisation.

    n_features_stop : int, default=2
        :meth:`path` stops once at most this many features remain.

    selection_threshold : float, default=0.9
        :meth:`path` keeps the model with the fewest features whose GEMINI is at
        least this fraction of the best GEMINI along the path.

    tol : float, default=1e-4
        The dense fit (of :meth:`fit`, and the start of :meth:`path`) stops when
        minus its GEMINI has not improved by more than ``tol`` times its scale (the
        larger of its best and its first value) for ``n_iter_no_change``
        consecutive epochs; ``max_iter`` epochs without that give a
        ``ConvergenceWarning``. The paper's 0.01 stops a fit that starts from a
        k-means++ partition before it has refined it.

    path_tol : float, default=0.01
        The same rule, on minus the penalised GEMINI, for the trainings with a
        penalty: each step of :meth:`path` (the paper's 1%: a step continues the
        previous one) and the penalised phase of :meth:`fit` (``alpha > 0``).

    n_iter_no_change : int, default=10
        Patience of the stopping rule, in epochs.

    n_jobs : int, default=None
        BLAS threads of the products with the data and the kernel; ``None``
        means 1 (faster on small problems), ``-1`` all cores. Results do not
        depend on it.

    random_state : int, RandomState instance or None, default=None
        Seeds the initial weights, the k-means++ seedings and the batches.

    verbose : bool, default=False
        Show a progress bar (tqdm): over the epochs in :meth:`fit`, over the
        penalty steps in :meth:`path`.

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        Cluster of each training sample (clusters numbered 0, 1, ... without gaps).

    n_clusters_ : int
        Number of non-empty clusters (at most ``n_clusters``).

    params_ : dict of str to ndarray
        The model's weights, acting on the raw features (``'skip'``: n_features x
        n_clusters skip connection; ``'W0'``, ``'b0'``, ...: the MLP's layers;
        ``'bias'``: the logistic model's intercept). Training standardises the
        features; the standardisation is folded into these weights.

    feature_importances_ : ndarray of shape (n_features,)
        Norm of each feature's skip weights per standard deviation of the feature
        (0 for a dropped feature): comparable across features of any units.

    feature_exit_lambdas_ : ndarray of shape (n_features,)
        After :meth:`path`: the penalty at which each feature left the model
        (``inf`` for features still selected when the path stopped).

    path_ : GeminiPath
        After :meth:`path`: the recorded steps (see :meth:`path`).

    n_iter_ : int
        Training epochs of the fitted model: those of :meth:`fit` (the dense fit,
        then the penalised one if ``alpha > 0``), or, after :meth:`path`, those of
        the dense fit and of every step up to the selected model's.

    loss_curve_ : ndarray of shape (`n_iter_`,)
        Minus the penalised GEMINI of each of these epochs (lower is better), for
        the restart kept.

    n_features_in_ : int
        Number of features seen during ``fit``.

    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during ``fit``, when they are all strings.

    See Also
    --------
    sklearn.cluster.KMeans : Centroid-based clustering, without feature selection.

    Notes
    -----
    With the default linear kernel an epoch costs O(n_samples n_features
    n_clusters) per restart: the MMD is computed from the features, without a
    kernel matrix. Other kernels cost O(batch_size^2 n_clusters) per batch, and
    Wasserstein one exact optimal transport problem per cluster (one-vs-all) or
    per pair of clusters (one-vs-one), solved by POT's network simplex. The
    GEMINI is always computed with all features, as in the paper. Sparse (CSR)
    input is used as such in every product with the data; only the batches of a
    non-linear kernel or of a distance are densified.

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
        "n_clusters": [NumberInterval(Integral, 1, None, closed="left")],
        "gemini": [StrOptions(set(OBJECTIVES))],
        "kernel": [StrOptions(set(PAIRWISE_KERNEL_FUNCTIONS)), callable],
        "kernel_params": [dict, None],
        "n_kernel_features": [NumberInterval(Integral, 1, None, closed="left"), None],
        "metric": [StrOptions(set(VALID_METRICS["brute"]) - {"precomputed"}), callable],
        "hidden_layer_sizes": ["array-like"],
        "dropout": [NumberInterval(Real, 0, 1, closed="left")],
        "M": [NumberInterval(Real, 0, None, closed="left")],
        "groups": ["array-like", None],
        "alpha": [NumberInterval(Real, 0, None, closed="left")],
        "lambda_start": [NumberInterval(Real, 0, None, closed="neither")],
        "lambda_multiplier": [NumberInterval(Real, 1, None, closed="neither")],
        "init": [StrOptions({"k-means++", "random"})],
        "n_init": [NumberInterval(Integral, 1, None, closed="left")],
        "reseed_empty_clusters": ["boolean"],
        "max_iter": [NumberInterval(Integral, 1, None, closed="left")],
        "batch_size": [NumberInterval(Integral, 2, None, closed="left"), StrOptions({"auto"}),
                       None],
        "learning_rate": [NumberInterval(Real, 0, None, closed="neither")],
        "n_features_stop": [NumberInterval(Integral, 0, None, closed="left")],
        "selection_threshold": [NumberInterval(Real, 0, 1, closed="both")],
        "tol": [NumberInterval(Real, 0, None, closed="left")],
        "path_tol": [NumberInterval(Real, 0, None, closed="left")],
        "n_iter_no_change": [NumberInterval(Integral, 1, None, closed="left")],
        "n_jobs": [ANY_INTEGER, None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(self, n_clusters=3, *, gemini="mmd_ovo", kernel="rbf", kernel_params=None,
                 n_kernel_features=100, metric="euclidean", hidden_layer_sizes=(20,),
                 dropout=0.0, M=10.0, groups=None, alpha=0.0, lambda_start=1.0,
                 lambda_multiplier=1.05, init="k-means++", n_init=5,
                 reseed_empty_clusters=True, max_iter=200, batch_size="auto",
                 learning_rate=0.05, n_features_stop=2, selection_threshold=0.9, tol=1e-4,
                 path_tol=0.01, n_iter_no_change=10, n_jobs=None, random_state=None,
                 verbose=False):
        self.n_clusters = n_clusters
        self.gemini = gemini
        self.kernel = kernel
        self.kernel_params = kernel_params
        self.n_kernel_features = n_kernel_features
        self.metric = metric
        self.hidden_layer_sizes = hidden_layer_sizes
        self.dropout = dropout
        self.M = M
        self.groups = groups
        self.alpha = alpha
        self.lambda_start = lambda_start
        self.lambda_multiplier = lambda_multiplier
        self.init = init
        self.n_init = n_init
        self.reseed_empty_clusters = reseed_empty_clusters
        self.max_iter = max_iter
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.n_features_stop = n_features_stop
        self.selection_threshold = selection_threshold
        self.tol = tol
        self.path_tol = path_tol
        self.n_iter_no_change = n_iter_no_change
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    @_fit_context(prefer_skip_nested_validation=True)
    @keeps_state_on_failure
    def fit(self, X, y=None):
        """Train at the fixed penalty ``alpha`` (a dense Adam fit first).

        The ``n_init`` restarts of the dense fit train together; the
        best reproduced one is kept (see ``n_init``) and, if ``alpha > 0``, trained
        on with proximal SGD.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data; CSR matrices are used without densifying.
        y : Ignored

        Returns
        -------
        self : object
        """
        X, problem, params, rng = self._setup(X)
        forget_stream(self)
        n_phases = 2 if self.alpha > 0 else 1
        with self._threads(), EpochProgress(self.verbose, "SparseGEMINI",
                                            self.max_iter * n_phases) as bar:
            params, curve, converged = train_restarts(
                params, problem, learning_rate=self.learning_rate, max_iter=self.max_iter,
                tol=self.tol, rng=rng, reseed=self.reseed_empty_clusters, progress=bar)
            curves, unconverged_tols = [curve], [] if converged else [self.tol]
            if self.alpha > 0:
                result = train_epochs(params, problem, penalty=self.alpha, optimizer="sgd",
                                      learning_rate=self.learning_rate,
                                      max_iter=self.max_iter, tol=self.path_tol, rng=rng,
                                      warn=False, progress=bar)
                curves.append(result.loss_curve[:, 0])
                if not result.converged:
                    unconverged_tols.append(self.path_tol)
            labels = self._set_fitted(params, problem, np.concatenate(curves))
        if unconverged_tols:
            warn_not_converged("SparseGEMINI", self.max_iter, unconverged_tols[0],
                               self.n_iter_no_change)
        self._warn_empty_clusters()
        self.labels_ = labels
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    @keeps_state_on_failure
    def partial_fit(self, X, y=None):
        """One pass over a chunk of the data, continuing the previous calls' training.

        The first call (or the first after :meth:`fit`) initialises the model from
        its chunk as ``fit`` does: the standardisation of the features and the
        GEMINI's geometry (the kernel's scale, its Nyström landmarks) are those of
        the first chunk, kept for the next ones, so feed a representative first
        chunk (shuffled data); the ``n_init`` restarts start from k-means partitions
        of it. Each call then makes one pass over its chunk in batches of
        ``batch_size``, with Adam (and, if ``alpha > 0``, SGD and the proximal
        step of the penalty after each step) continuing its state
        (``batch_size='auto'``: batches of at most 1,024 samples); clusters a pass
        leaves empty are re-seeded from that chunk. After the first pass only the
        restart that :meth:`fit` would keep, judged on the first chunk, goes on,
        so that a cluster keeps its number from call to call. After every call
        the fitted attributes and :meth:`predict` are valid and ``labels_`` are
        the chunk's. ``n_iter_`` counts the calls, ``loss_curve_`` holds minus the
        GEMINI of each pass, ``n_steps_`` the steps and ``n_samples_seen_`` the
        samples. No feature-selection path: use :meth:`path` on data that fit in
        memory.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            A chunk of the training data; the first needs at least ``n_clusters``
            samples.
        y : Ignored

        Returns
        -------
        self : object
        """
        stream = getattr(self, "_stream", None)
        if stream is None:
            X, problem, params, rng = self._setup(X)
            problem.batch_size = self._stream_batch_size(X.shape[0])
            stream = GeminiStream.start(params, problem, rng, self._optimizer_name(),
                                        self.learning_rate, self.reseed_empty_clusters)
        else:
            X = validate_data(self, X, accept_sparse="csr", dtype=[np.float64, np.float32],
                              reset=False)
            check_magnitude(X)
            stream = stream.copy()  # a failed call leaves the estimator as it was
            problem = stream.problem(X, self._stream_batch_size(X.shape[0]), self)
        with self._threads():
            stream.pass_over(problem, penalty=self.alpha)
            stream.keep_best_restart(problem)
            labels = self._set_fitted(stream.params, problem, stream.curve())
        keep_stream(self, stream)
        self._warn_empty_clusters()
        self.labels_ = labels
        return self

    def _stream_batch_size(self, n_samples):
        """``partial_fit``'s batches: ``batch_size``, with 'auto' (and None) at most
        1,024 samples, so that a pass over a chunk takes several steps."""
        if self.batch_size in ("auto", None):
            return min(n_samples, AUTO_BATCH_SIZE)
        return int(self.batch_size)

    def _optimizer_name(self):
        return "sgd" if self.alpha > 0 else "adam"

    def _groups(self, n_features):
        return _check_groups(self.groups, n_features)

    @_fit_context(prefer_skip_nested_validation=True)
    @keeps_state_on_failure
    def path(self, X, y=None):
        """Train along growing penalties and select features (the paper's procedure).

        A dense fit (Adam, no penalty; ``n_init`` restarts, the best kept), then
        proximal SGD steps at penalties ``lambda_start * lambda_multiplier ** t``
        until at most ``n_features_stop`` features remain. Every step is recorded;
        the first model reaching each number of features is kept, and the
        estimator ends fitted on the one with the fewest features whose GEMINI is
        at least ``selection_threshold`` times the best.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : Ignored

        Returns
        -------
        path : GeminiPath
            The steps: ``lambdas``, ``n_features``, ``masks``, ``gemini``,
            ``n_epochs``, the kept ``models`` (their ``params`` act on the raw
            features, like ``params_``) and the ``selected`` feature count. Also
            stored as ``path_``.
        """
        X, problem, params, rng = self._setup(X)
        forget_stream(self)
        bar = tqdm(desc="SparseGEMINI path", unit="step") if self.verbose else None
        try:
            with self._threads():
                records, models = run_path(
                    params, problem, lambda_start=self.lambda_start,
                    lambda_multiplier=self.lambda_multiplier,
                    n_features_stop=self.n_features_stop, max_iter=self.max_iter,
                    learning_rate=self.learning_rate, tol=self.tol, path_tol=self.path_tol,
                    rng=rng, progress=bar, reseed=self.reseed_empty_clusters,
                )
                selected = select_model(models, self.selection_threshold)
                last_step = models[selected]["step"]
                labels = self._set_fitted(
                    models[selected]["params"], problem,
                    np.concatenate(records["loss_curve"][: last_step + 1]))
        finally:
            if bar is not None:
                bar.close()
        standardisation = problem.standardisation
        raw_models = {
            count: {**entry, "params": fold_standardisation(
                entry["params"], standardisation.mean, standardisation.scale)}
            for count, entry in models.items()
        }
        path = GeminiPath(
            lambdas=np.asarray(records["lambdas"]),
            n_features=np.asarray(records["n_features"]),
            masks=np.asarray(records["masks"]),
            gemini=np.asarray(records["gemini"]),
            n_epochs=np.asarray(records["n_epochs"]),
            converged=np.asarray(records["converged"]),
            models=raw_models,
            selected=selected,
        )
        # the selected model's training: the dense fit and every step up to its own
        unconverged = np.flatnonzero(~path.converged[: last_step + 1])
        if unconverged.size:
            warn_not_converged("SparseGEMINI.path", self.max_iter,
                               self.tol if unconverged[0] == 0 else self.path_tol,
                               self.n_iter_no_change)
        self._warn_empty_clusters()
        self.labels_ = labels
        self.path_ = path
        self.feature_exit_lambdas_ = _exit_lambdas(path)
        return path

    def _threads(self):
        return threadpool_limits(limits=effective_n_jobs(self.n_jobs), user_api="blas")

    def _setup(self, X):
        X = validate_data(self, X, accept_sparse="csr", dtype=[np.float64, np.float32])
        check_magnitude(X)
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
        standardisation = Standardisation(X)
        init_seed, batch_seed, landmark_seed = derive_seeds(self.random_state, 3)
        geometry = Geometry(standardisation, self.gemini, self.kernel, self.kernel_params,
                            self.metric, self.n_kernel_features)
        problem = Problem(
            inputs=standardisation.inputs(X), geometry=geometry, objective=self.gemini,
            group=group, n_groups=n_groups, M=float(self.M),
            batch_size=self._batch_size(n_samples, geometry),
            n_iter_no_change=int(self.n_iter_no_change),
            standardisation=standardisation, dropout=float(self.dropout),
        )
        init_rng = np.random.default_rng(init_seed)
        with self._threads():
            geometry.fit(problem.inputs, landmark_seed)
            if self.init == "k-means++":
                params = init_kmeans_plusplus(problem.inputs, standardisation.kernel_weights,
                                              hidden, self.n_clusters, self.n_init, init_rng)
            else:
                params = init_random(n_features, hidden, self.n_clusters, self.n_init,
                                     init_rng)
        # trained in the precision of the inputs (float32 input: float32 products)
        params = {name: value.astype(problem.inputs.dtype) for name, value in params.items()}
        return X, problem, params, np.random.default_rng(batch_seed)

    def _batch_size(self, n_samples, geometry):
        if self.batch_size is None:
            return n_samples
        if self.batch_size == "auto":
            if not geometry.needs_matrix or n_samples <= AUTO_FULL_BATCH_MAX:
                return n_samples
            return AUTO_BATCH_SIZE
        return int(self.batch_size)

    def _set_fitted(self, params, problem, loss_curve):
        """Store the fitted model (params of one restart); return the training labels."""
        proba = predict_proba(params, problem.inputs)[0]
        if not np.all(np.isfinite(proba)):
            raise FloatingPointError(
                "SparseGEMINI diverged (non-finite predictions); lower learning_rate."
            )
        used = np.unique(proba.argmax(axis=1))
        unused = np.setdiff1d(np.arange(self.n_clusters), used)
        standardisation = problem.standardisation
        self._model = params
        self._standardisation = standardisation
        self._geometry = problem.geometry
        self._cluster_order = np.concatenate([used, unused])
        self.params_ = fold_standardisation(params, standardisation.mean,
                                            standardisation.scale)
        self.n_clusters_ = int(used.size)
        self.feature_importances_ = np.sqrt((params[SKIP][0] ** 2).sum(axis=1))
        self._support = feature_mask(selected_groups(params, problem), problem)
        self._batch = problem.batch_size
        self.loss_curve_ = loss_curve
        self.n_iter_ = int(loss_curve.shape[0])
        for name in ("path_", "feature_exit_lambdas_", "n_steps_", "n_samples_seen_"):
            self.__dict__.pop(name, None)
        return np.argmax(proba[:, self._cluster_order], axis=1)

    def _warn_empty_clusters(self):
        if self.n_clusters_ < self.n_clusters:
            warnings.warn(
                f"SparseGEMINI found {self.n_clusters_} non-empty clusters of the "
                f"n_clusters={self.n_clusters} asked: the model assigns no training "
                "sample to the others. Labels are numbered 0 .. n_clusters_ - 1. More "
                "restarts (n_init) or fewer clusters may help.",
                UserWarning, stacklevel=5,  # fit, keeps_state_on_failure, _fit_context
            )

    def _inputs(self, X, reset=False):
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", dtype=[np.float64, np.float32],
                          reset=reset)
        check_magnitude(X)
        return self._standardisation.inputs(X)

    def predict_proba(self, X):
        """Cluster probabilities p(y=k|x), columns ordered like the labels.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_clusters)
        """
        inputs = self._inputs(X)
        with self._threads():
            proba = predict_proba(self._model, inputs)[0]
        return proba[:, self._cluster_order]

    def predict(self, X):
        """Most probable cluster of each sample.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        labels : ndarray of shape (n_samples,)
        """
        return np.argmax(self.predict_proba(X), axis=1)

    def score(self, X, y=None):
        """The GEMINI of the model's predictions on X (higher is better).

        Computed as in training: the same objective, with the kernel (or
        distance) on X scaled as the training data were, over all samples (or,
        when training used batches, the mean over batches of that size drawn in
        a fixed order). ``GridSearchCV`` uses it when given no scorer.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : Ignored

        Returns
        -------
        score : float
        """
        inputs = self._inputs(X)
        problem = Problem(inputs=inputs, geometry=self._geometry, objective=self.gemini,
                          group=None, n_groups=0, M=0.0,
                          batch_size=min(self._batch, inputs.n_samples),
                          n_iter_no_change=1)
        with self._threads():
            return float(full_gemini(self._model, problem)[0])

    def _get_support_mask(self):
        check_is_fitted(self)
        return self._support

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
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

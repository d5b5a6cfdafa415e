"""SparseGEMINI: discriminative clustering with feature selection (Ohl et al., 2024)."""

from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin, _fit_context
from sklearn.feature_selection import SelectorMixin
from sklearn.metrics.pairwise import PAIRWISE_KERNEL_FUNCTIONS
from sklearn.neighbors import VALID_METRICS
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted

from skdiffclust._training import TrainingSession
from skdiffclust._training._stream import (forget_stream, keep_stream, next_chunk,
                                           resumed_stream)
from skdiffclust._utils._random import derive_seeds
from skdiffclust._utils._scores import silhouette
from skdiffclust._utils._state import keeps_state_on_failure
from skdiffclust._utils._structure import warn_if_unstructured
from skdiffclust._utils._threads import host_threads, one_blas_thread
from skdiffclust._utils._validation import (
    N_JOBS,
    NumberInterval,
    RenamedParameters,
    refusing_former_names,
    check_array,
    check_hidden_layer_sizes,
    check_magnitude,
    check_n_clusters,
    validate_data,
    warn_empty_clusters,
)
from skdiffclust.gemini._data import Geometry, Standardisation, check_groups
from skdiffclust.gemini._count import (COUNT_ATTRIBUTES, FitStart, counted_fit, dense_count,
                                       fitted_count, fitted_state, n_trainings)
from skdiffclust.gemini._models import predict_proba
from skdiffclust.gemini._objectives import OBJECTIVES
from skdiffclust.gemini._fit import (GeminiStream, Problem, run_path, selected_model,
                                     train_at_penalty)
from skdiffclust.gemini._path import exit_lambdas, path_from_records
from skdiffclust.gemini._settings import (GeminiSettings, counts_clusters, fit_batch_size,
                                          stream_batch_size)


class SparseGEMINI(RenamedParameters, ClusterMixin, SelectorMixin, BaseEstimator):
    """Sparse GEMINI: clustering by generalised mutual information, selecting features.

    A discriminative model p(y|x) (a sparse logistic regression, or an MLP with a
    linear skip connection as in LassoNet) is trained, in NumPy, to maximise a
    generalised mutual information (GEMINI: MMD or Wasserstein, one-vs-all or
    one-vs-one), while a group-lasso penalty on the skip connection removes
    features (Ohl et al., 2024). :meth:`path` increases the penalty and keeps the
    model with the fewest features whose GEMINI stays within
    ``selection_threshold`` of the best; ``transform`` keeps their columns.

    Read more in the :ref:`User Guide <sparse_gemini>`, which lists the defaults
    that differ from the paper and why.

    Parameters
    ----------
    n_clusters : int or 'auto', default=3
        Number of clusters (model outputs). A model may leave some empty: the
        estimator then warns and ``n_clusters_`` says how many it found.
        ``'auto'``: a fit at each number from 2 to ``max_clusters``, keeping the
        one whose partition has the highest silhouette in the GEMINI's geometry
        (:ref:`n_clusters_auto`; a Wasserstein GEMINI's candidates fit its MMD).

    max_clusters : int, default=20
        The largest number ``n_clusters='auto'`` considers.

    gemini : {'mmd_ovo', 'mmd_ova', 'wasserstein_ovo', 'wasserstein_ova', 'mi'}, \
default='mmd_ovo'
        The objective. ``'mi'`` is the classic mutual information (a baseline).

    kernel : str or callable, default='rbf'
        Kernel of the MMD objectives (the paper's is ``'linear'``), any of
        :func:`sklearn.metrics.pairwise.pairwise_kernels`, on the data centred and
        divided by one global scale: kernel parameters refer to these scaled data.
        A callable is checked on the data (landmarks or batches): values that
        are not finite, or no spread in its feature space (a distance, a
        constant), are refused.

    kernel_params : dict, default=None
        Keyword arguments of the kernel (e.g. ``{'gamma': 0.1}``).

    n_kernel_features : int or None, default=100
        A non-linear kernel is approximated by this many Nyström features, so
        that no n x n matrix is built. ``None``: the exact kernel matrix of each
        batch. The linear kernel is always exact.

    metric : str or callable, default='euclidean'
        Distance of the Wasserstein objectives (on the same scaled data): any
        metric of :func:`sklearn.metrics.pairwise_distances` but ``'precomputed'``.

    hidden_layer_sizes : tuple of int, default=(20,)
        Hidden layers of the MLP; ``()`` gives the sparse logistic regression (the
        paper's M = 0 case).

    dropout : float in [0, 1), default=0.0
        Dropout rate of the MLP's hidden units during training steps (inverted
        dropout; predictions use every unit). Ignored without hidden layers.

    hierarchy_coefficient : float, default=10
        LassoNet's hierarchy coefficient M: the first-layer weights of a feature are
        bounded by M times the norm of its skip weights, so a dropped feature
        leaves the MLP.

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
        as the Voronoi partition of k-means++ seeds refined by Lloyd's iterations.
        ``'random'``: every layer drawn like torch's ``nn.Linear``, as in the paper.

    n_init : int, default=5
        Number of restarts of the dense fit, trained together as one batched
        model; the kept one has the highest GEMINI among the restarts whose
        partition another restart reproduces (see the User Guide). The paper
        uses one.

    reseed_empty_clusters : bool, default=True
        During the dense fit, re-seed a cluster an epoch leaves empty as a split
        of a spread-out cluster (at most ``n_clusters`` times per restart).

    max_iter : int, default=200
        Maximum number of epochs of each training (the dense fit, the penalised
        fit, each step of the path).

    batch_size : int, 'auto' or None, default='auto'
        Samples per batch; ``None`` uses all samples. ``'auto'`` uses all samples
        when the GEMINI needs no n x n matrix or n_samples <= 4096, batches of
        1024 otherwise.

    learning_rate : float, default=0.05
        Step size of Adam (dense fit) and of SGD with momentum 0.9 (penalised
        steps; the proximal threshold is ``learning_rate`` times the penalty).

    n_features_stop : int, default=2
        :meth:`path` stops once at most this many features remain.

    selection_threshold : float, default=0.9
        :meth:`path` keeps the model with the fewest features whose GEMINI is at
        least this fraction of the best GEMINI along the path.

    relax : bool, default=False
        Whether to train a penalised model on without its penalty, on the
        features it kept: the model :meth:`path` selects, and :meth:`fit`'s
        model when ``alpha > 0`` (the relaxed lasso, Meinshausen 2007; glmnet's
        ``relax``). The penalty shrinks the weights of the features it keeps as
        well as dropping the others; relaxing undoes the shrinkage (Adam at
        ``learning_rate``, stopped by ``path_tol``). ``False`` is the paper's
        procedure. ``path_.models`` keeps the models as the path found them.

    tol : float, default=1e-4
        The dense fit stops when minus its GEMINI has not improved by more than
        ``tol`` (relative) for ``n_iter_no_change`` consecutive epochs;
        ``max_iter`` epochs without that give a ``ConvergenceWarning``.

    path_tol : float, default=0.01
        The same rule for the trainings with a penalty: each step of :meth:`path`
        and the penalised phase of :meth:`fit` (``alpha > 0``), and for the
        ``relax`` training that continues them.

    n_iter_no_change : int, default=10
        Patience of the stopping rule, in epochs.

    n_jobs : int, default=None
        Threads sharing the products with the data. ``None`` means 1 unless in a
        ``joblib.parallel_config`` context, ``-1`` every core (:term:`n_jobs`).
        They compute blocks of 256 rows, each on one BLAS thread, summed in their
        order, so the results do not depend on ``n_jobs``.

    random_state : int, RandomState instance or None, default=None
        Seeds the initial weights, the k-means++ seedings and the batches.

    verbose : bool, default=False
        Show a progress bar (tqdm) over the training epochs (in :meth:`path`, with
        the step, its penalty and the features left).

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        Cluster of each training sample (clusters numbered 0, 1, ... without gaps).

    n_clusters_ : int
        Number of non-empty clusters (at most ``n_clusters``, or the number
        ``'auto'`` chose).

    n_clusters_candidates_ : ndarray of shape (n_candidates,)
        The numbers ``n_clusters='auto'`` chose among. Only then.

    n_clusters_scores_ : ndarray of shape (n_candidates,)
        The silhouette of each candidate's partition (on at most 2,000 samples,
        in the GEMINI's geometry); the highest is chosen.
        Only with ``'auto'``.

    params_ : dict of str to ndarray
        The model's weights, acting on the raw features (``'skip'``: n_features x
        n_clusters skip connection; ``'W0'``, ``'b0'``, ...: the MLP's layers;
        ``'bias'``: the logistic model's intercept).

    feature_importances_ : ndarray of shape (n_features,)
        Norm of each feature's skip weights per standard deviation of the feature
        (0 for a dropped feature): comparable across features of any units.

    feature_exit_lambdas_ : ndarray of shape (n_features,)
        After :meth:`path`: the penalty at which each feature left the model
        (``inf`` for features still selected when the path stopped, 0 for those
        the dense fit already leaves out, such as a constant feature).

    path_ : GeminiPath
        After :meth:`path`: the recorded steps (see :meth:`path`).

    n_iter_ : int
        Training epochs of the fitted model (after :meth:`path`: of the dense fit
        and of every step up to the selected model's, then of its ``relax``
        training).

    loss_curve_ : ndarray of shape (`n_iter_`,)
        Minus the penalised GEMINI of each of these epochs (lower is better), for
        the restart kept.

    device_ : str
        Where the fit trained: always ``'cpu'`` (NumPy's gradients; the attribute
        every trained estimator of the package has).

    n_features_in_ : int
        Number of features seen during ``fit``.

    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during ``fit``, when they are all strings.

    See Also
    --------
    sklearn.cluster.KMeans : Centroid-based clustering, without feature selection.

    Notes
    -----
    With Nyström features or the linear kernel an MMD epoch costs O(n_samples
    n_features n_clusters) per restart; an exact kernel O(batch_size^2
    n_clusters) per batch; Wasserstein one optimal transport problem per cluster
    or pair of clusters. Sparse (CSR) input is used as such in every product with
    the data. The model reads standardised features and the geometry sees the data
    globally scaled, so the partition does not change under a shift or a global
    rescale of the data (see the User Guide).

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

    _renamed_parameters = {"M": "hierarchy_coefficient"}

    _parameter_constraints: dict = {
        "n_clusters": [NumberInterval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "max_clusters": [NumberInterval(Integral, 2, None, closed="left")],
        "gemini": [StrOptions(set(OBJECTIVES))],
        "kernel": [StrOptions(set(PAIRWISE_KERNEL_FUNCTIONS)), callable],
        "kernel_params": [dict, None],
        "n_kernel_features": [NumberInterval(Integral, 1, None, closed="left"), None],
        "metric": [StrOptions(set(VALID_METRICS["brute"]) - {"precomputed"}), callable],
        "hidden_layer_sizes": ["array-like"],
        "dropout": [NumberInterval(Real, 0, 1, closed="left")],
        "hierarchy_coefficient": [NumberInterval(Real, 0, None, closed="left")],
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
        "relax": ["boolean"],
        "tol": [NumberInterval(Real, 0, None, closed="left")],
        "path_tol": [NumberInterval(Real, 0, None, closed="left")],
        "n_iter_no_change": [NumberInterval(Integral, 1, None, closed="left")],
        "n_jobs": N_JOBS,
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    @refusing_former_names
    def __init__(self, n_clusters=3, *, max_clusters=20, gemini="mmd_ovo", kernel="rbf",
                 kernel_params=None, n_kernel_features=100, metric="euclidean",
                 hidden_layer_sizes=(20,), dropout=0.0, hierarchy_coefficient=10.0, groups=None,
                 alpha=0.0, lambda_start=1.0, lambda_multiplier=1.05, init="k-means++", n_init=5,
                 reseed_empty_clusters=True, max_iter=200, batch_size="auto",
                 learning_rate=0.05, n_features_stop=2, selection_threshold=0.9, relax=False,
                 tol=1e-4, path_tol=0.01, n_iter_no_change=10, n_jobs=None,
                 random_state=None, verbose=False):
        self.n_clusters = n_clusters
        self.max_clusters = max_clusters
        self.gemini = gemini
        self.kernel = kernel
        self.kernel_params = kernel_params
        self.n_kernel_features = n_kernel_features
        self.metric = metric
        self.hidden_layer_sizes = hidden_layer_sizes
        self.dropout = dropout
        self.hierarchy_coefficient = hierarchy_coefficient
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
        self.relax = relax
        self.tol = tol
        self.path_tol = path_tol
        self.n_iter_no_change = n_iter_no_change
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    @_fit_context(prefer_skip_nested_validation=True)
    @keeps_state_on_failure
    def fit(self, X, y=None):
        """Train at the fixed penalty ``alpha``: a dense Adam fit of the ``n_init``
        restarts, then, if ``alpha > 0``, proximal SGD on the one kept.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data; CSR matrices are used without densifying.
        y : Ignored

        Returns
        -------
        self : object
        """
        X, problem, start = self._setup(X)
        settings = self._settings()
        forget_stream(self)
        n_phases = 1 if settings.alpha == 0 else 3 if settings.relax else 2
        n_fits = n_trainings(problem, settings)
        with self._threads(), TrainingSession(
                "SparseGEMINI", verbose=self.verbose,
                total=settings.max_iter * n_phases * n_fits) as session:
            (params, curve), count = counted_fit(
                problem, settings, start,
                lambda params, on: train_at_penalty(params, on, settings, start.rng(),
                                                    session))
            labels = self._set_fitted(params, problem, curve, count)
        self._warn_empty_clusters()
        warn_if_unstructured("SparseGEMINI", X, labels, count, self.random_state)
        self.labels_ = labels
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    @keeps_state_on_failure
    def partial_fit(self, X, y=None):
        """One pass over a chunk of the data, continuing the previous calls' training.

        The first call (or the first after :meth:`fit`) initialises the model from
        its chunk, whose standardisation and geometry are kept (and, with
        ``n_clusters='auto'``, the number :meth:`fit` would choose on it): feed a
        representative (shuffled) first chunk. Each call makes one pass in batches
        of ``batch_size`` (``'auto'``: at most 1,024 samples); after it the fitted
        attributes are valid, ``labels_`` are the chunk's, ``n_iter_`` counts the
        calls, ``n_steps_`` the steps and ``n_samples_seen_`` the samples. See
        :ref:`the User Guide <sparse_gemini_partial_fit>` for the details.

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
        stream, settings = resumed_stream(self), self._settings()
        if stream is None:
            X, problem, start = self._setup(X)
            count = dense_count(problem, settings, start, self.verbose)
            problem.batch_size = stream_batch_size(self.batch_size, X.shape[0])
            with self._threads():
                params = start.params(problem, count.n_clusters)
            stream = GeminiStream.start(params, problem, start.rng(), settings)
        else:
            count = fitted_count(self)  # the first call's
            X, stream = next_chunk(self, stream, X)  # the first chunk's standardisation
            problem = self._problem(X, stream.standardisation, stream.geometry,
                                    stream_batch_size(self.batch_size, X.shape[0]))
        with self._threads():
            stream.pass_over(problem, settings)
            stream.keep_best_restart(problem)
            labels = self._set_fitted(stream.params, problem, stream.curve(), count)
        keep_stream(self, stream, X)
        self._warn_empty_clusters()
        self.labels_ = labels
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    @keeps_state_on_failure
    def path(self, X, y=None):
        """Train along growing penalties and select features (the paper's procedure).

        A dense fit, then proximal SGD steps at penalties ``lambda_start *
        lambda_multiplier ** t`` until at most ``n_features_stop`` features remain;
        the estimator ends fitted on the model with the fewest features whose
        GEMINI is at least ``selection_threshold`` times the best (with ``relax``,
        trained on without the penalty on those features). With
        ``n_clusters='auto'`` the number is chosen first, by fits without penalty.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : Ignored

        Returns
        -------
        path : GeminiPath
            The steps (``lambdas``, ``n_features``, ``masks``, ``gemini``,
            ``n_epochs``), the kept ``models`` (``params`` on the raw features)
            and the ``selected`` feature count. Also stored as ``path_``.
        """
        X, problem, start = self._setup(X)
        settings = self._settings()
        forget_stream(self)
        count = dense_count(problem, settings, start, self.verbose)
        with self._threads(), TrainingSession("SparseGEMINI.path",
                                              verbose=self.verbose) as session:
            rng = start.rng()
            records, models = run_path(start.params(problem, count.n_clusters), problem,
                                       settings, rng, session)
            selected, params, curve = selected_model(records, models, problem, settings,
                                                     rng, session)
            labels = self._set_fitted(params, problem, curve, count)
        path = path_from_records(records, models, selected, problem.standardisation)
        self._warn_empty_clusters()
        self.labels_ = labels
        self.path_ = path
        self.feature_exit_lambdas_ = exit_lambdas(path)
        return path

    def _threads(self):
        return one_blas_thread()  # n_jobs shares fixed blocks of rows instead

    def _n_threads(self):
        return host_threads(self.n_jobs)

    def _settings(self):
        """The training settings of this call, from the validated parameters."""
        return GeminiSettings.of(self)

    def _setup(self, X):
        X = validate_data(self, X, accept_sparse="csr", dtype=[np.float64, np.float32])
        check_magnitude(X)
        n_samples, n_features = X.shape
        check_n_clusters(self.n_clusters, n_samples, auto=True)
        check_groups(self.groups, n_features)  # before any work
        hidden = check_hidden_layer_sizes(self.hidden_layer_sizes)
        standardisation = Standardisation(X)
        # a fourth seed (the silhouette's samples) only for 'auto': the others unchanged
        init_seed, batch_seed, landmark_seed, *sample_seed = derive_seeds(
            self.random_state, 3 + counts_clusters(self.n_clusters))
        geometry = Geometry(standardisation, self.gemini, self.kernel, self.kernel_params,
                            self.metric, self.n_kernel_features)
        problem = self._problem(X, standardisation, geometry,
                                fit_batch_size(self.batch_size, n_samples, geometry))
        with self._threads():
            geometry.fit(problem.inputs, landmark_seed)
        start = FitStart(self.init, self.n_init, hidden, init_seed, batch_seed, *sample_seed)
        return X, problem, start

    def _problem(self, X, standardisation, geometry, batch_size):
        """The training problem of X, in a standardisation and a geometry."""
        group, n_groups = check_groups(self.groups, X.shape[1])
        return Problem(inputs=standardisation.inputs(X), geometry=geometry,
                       objective=self.gemini, group=group, n_groups=n_groups,
                       M=float(self.hierarchy_coefficient), batch_size=batch_size,
                       standardisation=standardisation, n_threads=self._n_threads())

    def _set_fitted(self, params, problem, loss_curve, count):
        """Store the fitted model (params of one restart) and its ``count`` (a
        ``ClusterCount``); return the training labels."""
        attributes, labels = fitted_state(params, problem, loss_curve, count)
        for name in ("path_", "feature_exit_lambdas_", "n_steps_", "n_samples_seen_",
                     *COUNT_ATTRIBUTES):
            self.__dict__.pop(name, None)
        self.__dict__.update(attributes, device_="cpu")  # NumPy's gradients
        return labels

    def _warn_empty_clusters(self):
        if self.n_clusters_ < self._n_outputs:
            warn_empty_clusters(
                "SparseGEMINI", self.n_clusters_, self._n_outputs,
                cause="the model assigns no training sample to the others",
                remedy="More restarts (n_init) or fewer clusters",
                counted=hasattr(self, "n_clusters_candidates_"))

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
            proba = predict_proba(self._model, inputs, self._n_threads())[0]
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
        """Silhouette of the partition ``predict`` gives X (higher is better).

        The mean silhouette of X's clusters in the selected features, standardised
        as the model reads them (euclidean), in [-1, 1], -1 where it is undefined
        (one cluster, or no feature selected); above 4,000 samples, that of a fixed
        sample of them. Unlike the GEMINI fit maximises, which grows as clusters
        are added, it compares fits with different numbers of clusters:
        ``GridSearchCV`` over ``n_clusters`` without a scorer chooses by it.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : Ignored

        Returns
        -------
        score : float
        """
        labels = self.predict(X)
        if not self._support.any():
            return -1.0
        return silhouette(self._inputs(X).data[:, self._support], labels)

    def transform(self, X):
        """Reduce X to the selected features (those of ``get_support()``).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        X_selected : {ndarray, sparse matrix} of shape (n_samples, n_selected_features)
            The columns of X that the model kept, in X's dtype.
        """
        check_is_fitted(self)
        # scikit-learn's selector reads X as it is: a torch tensor NumPy cannot read,
        # a malformed sparse matrix (SciPy reads its indices unchecked) or strings
        # are refused here, before it
        check_array(X, accept_sparse=True, dtype="numeric", ensure_all_finite=False)
        return super().transform(X)

    def _get_support_mask(self):
        check_is_fitted(self)
        return self._support

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags

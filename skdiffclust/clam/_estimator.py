"""ClAM: clustering with associative memories (Saha, Krotov, Zaki, Ram, ICML 2023)."""

from numbers import Integral, Real

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    ClusterMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import threadpool_limits

from skdiffclust._training._stream import (forget_stream, keep_stream, next_chunk,
                                           resumed_stream)
from skdiffclust._utils._random import derive_seeds
from skdiffclust._utils._scores import silhouette
from skdiffclust._utils._state import keeps_state_on_failure
from skdiffclust._utils._threads import host_threads
from skdiffclust._utils._validation import (N_JOBS, NumberInterval, check_magnitude,
                                            check_n_clusters, check_spread,
                                            validate_data, warn_empty_clusters)
from skdiffclust.clam._data import ScaledData, check_directions
from skdiffclust.clam._device import FitShape, Machine, train_where_resolved
from skdiffclust.clam._settings import (
    MAX_BETA,
    PLATEAU_BOUNDS,
    PLATEAU_STEPS,
    Dynamics,
    FittedState,
    TrainingSettings,
    scaled_beta,
    scaled_learning_rate,
    steps_patience,
    training_device,
)
from skdiffclust.clam._selection import (
    initial_prototypes,
    keep_best,
    scales_of,
    settled_prototypes,
    warn_repeated_rows,
)


class ClAM(ClassNamePrefixFeaturesOutMixin, TransformerMixin, ClusterMixin, BaseEstimator):
    """Clustering with associative memories (ClAM), a differentiable k-means.

    Each point follows the attractor dynamics of an associative memory whose
    memories are ``n_clusters`` prototypes, and belongs to the prototype it ends
    next to. The prototypes are trained through the dynamics with the masked
    pattern-completion loss of Saha et al. (2023). Read more in the
    :ref:`User Guide <clam>`, which lists the defaults that differ from the paper.

    Parameters
    ----------
    n_clusters : int, default=8
        Number of prototypes k. If a cluster is empty at the end, the estimator
        warns and ``n_clusters_`` says how many it found.

    beta : float or 'auto', default='auto'
        Inverse temperature of the energy ``E(v) = -1/beta log sum_mu
        exp(-beta ||rho_mu - v||^2)`` (eq. 1 as written; the authors' code uses
        ``beta / 2``). Large beta makes the basins the Voronoi cells of the
        prototypes (k-means); small beta lets prototypes attract collectively.
        A float is in units of the data after centring and division by their
        root mean squared deviation (on standardised features, the paper's) and
        gives the paper's single fit, at most 1e15 (past k-means' hard
        assignments already; float32 training overflowed at 1e25).
        ``'auto'`` is 8 over the scale at which
        the initial prototypes compete for a point, so that the basins of
        attraction are the Voronoi cells of the prototypes but next to their
        boundaries (the paper's criterion, :ref:`clam_scale`). ``beta_`` holds the value
        used, in the units of the input.

    n_steps : int, default=10
        Number of AM recursion steps T.

    step_size : float in (0, 1], default=None
        ``dt / tau``, the fraction of the way each step moves a point toward the
        attraction-weighted prototypes. ``None`` means ``1 / n_steps`` (the
        paper's ``T = tau / dt``).

    metric : {'euclidean', 'cosine'}, default='euclidean'
        ``'cosine'`` is the spherical variant (eq. 12): the dynamics stay on the
        unit sphere.

    weighted : bool, default=False
        Learn one weight per prototype (eq. 10-11), scaling its attraction.

    mask_prob : float in [0, 1), default=0.15
        Fraction of features hidden in each training example
        (``round(mask_prob * n_features)`` of them). When that is 0 (e.g. 2-D
        data) training uses the unmasked loss ``||x - x^T||^2`` (eq. 8).

    mask_value : {'mean', 'min', 'max'}, default='mean'
        The value a hidden feature starts from, over the training data.

    init : {'k-means', 'k-means++', 'random'} or array-like of shape \
            (n_clusters, n_features), default='k-means'
        Initial prototypes. ``'k-means'``: ``max(n_init, 10)`` k-means++ seeds
        refined by Lloyd's iterations to convergence, on at most 5,000 points
        drawn at random, then on all of them; the ``n_init`` of lowest inertia,
        duplicates dropped (so fewer restarts may be trained): the start of
        ``KMeans(n_init=10)``. ``'k-means++'``: k-means++ seeds.
        ``'random'``: distinct training points drawn at random (the paper's). An
        array is used as given (then ``n_init`` is 1; repeated rows, which start
        prototypes that are pulled alike, are warned about). At the sharp ``beta`` of
        ``'auto'``, training refines the starts within their basins, as k-means'
        iterations would but more slowly: from k-means++ or random starts, a
        softer ``beta`` (the paper's 1.0) lets prototypes travel between
        clusters.

    n_init : int, default=1
        Number of restarts from different initial prototypes, trained together;
        the one of lowest masked loss (on masks fixed at fit time) is kept, the
        first of those within 3% of it. See ``prune``. With ``init='k-means'``
        the restarts start from the best k-means minima (one: the best), and
        the masked loss is no guide among them (:ref:`clam_starts`); the paper
        trains 10 random starts.

    max_iter : int, default=200
        Maximum number of training epochs. ``0`` keeps the initial prototypes.

    batch_size : int, default=16
        Points per mini-batch (the paper's best are 8 and 16).

    learning_rate : float or 'auto', default='auto'
        Initial learning rate of Adam, in the units of ``beta``. It follows the
        paper's plateau schedule (x0.8 after 5 epochs, or about 1,000 steps,
        without a 0.1% gain, down to 1e-4 times its start), then a cool-down of
        about 1,000 steps once converged (counted in ``n_iter_``). ``'auto'``
        is a fraction of the clusters' spread per feature, smaller at a sharper
        ``beta`` (:ref:`clam`).

    gradient_clip : float >= 1 or None, default=1.5
        Each example's gradient is scaled down to at most ``gradient_clip`` times
        the median norm of the gradients in its mini-batch before the step.
        Points next to the boundaries of the basins carry gradients hundreds of
        times the median at a sharp ``beta``; unclipped, they make training
        chaotic, its result hanging on the data's last bits
        (:ref:`clam_stability`). ``None``: the paper's plain gradient.

    tol : float, default=1e-2
        Training stops when the epoch loss has not decreased by a relative
        ``tol`` for ``n_iter_no_change`` epochs.

    n_iter_no_change : int or 'auto', default='auto'
        See ``tol``. ``'auto'``: the epochs of about 2,000 Adam steps, between 2
        and 10.

    reseed : bool, default=True
        Move a prototype that attracted no example in an epoch to an example
        drawn in proportion to its completion loss (at most ``n_clusters``
        times per restart). ``False``: they stay (the paper is silent).

    prune : bool, default=True
        Stop training restarts that duplicate a better one or whose loss is
        more than 10% above the best. ``False`` trains every restart to the end,
        as the paper does.

    device : {'auto', 'cpu', 'cuda'}, default='auto'
        Where the prototypes are trained: the CPU with numba kernels (no
        PyTorch needed), or CUDA with a fused numba.cuda kernel (the same
        training, re-seeding and pruning as on the CPU, equal to it within
        float32 rounding; no PyTorch needed). Where numba.cuda cannot launch
        kernels, ``'cuda'`` trains with torch (without pruning). ``'auto'``
        picks CUDA where it was measured faster (torch from ``batch_size=1024``;
        the fused kernel from 100,000 samples, 8 clusters and batches of 8 while
        it works in shared memory: see the User Guide), else the CPU (also, with
        a warning, where numba.cuda fails). Inference always runs on the CPU.

    n_jobs : int, default=None
        Threads of the CPU kernels. ``None`` means 1 unless in a
        ``joblib.parallel_config`` context, ``-1`` every core (:term:`n_jobs`).
        The result does not depend on it.

    random_state : int, RandomState instance or None, default=None
        Seeds every random draw: same seed and data, same labels, in any process
        and with any ``n_jobs``.

    verbose : bool, default=False
        Show a progress bar (tqdm) over the training epochs.

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (n_clusters, n_features)
        The learned prototypes, in the units and dtype of the input, in the
        order of the labels (unit vectors for ``metric='cosine'``).

    cluster_weights_ : ndarray of shape (n_clusters,)
        Normalised prototype weights ``softmax(log w)``; uniform unless
        ``weighted``.

    labels_ : ndarray of shape (n_samples,)
        Cluster of each training point, numbered ``0 .. n_clusters_ - 1`` by first
        appearance.

    n_clusters_ : int
        Number of clusters with at least one training point (``n_clusters``
        unless the estimator warned).

    beta_ : float
        The inverse temperature used, in the units of the input (one over its
        squared units; for ``metric='cosine'``, the paper's).

    n_iter_ : int
        Training epochs run.

    loss_ : float
        Masked completion loss of the kept restart, in the squared units of the
        input (masks drawn from a seed fixed at fit time).

    loss_curve_ : ndarray of shape (`n_iter_`,)
        Its mean loss over each training epoch (same units).

    device_ : str
        Where the fit trained: ``'cpu'`` or ``'cuda'`` (what ``device='auto'``
        chose; ``partial_fit`` trains on the CPU).

    n_features_in_ : int
        Number of features seen during ``fit``.

    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during ``fit``. Defined only when `X`
        has feature names that are all strings.

    See Also
    --------
    sklearn.cluster.KMeans : Lloyd's algorithm for the same prototype objective;
        ClAM with a large ``beta`` and ``mask_prob=0`` is a relaxation of it.

    Notes
    -----
    One recursion step is ``x <- (1 - alpha) x + alpha p @ R`` with ``alpha =
    step_size`` and ``p = softmax_mu(-beta ||rho_mu - x||^2)``. Inference runs
    in float64, each point on its own: a point's label depends neither on its
    batch nor on the number of threads. The :ref:`User Guide <clam>` gives the
    details, and the defaults that differ from the paper.

    References
    ----------
    .. [1] B. Saha, D. Krotov, M. J. Zaki, P. Ram. "End-to-end Differentiable
       Clustering with Associative Memories", ICML 2023.

    Examples
    --------
    >>> import numpy as np
    >>> from skdiffclust.clam import ClAM
    >>> X = np.array([[0.0, 0.0], [0.2, 0.1], [0.1, 0.3],
    ...               [4.0, 4.0], [4.2, 3.9], [3.9, 4.1]])
    >>> clam = ClAM(n_clusters=2, random_state=0).fit(X)
    >>> clam.labels_
    array([0, 0, 0, 1, 1, 1])
    >>> clam.predict([[0.5, 0.5], [3.5, 3.5]])
    array([0, 1])
    """

    _parameter_constraints: dict = {
        "n_clusters": [NumberInterval(Integral, 1, None, closed="left")],
        "beta": [NumberInterval(Real, 0, MAX_BETA, closed="right"), StrOptions({"auto"})],
        "n_steps": [NumberInterval(Integral, 1, None, closed="left")],
        "step_size": [NumberInterval(Real, 0, 1, closed="right"), None],
        "metric": [StrOptions({"euclidean", "cosine"})],
        "weighted": ["boolean"],
        "mask_prob": [NumberInterval(Real, 0, 1, closed="left")],
        "mask_value": [StrOptions({"mean", "min", "max"})],
        "init": [StrOptions({"random", "k-means++", "k-means"}), "array-like"],
        "n_init": [NumberInterval(Integral, 1, None, closed="left")],
        "max_iter": [NumberInterval(Integral, 0, None, closed="left")],
        "batch_size": [NumberInterval(Integral, 1, None, closed="left")],
        "learning_rate": [NumberInterval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "gradient_clip": [NumberInterval(Real, 1, None, closed="left"), None],
        "tol": [NumberInterval(Real, 0, None, closed="left")],
        "n_iter_no_change": [NumberInterval(Integral, 1, None, closed="left"),
                             StrOptions({"auto"})],
        "reseed": ["boolean"],
        "prune": ["boolean"],
        "device": [StrOptions({"auto", "cpu", "cuda"})],
        "n_jobs": N_JOBS,
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(self, n_clusters=8, *, beta="auto", n_steps=10, step_size=None,
                 metric="euclidean", weighted=False, mask_prob=0.15, mask_value="mean",
                 init="k-means", n_init=1, max_iter=200, batch_size=16,
                 learning_rate="auto", gradient_clip=1.5, tol=1e-2, n_iter_no_change="auto",
                 reseed=True, prune=True, device="auto", n_jobs=None, random_state=None,
                 verbose=False):
        self.n_clusters = n_clusters
        self.beta = beta
        self.n_steps = n_steps
        self.step_size = step_size
        self.metric = metric
        self.weighted = weighted
        self.mask_prob = mask_prob
        self.mask_value = mask_value
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.gradient_clip = gradient_clip
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.reseed = reseed
        self.prune = prune
        self.device = device
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    @_fit_context(prefer_skip_nested_validation=True)
    @keeps_state_on_failure
    def fit(self, X, y=None):
        """Learn the prototypes and cluster the training points.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training points.

        y : Ignored
            Not used, present for API consistency.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        X = self._validate_first(X)
        forget_stream(self)
        self._adopt(self._fitted_state(X, derive_seeds(self.random_state, 3)))
        self._warn_empty_clusters(relabelled=True)
        return self

    def _validate_first(self, X):
        X = validate_data(self, X, accept_sparse="csr", dtype=[np.float64, np.float32])
        check_n_clusters(self.n_clusters, X.shape[0])
        check_magnitude(X)
        check_spread(X)
        check_directions(X, self.metric)
        return X

    @_fit_context(prefer_skip_nested_validation=True)
    @keeps_state_on_failure
    def partial_fit(self, X, y=None):
        """One pass over a chunk of the data, continuing the previous calls' training.

        The first call (or the first after :meth:`fit`) initialises ClAM from its
        chunk as ``fit`` does and freezes its coordinates (centring, scale, fill
        of hidden features, ``beta``): feed a representative first chunk. Each
        call makes one pass in mini-batches, continuing the prototypes, Adam's
        state, the schedule and the re-seeding; after the first, only the restart
        ``fit`` would keep goes on, so clusters keep their numbers. ``n_iter_``
        counts the calls. Trains on the CPU, whatever ``device``. See
        :ref:`streaming` in the user guide.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            A chunk of the training points; the first needs at least
            ``n_clusters`` of them.

        y : Ignored
            Not used, present for API consistency.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        stream = resumed_stream(self)
        if stream is None:
            X = self._validate_first(X)
            stream = self._start_stream(X)
        else:
            X, stream = next_chunk(self, stream, X)
            check_directions(X, self.metric)
        n_threads = host_threads(self.n_jobs)
        data = stream.data(X)
        rows = data.inference_rows()
        stream.pass_over(data, weighted=self.weighted, mask_prob=self.mask_prob,
                         batch_size=self.batch_size, reseed=self.reseed,
                         n_threads=n_threads, clip=self.gradient_clip)
        stream.keep_best_restart(rows, self.mask_prob, self.weighted, n_threads)
        kept = stream.kept(rows, self.mask_prob, self.weighted, n_threads)
        self._adopt(FittedState.of(kept, data, stream.dynamics, stream.fill,
                                   stream.score_seed, X.dtype, weighted=self.weighted,
                                   mask_prob=self.mask_prob, relabel=False))
        keep_stream(self, stream, X)
        self._warn_empty_clusters(relabelled=False)
        return self

    def _start_stream(self, X):
        """The state of ``partial_fit`` before its first pass, from the first chunk."""
        from skdiffclust.clam._stream import ClamStream

        init_seed, train_seed, score_seed = derive_seeds(self.random_state, 3)
        n_threads = host_threads(self.n_jobs)  # partial_fit trains on the CPU
        data, initial = self._data_and_initial_prototypes(X, init_seed, n_threads)
        dynamics, learning_rate = self._dynamics_and_rate(data, initial, n_threads)
        return ClamStream.start(
            data, initial, dynamics, data.column_reduction(self.mask_value), learning_rate,
            steps_patience(data.n_samples, self.batch_size, PLATEAU_STEPS, PLATEAU_BOUNDS),
            seed=train_seed, score_seed=score_seed)

    def _data_and_initial_prototypes(self, X, init_seed, n_threads):
        """ClAM's view of X and the initial prototypes of every restart."""
        data = ScaledData(X, self.metric == "cosine")
        with threadpool_limits(n_threads, user_api="blas"):  # k-means++'s products
            initial = initial_prototypes(
                data, init_seed, n_clusters=self.n_clusters, init=self.init,
                n_init=self.n_init, cosine=self.metric == "cosine", n_threads=n_threads)
        if not isinstance(self.init, str):  # from fit or partial_fit, to its caller
            warn_repeated_rows(self.init)
        return data, initial

    def _fitted_state(self, X, seeds):
        """The state of a fit on X; the estimator is left as it is."""
        from skdiffclust.clam._fit import train_restarts

        device = training_device(self.device, self.batch_size, Machine(FitShape(
            X.shape[0], self.n_clusters, X.shape[1], self.mask_prob, self.n_steps)))
        n_threads = host_threads(self.n_jobs)
        init_seed, train_seed, score_seed = seeds
        data, initial = self._data_and_initial_prototypes(X, init_seed, n_threads)
        dynamics, learning_rate = self._dynamics_and_rate(data, initial, n_threads)
        settings = TrainingSettings.resolved(
            data.n_samples, n_iter_no_change=self.n_iter_no_change, weighted=self.weighted,
            mask_prob=self.mask_prob, batch_size=self.batch_size, max_iter=self.max_iter,
            learning_rate=learning_rate, gradient_clip=self.gradient_clip, tol=self.tol,
            device=device, seed=train_seed, verbose=self.verbose, n_threads=n_threads,
            reseed=self.reseed, prune=self.prune, loss_scale=float(data.scale) ** 2)
        fill = data.column_reduction(self.mask_value)
        trained, device = train_where_resolved(lambda settings: train_restarts(
            data.training_rows(), fill.astype(np.float32), initial.astype(np.float32),
            dynamics, settings), settings, self.device)
        if self.max_iter == 0:  # untrained: the initial prototypes, not their float32 copy
            trained.prototypes = initial
        rows = data.inference_rows()
        kept = keep_best(rows, fill, trained, dynamics, score_seed, n_threads,
                         weighted=self.weighted, mask_prob=self.mask_prob,
                         cosine=self.metric == "cosine")
        return FittedState.of(kept, data, dynamics, fill, score_seed, X.dtype,
                              weighted=self.weighted, mask_prob=self.mask_prob,
                              device=device)

    def _adopt(self, state):
        """Take the fitted attributes (and private state) of ``state`` by name."""
        for name, value in state.items():
            setattr(self, name, value)

    def _in_input_units(self, prototypes):  # for ClAMLayer.from_estimator
        cosine = self._fit_dynamics.metric == "cosine"
        return prototypes if cosine else prototypes * self._scale + self._shift

    def _warn_empty_clusters(self, *, relabelled):
        # called by fit and partial_fit: its caller's caller's caller is the user's
        # (through keeps_state_on_failure and _fit_context)
        if self.n_clusters_ < self.n_clusters:
            warn_empty_clusters(
                "ClAM", self.n_clusters_, self.n_clusters,
                cause="the dynamics take no training point to the other prototypes",
                remedy="A larger beta, more restarts (n_init) or fewer clusters",
                relabelled=relabelled)

    def _dynamics_and_rate(self, data, initial, n_threads):
        """The dynamics and Adam's initial rate, in the units of the scaled data."""
        if not (isinstance(self.init, str) and self.init == "k-means"):  # those are settled
            initial = settled_prototypes(data, initial, n_threads)
        spread, competition = scales_of(data, initial)
        cosine = self.metric == "cosine"
        beta = scaled_beta(self.beta, competition, cosine)
        return self._dynamics(beta), scaled_learning_rate(
            self.learning_rate, spread, competition, data.n_features, beta, cosine)

    def _dynamics(self, beta):
        alpha = 1.0 / self.n_steps if self.step_size is None else float(self.step_size)
        return Dynamics(beta=float(beta), n_steps=int(self.n_steps), alpha=alpha,
                        metric=self.metric)

    def _log_weights(self):
        return np.log(self.cluster_weights_) if self._weighted else None

    def _scaled(self, X):
        """X validated, and its rows as ClAM sees them (centred and scaled)."""
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", dtype=[np.float64, np.float32],
                          reset=False)
        check_magnitude(X)
        check_directions(X, self._fit_dynamics.metric, training=False)
        data = ScaledData(X, self._fit_dynamics.metric == "cosine", self._shift, self._scale)
        return X, data.inference_rows()

    def _converge(self, X, proba=False):
        from skdiffclust.clam._inference import converge

        X, rows = self._scaled(X)
        labels, distances, *probabilities = converge(
            rows, self._prototypes, self._log_weights(), self._fit_dynamics,
            host_threads(self.n_jobs), proba=proba)
        if self._fit_dynamics.metric != "cosine":
            distances = distances * self._scale
        return labels, distances.astype(X.dtype, copy=False), *probabilities

    def predict(self, X):
        """Cluster of each point: the prototype nearest to where its dynamics end.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            New points.

        Returns
        -------
        labels : ndarray of shape (n_samples,)
            Index of the cluster (row of ``cluster_centers_``) of each point.
        """
        return self._converge(X)[0]

    def predict_proba(self, X):
        """Soft assignments by the attractor dynamics.

        The attraction of each prototype where the point's dynamics end (eq. 13
        at :math:`x^T`), ``softmax(-beta_ ||cluster_centers_ - x^T||^2)``; the
        most probable cluster is :meth:`predict`'s (see :ref:`clam`).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            New points.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_clusters)
            Rows summing to 1, in float64; columns in the order of
            ``cluster_centers_``.
        """
        return self._converge(X, proba=True)[2]

    def transform(self, X):
        """Distances from the converged points to every prototype.

        Euclidean distances in the units of the input (``1 - cos`` for
        ``metric='cosine'``) from where each point's dynamics end.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            New points.

        Returns
        -------
        distances : ndarray of shape (n_samples, n_clusters)
            In the dtype of ``X``; columns in the order of ``cluster_centers_``.
        """
        return self._converge(X)[1]

    def score(self, X, y=None):
        """Silhouette of the partition ``predict`` gives X (higher is better).

        The mean silhouette of X's clusters (euclidean; cosine for
        ``metric='cosine'``), in [-1, 1], -1 where it is undefined (one cluster);
        above 4,000 points, that of a fixed sample of them. Unlike the masked
        completion loss fit minimises (``loss_``), which falls as clusters are
        added, it compares fits with different numbers of clusters:
        ``GridSearchCV`` over ``n_clusters`` without a scorer chooses by it.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Points to score.

        y : Ignored
            Not used, present for API consistency.

        Returns
        -------
        score : float
        """
        labels = self.predict(X)
        X, rows = self._scaled(X)  # centred and scaled: the same silhouettes, in range
        space = rows if isinstance(rows, np.ndarray) else X  # sparse rows: X, as given
        return silhouette(space, labels, metric=self._fit_dynamics.metric)

    @property
    def _n_features_out(self):
        return self.cluster_centers_.shape[0]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags

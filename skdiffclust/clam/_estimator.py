"""ClAM: clustering with associative memories (Saha, Krotov, Zaki, Ram, ICML 2023)."""

import warnings
from numbers import Integral, Real

import numpy as np
from joblib import effective_n_jobs
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    ClusterMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.cluster import kmeans_plusplus
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data
from threadpoolctl import threadpool_limits

from skdiffclust._training._stream import forget_stream, keep_stream
from skdiffclust._utils._random import derive_seeds, numpy_generator
from skdiffclust._utils._state import keeps_state_on_failure
from skdiffclust._utils._validation import (ANY_INTEGER, NumberInterval, check_magnitude,
                                            check_spread)
from skdiffclust.clam._data import ScaledData
from skdiffclust.clam._device import resolve_training_device
from skdiffclust.clam._settings import (
    COOLDOWN_BOUNDS,
    COOLDOWN_STEPS,
    PLATEAU_BOUNDS,
    PLATEAU_STEPS,
    STOPPING_BOUNDS,
    STOPPING_STEPS,
    Dynamics,
    FittedState,
    TrainingSettings,
    steps_patience,
)
from skdiffclust.clam._selection import (
    best_restart,
    normalised_weights,
    relabel_by_first_appearance,
    row_sample,
    scales_of,
    silhouette,
    softest_near_best,
    unit_rows,
)

# beta='auto' is a multiple of one over the scale at which the initial prototypes
# compete (_selection.scales_of: the spread, mean squared distance of the points to
# their nearest initial prototype, or the gap to the second nearest when smaller),
# the multiple being chosen among
# AUTO_BETA_GRID by the silhouette of the partition it gives, on at most
# SELECTION_POINTS points (the paper selects beta by silhouette, dataset by
# dataset); learning_rate='auto' is AUTO_LEARNING_RATE times the spread per
# feature, sqrt(spread / d): both follow the scale of the clusters
AUTO_BETA_GRID = (0.5, 1.0, 2.0, 4.0)
SELECTION_POINTS = 5000
# on more points, the selection fits this many of them, drawn at random (then the
# chosen beta is fitted on all of them)
SELECTION_SAMPLE = 2500
# the silhouettes are computed on at most this many of those points (the softest
# beta within _selection.SILHOUETTE_TOLERANCE of the best silhouette is chosen)
SILHOUETTE_POINTS = 1000
AUTO_LEARNING_RATE = 0.05
# k-means++ seeds on at most this many points, drawn at random
SEEDING_POINTS = 20_000


class ClAM(ClassNamePrefixFeaturesOutMixin, TransformerMixin, ClusterMixin, BaseEstimator):
    """Clustering with associative memories (ClAM), a differentiable k-means.

    Each point is moved for ``n_steps`` steps by the attractor dynamics of a dense
    associative memory whose memories are ``n_clusters`` learned prototypes, and
    belongs to the prototype it ends next to: a hard assignment at all times,
    computed by differentiable operations. The prototypes are trained end to end
    by backpropagation through the dynamics, with the masked pattern-completion
    loss of Saha et al. (2023): hide a few features of a point, let the dynamics
    complete them, and penalise the error on the hidden features.

    Read more in the :ref:`User Guide <clam>`, which lists the defaults that
    differ from the paper and why.

    Parameters
    ----------
    n_clusters : int, default=8
        Number of prototypes k. Prototypes that attract no point during training
        are re-seeded (``reseed``); if some cluster is still empty at the end, the
        estimator warns and ``n_clusters_`` says how many it found.

    beta : float or 'auto', default='auto'
        Inverse temperature of the energy ``E(v) = -1/beta log sum_mu
        exp(-beta ||rho_mu - v||^2)`` (eq. 1, exactly as written in the paper; the
        authors' code uses ``beta / 2``, so their beta is twice this one). Large
        beta makes the basins of attraction the Voronoi cells of the prototypes
        (k-means); small beta lets prototypes attract collectively.

        ClAM works on the data centred and divided by their root mean squared
        deviation (one scale for all features), so that it is invariant to a
        shift and equivariant to a global rescale; a float beta is in units of
        one over that deviation squared: on standardised features, the paper's
        beta (it found 0.1 to 3 best on the UCI sets of 7 to 18 features, and
        about 0.1 on the 64 features of digits). ``'auto'`` selects beta as the paper's
        authors do, by the silhouette of the partition: ClAM is fitted at 0.5, 1,
        2 and 4 times one over the scale at which the initial prototypes compete
        for the points (two over it for ``metric='cosine'``): the mean squared
        distance of the points to their nearest initial prototype, or, when it is
        smaller, the median gap between their squared distances to the nearest
        and the second nearest (in high dimension, where every distance carries
        the same large within-cluster term, which the attraction's softmax
        ignores), on all the points up to
        5,000 (on 2,500 drawn at random beyond, then once more on all of them),
        and the softest beta whose silhouette (on 1,000 of those points) is
        within 0.005 of the best is kept, among the fits that keep the most
        clusters. About four fits' time on small data. A float is the paper's
        single fit at a fixed beta. ``beta_`` holds the
        value used, in the units of the input.

    n_steps : int, default=10
        Number of AM recursion steps T.

    step_size : float in (0, 1], default=None
        ``dt / tau``, the fraction of the way each step moves a point toward the
        attraction-weighted prototypes. ``None`` means ``1 / n_steps`` (the
        paper's ``T = tau / dt``). With any value in (0, 1] the energy never
        increases along the recursion.

    metric : {'euclidean', 'cosine'}, default='euclidean'
        ``'cosine'`` is the spherical variant (eq. 12): points are scaled to unit
        norm, prototypes act through their directions, and the dynamics stay on
        the unit sphere.

    weighted : bool, default=False
        Learn one weight per prototype (eq. 10-11), scaling its attraction.

    mask_prob : float in [0, 1), default=0.15
        Fraction of features hidden in each training example: exactly
        ``round(mask_prob * n_features)`` distinct features, chosen at random.
        When that is 0 (``mask_prob=0``, or fewer than ``0.5 / mask_prob``
        features, e.g. 2-D data) training uses the unmasked loss
        ``||x - x^T||^2`` (eq. 8): hiding one of two coordinates leaves too
        little to complete a pattern from.

    mask_value : {'mean', 'min', 'max'}, default='mean'
        The value a hidden feature starts from: that feature's mean, minimum or
        maximum over the training data.

    init : {'k-means++', 'random'} or array-like of shape (n_clusters, n_features), \
            default='k-means++'
        Initial prototypes: ``'k-means++'`` seeds them by k-means++ (better and
        more stable results than random seeding), ``'random'`` picks
        ``n_clusters`` distinct training points at random (the paper's seeding);
        an array is used as given (and ``n_init`` is then 1).

    n_init : int, default=3
        Number of restarts from different initial prototypes, trained together;
        the one of lowest masked loss (on masks fixed at fit time, the same for
        all) is kept. With ``prune``, restarts that found the prototypes of a
        better one (after any epoch), or whose epoch loss is more than 10% above
        the best one (from the third epoch), stop training and are not kept.

    max_iter : int, default=200
        Maximum number of training epochs. ``0`` keeps the initial prototypes.

    batch_size : int, default=16
        Points per mini-batch. Small batches (the paper's best are 8 and 16) give
        markedly better clusters than large ones, at more steps per epoch.

    learning_rate : float or 'auto', default='auto'
        Initial learning rate of Adam, in the units of the data after centring and
        scaling (see ``beta``; on standardised features, the paper's). It is
        multiplied by 0.8 whenever the epoch loss has not improved by 0.1% for 5
        epochs (on more than 3,200 points, for about 1,000 steps), down to 1e-4
        times its initial value (the paper's schedule). ``'auto'`` is a fraction
        of the clusters' spread per feature, smaller at a sharper ``beta`` (see
        the user guide). Once training has converged, a cool-down of about
        1,000 steps halves the rate at each epoch; they count in ``n_iter_``.

    tol : float, default=1e-3
        Training stops when the epoch loss (summed over the restarts) has not
        decreased by more than a relative ``tol`` for ``n_iter_no_change``
        epochs.

    n_iter_no_change : int or 'auto', default='auto'
        See ``tol``. ``'auto'``: the epochs of about 2,000 Adam steps, between 2
        and 10 (10 epochs on up to 3,200 points; 2 on 100,000).

    reseed : bool, default=True
        Re-seed dead prototypes during training: a prototype that attracted no
        training example most in an epoch moves to an example drawn with
        probability proportional to its completion loss, at most ``n_clusters``
        times per restart. ``False``: they stay (the paper is silent).

    prune : bool, default=True
        Stop training restarts that duplicate a better one or whose loss is
        clearly worse (see ``n_init``): on large data, where an epoch is long and
        restarts often agree, most epochs then train one restart. ``False``
        trains every restart until the end, as the paper does.

    device : {'auto', 'cpu', 'cuda'}, default='auto'
        Where the prototypes are trained. The CPU trains with numba kernels and
        needs no PyTorch; CUDA trains with torch (without pruning). ``'auto'``
        picks CUDA when PyTorch is installed, sees one, and ``batch_size`` is at
        least 1024 (a step on a small batch is too little work for a GPU).
        Inference (``labels_``, ``predict``, ``predict_proba``, ``transform``,
        ``score``) runs on the CPU, so fitted estimators need neither a GPU nor
        PyTorch.

    n_jobs : int, default=None
        Threads of the CPU kernels: the restarts during training, slices of the
        points during inference. ``None`` means 1, ``-1`` all processors. The
        result does not depend on it.

    random_state : int, RandomState instance or None, default=None
        Seeds the initialisation, the batches, the masks and the re-seeding.
        Same seed, same data (bit for bit): same labels, in any process and with
        any ``n_jobs``.

    verbose : bool, default=False
        Show a progress bar (tqdm) over the training epochs.

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (n_clusters, n_features)
        The learned prototypes (memories), in the units and dtype of the input,
        occupied clusters first, in the order of the labels. Unit vectors for
        ``metric='cosine'``.

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
        Training loss of the kept restart: the mean over points of the squared
        completion error on the hidden features, in the squared units of the
        input, on masks drawn from a seed fixed at fit time.

    loss_curve_ : ndarray of shape (`n_iter_`,)
        Its mean loss over each training epoch (same units).

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
    step_size`` and ``p = softmax_mu(-beta ||rho_mu - x||^2)``: a gradient step
    on the energy, computed from inner products and a softmax over logits (the
    reference code's raw ``exp`` gives 0/0 in high dimension). Training follows
    algorithm 1 of the paper, with the backward pass through the T steps written
    out by hand; inference runs in float64, each point on its own, so that a
    point's label depends neither on its batch nor on the number of threads. The
    user guide gives the details, and the defaults that differ from the paper.

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
        "beta": [NumberInterval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "n_steps": [NumberInterval(Integral, 1, None, closed="left")],
        "step_size": [NumberInterval(Real, 0, 1, closed="right"), None],
        "metric": [StrOptions({"euclidean", "cosine"})],
        "weighted": ["boolean"],
        "mask_prob": [NumberInterval(Real, 0, 1, closed="left")],
        "mask_value": [StrOptions({"mean", "min", "max"})],
        "init": [StrOptions({"random", "k-means++"}), "array-like"],
        "n_init": [NumberInterval(Integral, 1, None, closed="left")],
        "max_iter": [NumberInterval(Integral, 0, None, closed="left")],
        "batch_size": [NumberInterval(Integral, 1, None, closed="left")],
        "learning_rate": [NumberInterval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "tol": [NumberInterval(Real, 0, None, closed="left")],
        "n_iter_no_change": [NumberInterval(Integral, 1, None, closed="left"),
                             StrOptions({"auto"})],
        "reseed": ["boolean"],
        "prune": ["boolean"],
        "device": [StrOptions({"auto", "cpu", "cuda"})],
        "n_jobs": [ANY_INTEGER, None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(self, n_clusters=8, *, beta="auto", n_steps=10, step_size=None,
                 metric="euclidean", weighted=False, mask_prob=0.15, mask_value="mean",
                 init="k-means++", n_init=3, max_iter=200, batch_size=16,
                 learning_rate="auto", tol=1e-3, n_iter_no_change="auto", reseed=True,
                 prune=True, device="auto", n_jobs=None, random_state=None, verbose=False):
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
        *seeds, selection_seed = derive_seeds(self.random_state, 4)
        if self.beta != "auto" or self.max_iter == 0 or not 2 <= self.n_clusters < X.shape[0]:
            state = self._fit_with_sharpness(X, 1.0, seeds, self.verbose)
        else:
            sharpness, state, caught = self._select_sharpness(X, seeds, selection_seed)
            if state is None or self.verbose:  # fitted on a sample, or the bar is wanted
                state = self._fit_with_sharpness(X, sharpness, seeds, self.verbose)
            else:  # fitted on all of X with the same seeds: this very fit, already made
                for warning in caught:  # and the warnings it gave
                    warnings.warn(warning.message, warning.category, stacklevel=4)
        self._adopt(state)
        self._warn_empty_clusters(relabelled=True)
        return self

    def _validate_first(self, X):
        X = validate_data(self, X, accept_sparse="csr", dtype=[np.float64, np.float32])
        if X.shape[0] < self.n_clusters:
            raise ValueError(
                f"n_samples={X.shape[0]} should be >= n_clusters={self.n_clusters}."
            )
        check_magnitude(X)
        check_spread(X)
        return X

    @_fit_context(prefer_skip_nested_validation=True)
    @keeps_state_on_failure
    def partial_fit(self, X, y=None):
        """One pass over a chunk of the data, continuing the previous calls' training.

        The first call (or the first after :meth:`fit`) initialises ClAM from its
        chunk as ``fit`` does: ``beta='auto'`` is selected by silhouette on it
        (on 2,500 of its points at most), the ``n_init`` restarts are seeded by
        k-means++ in it, and the centring and scale of its points, and the
        ``mask_value`` of hidden features, are frozen: later chunks are seen in
        the first chunk's coordinates (so feed a representative first chunk,
        e.g. shuffled data; running moments would move the coordinates, hence
        the prototypes' units, from call to call). Each call makes one pass over
        its chunk in mini-batches of ``batch_size``, continuing the prototypes,
        Adam's state, the plateau schedule of the learning rate and the
        re-seeding of dead prototypes (from the chunk's points). After the first
        pass only the restart ``fit`` would keep goes on, so that a cluster keeps
        its number from call to call (``cluster_centers_`` keep their order;
        labels may skip a cluster the chunk leaves empty). After every call the
        fitted attributes and :meth:`predict` are valid and ``labels_`` are the
        chunk's; ``n_iter_`` counts the calls, ``loss_curve_`` holds each pass's
        mean loss, ``n_steps_`` the Adam steps and ``n_samples_seen_`` the points.
        Training runs on the CPU (numba kernels), whatever ``device``.

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
        stream = getattr(self, "_stream", None)
        if stream is None:
            X = self._validate_first(X)
            stream = self._start_stream(X)
        else:
            X = validate_data(self, X, accept_sparse="csr", dtype=[np.float64, np.float32],
                              reset=False)
            check_magnitude(X)
            stream = stream.copy()  # a failed call leaves the estimator as it was
        n_threads = effective_n_jobs(self.n_jobs)
        data = stream.data(X)
        rows = _inference_rows(data)
        stream.pass_over(data, weighted=self.weighted, mask_prob=self.mask_prob,
                         batch_size=self.batch_size, reseed=self.reseed,
                         n_threads=n_threads)
        stream.keep_best_restart(rows, self.mask_prob, self.weighted, n_threads)
        kept = stream.kept(rows, self.mask_prob, self.weighted, n_threads)
        self._adopt(self._fitted_state(kept, data, stream.dynamics, stream.fill,
                                       stream.score_seed, X.dtype, relabel=False))
        keep_stream(self, stream)
        self._warn_empty_clusters(relabelled=False)
        return self

    def _start_stream(self, X):
        """The state of ``partial_fit`` before its first pass, from the first chunk."""
        from skdiffclust.clam._stream import ClamStream

        *seeds, selection_seed = derive_seeds(self.random_state, 4)
        sharpness = 1.0
        if self.beta == "auto" and 2 <= self.n_clusters < X.shape[0]:
            sharpness = self._select_sharpness(X, seeds, selection_seed)[0]
        init_seed, train_seed, score_seed = seeds
        data = ScaledData(X, self.metric == "cosine")
        with threadpool_limits(effective_n_jobs(self.n_jobs), user_api="blas"):
            initial = self._initial_prototypes(data, init_seed)
        spread, competition = scales_of(data, initial)
        dynamics = self._dynamics(self._beta(competition, sharpness))
        return ClamStream.start(
            data, initial, dynamics, data.column_reduction(self.mask_value),
            self._learning_rate(spread, competition, data.n_features, dynamics.beta),
            steps_patience(data.n_samples, self.batch_size, PLATEAU_STEPS, PLATEAU_BOUNDS),
            seed=train_seed, score_seed=score_seed)

    def _select_sharpness(self, X, seeds, selection_seed):
        """The multiple of beta='auto' (in ``AUTO_BETA_GRID``) whose partition of at
        most ``SELECTION_POINTS`` points has the best silhouette, among those that
        keep the most clusters; with the winning fit's state and warnings when it
        was made on all of X."""
        rng = numpy_generator(selection_seed)
        n_sample = X.shape[0] if X.shape[0] <= SELECTION_POINTS else SELECTION_SAMPLE
        sample = X[row_sample(rng, X.shape[0], n_sample)]
        scored = row_sample(rng, sample.shape[0], SILHOUETTE_POINTS)
        metric = "cosine" if self.metric == "cosine" else "euclidean"
        # centred (dense, Euclidean), so that a large offset costs no precision
        scored_rows = sample[scored]
        if metric == "euclidean" and isinstance(scored_rows, np.ndarray):
            scored_rows = scored_rows - scored_rows.mean(axis=0)
        fits, keys = [], []
        for sharpness in AUTO_BETA_GRID:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                state = self._fit_with_sharpness(sample, sharpness, seeds, verbose=False)
            fits.append((sharpness, state, caught))
            keys.append((state.n_clusters_,
                         silhouette(scored_rows, state.labels_[scored], metric)))
        sharpness, state, caught = fits[softest_near_best(keys)]
        if sample.shape[0] < X.shape[0]:
            return sharpness, None, []
        return sharpness, state, caught

    def _fit_with_sharpness(self, X, sharpness, seeds, verbose):
        """The state of a fit at ``beta = sharpness`` times the automatic one (or
        ``self.beta``); the estimator is left as it is."""
        from skdiffclust.clam._fit import train_restarts

        n_threads = effective_n_jobs(self.n_jobs)
        init_seed, train_seed, score_seed = seeds
        data = ScaledData(X, self.metric == "cosine")
        with threadpool_limits(n_threads, user_api="blas"):  # k-means++'s small products
            initial = self._initial_prototypes(data, init_seed)
        spread, competition = scales_of(data, initial)
        dynamics = self._dynamics(self._beta(competition, sharpness))
        settings = self._training_settings(
            data.n_samples, self._learning_rate(spread, competition, data.n_features,
                                                dynamics.beta),
            seed=train_seed, verbose=verbose, n_threads=n_threads)
        fill = data.column_reduction(self.mask_value)
        trained = train_restarts(_training_rows(data), fill.astype(np.float32),
                                 initial.astype(np.float32), dynamics, settings)
        if self.max_iter == 0:  # untrained: the initial prototypes, not their float32 copy
            trained.prototypes = initial
        kept = self._keep_best(data, fill, trained, dynamics, score_seed, n_threads)
        return self._fitted_state(kept, data, dynamics, fill, score_seed, X.dtype)

    def _training_settings(self, n_samples, learning_rate, *, seed, verbose, n_threads):
        """The training's settings, the 'auto' patiences resolved for ``n_samples``."""
        def patience(steps, bounds):
            return steps_patience(n_samples, self.batch_size, steps, bounds)

        n_iter_no_change = (patience(STOPPING_STEPS, STOPPING_BOUNDS)
                            if self.n_iter_no_change == "auto" else int(self.n_iter_no_change))
        return TrainingSettings(
            weighted=self.weighted, mask_prob=self.mask_prob, batch_size=self.batch_size,
            max_iter=self.max_iter, learning_rate=learning_rate, tol=self.tol,
            n_iter_no_change=n_iter_no_change,
            device=resolve_training_device(self.device, self.batch_size), seed=seed,
            verbose=verbose, plateau_patience=patience(PLATEAU_STEPS, PLATEAU_BOUNDS),
            cooldown_epochs=patience(COOLDOWN_STEPS, COOLDOWN_BOUNDS), n_threads=n_threads,
            reseed=self.reseed, prune=self.prune)

    def _fitted_state(self, kept, data, dynamics, fill, score_seed, dtype, relabel=True):
        """Fitted attributes in the input's units (occupied clusters first, unless
        not ``relabel``), and the state inference needs in ClAM's (centred and
        scaled) units."""
        order, labels = np.arange(self.n_clusters), kept["labels"]
        if relabel:
            order, labels = relabel_by_first_appearance(labels, self.n_clusters)
        squared_scale = data.scale**2
        prototypes = kept["prototypes"][order]
        centers = prototypes if self.metric == "cosine" else prototypes * data.scale + data.shift
        return FittedState(
            cluster_centers_=centers.astype(dtype), cluster_weights_=kept["weights"][order],
            labels_=labels, n_clusters_=int(np.unique(labels).size),
            beta_=dynamics.beta / squared_scale, n_iter_=kept["n_iter"],
            loss_=kept["loss"] * squared_scale, loss_curve_=kept["loss_curve"] * squared_scale,
            _prototypes=prototypes, _shift=data.shift, _scale=data.scale, _mask_fill=fill,
            _score_seed=score_seed, _beta_scaled=dynamics.beta)

    def _adopt(self, state):
        """Take the fitted attributes (and private state) of ``state`` by name."""
        for name, value in state.items():
            setattr(self, name, value)

    def _in_input_units(self, prototypes):
        """Prototypes in ClAM's units -> the input's (used by ``ClAMLayer``)."""
        if self.metric == "cosine":
            return prototypes
        return prototypes * self._scale + self._shift

    def _warn_empty_clusters(self, *, relabelled):
        # called by fit and partial_fit: its caller's caller's caller is the user's
        # (through keeps_state_on_failure and _fit_context)
        if self.n_clusters_ < self.n_clusters:
            numbering = ("Labels are numbered 0 .. n_clusters_ - 1" if relabelled
                         else "Labels keep the prototypes' numbers")
            warnings.warn(
                f"ClAM found {self.n_clusters_} non-empty clusters of the "
                f"n_clusters={self.n_clusters} asked: the dynamics take no training "
                f"point to the other prototypes. {numbering}. A larger beta, more "
                "restarts (n_init) or fewer clusters may help.",
                UserWarning, stacklevel=5,
            )

    def _beta(self, competition, sharpness):
        """beta in the units of the centred and scaled data: ``sharpness`` over the
        scale at which the prototypes compete (``_selection.scales_of``)."""
        if self.beta != "auto":
            return float(self.beta)
        # cosine logits are beta <rho~, v> = -beta/2 ||rho~ - v||^2 + const
        return (2.0 if self.metric == "cosine" else 1.0) * sharpness / competition

    def _learning_rate(self, spread, competition, n_features, beta):
        """'auto': a fraction of the clusters' spread per feature, divided by the
        sharpness ``s = beta * competition`` as ``max(s, 1/2) * sqrt(max(s, 1))``:
        the loss steepens with beta, and steps of the same length make mini-batch
        training chaotic (its result then hangs on the data's last bits)."""
        if self.learning_rate != "auto":
            return float(self.learning_rate)
        sharpness = beta * competition / (2.0 if self.metric == "cosine" else 1.0)
        return (AUTO_LEARNING_RATE * float(np.sqrt(spread / n_features))
                / (max(sharpness, 0.5) * np.sqrt(max(sharpness, 1.0))))

    def _keep_best(self, data, fill, trained, dynamics, score_seed, n_threads):
        """The restart of lowest loss (same masks for all), and its labels."""
        from skdiffclust.clam._inference import converge, evaluate_loss

        candidates = np.flatnonzero(trained.selectable)  # not pruned
        log_weights = trained.log_weights[candidates] if self.weighted else None
        rows = _inference_rows(data)
        losses = evaluate_loss(rows, fill, trained.prototypes[candidates], log_weights,
                               dynamics, self.mask_prob, score_seed, n_threads)
        best = candidates[best_restart(losses, trained.prototypes[candidates])]
        loss = float(losses[candidates == best][0])
        prototypes = trained.prototypes[best].astype(np.float64)
        if self.metric == "cosine":
            prototypes = unit_rows(prototypes)
        weights = normalised_weights(trained.log_weights[best].astype(np.float64))
        labels, _ = converge(rows, prototypes, np.log(weights) if self.weighted else None,
                             dynamics, n_threads)
        return {"prototypes": prototypes, "weights": weights, "labels": labels,
                "loss": loss, "n_iter": int(trained.n_iter[best]),
                "loss_curve": np.asarray(trained.loss_curves[best], dtype=np.float64)}

    def _dynamics(self, beta):
        alpha = 1.0 / self.n_steps if self.step_size is None else float(self.step_size)
        return Dynamics(beta=float(beta), n_steps=int(self.n_steps), alpha=alpha,
                        metric=self.metric)

    def _initial_prototypes(self, data, seed):
        """Initial prototypes of every restart, (n_init, n_clusters, n_features),
        float64, in the units of the centred and scaled data."""
        k, d = self.n_clusters, data.n_features
        if not isinstance(self.init, str):
            init = np.asarray(self.init, dtype=np.float64)
            if init.shape != (k, d):
                raise ValueError(
                    f"init must have shape (n_clusters, n_features) = ({k}, {d}), "
                    f"got {init.shape}."
                )
            if not np.isfinite(init).all():
                raise ValueError("init contains NaN or infinity.")
            check_magnitude(init, "init")
            if self.metric != "cosine":
                init = (init - data.shift) / data.scale
            return init[None].copy()
        rng = numpy_generator(seed)
        # k-means++ on at most SEEDING_POINTS points drawn at random (all of them on
        # smaller data), so that seeding stays cheap next to training on large data
        pool = np.arange(data.n_samples)
        if data.n_samples > SEEDING_POINTS:
            pool = np.sort(rng.choice(data.n_samples, SEEDING_POINTS, replace=False))
        seeding_rows = data.seeding_rows(pool)
        restarts = []
        for _ in range(self.n_init):
            if self.init == "random":
                chosen = rng.choice(data.n_samples, k, replace=False)
            else:
                _, chosen = kmeans_plusplus(seeding_rows, k,
                                            random_state=int(rng.integers(2**31 - 1)))
                chosen = pool[chosen]
            restarts.append(data.take(chosen))
        return np.stack(restarts)

    def _log_weights(self):
        return np.log(self.cluster_weights_) if self.weighted else None

    def _scaled(self, X):
        """X validated, and its rows as ClAM sees them (centred and scaled)."""
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", dtype=[np.float64, np.float32],
                          reset=False)
        check_magnitude(X)
        data = ScaledData(X, self.metric == "cosine", self._shift, self._scale)
        return X, _inference_rows(data)

    def _converge(self, X, proba=False):
        from skdiffclust.clam._inference import converge

        X, rows = self._scaled(X)
        labels, distances, *probabilities = converge(
            rows, self._prototypes, self._log_weights(), self._dynamics(self._beta_scaled),
            effective_n_jobs(self.n_jobs), proba=proba)
        if self.metric != "cosine":
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

        Each point runs the ``n_steps`` steps of :meth:`predict`; its probability
        of a cluster is the attraction the cluster's prototype exerts where the
        point ends, eq. 13 of the paper at :math:`x^T`: ``softmax(-beta_
        ||cluster_centers_ - x^T||^2)`` (``softmax(beta_ cos)`` for
        ``metric='cosine'``). Points deep in a basin get nearly one-hot rows,
        points near a boundary between basins spread theirs. The weights of
        ``weighted=True`` move the points but are left out here, so that the most
        probable cluster is always :meth:`predict`'s.

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

        Each point runs the ``n_steps`` AM steps first; the distances are Euclidean
        (in the units of the input), or cosine distances ``1 - cos`` for
        ``metric='cosine'``.

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
        """Minus the masked completion loss of the points (higher is better).

        The loss of ``loss_``, in the squared units of the input, with masks drawn
        from a seed fixed at fit time, so that the score is deterministic and
        ``score(X_train) == -loss_``. ``GridSearchCV`` uses it when given no
        scorer; it favours more clusters, so select ``n_clusters`` or ``beta``
        with a silhouette scorer instead.

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
        from skdiffclust.clam._inference import evaluate_loss

        _, rows = self._scaled(X)
        log_weights = self._log_weights()
        losses = evaluate_loss(
            rows, self._mask_fill, self._prototypes[None],
            None if log_weights is None else log_weights[None],
            self._dynamics(self._beta_scaled), self.mask_prob, self._score_seed,
            effective_n_jobs(self.n_jobs),
        )
        return -float(losses[0]) * self._scale**2

    @property
    def _n_features_out(self):
        return self.cluster_centers_.shape[0]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


def _training_rows(data):
    """float32 rows for training: an array (dense input), or the row source (sparse)."""
    rows = data.float32_rows()
    return data if rows is None else rows


def _inference_rows(data):
    """float64 rows for inference: an array (dense input), or the row source."""
    rows = data.dense()
    return data if rows is None else rows

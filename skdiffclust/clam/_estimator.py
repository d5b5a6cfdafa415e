"""ClAM: clustering with associative memories (Saha, Krotov, Zaki, Ram, ICML 2023)."""

from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin, TransformerMixin, _fit_context
from sklearn.cluster import kmeans_plusplus
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from skdiffclust._utils._random import derive_seeds, numpy_generator


class ClAM(TransformerMixin, ClusterMixin, BaseEstimator):
    """Clustering with associative memories (ClAM), a differentiable k-means.

    Each point is moved for ``n_steps`` steps by the attractor dynamics of a dense
    associative memory whose memories are ``n_clusters`` learned prototypes, and
    belongs to the prototype it ends next to: a hard assignment at all times,
    computed by differentiable operations. The prototypes are trained end to end
    by backpropagation through the dynamics, with the masked pattern-completion
    loss of Saha et al. (2023): hide a few features of a point, let the dynamics
    complete them, and penalise the error on the hidden features.

    Read more in the :ref:`User Guide <clam>`.

    Parameters
    ----------
    n_clusters : int, default=8
        Number of prototypes k. Some may end with no point (the labels then
        number the occupied clusters only).

    beta : float, default=1.0
        Inverse temperature of the energy ``E(v) = -1/beta log sum_mu
        exp(-beta ||rho_mu - v||^2)`` (eq. 1, exactly as written in the paper; the
        authors' code uses ``beta / 2``, so their beta is twice this one). It is
        in units of one over squared distance: standardise the features, or scale
        beta with them. Large beta makes the basins of attraction the Voronoi cells
        of the prototypes (k-means); small beta lets prototypes attract
        collectively. The most important hyperparameter, to tune per dataset (the
        paper selects it by silhouette): on standardised data, the best values
        were 0.1 to 3 for the UCI sets of 7 to 18 features, and about 0.1 for the
        64 features of digits, where beta=1 leaves most prototypes without points.

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
        more stable silhouettes on the UCI benchmarks), ``'random'`` picks
        ``n_clusters`` distinct training points at random (random seeding, as in
        the paper); an array is used as given (and ``n_init`` is then 1).

    n_init : int, default=3
        Number of restarts from different initial prototypes; the one with the
        lowest final training loss is kept. The restarts are trained together, in
        one batched computation.

    max_iter : int, default=200
        Maximum number of training epochs. ``0`` keeps the initial prototypes.

    batch_size : int, default=16
        Points per mini-batch. Small batches (the paper's best are 8 and 16) give
        markedly better clusters than large ones, at more steps per epoch.

    learning_rate : float, default=0.1
        Initial learning rate of Adam. It is multiplied by 0.8 whenever the epoch
        loss has not improved by 0.1% for 5 epochs, down to 1e-5 (the paper's
        schedule).

    tol : float, default=1e-3
        A restart stops when its epoch loss has not decreased by more than a
        relative ``tol`` for ``n_iter_no_change`` epochs.

    n_iter_no_change : int, default=10
        See ``tol``.

    device : {'auto', 'cpu', 'cuda'}, default='auto'
        Where the prototypes are trained; ``'auto'`` picks CUDA when PyTorch is
        installed and sees one. The CPU trains with numba kernels and needs no
        PyTorch; CUDA trains with torch. Inference (``labels_``, ``predict``,
        ``transform``, ``score``) runs on the CPU, so fitted estimators need
        neither a GPU nor PyTorch.

    random_state : int, RandomState instance or None, default=None
        Seeds the initialisation, the batches and the masks. Same seed, same
        data (bit for bit), same machine: same labels. Stochastic training
        amplifies differences in the last bit of the input, such as those
        between two runs of a NumPy reduction on differently aligned memory.

    verbose : bool, default=False
        Show a progress bar (tqdm) over the training epochs.

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (n_clusters, n_features)
        The learned prototypes (memories), occupied clusters first, in the order
        of the labels. Unit vectors for ``metric='cosine'``.

    cluster_weights_ : ndarray of shape (n_clusters,)
        Normalised prototype weights ``softmax(log w)``; uniform unless
        ``weighted``.

    labels_ : ndarray of shape (n_samples,)
        Cluster of each training point, numbered ``0 .. m-1`` by first appearance
        over the ``m <= n_clusters`` occupied prototypes.

    n_iter_ : int
        Training epochs run by the kept restart.

    loss_ : float
        Its training loss (mean over points of the squared completion error on
        the hidden features), on masks drawn from a seed fixed at fit time.

    loss_curve_ : list of float
        Its mean loss over each training epoch.

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
    One recursion step is ``x <- x + alpha * sum_mu (rho_mu - x)
    softmax_mu(-beta ||rho_mu - x||^2)`` with ``alpha = step_size``, i.e.
    ``x <- (1 - alpha) x + alpha p @ R``: a gradient step on the energy. It is
    computed from inner products and a softmax over logits, so that it costs
    ``O(n k d)`` per step and neither under- nor overflows in high dimension (the
    reference code's raw ``exp`` gives 0/0 there).

    Training follows algorithm 1 of the paper: each example hides some features
    (replaced by ``mask_value``), only those evolve during the T steps, and the
    loss is the squared error on them; Adam minimises it with backpropagation
    through the T steps, written out by hand. On the CPU, each epoch is one call
    of numba kernels (one thread) that follow only the hidden coordinates of each
    example, so that a step costs ``O(k h)`` per example for ``h`` hidden
    features instead of ``O(k d)``; on CUDA it runs in torch, a few matrix
    products per step. The two compute the same updates (they draw their batches
    and masks from different generators). Inference starts from the complete
    point and assigns it to the prototype nearest to where it ends. Since a point
    only travels part of the way in T steps, prototypes sit beyond their
    cluster's mean. Training runs in float32; inference in float64, on the CPU
    (numba kernels that compute each point on its own), so that a point's label
    does not depend on the other points of its batch.

    ClAM costs T forward and backward steps per point and epoch, on small
    batches: on the CPU, it fits the UCI sets of ``benchmarks/bench_clam.py`` in
    0.01 to 0.1 s, 1 to 3 times the time of scikit-learn's ``KMeans(n_init=10)``
    on one thread (a torch training loop on the CPU took about 2 s, 40 to 100
    times KMeans).

    The paper selects beta, T and the other hyperparameters per dataset by the
    silhouette coefficient; use :class:`~sklearn.model_selection.GridSearchCV`
    with a silhouette scorer for that (``score`` is minus the training loss).

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
    >>> clam = ClAM(n_clusters=2, max_iter=20, random_state=0).fit(X)
    >>> clam.labels_
    array([0, 0, 0, 1, 1, 1])
    >>> clam.predict([[0.5, 0.5], [3.5, 3.5]])
    array([0, 1])
    """

    _parameter_constraints: dict = {
        "n_clusters": [Interval(Integral, 1, None, closed="left")],
        "beta": [Interval(Real, 0, None, closed="neither")],
        "n_steps": [Interval(Integral, 1, None, closed="left")],
        "step_size": [Interval(Real, 0, 1, closed="right"), None],
        "metric": [StrOptions({"euclidean", "cosine"})],
        "weighted": ["boolean"],
        "mask_prob": [Interval(Real, 0, 1, closed="left")],
        "mask_value": [StrOptions({"mean", "min", "max"})],
        "init": [StrOptions({"random", "k-means++"}), "array-like"],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "max_iter": [Interval(Integral, 0, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "device": [StrOptions({"auto", "cpu", "cuda"})],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(self, n_clusters=8, *, beta=1.0, n_steps=10, step_size=None,
                 metric="euclidean", weighted=False, mask_prob=0.15, mask_value="mean",
                 init="k-means++", n_init=3, max_iter=200, batch_size=16,
                 learning_rate=0.1, tol=1e-3, n_iter_no_change=10, device="auto",
                 random_state=None, verbose=False):
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
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Learn the prototypes and cluster the training points.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training points.

        y : Ignored
            Not used, present for API consistency.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        X = validate_data(self, X, dtype=[np.float64, np.float32])
        if X.shape[0] < self.n_clusters:
            raise ValueError(
                f"n_samples={X.shape[0]} should be >= n_clusters={self.n_clusters}."
            )
        training = _training_module()
        device = _resolve_device(self.device)
        init_seed, train_seed, score_seed = derive_seeds(self.random_state, 3)
        points = self._points(X)
        fill = _mask_fill(points, self.mask_value)
        dynamics = self._dynamics(training)
        initial = self._initial_prototypes(points, init_seed)
        trained = self._train(training, points, fill, initial, dynamics, device, train_seed)
        kept = self._keep_best(training, points, fill, trained, dynamics, score_seed)
        order, labels = _relabel_by_first_appearance(kept["labels"], self.n_clusters)

        self.cluster_centers_ = kept["prototypes"][order].astype(X.dtype)
        self.cluster_weights_ = kept["weights"][order]
        self.labels_ = labels
        self.n_iter_ = kept["n_iter"]
        self.loss_ = kept["loss"]
        self.loss_curve_ = kept["loss_curve"]
        self._mask_fill = fill
        self._score_seed = score_seed
        return self

    def _train(self, training, points, fill, initial, dynamics, device, seed):
        """Algorithm 1 for every restart."""
        return training.train_restarts(
            points, fill, initial, dynamics, weighted=self.weighted,
            mask_prob=self.mask_prob, batch_size=self.batch_size,
            max_iter=self.max_iter, learning_rate=self.learning_rate, tol=self.tol,
            n_iter_no_change=self.n_iter_no_change, device=device, seed=seed,
            verbose=self.verbose,
        )

    def _keep_best(self, training, points, fill, trained, dynamics, score_seed):
        """The restart of lowest loss (same masks for all), and its labels."""
        log_weights = trained.log_weights if self.weighted else None
        losses = training.evaluate_loss(points, fill, trained.prototypes, log_weights,
                                        dynamics, self.mask_prob, score_seed)
        best = _best_restart(losses, trained.prototypes)
        prototypes = trained.prototypes[best]
        if self.metric == "cosine":
            prototypes = _unit_rows(prototypes)
        weights = _normalised_weights(trained.log_weights[best])
        labels, _ = training.converge(
            points, prototypes, np.log(weights) if self.weighted else None, dynamics)
        return {"prototypes": prototypes, "weights": weights, "labels": labels,
                "loss": float(losses[best]), "n_iter": int(trained.n_iter[best]),
                "loss_curve": trained.loss_curves[best]}

    def _points(self, X):
        # a float32 copy for training; unit rows for the spherical variant
        points = np.array(X, dtype=np.float32)
        return _unit_rows(points) if self.metric == "cosine" else points

    def _dynamics(self, training):
        alpha = 1.0 / self.n_steps if self.step_size is None else float(self.step_size)
        return training.Dynamics(beta=float(self.beta), n_steps=int(self.n_steps),
                                 alpha=alpha, metric=self.metric)

    def _initial_prototypes(self, points, seed):
        """Initial prototypes of every restart, shape (n_init, n_clusters, n_features)."""
        k, d = self.n_clusters, points.shape[1]
        if not isinstance(self.init, str):
            init = np.asarray(self.init, dtype=np.float32)
            if init.shape != (k, d):
                raise ValueError(
                    f"init must have shape (n_clusters, n_features) = ({k}, {d}), "
                    f"got {init.shape}."
                )
            if not np.isfinite(init).all():
                raise ValueError("init contains NaN or infinity.")
            return init[None].copy()
        rng = numpy_generator(seed)
        restarts = []
        for _ in range(self.n_init):
            if self.init == "random":
                restarts.append(points[rng.choice(points.shape[0], k, replace=False)])
            else:
                centers, _ = kmeans_plusplus(
                    points, k, random_state=int(rng.integers(2**31 - 1)))
                restarts.append(centers)
        return np.stack(restarts).astype(np.float32)

    def _log_weights(self):
        return np.log(self.cluster_weights_) if self.weighted else None

    def _check_X(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        return self._points(X)

    def _converge(self, X):
        training = _training_module()
        points = self._check_X(X)
        prototypes = self.cluster_centers_.astype(np.float32)
        return training.converge(points, prototypes, self._log_weights(),
                                 self._dynamics(training))

    def predict(self, X):
        """Cluster of each point: the prototype nearest to where its dynamics end.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            New points.

        Returns
        -------
        labels : ndarray of shape (n_samples,)
            Index of the cluster (row of ``cluster_centers_``) of each point.
        """
        return self._converge(X)[0]

    def transform(self, X):
        """Distances from the converged points to every prototype.

        Each point runs the ``n_steps`` AM steps first; the distances are Euclidean,
        or cosine distances ``1 - cos`` for ``metric='cosine'``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            New points.

        Returns
        -------
        distances : ndarray of shape (n_samples, n_clusters)
        """
        return self._converge(X)[1]

    def score(self, X, y=None):
        """Minus the masked completion loss of the points (higher is better).

        The masks come from a seed fixed at fit time, so the score is
        deterministic, and ``score(X_train) == -loss_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Points to score.

        y : Ignored
            Not used, present for API consistency.

        Returns
        -------
        score : float
        """
        points = self._check_X(X)
        training = _training_module()
        log_weights = self._log_weights()
        prototypes = self.cluster_centers_[None].astype(np.float32)
        losses = training.evaluate_loss(
            points, self._mask_fill, prototypes,
            None if log_weights is None else log_weights[None],
            self._dynamics(training), self.mask_prob, self._score_seed,
        )
        return -float(losses[0])


def _training_module():
    # imported on first use, so that ``import skdiffclust`` does not import numba
    from skdiffclust.clam import _training

    return _training


def _resolve_device(device):
    """'cpu' (the numba kernels, no torch needed) or the torch device for CUDA."""
    if device == "cpu":
        return "cpu"
    try:
        from skdiffclust._utils._torch import resolve_device
    except ImportError as error:
        if device == "auto":
            return "cpu"
        raise ImportError(
            'ClAM(device="cuda") trains with PyTorch: pip install "skdiffclust[torch]"'
        ) from error
    return resolve_device(device)


def _unit_rows(X):
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.maximum(norms, np.finfo(X.dtype).tiny)


def _mask_fill(points, mask_value):
    reduce = {"mean": np.mean, "min": np.min, "max": np.max}[mask_value]
    return reduce(points, axis=0).astype(points.dtype)


def _normalised_weights(log_weights):
    shifted = np.exp(log_weights - log_weights.max())
    return shifted / shifted.sum()


def _best_restart(losses, prototypes):
    finite = np.isfinite(losses) & np.isfinite(prototypes).all(axis=(1, 2))
    if not finite.any():
        raise FloatingPointError(
            "ClAM training diverged (non-finite loss in every restart); lower "
            "learning_rate or beta."
        )
    return int(np.argmin(np.where(finite, losses, np.inf)))


def _relabel_by_first_appearance(labels, n_clusters):
    """Renumber occupied clusters 0..m-1 by first appearance; empty ones go last."""
    _, first = np.unique(labels, return_index=True)
    occupied = labels[np.sort(first)]
    empty = np.setdiff1d(np.arange(n_clusters), occupied)
    order = np.concatenate([occupied, empty])
    rank = np.empty(n_clusters, dtype=np.intp)
    rank[order] = np.arange(n_clusters)
    return order, rank[labels]

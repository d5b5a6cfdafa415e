"""PRCut: deep clustering by probabilistic ratio-cut optimisation."""

import os
import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from skdiffclust._utils._random import derive_seeds
from skdiffclust.prcut._graph import (
    affinity_from_neighbors,
    check_precomputed_affinity,
    knn_affinity,
    n_connected_components,
    prcut_objective,
)
from skdiffclust.prcut._inference import predict_probabilities


class PRCut(ClusterMixin, BaseEstimator):
    """Deep clustering by probabilistic ratio-cut optimisation (PRCut).

    A network maps each sample to cluster-assignment probabilities P. PRCut treats
    the assignments as independent random variables and minimises, by mini-batch
    gradient descent, an upper bound of the expected ratio cut of a similarity
    graph (Ghriss & Monteleoni, 2025), with no spectral decomposition: the graph
    is only read batch pair by batch pair. A KL divergence between the mean
    assignment and the uniform distribution keeps the clusters from collapsing
    into one. New samples are assigned by the trained network.

    Needs PyTorch (``pip install "skdiffclust[torch]"``) to fit; ``predict`` and
    ``predict_proba`` run in NumPy.

    Parameters
    ----------
    n_clusters : int, default=8
        Number of clusters k (outputs of the network).

    affinity : {'nearest_neighbors', 'rbf', 'precomputed'}, default='nearest_neighbors'
        The similarity graph W whose ratio cut is minimised, built once and kept
        sparse. ``'nearest_neighbors'``: W_ij = 1 when i is among the
        ``n_neighbors`` nearest neighbours of j or j among those of i.
        ``'rbf'``: the same edges weighted by exp(-rbf_gamma ||x_i - x_j||^2).
        ``'precomputed'``: ``X`` is the (n_samples, n_samples) affinity matrix,
        dense or sparse (symmetric, non-negative); the network's input is then
        the row of ``X``, and ``predict`` takes the affinities of new samples to
        the training samples.

    n_neighbors : int, default=10
        Neighbours per sample of the graph. Clipped, with a warning, to
        ``n_samples - 1``.

    rbf_gamma : float, default=None
        Inverse squared bandwidth of ``affinity='rbf'``; ``None`` takes one over
        the median squared distance along the graph's edges.

    hidden_layer_sizes : tuple of int, default=()
        Hidden layers of the network (GELU activations), ``()`` for a linear map
        followed by the softmax (the paper's model).

    gamma : float, default=100.0
        Weight of the KL(P-bar || uniform) regulariser (the paper's value). Large
        values give balanced clusters; small values let the ratio cut favour
        unbalanced ones but risk clusters dying out.

    momentum : float, default=0.8
        Rate beta of the moving average of the cluster proportions P-bar:
        ``P-bar <- (1 - beta) P-bar + beta * batch mean`` (the authors' code;
        the paper's decaying rate beta / t lags behind the network and lets
        shrinking clusters die out).

    annealing : float in [0, 1), default=0.0
        Fraction of ``max_iter`` spent annealing the bound: the hardness part of
        its edge term (see Notes) is weighted by s, raised geometrically from
        0.01 to 1 over these steps, after which training minimises the paper's
        bound and early stopping may end it. ``0`` is algorithm 1 as published.
        Annealing lets the partition grow out of the graph's smoothest
        directions, as spectral clustering's does, instead of freezing the first
        one gradient descent meets; with a small ``gamma`` it reaches lower ratio
        cuts (see the digits example).

    batch_size : int, default=1024
        Size of the left and of the right batch; capped at ``n_samples``. An
        epoch is ``max(n_samples // batch_size, 1)`` batch pairs.

    max_iter : int, default=500
        Maximum number of epochs; a ``ConvergenceWarning`` says when they ran out
        before the objective converged.

    learning_rate : float, default=1e-2
        Adam's step size.

    tol : float, default=1e-3
        Training stops when the epoch's mean objective has not decreased by more
        than ``tol`` times its scale (the larger of its best and its first value)
        for ``n_iter_no_change`` epochs.

    n_iter_no_change : int, default=10
        Patience of the stopping rule, in epochs.

    n_init : int, default=1
        Number of trainings from different initialisations; the one with the
        lowest objective on the whole graph is kept.

    device : {'auto', 'cpu', 'cuda'}, default='auto'
        Where the network is trained; ``'auto'`` picks CUDA when available. On
        CUDA the kNN graph is built there too (exact, blockwise) and the data, the
        graph and the batches stay on the device. Fitted weights are NumPy arrays.

    n_jobs : int, default=None
        CPU threads of the neighbour search and of torch's CPU training; ``None``
        means 1, ``-1`` all cores. Results do not depend on it.

    random_state : int, RandomState instance or None, default=None
        Seeds the initialisations and the batches. Same seed, same data, same
        machine (on the CPU): same labels.

    verbose : bool, default=False
        Show a progress bar (tqdm) over the training epochs.

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        Cluster of each training sample: the argmax of its probabilities.

    n_clusters_ : int
        Number of non-empty clusters. The network's outputs of clusters that no
        training sample chose are removed (with a warning), so labels run from 0
        to ``n_clusters_ - 1``.

    coefs_ : list of ndarray
        Weight matrices of the network, ``coefs_[i]`` of shape
        (n_inputs of layer i, n_outputs of layer i); the standardisation of the
        features is folded into the first one.

    intercepts_ : list of ndarray
        Bias vectors of the network.

    affinity_matrix_ : scipy.sparse.csr_matrix of shape (n_samples, n_samples)
        The graph W (symmetric, zero diagonal).

    objective_ : float
        Objective of the kept network on the whole graph: the ratio-cut bound
        (in units of the graph's total weight) plus ``gamma`` times the KL term.

    loss_curve_ : ndarray of shape (n_iter_,)
        Mean mini-batch objective of each epoch of the kept training (during
        annealing, with the annealed bound).

    n_iter_ : int
        Epochs of the kept training.

    n_features_in_ : int
        Number of features seen during ``fit``.

    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during ``fit``. Defined only when `X`
        has feature names that are all strings.

    See Also
    --------
    sklearn.cluster.SpectralClustering : Relaxes the (normalised) cut to an
        eigenproblem on the whole graph.
    skdiffclust.prcut.ratio_cut : The ratio cut of a partition.

    Notes
    -----
    For a cluster with probabilities p and mean p_bar, the expected ratio cut is
    bounded by ``1/p_bar * sum_ij W_ij (p_i + p_j - 2 p_i p_j)`` (eq. 7). Each
    step samples a left and a right batch and reads the block of W between them
    from the CSR graph as an edge list (O(batch_size * n_neighbors), never
    densified), divides the bound by the block's total weight, and back-propagates
    ``sum_i p_i * sg(g_i)`` where g is the gradient of eq. 8 evaluated with the
    moving average P-bar, plus ``gamma * KL(mean P || uniform)`` of the batch.
    P-bar is floored at 1% of 1/k so that an emptying cluster never gives an
    infinite or NaN gradient, and a block without edges contributes no ratio-cut
    gradient. Features are standardised before entering the network.

    Annealing (``annealing > 0``, not in the paper) uses the identity
    ``p_i + p_j - 2 p_i p_j = (p_i - p_j)^2 + p_i (1 - p_i) + p_j (1 - p_j)``:
    a Laplacian part, and a concave hardness part that vanishes only for hard
    assignments. With the hardness part weighted by a small s, the uniform
    assignment minimises the bound; as s grows it first becomes unstable along
    the smoothest generalised eigenvectors of the graph (``L v = lambda D v``),
    the directions spectral clustering embeds the data in, and at s = 1 the
    objective is eq. 7 again. This is deterministic annealing applied to the
    bound; the eq. 8 gradient carries over with ``1 - 2 p_j`` replaced by
    ``s + 2 (1 - s) p_i - 2 p_j``.

    A graph with several connected components has ratio cut 0 for any partition
    that keeps each component whole; a warning says so. Identical samples get
    identical probabilities, hence the same cluster.

    On the CPU, results are reproducible for a given ``random_state``; on CUDA,
    scatter additions make them reproducible only up to rounding.

    References
    ----------
    .. [1] A. Ghriss, C. Monteleoni. "Deep Clustering via Probabilistic Ratio-Cut
       Optimization", AISTATS 2025.

    Examples
    --------
    >>> import numpy as np
    >>> from skdiffclust.prcut import PRCut
    >>> rng = np.random.default_rng(0)
    >>> X = np.concatenate([rng.normal(0, 0.5, (30, 2)), rng.normal(2, 0.5, (30, 2))])
    >>> model = PRCut(n_clusters=2, random_state=0).fit(X)
    >>> np.bincount(model.labels_[:30]), np.bincount(model.labels_[30:])
    (array([30]), array([ 0, 30]))
    >>> model.predict([[0.1, 0.0], [2.1, 1.9]])
    array([0, 1])
    >>> model.predict_proba([[0.0, 0.0], [1.0, 1.0]]).round(1)  # sure, then unsure
    array([[1. , 0. ],
           [0.7, 0.3]])
    """

    _parameter_constraints: dict = {
        "n_clusters": [Interval(Integral, 1, None, closed="left")],
        "affinity": [StrOptions({"nearest_neighbors", "rbf", "precomputed"})],
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "rbf_gamma": [Interval(Real, 0, None, closed="neither"), None],
        "hidden_layer_sizes": ["array-like"],
        "gamma": [Interval(Real, 0, None, closed="left")],
        "momentum": [Interval(Real, 0, 1, closed="right")],
        "annealing": [Interval(Real, 0, 1, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "device": [StrOptions({"auto", "cpu", "cuda"})],
        "n_jobs": [Integral, None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(self, n_clusters=8, *, affinity="nearest_neighbors", n_neighbors=10,
                 rbf_gamma=None, hidden_layer_sizes=(), gamma=100.0, momentum=0.8,
                 annealing=0.0, batch_size=1024, max_iter=500, learning_rate=1e-2, tol=1e-3,
                 n_iter_no_change=10, n_init=1, device="auto", n_jobs=None,
                 random_state=None, verbose=False):
        self.n_clusters = n_clusters
        self.affinity = affinity
        self.n_neighbors = n_neighbors
        self.rbf_gamma = rbf_gamma
        self.hidden_layer_sizes = hidden_layer_sizes
        self.gamma = gamma
        self.momentum = momentum
        self.annealing = annealing
        self.batch_size = batch_size
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.n_init = n_init
        self.device = device
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Build the graph and train the network on its ratio cut.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features) or \
                (n_samples, n_samples)
            Training samples, or a symmetric affinity matrix if
            ``affinity='precomputed'`` (the only case where sparse input is
            accepted).

        y : Ignored
            Not used, present for API consistency by convention.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        precomputed = self.affinity == "precomputed"
        X = validate_data(self, X, accept_sparse="csr" if precomputed else False,
                          dtype=[np.float64, np.float32], ensure_min_samples=2)
        n_samples = X.shape[0]
        hidden = _check_hidden_layer_sizes(self.hidden_layer_sizes)
        if self.n_clusters > n_samples:
            raise ValueError(
                f"n_clusters={self.n_clusters} must be <= n_samples={n_samples}."
            )
        device = _import_training()[1].resolve_device(self.device)
        graph = self._build_graph(X, device)
        _warn_on_degenerate_graph(graph, X, precomputed)
        objective, coefs, intercepts, curve, n_iter, P = self._train_networks(
            X, graph, hidden, device)
        used = np.unique(P.argmax(1))
        if used.size < self.n_clusters:
            warnings.warn(
                f"Only {used.size} of the n_clusters={self.n_clusters} clusters are "
                "the most likely cluster of some training sample; the others are "
                "removed (n_clusters_ < n_clusters). A larger gamma favours "
                "balanced clusters.", UserWarning, stacklevel=3,
            )
            coefs = [*coefs[:-1], coefs[-1][:, used]]
            intercepts = [*intercepts[:-1], intercepts[-1][used]]
            P = P[:, used]
        self.coefs_ = coefs
        self.intercepts_ = intercepts
        self.affinity_matrix_ = graph
        self.objective_ = float(objective)
        self.loss_curve_ = curve
        self.n_iter_ = int(n_iter)
        self.n_clusters_ = int(used.size)
        self.labels_ = P.argmax(1).astype(np.int64)
        return self

    def _train_networks(self, X, graph, hidden, device):
        """Train ``n_init`` networks; keep the one of lowest objective on the graph."""
        inputs, shift, scale = _network_inputs(X, self.affinity == "precomputed")
        training = _import_training()[0]
        seeds = derive_seeds(self.random_state, 2 * self.n_init)
        best = None
        for init in range(self.n_init):
            name = "PRCut" if self.n_init == 1 else f"PRCut ({init + 1}/{self.n_init})"
            coefs, intercepts, result = training.train_prcut(
                inputs, graph, n_clusters=self.n_clusters,
                hidden_layer_sizes=hidden, batch_size=self.batch_size,
                max_iter=self.max_iter, learning_rate=self.learning_rate,
                momentum=self.momentum, gamma=self.gamma,
                annealing=self.annealing, tol=self.tol,
                n_iter_no_change=self.n_iter_no_change, device=device,
                init_seed=seeds[2 * init], batch_seed=seeds[2 * init + 1],
                verbose=self.verbose, n_threads=_n_threads(self.n_jobs), name=name,
            )
            _check_finite(coefs, intercepts)
            coefs, intercepts = _fold_standardisation(coefs, intercepts, shift, scale)
            P = predict_probabilities(X, coefs, intercepts)
            bound, kl = prcut_objective(graph, P, self.gamma)
            objective = bound + self.gamma * kl
            if best is None or objective < best[0]:
                best = (objective, coefs, intercepts, result.loss_curve, result.n_iter, P)
        return best

    def _build_graph(self, X, device):
        if self.affinity == "precomputed":
            return check_precomputed_affinity(X)
        n_neighbors = self.n_neighbors
        if n_neighbors >= X.shape[0]:
            warnings.warn(
                f"n_neighbors={n_neighbors} >= n_samples={X.shape[0]}; using "
                f"n_neighbors={X.shape[0] - 1} (every other sample).",
                UserWarning, stacklevel=4,
            )
            n_neighbors = X.shape[0] - 1
        kernel = "connectivity" if self.affinity == "nearest_neighbors" else "rbf"
        if device.type == "cuda":
            from skdiffclust.prcut._device import knn_search

            distances, neighbors = knn_search(X, n_neighbors, device)
            return affinity_from_neighbors(distances, neighbors, kernel=kernel,
                                           rbf_gamma=self.rbf_gamma)
        return knn_affinity(X, n_neighbors, kernel=kernel, rbf_gamma=self.rbf_gamma,
                            n_jobs=self.n_jobs)

    def predict_proba(self, X):
        """Cluster-assignment probabilities of new samples, from the network.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_queries, n_features) or \
                (n_queries, n_samples_fit)
            New samples, or their affinities to the training samples if
            ``affinity='precomputed'``.

        Returns
        -------
        proba : ndarray of shape (n_queries, n_found_clusters)
            One column per cluster of ``labels_`` (``n_clusters_`` of them);
            each row sums to 1.
        """
        check_is_fitted(self)
        sparse = "csr" if self.affinity == "precomputed" else False
        X = validate_data(self, X, reset=False, dtype=[np.float64, np.float32],
                          accept_sparse=sparse)
        return predict_probabilities(X, self.coefs_, self.intercepts_)

    def predict(self, X):
        """Most likely cluster of each new sample.

        On the training samples this gives ``labels_``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_queries, n_features) or \
                (n_queries, n_samples_fit)
            New samples, or their affinities to the training samples if
            ``affinity='precomputed'``.

        Returns
        -------
        labels : ndarray of shape (n_queries,)
            Cluster of each sample.
        """
        return self.predict_proba(X).argmax(1).astype(np.int64)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        precomputed = self.affinity == "precomputed"
        tags.input_tags.pairwise = precomputed
        tags.input_tags.sparse = precomputed
        tags.input_tags.positive_only = precomputed
        return tags


def _import_training():
    try:
        from skdiffclust._utils import _torch
        from skdiffclust.prcut import _training
    except ImportError as error:
        raise ImportError(
            'PRCut needs PyTorch: pip install "skdiffclust[torch]"') from error
    return _training, _torch


def _check_hidden_layer_sizes(hidden_layer_sizes):
    sizes = np.asarray(hidden_layer_sizes)
    valid = sizes.ndim == 1 and (
        sizes.size == 0 or (sizes.dtype.kind in "iu" and sizes.min() >= 1))
    if not valid:
        raise ValueError(
            "hidden_layer_sizes must be a sequence of positive integers, got "
            f"{hidden_layer_sizes!r}."
        )
    return tuple(int(s) for s in sizes)


def _n_threads(n_jobs):
    if n_jobs is None:
        return 1
    if n_jobs < 0:
        return max((os.cpu_count() or 1) + 1 + n_jobs, 1)
    return max(int(n_jobs), 1)


def _network_inputs(X, precomputed):
    """Standardised features for the network; rows of an affinity are kept as they
    are (dense or sparse alike, and sparse ones stay sparse)."""
    if precomputed:
        return X, None, None
    shift = X.mean(0)
    scale = X.std(0)
    scale[scale == 0] = 1.0
    return (X - shift) / scale, shift, scale


def _fold_standardisation(coefs, intercepts, shift, scale):
    """First layer on raw features: (x - shift) / scale @ A + b = x @ A' + b'."""
    if shift is None:
        return coefs, intercepts
    first = coefs[0] / scale[:, None]
    return [first, *coefs[1:]], [intercepts[0] - shift @ first, *intercepts[1:]]


def _check_finite(coefs, intercepts):
    if not all(np.all(np.isfinite(a)) for a in (*coefs, *intercepts)):
        raise FloatingPointError(
            "PRCut's training diverged (non-finite weights); lower learning_rate."
        )


def _warn_on_degenerate_graph(graph, X, precomputed):
    n_components = n_connected_components(graph)
    if graph.nnz == 0:
        warnings.warn(
            "The affinity graph has no edge: every partition has ratio cut 0, and "
            "only the KL term shapes the clusters.", UserWarning, stacklevel=4,
        )
    elif n_components > 1:
        warnings.warn(
            f"The affinity graph is not connected ({n_components} components): any "
            "partition keeping each component whole has ratio cut 0.",
            UserWarning, stacklevel=4,
        )
    if not precomputed and np.all(X == X[0]):
        warnings.warn(
            "All samples are identical: they all get the same cluster.",
            UserWarning, stacklevel=4,
        )

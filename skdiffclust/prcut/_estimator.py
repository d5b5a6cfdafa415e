"""PRCut: deep clustering by probabilistic ratio-cut optimisation."""

from numbers import Integral, Real

import numpy as np
from scipy.special import softmax
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    ClusterMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted

from skdiffclust._training._stream import forget_stream, keep_stream, resumed_stream
from skdiffclust._utils._state import keeps_state_on_failure
from skdiffclust._utils._threads import device_type
from skdiffclust._utils._validation import (N_JOBS, NumberInterval, RenamedParameters,
                                            refusing_former_names,
                                            check_hidden_layer_sizes, check_magnitude,
                                            check_n_clusters)
from skdiffclust.prcut._graph_path import fit_on_graph, neighbour_votes
from skdiffclust.prcut._inference import (COUNT_ATTRIBUTES, NETWORK_ATTRIBUTES, exported_network,
                                          fitted_attributes, fitted_count, module_logits,
                                          predict_logits)
from skdiffclust.prcut._inputs import (check_fit_inputs, check_samples, check_stream_affinity,
                                       score_of_predictions, validated_queries,
                                       warn_if_no_clusters)
from skdiffclust.prcut._settings import PRCutSettings, StartSettings, resolved_solver
from skdiffclust.prcut._start import network_input, training_device, training_start
from skdiffclust.prcut._stream import PRCutStream


class PRCut(RenamedParameters, ClassNamePrefixFeaturesOutMixin, TransformerMixin, ClusterMixin,
            BaseEstimator):
    """Deep clustering by probabilistic ratio-cut optimisation (PRCut).

    A network maps each sample to cluster probabilities; PRCut minimises, by
    mini-batch gradient descent, an upper bound of the expected ratio cut of a
    similarity graph, plus a KL term that keeps clusters from collapsing (Ghriss
    & Monteleoni, 2025). New samples are assigned by the trained network.
    Up to 20,000 samples (``solver='auto'``, not in the paper) the objective is
    descended on the whole graph instead, and new samples join their neighbours.

    By default (``init='auto'``, not in the paper) the network is first fitted
    to spectral clustering's partition of the graph (reweighted by shared
    neighbours where it has hubs); ``init='random'`` is the paper's algorithm.
    The network is a built-in MLP or your own ``torch.nn.Module`` (``module``).
    Needs PyTorch to fit; with the built-in network, ``predict``,
    ``predict_proba`` and ``transform`` run in NumPy. Read more in the
    :ref:`User Guide <prcut>`, which lists the defaults that differ from the paper.

    Parameters
    ----------
    n_clusters : int or 'auto', default=8
        Number of clusters k (outputs of the network). ``'auto'``: where the graph
        has hubs (images), the number from 2 to ``max_clusters`` whose partitions
        are the most stable, if it stands out; elsewhere, or else, its connected
        components of 10% of the samples or more, when there are two or more, or
        the number after which the spectrum of its normalised Laplacian jumps
        most in ratio (:ref:`n_clusters_auto`).

    max_clusters : int, default=50
        The largest number ``n_clusters='auto'`` considers.

    affinity : {'nearest_neighbors', 'rbf', 'precomputed'}, default='nearest_neighbors'
        The similarity graph W whose ratio cut is minimised, kept sparse.
        ``'nearest_neighbors'``: the kNN connectivity ``(A + A.T) / 2``;
        ``'rbf'``: the same, times ``exp(-rbf_gamma ||x_i - x_j||^2)``;
        ``'precomputed'``: ``X`` is the (n_samples, n_samples) affinity, dense or
        sparse, and the network reads its rows (:ref:`prcut_parameters`).

    n_neighbors : int, default=10
        Neighbours per sample of the graph, among the distinct samples (a copy joins
        its copies); at most the distinct samples less one, with a warning.

    neighbors_algorithm : {'auto', 'exact', 'approximate'}, default='auto'
        How the graph's neighbours are searched: ``'exact'`` (scikit-learn or
        blockwise torch), ``'approximate'`` (the package's inverted-file index,
        seeded by ``random_state``), ``'auto'``: exact up to 20,000 samples or
        while affordable (many features), approximate otherwise
        (:ref:`prcut_parameters`). Ignored with ``affinity='precomputed'``.

    rbf_gamma : float, default=None
        Inverse squared bandwidth of ``affinity='rbf'``, in the units of X;
        ``None`` takes one over the median squared distance along the graph's
        edges.

    hidden_layer_sizes : tuple of int, default=(64, 64)
        Hidden layers of the built-in network (GELU). ``()``: a linear map, the
        paper's model on pretrained representations.

    module : torch.nn.Module, default=None
        Your own network in place of the built-in one, mapping a float tensor of
        samples of X as given (any shape whose first axis is the samples) to
        ``n_clusters`` logits. A deep copy, ``module_``, is trained from its
        weights; its input is not standardised. The graph is built from X
        flattened, or from ``fit``'s ``graph_input``. Read more in
        :ref:`prcut_module`.

    balance : float, default=0.3
        Weight of the KL(P-bar || uniform) regulariser (the paper's gamma).
        Large values force balanced clusters (the paper's 100); small ones let
        the ratio cut choose the sizes (:ref:`prcut`).

    solver : {'auto', 'graph', 'network'}, default='auto'
        ``'network'``: train the network by mini-batches (the paper's). ``'graph'``:
        no network; from the spectral start or the graph's spanning tree cut by
        Genie's balance rule, whichever has the lower objective, single samples
        move between clusters while that lowers the objective on the whole graph
        (each sweep an epoch); ``predict`` takes the majority cluster of the
        ``n_neighbors`` nearest training samples. ``'auto'``: ``'graph'`` up to
        20,000 samples with the built-in network's input (:ref:`prcut_solver`).

    keep_components : bool, default=True
        When the graph has at least ``n_clusters`` connected components, return
        whole components (grouped, with a warning, when there are more), without
        training. ``False``: the objective decides (the paper's algorithm).

    momentum : float, default=0.8
        Rate beta of the moving average of the cluster proportions P-bar (the
        authors' code's; the paper's decays as beta / t).

    annealing : float in [0, 1), default=0.0
        Fraction of ``max_iter`` spent raising the bound's hardness from 0.01 to 1
        before early stopping may end training. ``0``: algorithm 1 as published.

    batch_size : int, default=1024
        Size of the left and of the right batch (at most ``n_samples``); an epoch
        is ``max(n_samples // batch_size, 1)`` batch pairs.

    max_iter : int, default=500
        Maximum number of epochs of PRCut's training (``ConvergenceWarning``
        when they run out first).

    learning_rate : float or 'auto', default='auto'
        Adam's step size. ``'auto'``: 3e-3 (the paper's 1e-2 made the trained
        partition chaotic), shrunk by a short cool-down once the stopping rule
        holds (counted in ``n_iter_``).

    tol : float, default=1e-3
        Training stops when the epoch's objective has not fallen by ``tol`` times
        its scale for ``n_iter_no_change`` epochs.

    n_iter_no_change : int or 'auto', default='auto'
        Patience of the stopping rule, in epochs; training also waits until an
        epoch moves at most 0.1% of the samples, or its moves stop falling for 5
        epochs. ``'auto'``: the epochs of about 32 batch pairs, 10 to 32.

    n_init : int, default=1
        Trainings from different seeds; of their networks (and the one fitted to
        the start), the one using the most clusters, then of lowest objective, is kept.

    init : {'auto', 'spectral_snn', 'spectral', 'random'}, default='auto'
        ``'spectral'``: first fit the network to spectral clustering's partition
        of the graph; ``'spectral_snn'``: of its edges reweighted by shared
        neighbours, which ``fit`` then trains on (:ref:`the start
        <prcut_spectral_snn>`); ``'auto'``: the latter where the graph has hubs
        and no clear eigengap (:ref:`the defaults <prcut_defaults>`); ``'random'``: the paper's.

    n_eigenvectors : int or 'auto', default='auto'
        Eigenvectors of the spectral start. ``n_clusters`` (or ``None``):
        discretised by column-pivoted QR; more: their unit rows clustered by
        k-means (:ref:`the wide start <prcut_wide_start>`). ``'auto'``: on the
        shared-neighbour start, 1 to 3 times ``n_clusters``, a wide partition
        kept when its objective is at most half the narrow one's; on the graph
        itself, ``n_clusters`` (:ref:`defaults <prcut_defaults>`). Ignored with
        ``init='random'``.

    device : {'auto', 'cpu', 'cuda'}, default='auto'
        Where the network is trained (and, on CUDA, the kNN graph built).

    n_jobs : int, default=None
        CPU threads of the neighbour search and the start's graph products and counts; ``None``
        means 1 unless in a ``joblib.parallel_config`` context, ``-1`` every core (:term:`n_jobs`).
        The network and eigenvectors use one thread, so the labels do not depend on it.

    random_state : int, RandomState instance or None, default=None
        Seeds every random draw: same seed and data, same labels on the CPU, with
        any ``n_jobs``.

    verbose : bool, default=False
        Show a progress bar (tqdm) over the training epochs.

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        Cluster of each training sample: the argmax of its probabilities, or, where
        the graph's components are returned whole (``keep_components``), its
        component's cluster, which ``predict`` (the network) may not give a sample
        on a component's edge.

    n_clusters_ : int
        Number of non-empty clusters (unused outputs are removed, with a
        warning); labels and the columns of ``predict_proba`` follow them.

    n_clusters_candidates_, n_clusters_scores_ : ndarray of shape (n_candidates,)
        The numbers ``n_clusters='auto'`` chose among, and their scores: the log
        ratio of the Laplacian's eigenvalues k + 1 and k, or where the graph has
        hubs the stability of the partitions. Only with ``'auto'``.

    n_clusters_modularity_ : ndarray of shape (n_candidates,)
        The modularity of a partition at each candidate, where the stability was
        measured.

    solver_ : str
        The path the fit took: ``'graph'`` or ``'network'``.

    X_fit_ : {ndarray, sparse matrix} of shape (n_samples, n_features)
        The training samples as the graph read them (centred, in one global
        scale), which ``predict`` searches. Only with ``solver_ == 'graph'``.

    coefs_ : list of ndarray
        Weight matrices of the built-in network (the standardisation of the
        features folded into the first). Only without ``module``.

    intercepts_ : list of ndarray
        Bias vectors of the built-in network. Only without ``module``.

    module_ : torch.nn.Module
        The trained copy of ``module``, on the CPU. Only with ``module``.

    module_outputs_ : ndarray of shape (`n_clusters_`,)
        The output of ``module_`` that is each cluster's logit (with ``module``).

    affinity_matrix_ : scipy.sparse.csr_matrix or ndarray of shape (n_samples, n_samples)
        The graph W trained on (CSR, symmetric; its shared-neighbour weights
        after that start, with ``fit``), or a dense precomputed affinity as given.

    objective_ : float
        PRCut's objective of ``labels_`` on ``affinity_matrix_`` (the bound at hard
        assignments plus ``gamma`` times the KL term): it compares fits with the
        same number of clusters (``score`` compares any).

    loss_curve_ : ndarray of shape (`n_iter_`,)
        Mean mini-batch objective of each epoch of the kept training.

    n_iter_ : int
        Epochs of PRCut's training in the kept run.

    device_ : str
        Where the fit trained: ``'cpu'`` or ``'cuda'`` (what ``device='auto'``
        chose; ``partial_fit`` trains on the CPU).

    n_features_in_ : int
        Number of features seen during ``fit``.

    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of the features, when `X` has feature names that are all strings.

    See Also
    --------
    sklearn.cluster.SpectralClustering : Relaxes the (normalised) cut to an
        eigenproblem on the whole graph; PRCut's default start.
    skdiffclust.metrics.ratio_cut : The ratio cut of a partition.

    Notes
    -----
    For a cluster with probabilities p and mean p_bar, the expected ratio cut is
    bounded by ``1/p_bar * sum_ij W_ij (p_i + p_j - 2 p_i p_j)`` (eq. 7); each
    step reads the block of W between two batches as an edge list. On CUDA,
    scatter additions make results reproducible only up to rounding.

    References
    ----------
    .. [1] A. Ghriss, C. Monteleoni. "Deep Clustering via Probabilistic Ratio-Cut
       Optimization", AISTATS 2025.
    .. [2] A. Damle, V. Minden, L. Ying. "Simple, direct and efficient multi-way
       spectral clustering", Information and Inference 8(1), 2019.
    .. [3] Y. Zhou, Y. Saad. "A Chebyshev-Davidson algorithm for large symmetric
       eigenproblems", SIAM J. Matrix Anal. Appl. 29(3), 2007.

    Examples
    --------
    >>> import numpy as np
    >>> from skdiffclust.prcut import PRCut
    >>> rng = np.random.default_rng(0)
    >>> X = np.concatenate([rng.normal(0, 0.5, (30, 2)), rng.normal(2, 0.5, (30, 2))])
    >>> model = PRCut(n_clusters=2, random_state=0).fit(X)
    >>> model.predict([[0.1, 0.0], [2.1, 1.9]])
    array([0, 1])
    """

    _renamed_parameters = {"gamma": "balance"}

    _parameter_constraints: dict = {
        "n_clusters": [NumberInterval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "max_clusters": [NumberInterval(Integral, 2, None, closed="left")],
        "affinity": [StrOptions({"nearest_neighbors", "rbf", "precomputed"})],
        "n_neighbors": [NumberInterval(Integral, 1, None, closed="left")],
        "neighbors_algorithm": [StrOptions({"auto", "exact", "approximate"})],
        "rbf_gamma": [NumberInterval(Real, 0, None, closed="neither"), None],
        "hidden_layer_sizes": ["array-like"],
        # torch is imported only to fit: fit checks that it is an nn.Module
        "module": "no_validation",
        "balance": [NumberInterval(Real, 0, None, closed="left")],
        "keep_components": ["boolean"],
        "solver": [StrOptions({"auto", "graph", "network"})],
        "momentum": [NumberInterval(Real, 0, 1, closed="right")],
        "annealing": [NumberInterval(Real, 0, 1, closed="left")],
        "batch_size": [NumberInterval(Integral, 1, None, closed="left")],
        "max_iter": [NumberInterval(Integral, 1, None, closed="left")],
        "learning_rate": [NumberInterval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "tol": [NumberInterval(Real, 0, None, closed="left")],
        "n_iter_no_change": [NumberInterval(Integral, 1, None, closed="left"),
                             StrOptions({"auto"})],
        "n_init": [NumberInterval(Integral, 1, None, closed="left")],
        "init": [StrOptions({"auto", "spectral", "spectral_snn", "random"})],
        "n_eigenvectors": [NumberInterval(Integral, 1, None, closed="left"), None,
                           StrOptions({"auto"})],
        "device": [StrOptions({"auto", "cpu", "cuda"})],
        "n_jobs": N_JOBS,
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    @refusing_former_names
    def __init__(self, n_clusters=8, *, max_clusters=50, affinity="nearest_neighbors",
                 n_neighbors=10, neighbors_algorithm="auto", rbf_gamma=None,
                 hidden_layer_sizes=(64, 64), module=None, balance=0.3, solver="auto",
                 keep_components=True,
                 momentum=0.8, annealing=0.0, batch_size=1024, max_iter=500,
                 learning_rate="auto", tol=1e-3, n_iter_no_change="auto", n_init=1,
                 init="auto", n_eigenvectors="auto", device="auto", n_jobs=None,
                 random_state=None, verbose=False):
        self.n_clusters = n_clusters
        self.max_clusters = max_clusters
        self.affinity = affinity
        self.n_neighbors = n_neighbors
        self.neighbors_algorithm = neighbors_algorithm
        self.rbf_gamma = rbf_gamma
        self.hidden_layer_sizes = hidden_layer_sizes
        self.module = module
        self.balance = balance
        self.solver = solver
        self.keep_components = keep_components
        self.momentum = momentum
        self.annealing = annealing
        self.batch_size = batch_size
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.n_init = n_init
        self.init = init
        self.n_eigenvectors = n_eigenvectors
        self.device = device
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    @_fit_context(prefer_skip_nested_validation=True)
    @keeps_state_on_failure
    def fit(self, X, y=None, *, graph_input=None):
        """Build the graph and train the network on its ratio cut.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features) or \
                (n_samples, n_samples)
            Training samples, or a symmetric affinity matrix if
            ``affinity='precomputed'``. With ``module``, any array whose first
            axis is the samples (e.g. images), given to the module as it is.

        y : Ignored
            Not used, present for API consistency by convention.

        graph_input : {array-like, sparse matrix} of shape (n_samples, \
                n_graph_features) or (n_samples, n_samples), default=None
            What the graph is built from in place of X (then only the network's
            input): other features of the samples (PCA, a pretrained embedding),
            or, with ``affinity='precomputed'``, their affinity matrix.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        X = check_samples(self, X, reset=True, ensure_min_samples=2)
        forget_stream(self)
        check_hidden_layer_sizes(self.hidden_layer_sizes)  # before any work
        check_n_clusters(self.n_clusters, X.shape[0], auto=True)
        self._graph_input_used = graph_input is not None
        graph_input = check_fit_inputs(X, graph_input, affinity=self.affinity)
        self._graph_input_width = None if graph_input is None else graph_input.shape[1]
        settings = self._training_settings(
            X.shape[0], training_device(self.device), verbose=self.verbose)
        solver = resolved_solver(self.solver, X.shape[0], module=self.module, init=self.init,
                                 graph_input=graph_input, affinity=self.affinity)
        begun = training_start(X, settings, StartSettings.of(self),
                               n_seeds=2 * self.n_init + 1, graph_input=graph_input)
        if solver == "graph":
            labels, curve = fit_on_graph(begun, begun.settings)
            self._set_fitted(None, labels, begun.graph, curve, begun.count,
                             begun.settings.device, X_fit=begun.scaling)
            return warn_if_no_clusters(self, X, graph_input, begun.count)
        from skdiffclust.prcut._fit import train_and_keep_best  # torch, checked above
        inputs, settings = network_input(X, begun.scaling, begun.settings)
        weights, curve = train_and_keep_best(
            inputs, begun.graph, settings, n_init=self.n_init, seeds=begun.seeds,
            initial_labels=begun.initial_labels, whole=begun.whole)
        network, labels = exported_network(weights, X, begun.scaling, self.module)
        if begun.whole:  # the components exactly, whatever a boundary sample's network says
            labels = begun.initial_labels
        self._set_fitted(network, labels, begun.graph, curve, begun.count, settings.device)
        return warn_if_no_clusters(self, X, graph_input, begun.count)

    @_fit_context(prefer_skip_nested_validation=True)
    @keeps_state_on_failure
    def partial_fit(self, X, y=None):
        """One pass over a chunk of the data, continuing the previous calls' training.

        The first call (or the first after :meth:`fit`, which it does not continue)
        starts from its chunk as ``fit`` does and freezes the centring and scales of
        its features: feed a representative first chunk (a later one far beyond its
        range is warned of, beyond 1e15 of its units refused). Each call makes one
        pass over its chunk's own kNN graph, continuing the network, Adam, P-bar and
        the annealing; the stream, not ``max_iter``, decides how long training lasts.
        ``n_iter_`` counts the calls. Trains on the CPU, whatever ``device``
        (:ref:`streaming`).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            A chunk of the training samples (at least 2; the first chunk at least
            ``n_clusters``). ``affinity='precomputed'`` is not supported.

        y : Ignored
            Not used, present for API consistency by convention.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        check_stream_affinity(self.affinity)
        stream = resumed_stream(self)
        X = check_samples(self, X, reset=stream is None, ensure_min_samples=2)
        if stream is None:
            check_n_clusters(self.n_clusters, X.shape[0], auto=True)
        check_magnitude(X)
        check_hidden_layer_sizes(self.hidden_layer_sizes)
        self._graph_input_used = False
        settings = self._training_settings(X.shape[0], training_device("cpu"))
        from skdiffclust.prcut._fit import INIT_ERROR_TARGET  # torch, checked above
        start = StartSettings.of(self)
        if stream is None:
            stream, scaling, graph, count, weights = PRCutStream.first_call(
                X, settings, start, n_init=self.n_init, fit_target=INIT_ERROR_TARGET)
        else:  # on a copy: a failed call leaves the estimator as it was
            count = fitted_count(self)  # the first call's
            stream, scaling, graph, weights = stream.continued(
                X, start, settings.but(n_clusters=count.n_clusters))
        network, labels = exported_network(weights, X, scaling, self.module)
        self._set_fitted(network, labels, graph, stream.curve(), count, "cpu",
                         keep_all=X.shape[0] < count.n_clusters)
        keep_stream(self, stream, X)
        return self

    def _training_settings(self, n_samples, device, verbose=False):
        """The training's settings (``fit``'s and ``partial_fit``'s), its ``'auto'``
        values resolved for ``n_samples`` samples, before the network's input is
        known (``_start.network_input`` completes them)."""
        return PRCutSettings.of(
            self, n_samples, hidden_layer_sizes=check_hidden_layer_sizes(self.hidden_layer_sizes),
            device=device, verbose=verbose)

    def _set_fitted(self, network, labels, graph, curve, count, device, keep_all=False,
                    X_fit=None):
        """The fitted attributes (``_inference.fitted_attributes``) of a fit on
        ``device``: of its network, or (``network`` None) of the graph path on ``X_fit``."""
        for name in NETWORK_ATTRIBUTES + COUNT_ATTRIBUTES:  # an earlier fit's
            vars(self).pop(name, None)
        vars(self).update(fitted_attributes(
            network, labels, graph, curve, count=count, gamma=self.balance,
            module=self.module, start=StartSettings.of(self), keep_all=keep_all,
            X_fit=X_fit), device_=device_type(device))

    def predict_proba(self, X):
        """Cluster-assignment probabilities of new samples, from the network (or the
        training samples' votes, ``solver_ == 'graph'``).

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
            each row sums to 1. In float64.
        """
        return self._proba(self._validate_queries(X))

    def transform(self, X):
        """Cluster-assignment probabilities of samples, in the dtype of X.

        :meth:`predict_proba`'s, as a transformer's output (float32 for float32
        input; ``set_output`` applies).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_queries, n_features) or \
                (n_queries, n_samples_fit)
            New samples, or their affinities to the training samples if
            ``affinity='precomputed'``.

        Returns
        -------
        proba : ndarray of shape (n_queries, n_found_clusters)
            Each row sums to 1.
        """
        X = self._validate_queries(X)
        return self._proba(X).astype(X.dtype, copy=False)

    def _validate_queries(self, X):
        check_is_fitted(self)
        return validated_queries(self, X)

    def _proba(self, X):
        """Probabilities in float64: the network's softmax, or on the graph path
        the votes of the nearest training samples."""
        if hasattr(self, "X_fit_"):  # in the training samples' centring and scale
            return neighbour_votes(self.X_fit_, self.labels_, self.n_clusters_,
                                   self._query_scaling.applied_to(X).metric,
                                   self._fitted_with.start.n_neighbors)
        return softmax(self._logits(X), axis=1)

    def _logits(self, X):
        """The fitted network's logits of the clusters found, in float64."""
        if hasattr(self, "module_"):
            return module_logits(self.module_, X)[:, self.module_outputs_]
        return predict_logits(X, self.coefs_, self.intercepts_)

    @property
    def _n_features_out(self):
        return self.n_clusters_

    def predict(self, X):
        """Most likely cluster of each new sample (on the training samples, ``labels_``).

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

    def score(self, X, y=None, *, graph_input=None):
        """Silhouette of the partition ``predict`` gives X (higher is better).

        The mean silhouette (euclidean) of X's clusters in the features the graph
        is built from (``graph_input`` if fit had one), -1 where undefined; above
        4,000 samples, that of a fixed sample. With ``affinity='precomputed'``,
        Barber's modularity of the queries' affinities to the training samples.
        Unlike ``objective_``, it compares numbers of clusters: ``GridSearchCV``
        over ``n_clusters`` without a scorer chooses by it.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_queries, n_features) or \
                (n_queries, n_samples_fit)
            At least two samples.

        y : Ignored
            Not used, present for API consistency by convention.

        graph_input : {array-like, sparse matrix} of shape (n_queries, \
                n_graph_features) or (n_queries, n_samples_fit), default=None
            The queries' graph features, or their affinities to the training
            samples (``affinity='precomputed'``), when ``fit`` had a
            ``graph_input``.

        Returns
        -------
        score : float
        """
        return score_of_predictions(self, check_samples(self, X, reset=False),
                                    self.predict(X), graph_input)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        precomputed = self.affinity == "precomputed"
        tags.input_tags.pairwise = precomputed
        tags.input_tags.sparse = self.neighbors_algorithm != "approximate"  # dense only
        tags.input_tags.positive_only = precomputed
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags

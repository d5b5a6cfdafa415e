"""PRCut: deep clustering by probabilistic ratio-cut optimisation."""

import os
import warnings
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
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from skdiffclust._training._stream import forget_stream, keep_stream
from skdiffclust._utils._random import derive_seeds
from skdiffclust._utils._state import keeps_state_on_failure
from skdiffclust._utils._validation import check_hidden_layer_sizes, check_magnitude
from skdiffclust.prcut._graph import (
    check_precomputed_affinity,
    bipartite_objective,
    connected_component_labels,
    group_components,
    partition_objective,
    scaled_knn_graph,
    shared_neighbor_graph,
    warn_on_degenerate_graph,
)
from skdiffclust.prcut._inference import module_logits, predict_logits
from skdiffclust.prcut._inputs import (
    check_graph_input,
    check_samples,
    flat,
    graph_source_and_input,
    score_graph_source,
    x_is_affinity,
)
from skdiffclust.prcut._scaling import AffinityRows, FeatureScaling
from skdiffclust.prcut._stream import PRCutStream


class PRCut(ClassNamePrefixFeaturesOutMixin, TransformerMixin, ClusterMixin, BaseEstimator):
    """Deep clustering by probabilistic ratio-cut optimisation (PRCut).

    A network maps each sample to cluster-assignment probabilities P. PRCut treats
    the assignments as independent random variables and minimises, by mini-batch
    gradient descent, an upper bound of the expected ratio cut of a similarity
    graph (Ghriss & Monteleoni, 2025): the graph is only read batch pair by batch
    pair. A KL divergence between the mean assignment and the uniform distribution
    keeps the clusters from collapsing into one. New samples are assigned by the
    trained network.

    Gradient descent on the bound only improves a partition locally. By default
    (``init='spectral'``, not in the paper) the network is first fitted to the
    partition spectral clustering finds on the same graph (its top eigenvectors,
    computed by subspace iteration; whole components when the graph has at least
    ``n_clusters`` of them), so that training starts from the graph's global
    structure and lowers the ratio cut from there. ``init='random'`` is the
    paper's algorithm.

    Read more in the :ref:`User Guide <prcut>`, which lists the defaults that
    differ from the paper.

    The network is a built-in MLP, or your own ``torch.nn.Module`` (``module``):
    a CNN on images, a head on pretrained features.

    Needs PyTorch (``pip install "skdiffclust[torch]"``) to fit. With the built-in
    network, ``predict``, ``predict_proba`` and ``transform`` run in NumPy (a
    fitted model loads without torch); with ``module``, they run ``module_``.

    Parameters
    ----------
    n_clusters : int, default=8
        Number of clusters k (outputs of the network).

    affinity : {'nearest_neighbors', 'rbf', 'precomputed'}, default='nearest_neighbors'
        The similarity graph W whose ratio cut is minimised, built once and kept
        sparse. ``'nearest_neighbors'``: W_ij = 1 when i and j are among each
        other's ``n_neighbors`` nearest neighbours, 1/2 when only one of them is
        among the other's (``(A + A.T) / 2``: the paper's connectivity graph,
        symmetrised as scikit-learn's ``SpectralClustering`` symmetrises its
        own; mutual neighbours weigh twice a one-way pair, and the spectral
        partitions of this graph had lower ratio cuts on the development data
        than those of the union ``max(A, A.T)``, which is W * 2 rounded up).
        ``'rbf'``: the same, times exp(-rbf_gamma ||x_i - x_j||^2).
        ``'precomputed'``: ``X`` is the (n_samples, n_samples) affinity matrix,
        dense or sparse (symmetric, non-negative, its diagonal ignored); the
        network's input is then the row of ``X``, and ``predict`` takes the
        affinities of new samples to the training samples. A dense affinity is
        read in place, batch block by batch block (no copy).

    n_neighbors : int, default=10
        Neighbours per sample of the graph. Clipped, with a warning, to
        ``n_samples - 1``.

    neighbors_algorithm : {'auto', 'exact', 'approximate'}, default='auto'
        How the graph's neighbours are searched (ignored with
        ``affinity='precomputed'``). ``'exact'``: scikit-learn's
        ``NearestNeighbors`` on the CPU, the blockwise torch search on CUDA.
        ``'approximate'``: FAISS's inverted-file index on the CPU (recall@10
        above 0.99 on the blobs of ``doc/benchmarks.rst``, a few times faster
        from 20,000 samples on); needs ``pip install "skdiffclust[ann]"`` and
        dense ``X``. ``'auto'``: exact up to 20,000 samples, for sparse ``X``,
        on CUDA, or when FAISS is not installed; approximate otherwise. The
        approximate search is seeded by ``random_state`` and gives the same
        graph whatever ``n_jobs``.

    rbf_gamma : float, default=None
        Inverse squared bandwidth of ``affinity='rbf'``, in the units of X;
        ``None`` takes one over the median squared distance along the graph's
        edges.

    hidden_layer_sizes : tuple of int, default=(64, 64)
        Hidden layers of the network (GELU activations). ``()`` is a linear map
        followed by the softmax, the paper's model on pretrained representations;
        on raw features it cannot draw curved boundaries (two moons, circles).
        Ignored when ``module`` is given.

    module : torch.nn.Module, default=None
        Your own network in place of the built-in one: any ``nn.Module`` mapping
        a float tensor of samples of X, of shape (batch, n_features), or
        (batch, 28, 28) for images given as such, to ``n_clusters`` logits: X
        may have any shape whose first axis is the samples, and reaches the
        module as it is. PRCut trains a deep copy, ``module_``; the module
        passed is never changed, and every training starts from its weights
        (pretrained ones are kept). Its input is X as given, in the dtype of its
        parameters (float32 unless it was converted): PRCut's standardisation
        of the features is the built-in network's only, so scale the data first
        or normalise inside the module. The graph is built from X flattened, or
        from ``fit``'s ``graph_input``. Sparse rows are densified a batch at a
        time; with ``affinity='precomputed'`` the input is the row of
        affinities. Uninitialised (lazy) parameters, e.g. of
        ``nn.LazyLinear``, are drawn from ``random_state`` (torch's global
        generators are left as they were). ``None``: the built-in MLP. Read more
        in the :ref:`User Guide <prcut_module>`.

    gamma : float, default=0.3
        Weight of the KL(P-bar || uniform) regulariser. Large values force
        balanced clusters (the paper's 100 forbids the unbalanced partitions of
        most real data, and at 1 the balance still outvotes near-zero cuts:
        groups of sizes 10:3:1 cut through); small ones let the ratio cut choose
        the sizes but risk clusters dying out, which the spectral start and the
        selection of partitions that use every cluster prevent.

    keep_components : bool, default=True
        When the graph has at least ``n_clusters`` connected components, return
        whole components (ratio cut 0): the components themselves when there
        are ``n_clusters`` of them, else grouped into clusters of balanced
        sizes (with a warning); the network is fitted to that partition and
        PRCut's training, which could only cut through components, does not
        run. ``False``: the objective decides, whose balance term may cut
        through components to even out the sizes (the paper's algorithm).

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
        Maximum number of epochs of PRCut's training (the fit to the initial
        partition has its own budget, see Notes); a ``ConvergenceWarning`` says
        when they ran out before the objective converged.

    learning_rate : float or 'auto', default='auto'
        Adam's step size. ``'auto'``: 3e-3 (also when one batch holds every
        sample, ``n_samples <= batch_size``, and each step reads the whole
        graph, with no sampling noise). The paper's 1e-2 with
        mini-batches made the trained partition chaotic: fits on copies of the
        data that differ in their last digits disagreed on up to 15% of the
        pairs of samples. Once the stopping rule holds, about 8 more steps
        (at least an epoch) shrink it geometrically to 1/16 of its value (a
        cool-down: Adam's steps do not shrink with the gradient, and the
        network would otherwise end wherever the last steps' oscillation put
        it); they count in ``n_iter_`` and ``loss_curve_``.

    tol : float, default=1e-3
        Training stops when the epoch's mean objective has not decreased by more
        than ``tol`` times its scale (the larger of its best and its first value)
        for ``n_iter_no_change`` epochs.

    n_iter_no_change : int or 'auto', default='auto'
        Patience of the stopping rule, in epochs; training also waits until an
        epoch changes the cluster of at most 0.1% of the samples. ``'auto'``:
        the epochs of about 32 batch pairs, between 10 and 32 (32 epochs of one
        step on data of at most ``batch_size`` samples, 10 from 3,200 samples
        on, fewer from 32 batch pairs an epoch on: those of 320 batch pairs): a
        patience of a few steps stops training on a plateau of the objective,
        where copies of the data differing in their last digits stop at
        different epochs.

    n_init : int, default=1
        Number of trainings from different seeds (network and batches; with
        ``module``, batches and lazy parameters; the initial partition is
        computed once); of the networks they produce (and,
        with ``init='spectral'``, those fitted to the initial partition before
        training), the one whose partition uses the most clusters, then has the
        lowest objective on the whole graph, is kept; an objective lower by less
        than 0.1% than that of an earlier candidate (the spectral start first)
        does not displace it.

    init : {'spectral', 'spectral_snn', 'random'}, default='spectral'
        ``'spectral'``: fit the network to spectral clustering's partition of the
        graph before PRCut's training (see Notes). ``'spectral_snn'``: the same
        with spectral clustering run on the graph's edges reweighted by the
        neighbours their ends share (training reads the graph itself), for
        large ``n_neighbors``. ``'random'``: start from the network's random
        initialisation, as in the paper (algorithm 1).

    device : {'auto', 'cpu', 'cuda'}, default='auto'
        Where the network is trained; ``'auto'`` picks CUDA when available. On
        CUDA the kNN graph is built there too (exact, blockwise; unless
        ``neighbors_algorithm='approximate'``) and the data, the
        graph and the batches stay on the device. Fitted weights are NumPy arrays
        (``module_`` is moved back to the CPU).

    n_jobs : int, default=None
        CPU threads of the neighbour search and of torch's CPU training; ``None``
        means 1 for the training and all cores for the search (as scikit-learn's
        brute-force search does), ``-1`` all cores. Results do not depend on it.

    random_state : int, RandomState instance or None, default=None
        Seeds the initialisations (the network and the subspace iteration) and
        the batches. Same seed, same data, same machine (on the CPU): same
        labels, whatever ``n_jobs``.

    verbose : bool, default=False
        Show a progress bar (tqdm) over the training epochs.

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        Cluster of each training sample: the argmax of its probabilities.

    n_clusters_ : int
        Number of non-empty clusters. The network's outputs of clusters that no
        training sample chose are removed (with a warning), so labels run from 0
        to ``n_clusters_ - 1``; the columns of ``predict_proba`` and ``transform``
        are these clusters.

    coefs_ : list of ndarray
        Weight matrices of the built-in network, ``coefs_[i]`` of shape
        (n_inputs of layer i, n_outputs of layer i); the standardisation of the
        features is folded into the first one (and into ``intercepts_[0]``).
        Only without ``module``.

    intercepts_ : list of ndarray
        Bias vectors of the built-in network. Only without ``module``.

    module_ : torch.nn.Module
        The trained copy of ``module``, on the CPU, in evaluation mode (pickled
        with the estimator: loading it needs torch). Only with ``module``.

    module_outputs_ : ndarray of shape (`n_clusters_`,)
        The output of ``module_`` whose logit is each cluster's: the module is
        kept whole, and the outputs of clusters that no training sample chose are
        left out. Only with ``module``.

    affinity_matrix_ : scipy.sparse.csr_matrix or ndarray of shape \
            (n_samples, n_samples)
        The graph W: a CSR matrix (symmetric, zero diagonal), or, for a dense
        precomputed affinity, ``X`` itself (its diagonal is ignored).

    objective_ : float
        PRCut's objective of ``labels_`` on the whole graph (the bound at hard
        assignments: ``4 n / sum(W)`` times the ratio cut, plus ``gamma`` times
        the KL divergence of the cluster proportions from uniform); ``score``
        on the training data gives minus this.

    loss_curve_ : ndarray of shape (`n_iter_`,)
        Mean mini-batch objective of each epoch of the kept training (soft
        assignments; during annealing, with the annealed bound).

    n_iter_ : int
        Epochs of PRCut's training in the kept run.

    n_features_in_ : int
        Number of features seen during ``fit``.

    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during ``fit``. Defined only when `X`
        has feature names that are all strings.

    See Also
    --------
    sklearn.cluster.SpectralClustering : Relaxes the (normalised) cut to an
        eigenproblem on the whole graph; PRCut's default start.
    skdiffclust.prcut.ratio_cut : The ratio cut of a partition.

    Notes
    -----
    For a cluster with probabilities p and mean p_bar, the expected ratio cut is
    bounded by ``1/p_bar * sum_ij W_ij (p_i + p_j - 2 p_i p_j)`` (eq. 7). Each
    step reads the block of W between a left and a right batch as an edge list
    (never densified), divides the bound by the block's total weight, and
    back-propagates ``sum_i p_i * sg(g_i)``, g the eq. 8 gradient with the
    moving average P-bar (floored at 1% of 1/k), plus ``gamma * KL(mean P ||
    uniform)`` of the batch. The user guide details the spectral start, the
    annealing, how features are scaled for the graph and for the network, and
    the defaults that differ from the paper. On the CPU, results are
    reproducible for a given ``random_state``; on CUDA, scatter additions make
    them reproducible only up to rounding.

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
    >>> model.labels_[:30].tolist() == [0] * 30, model.labels_[30:].tolist() == [1] * 30
    (True, True)
    >>> model.predict([[0.1, 0.0], [2.1, 1.9]])
    array([0, 1])
    >>> model.predict_proba([[0.0, 0.0]]).round(2)
    array([[1., 0.]])
    """

    _parameter_constraints: dict = {
        "n_clusters": [Interval(Integral, 1, None, closed="left")],
        "affinity": [StrOptions({"nearest_neighbors", "rbf", "precomputed"})],
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "neighbors_algorithm": [StrOptions({"auto", "exact", "approximate"})],
        "rbf_gamma": [Interval(Real, 0, None, closed="neither"), None],
        "hidden_layer_sizes": ["array-like"],
        # torch is imported only to fit: fit checks that it is an nn.Module
        "module": "no_validation",
        "gamma": [Interval(Real, 0, None, closed="left")],
        "keep_components": ["boolean"],
        "momentum": [Interval(Real, 0, 1, closed="right")],
        "annealing": [Interval(Real, 0, 1, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "tol": [Interval(Real, 0, None, closed="left")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left"),
                             StrOptions({"auto"})],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "init": [StrOptions({"spectral", "spectral_snn", "random"})],
        "device": [StrOptions({"auto", "cpu", "cuda"})],
        "n_jobs": [Integral, None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(self, n_clusters=8, *, affinity="nearest_neighbors", n_neighbors=10,
                 neighbors_algorithm="auto",
                 rbf_gamma=None, hidden_layer_sizes=(64, 64), module=None, gamma=0.3,
                 keep_components=True, momentum=0.8,
                 annealing=0.0, batch_size=1024, max_iter=500, learning_rate="auto", tol=1e-3,
                 n_iter_no_change="auto", n_init=1, init="spectral", device="auto",
                 n_jobs=None,
                 random_state=None, verbose=False):
        self.n_clusters = n_clusters
        self.affinity = affinity
        self.n_neighbors = n_neighbors
        self.neighbors_algorithm = neighbors_algorithm
        self.rbf_gamma = rbf_gamma
        self.hidden_layer_sizes = hidden_layer_sizes
        self.module = module
        self.gamma = gamma
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
            Training samples (dense, or a CSR sparse matrix), or a symmetric
            affinity matrix if ``affinity='precomputed'``. With ``module``, any
            array whose first axis is the samples (images of shape (n_samples,
            28, 28) or (n_samples, 1, 28, 28)), given to the module as it is;
            its graph is built from the samples flattened.

        y : Ignored
            Not used, present for API consistency by convention.

        graph_input : {array-like, sparse matrix} of shape (n_samples, \
                n_graph_features) or (n_samples, n_samples), default=None
            What the graph is built from, in place of X, which is then only the
            network's input: other features of the same samples (PCA features, a
            pretrained embedding such as the paper's DINOv2 or CLIP features),
            searched as ``affinity``, ``n_neighbors`` and
            ``neighbors_algorithm`` say; or, with ``affinity='precomputed'``,
            their symmetric affinity matrix, and X holds the samples' features.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        X = check_samples(self, X, reset=True, ensure_min_samples=2)
        forget_stream(self)
        n_samples = X.shape[0]
        check_hidden_layer_sizes(self.hidden_layer_sizes)  # before any work
        if self.n_clusters > n_samples:
            raise ValueError(
                f"n_clusters={self.n_clusters} must be <= n_samples={n_samples}."
            )
        self._graph_input_used = graph_input is not None
        if not x_is_affinity(self):
            check_magnitude(X)
        if graph_input is not None:
            graph_input = check_graph_input(graph_input, n_samples,
                                            self.affinity == "precomputed")
        training, torch_utils = _import_training()
        device = torch_utils.resolve_device(self.device)
        seeds, scaling, graph, initial_labels, whole = self._start(
            X, device, training, 2 * self.n_init + 1, graph_input)
        weights, curve = training.train_and_keep_best(
            self._network_input(X, scaling), graph, **self._training_settings(scaling),
            n_init=self.n_init, seeds=seeds, initial_labels=initial_labels, whole=whole,
            max_iter=self.max_iter, annealing=self.annealing, tol=self.tol,
            n_iter_no_change=self.n_iter_no_change, device=device, verbose=self.verbose,
            n_threads=_n_threads(self.n_jobs), share_inputs=isinstance(scaling, AffinityRows))
        if self.module is None:
            weights = scaling.on_raw_features(*weights)
        network, labels = self._exported(weights, X, torch_utils)
        if whole:  # the components exactly, whatever a boundary sample's network says
            labels = initial_labels
        self._set_fitted(network, labels, graph, curve)
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    @keeps_state_on_failure
    def partial_fit(self, X, y=None):
        """One pass over a chunk of the data, continuing the previous calls' training.

        The first call (or the first after :meth:`fit`) starts from its chunk as
        ``fit`` does (initial partition, ``n_init`` networks fitted to it, each
        trained for one pass, the one ``fit`` would keep going on) and freezes the
        centring and scales of its features: later chunks are seen in the first
        chunk's units, for the kNN metric and the network's input alike (feed a
        representative first chunk, e.g. shuffled data). Each call builds its
        chunk's own kNN graph (no edge joins two chunks) and makes one pass of
        ``max(n_chunk // batch_size, 1)`` batch pairs over it, continuing the
        network (``module``'s too), Adam's moments and step counts, the moving
        average P-bar and the ``annealing`` schedule (over ``annealing *
        max_iter`` passes of the first chunk's size), at the step size
        ``learning_rate`` gives the first chunk; the stream, not ``max_iter``,
        ``tol`` and ``n_iter_no_change``, decides how long training lasts.
        Training runs on the CPU, whatever ``device``.

        After every call the fitted attributes are those of ``fit`` for the last
        chunk (``labels_``, as :meth:`predict` gives them, ``objective_`` and
        ``affinity_matrix_`` are the chunk's; clusters the chunk leaves empty are
        left out, with a warning, but kept in the stream), ``n_iter_`` counts the
        calls, ``loss_curve_`` holds each pass's mean batch objective,
        ``n_steps_`` the training steps (not those of the fit to the initial
        partition) and ``n_samples_seen_`` the samples. A call that fails leaves
        the estimator as it was; the stream's state is NumPy (it pickles), and
        the same ``random_state`` and chunks give the same results.

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
        if self.affinity == "precomputed":
            raise ValueError(
                "partial_fit needs features: with affinity='precomputed' the network's "
                "input is a row of affinities to the training samples, which a stream "
                "does not keep. Use fit.")
        stream = getattr(self, "_stream", None)
        X = check_samples(self, X, reset=stream is None, ensure_min_samples=2)
        if stream is None and X.shape[0] < self.n_clusters:
            raise ValueError(
                f"The first chunk of partial_fit needs at least n_clusters="
                f"{self.n_clusters} samples, got {X.shape[0]}.")
        check_magnitude(X)
        check_hidden_layer_sizes(self.hidden_layer_sizes)
        self._graph_input_used = False
        training, torch_utils = _import_training()
        cpu = torch_utils.resolve_device("cpu")
        n_threads = _n_threads(self.n_jobs)
        if stream is None:
            seeds, scaling, graph, initial_labels, whole = self._start(
                X, cpu, training, 2 * self.n_init + 2, stream=True)
            stream, weights = PRCutStream.start(
                self._network_input(X, scaling), graph, initial_labels, scaling=scaling,
                settings=self._stream_settings(scaling), stream_seed=seeds[-1],
                seeds=[seeds[2 * i:2 * i + 2] for i in range(self.n_init)],
                fit_target=0.0 if whole else training.INIT_ERROR_TARGET,
                n_threads=n_threads)
        else:
            scaling = stream.scaling.applied_to(flat(X))
            graph = self._build_graph(scaling, cpu)
            stream = stream.copy()  # a failed call leaves the estimator as it was
            weights = stream.pass_over(self._network_input(X, scaling), graph,
                                       settings=self._stream_settings(scaling),
                                       n_threads=n_threads)
        if self.module is None:
            weights = scaling.on_raw_features(*weights)
        network, labels = self._exported(weights, X, torch_utils)
        self._set_fitted(network, labels, graph, stream.curve())
        keep_stream(self, stream)
        return self

    def _training_settings(self, scaling):
        """The arguments of the training (``fit``'s and ``partial_fit``'s) that
        come from the parameters, and the centring of sparse features."""
        return dict(
            n_clusters=self.n_clusters,
            hidden_layer_sizes=check_hidden_layer_sizes(self.hidden_layer_sizes),
            batch_size=self.batch_size, momentum=self.momentum, gamma=self.gamma,
            learning_rate=self.learning_rate, module=self.module,
            input_offset=scaling.offset if self.module is None else None)

    def _stream_settings(self, scaling):
        """Those of ``partial_fit``'s passes: annealing over passes, not epochs."""
        return dict(self._training_settings(scaling),
                    annealing_epochs=int(round(self.annealing * self.max_iter)))

    def _network_input(self, X, scaling):
        """The network's input: the scaled features (built-in network; their
        centring, when sparse, is ``input_offset``) or the rows of X (``module``)."""
        return scaling.network_input() if self.module is None else X

    def _start(self, X, device, training, n_seeds, graph_input=None, stream=False):
        """What ``fit`` and ``partial_fit``'s first call start from: ``n_seeds``
        seeds (the spectral start's is ``seeds[2 * n_init]``), how the network reads
        X (``scaling``; for a ``stream``, the scaling of X's features, which the
        later chunks' graphs use, with a module too), the graph (of X, or of
        ``graph_input``), the initial partition (``None`` for ``init='random'``) and
        whether it is the graph's whole components (``keep_components``); warns
        about a degenerate graph."""
        if self.module is not None:  # before any work: the graph may take long
            from skdiffclust.prcut._module import check_is_module

            check_is_module(self.module)
        seeds = derive_seeds(self.random_state, n_seeds)
        source, scaling = graph_source_and_input(
            X, graph_input, precomputed=self.affinity == "precomputed",
            builtin=self.module is None or stream)
        graph = source
        if isinstance(source, FeatureScaling):
            graph = self._build_graph(source, device, stacklevel=6)
        components = connected_component_labels(graph)
        whole = bool(self.keep_components and components.max() + 1 >= self.n_clusters)
        warn_on_degenerate_graph(components, getattr(source, "identical", False),
                                 self.n_clusters, self.keep_components, stacklevel=6)
        initial_labels = None
        if whole:  # zero cuts: whole components, which training could only cut
            initial_labels = group_components(components, self.n_clusters)
        elif self.init != "random":
            initial_labels = training.initial_partition(
                graph if self.init == "spectral"
                else shared_neighbor_graph(graph, _n_threads(self.n_jobs)),
                self.n_clusters, components, device=device,
                seed=seeds[2 * self.n_init], n_threads=_n_threads(self.n_jobs))
        return seeds, scaling, graph, initial_labels, whole

    def _exported(self, weights, X, torch_utils):
        """The fitted network from exported weights (the built-in network's, on raw
        features, or the module's state) and its labels of X, as ``predict``
        gives them."""
        if self.module is None:
            return weights, predict_logits(X, *weights).argmax(1)
        network = torch_utils.module_from_state(self.module, weights)
        return network, module_logits(network, X).argmax(1)

    def _set_fitted(self, network, labels, graph, curve):
        """The fitted attributes, for ``labels`` of the samples of ``graph``;
        clusters no sample chose are left out, with a warning."""
        used = np.unique(labels)
        if used.size < self.n_clusters:
            warnings.warn(
                f"Only {used.size} of the n_clusters={self.n_clusters} clusters are "
                "the most likely cluster of some training sample; the others are "
                "removed (n_clusters_ < n_clusters). A larger gamma favours "
                "balanced clusters.", UserWarning, stacklevel=5,
            )
        self._set_network(network, used)
        self.labels_ = np.searchsorted(used, labels).astype(np.int64)
        self.affinity_matrix_ = graph
        self.objective_ = partition_objective(graph, self.labels_, self.n_clusters,
                                              self.gamma)
        self.loss_curve_ = curve
        self.n_iter_ = int(curve.shape[0])
        self.n_clusters_ = int(used.size)

    def _set_network(self, network, used):
        """Keep the network's outputs of the clusters ``used``: the built-in
        network's other output columns are dropped; a module is kept whole, its
        outputs mapped to the clusters (``module_outputs_``). The attributes of the
        other kind of network, from an earlier fit, are removed."""
        for name in ("coefs_", "intercepts_", "module_", "module_outputs_"):
            vars(self).pop(name, None)
        if self.module is not None:
            self.module_, self.module_outputs_ = network, used
            return
        coefs, intercepts = network
        self.coefs_ = [*coefs[:-1], coefs[-1][:, used]]
        self.intercepts_ = [*intercepts[:-1], intercepts[-1][used]]

    def _build_graph(self, scaling, device=None, warn=True, stacklevel=5):
        """The kNN graph of the scaled features (:func:`scaled_knn_graph`)."""
        return scaled_knn_graph(
            scaling, n_neighbors=self.n_neighbors, affinity=self.affinity,
            rbf_gamma=self.rbf_gamma, algorithm=self.neighbors_algorithm, device=device,
            n_jobs=self.n_jobs, random_state=self.random_state, warn=warn,
            stacklevel=stacklevel + 1)

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
            each row sums to 1. In float64.
        """
        return softmax(self._logits(self._validate_queries(X)), axis=1)

    def transform(self, X):
        """Cluster-assignment probabilities of samples, in the dtype of X.

        The probabilities of :meth:`predict_proba` (one column per cluster found,
        ``n_clusters_`` of them), as a transformer's output: float32 for float32
        input, named by ``get_feature_names_out``, ``set_output`` applies.

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
        return softmax(self._logits(X), axis=1).astype(X.dtype, copy=False)

    def _validate_queries(self, X):
        check_is_fitted(self)
        X = check_samples(self, X, reset=False)
        if not x_is_affinity(self):
            check_magnitude(X)
        return X

    def _logits(self, X):
        """The fitted network's logits of the clusters found, in float64."""
        if hasattr(self, "module_"):
            return module_logits(self.module_, X)[:, self.module_outputs_]
        return predict_logits(X, self.coefs_, self.intercepts_)

    @property
    def _n_features_out(self):
        return self.n_clusters_

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

    def score(self, X, y=None, *, graph_input=None):
        """Minus PRCut's objective of the partition ``predict`` gives X (higher is better).

        The objective is the one ``fit`` minimises, at hard assignments: the
        ratio-cut bound (``4 n / sum(W)`` times the ratio cut of the partition on
        the graph W) plus ``gamma`` times the KL divergence of the cluster
        proportions from uniform. For features, W is the kNN graph of X built as
        in ``fit`` (``n_neighbors`` clipped to ``n_queries - 1``); with
        ``affinity='precomputed'``, X holds the affinities of the queries to the
        training samples, and the objective is that of the bipartite graph they
        form, the training samples keeping ``labels_`` (as in a training step
        between a batch of queries and the training set). When ``fit`` was given
        a ``graph_input``, so is ``score``: the queries' own, in its place.

        Like k-means' inertia, it compares fits with the same number of clusters
        on the same data (``gamma``, ``hidden_layer_sizes``, ``learning_rate``,
        ``init`` ...): more clusters cut more edges, so the score favours fewer.

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
            Minus the objective; 0 for a partition that cuts no edge into clusters
            of equal sizes.
        """
        labels = self.predict(X)
        X = check_samples(self, X, reset=False)
        if X.shape[0] < 2:
            raise ValueError(f"score needs at least 2 samples, got {X.shape[0]}.")
        source = score_graph_source(self, X, graph_input)
        k = self.n_clusters
        if self.affinity == "precomputed":
            objective = bipartite_objective(source, labels, self.labels_, k, self.gamma)
        else:
            graph = self._build_graph(FeatureScaling(source), warn=False)
            objective = partition_objective(graph, labels, k, self.gamma)
        return 0.0 - float(objective)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        precomputed = self.affinity == "precomputed"
        tags.input_tags.pairwise = precomputed
        tags.input_tags.sparse = True
        tags.input_tags.positive_only = precomputed
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


def _import_training():
    try:
        from skdiffclust._utils import _torch
        from skdiffclust.prcut import _training
    except ImportError as error:
        raise ImportError(
            'PRCut needs PyTorch: pip install "skdiffclust[torch]"') from error
    return _training, _torch


def _n_threads(n_jobs):
    if n_jobs is None:
        return 1
    if n_jobs < 0:
        return max((os.cpu_count() or 1) + 1 + n_jobs, 1)
    return max(int(n_jobs), 1)

"""SpanningForestClustering: clusters as the trees of a maximum-weight k-spanning forest."""

from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin, _fit_context
from sklearn.neighbors import VALID_METRICS
from sklearn.utils import TransformerTags
from sklearn.utils._available_if import available_if
from sklearn.utils._param_validation import HasMethods, StrOptions
from sklearn.utils._set_output import _SetOutputMixin
from sklearn.utils.validation import _generate_get_feature_names_out, check_is_fitted

from skdiffclust._utils._count import set_count_attributes
from skdiffclust._utils._state import keeps_state_on_failure
from skdiffclust._utils._structure import warn_if_unstructured
from skdiffclust._utils._validation import (
    N_JOBS,
    NumberInterval,
    check_magnitude,
    check_host_array,
    check_n_clusters,
    check_similarity_matrix,
    spread_unit,
    validate_data,
)
from skdiffclust.forest._api import warn_if_distances
from skdiffclust.forest._constraints import build_constraints, warn_if_partial_labels_in_y
from skdiffclust.forest._fit import fit_forest
from skdiffclust.forest._inference import (
    NeighbourIndex,
    SimilarityIndex,
    gap_score,
    embed,
    input_units,
)
from skdiffclust.forest._solver import (
    resolved_metric_params,
    thread_limit,
    warn_if_duplicates_split,
)


def _has_embedding(estimator):
    return estimator.embedding is not None


class SpanningForestClustering(ClusterMixin, _SetOutputMixin, BaseEstimator):
    """Clustering by maximum-weight k-spanning forests, optionally constrained.

    The clusters are the k trees of the spanning forest of maximum total similarity
    (Stewart et al., 2023), which is single-linkage clustering. Partial labels or
    must-link / cannot-link pairs constrain the forest, so that samples known to
    belong together end in the same tree and samples known to differ in different
    trees. Partial labels are passed as ``fit(X, partial_labels=...)``; ``y`` is
    ignored, as by every scikit-learn clusterer. With ``embedding``, an embedding
    of the features is first learnt through clustering, from the partial labels.

    Read more in the :ref:`User Guide <spanning_forest>`.

    Parameters
    ----------
    n_clusters : int or 'auto', default=2
        Number of clusters k, i.e. trees of the forest. ``'auto'``: the k, from 2
        to ``max_clusters``, at which the spanning tree's edge lengths, sorted
        from the heaviest, fall most in ratio: the largest gap between the
        lightest edge the forest removes and the heaviest it keeps
        (:ref:`n_clusters_auto_forest`). Lengths are distances; with
        ``metric='precomputed'``, the largest similarity minus the edge's. With
        constraints the candidates start at the fewest clusters they allow; with
        ``embedding`` the number is counted on the input, before training.

    max_clusters : int, default=20
        The largest number ``n_clusters='auto'`` considers.

    metric : str or callable, default='euclidean'
        Any metric of :func:`sklearn.metrics.pairwise_distances`; the similarity
        of two samples is minus their distance. ``'precomputed'``: ``X`` is a
        symmetric **similarity** matrix (larger means more similar), not a
        distance matrix: pass ``-D``.

    metric_params : dict, default=None
        Keyword arguments of the metric (e.g. ``{'p': 3}`` for ``'minkowski'``).
        Parameters the metric does not take are refused, and so is any with
        ``metric='precomputed'``.

    algorithm : {'auto', 'kd_tree', 'prim'}, default='auto'
        How to build the spanning tree of feature vectors: ``'kd_tree'`` (a k-d
        tree Borůvka algorithm, Euclidean metrics in 2 to 20 dimensions) or
        ``'prim'`` (O(n^2) time, O(n) memory, any metric). ``'auto'`` picks the
        k-d tree in at most 8 dimensions. Ignored when ``metric='precomputed'``.

    embedding : {'linear', 'mlp'}, torch.nn.Module or None, default=None
        ``None``: cluster the input as it is. Otherwise, first train an embedding
        (``'linear'``, a ReLU ``'mlp'``, or a copy of a module) with the perturbed
        partial Fenchel-Young loss so that its forests agree with the
        ``partial_labels`` of ``fit``, then cluster the embedded samples.
        A module maps a float tensor of samples (batch, n_features), or of the
        images' shape, to embeddings (batch, n_components), with float32 or
        float64 parameters; it is tried on the first rows of X before training
        (its lazy parameters materialised from ``random_state``), and a module
        that fails there is refused with the reason.
        Training needs PyTorch; see the :ref:`User Guide <spanning_forest_embedding>`.

    n_components : int, default=2
        Dimension of the ``'linear'`` and ``'mlp'`` embeddings.

    hidden_layer_sizes : tuple of int, default=(128,)
        Hidden layers of the ``'mlp'`` embedding.

    epsilon : float, default=0.1
        Noise amplitude of the perturbed forests (similarities standardised per batch).

    n_perturbations : int, default=100
        Monte-Carlo samples per gradient step.

    batch_size : int, default=64
        Samples per mini-batch (the paper's size), half labelled, half unlabelled
        when both exist.

    max_iter : int, default=100
        Maximum number of training epochs (of ``steps_per_epoch`` batches); a
        ``ConvergenceWarning`` says when they ran out before training converged.

    steps_per_epoch : int, default=None
        Mini-batches (Adam steps) per epoch, the unit of ``max_iter`` and
        ``n_iter_no_change``. ``None``: one pass, ``ceil(n_samples / batch_size)``.

    learning_rate : float, default=1e-2
        Adam's learning rate (the paper's is 3e-4, over many more steps).

    learning_rate_schedule : {'constant', 'cosine'}, default='constant'
        ``'constant'`` (the paper's), or ``'cosine'``: lowered after each epoch
        along a half cosine, from ``learning_rate`` to 0 at ``max_iter`` epochs
        (a planned budget: reaching ``max_iter`` then issues no
        ``ConvergenceWarning``).

    weight_decay : float, default=0.0
        L2 penalty on the weights, added to the gradient (Adam's ``weight_decay``).

    tol : float, default=1e-3
        Training stops when the epoch's mean loss (with ``early_stopping``, the
        validation error) has not decreased by a relative ``tol`` for ``n_iter_no_change`` epochs.

    n_iter_no_change : int, default=10
        Patience of the stopping rule, in epochs.

    early_stopping : bool, default=False
        Hold out ``validation_fraction`` of the labelled samples and stop training
        when their :func:`~skdiffclust.metrics.batch_clustering_error` has not
        improved for ``n_iter_no_change`` epochs; the best epoch's weights are kept.

    validation_fraction : float in (0, 1), default=0.1
        Fraction of the labelled samples held out by ``early_stopping``.

    device : {'auto', 'cpu', 'cuda'}, default='auto'
        Where the embedding is trained; ``'auto'`` picks CUDA when available,
        except for the built-in embeddings at a ``batch_size`` under 64, which
        train faster on the CPU (see the User Guide).
        Fitted weights are NumPy arrays: ``predict`` never needs a GPU.

    n_jobs : int, default=None
        CPU threads of Prim's distances, of the perturbed forests solved on the
        host while training, and of ``predict``'s neighbour search. ``None``
        means 1 unless in a ``joblib.parallel_config`` context, ``-1`` every core
        (:term:`n_jobs`). The results do not depend on it.

    random_state : int, RandomState instance or None, default=None
        Seeds the weight initialisation, the batches and the noise. Same seed, same
        data, same machine: same labels.

    verbose : bool, default=False
        Show a progress bar (tqdm) over the training epochs.

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        Cluster of each training sample, numbered by first appearance.

    n_clusters_ : int
        Number of clusters found: ``n_clusters`` (or the number ``'auto'`` chose)
        unless the constraints make that impossible (with an
        :class:`~skdiffclust.exceptions.InfeasibleConstraintsWarning`).

    n_clusters_candidates_ : ndarray of shape (n_candidates,)
        The numbers ``n_clusters='auto'`` chose among. Only then.

    n_clusters_scores_ : ndarray of shape (n_candidates,)
        The log-gap of each candidate k, ``log(h_(k-1) / h_k)`` (edge lengths
        ``h`` sorted from the heaviest); the highest was chosen. Only with
        ``n_clusters='auto'``.

    forest_edges_ : ndarray of shape (n_edges, 2)
        The edges of the forest, as pairs of training sample indices; there are
        ``n_samples - n_clusters_`` of them.

    forest_weights_ : ndarray of shape (n_edges,)
        The similarity of each edge: the input similarity for
        ``metric='precomputed'``, minus the distance otherwise.

    embedding_state_ : dict of str to ndarray or None
        Trained weights of the embedding (NumPy arrays); None without ``embedding``.

    loss_curve_ : ndarray of shape (`n_iter_`,)
        Mean training loss of each epoch. Only with ``embedding``.

    validation_scores_ : ndarray of shape (`n_iter_`,) or None
        Only with ``embedding``: the held-out samples' batch-wise clustering
        precision (one minus the error) after each epoch, ``None`` without
        ``early_stopping``.

    best_validation_score_ : float or None
        The highest of ``validation_scores_``, whose weights were kept.

    n_iter_ : int
        Training epochs run (0 without labelled samples); 1 without ``embedding``.

    device_ : str
        Where the fit trained the embedding: ``'cpu'`` or ``'cuda'`` (what
        ``device='auto'`` chose); ``'cpu'`` without ``embedding``.

    n_features_in_ : int
        Number of features seen during ``fit``.

    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during ``fit``. Defined only when `X`
        has feature names that are all strings.

    See Also
    --------
    sklearn.cluster.AgglomerativeClustering : Single linkage (``linkage='single'``)
        gives the same partitions without constraints.
    skdiffclust.spanning_forest : The functional form, returning the adjacency and
        connectivity matrices of the paper.

    Notes
    -----
    Without constraints the forest is exact, in O(n^2) time and O(n) memory
    (Prim) or faster (k-d tree); feature input never allocates an n x n matrix.
    With constraints, the solver is the greedy heuristic of Stewart et al. (2023,
    section 9.1); with partial labels it is exact for the forest the User Guide
    defines (each group's must-link edges kept), not always the best of all
    forests that meet the constraints. Ties are broken by sample index.

    References
    ----------
    .. [1] L. Stewart, F. Bach, F. Llinares-López, Q. Berthet. "Differentiable
       Clustering with Perturbed Spanning Forests", NeurIPS 2023.

    Examples
    --------
    >>> import numpy as np
    >>> from skdiffclust import SpanningForestClustering
    >>> X = np.array([[0.0, 0.0], [0.1, 0.0], [5.0, 5.0], [5.1, 5.0], [9.0, 0.0]])
    >>> SpanningForestClustering(n_clusters=3).fit(X).labels_
    array([0, 0, 1, 1, 2])

    ``n_clusters='auto'`` cuts the tree at its largest gap:

    >>> SpanningForestClustering(n_clusters="auto").fit(X).n_clusters_
    3

    Partial labels (``-1`` for unlabelled) force samples apart:

    >>> partial = np.array([0, 1, -1, -1, -1])
    >>> SpanningForestClustering(n_clusters=3).fit(X, partial_labels=partial).labels_
    array([0, 1, 2, 2, 2])
    """

    _parameter_constraints: dict = {
        "n_clusters": [NumberInterval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "max_clusters": [NumberInterval(Integral, 2, None, closed="left")],
        "metric": [StrOptions(set(VALID_METRICS["brute"])), callable],
        "metric_params": [dict, None],
        "algorithm": [StrOptions({"auto", "kd_tree", "prim"})],
        "embedding": [StrOptions({"linear", "mlp"}), HasMethods(["forward"]), None],
        "n_components": [NumberInterval(Integral, 1, None, closed="left")],
        "hidden_layer_sizes": ["array-like"],
        "epsilon": [NumberInterval(Real, 0, None, closed="neither")],
        "n_perturbations": [NumberInterval(Integral, 1, None, closed="left")],
        "batch_size": [NumberInterval(Integral, 2, None, closed="left")],
        "max_iter": [NumberInterval(Integral, 0, None, closed="left")],
        "steps_per_epoch": [NumberInterval(Integral, 1, None, closed="left"), None],
        "learning_rate": [NumberInterval(Real, 0, None, closed="neither")],
        "learning_rate_schedule": [StrOptions({"constant", "cosine"})],
        "weight_decay": [NumberInterval(Real, 0, None, closed="left")],
        "tol": [NumberInterval(Real, 0, None, closed="left")],
        "n_iter_no_change": [NumberInterval(Integral, 1, None, closed="left")],
        "early_stopping": ["boolean"],
        "validation_fraction": [NumberInterval(Real, 0, 1, closed="neither")],
        "device": [StrOptions({"auto", "cpu", "cuda"})],
        "n_jobs": N_JOBS,
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(self, n_clusters=2, *, max_clusters=20, metric="euclidean", metric_params=None,
                 algorithm="auto", embedding=None, n_components=2,
                 hidden_layer_sizes=(128,), epsilon=0.1, n_perturbations=100,
                 batch_size=64, max_iter=100, steps_per_epoch=None, learning_rate=1e-2,
                 learning_rate_schedule="constant", weight_decay=0.0, tol=1e-3,
                 n_iter_no_change=10, early_stopping=False, validation_fraction=0.1,
                 device="auto", n_jobs=None, random_state=None, verbose=False):
        self.n_clusters = n_clusters
        self.max_clusters = max_clusters
        self.metric = metric
        self.metric_params = metric_params
        self.algorithm = algorithm
        self.embedding = embedding
        self.n_components = n_components
        self.hidden_layer_sizes = hidden_layer_sizes
        self.epsilon = epsilon
        self.n_perturbations = n_perturbations
        self.batch_size = batch_size
        self.max_iter = max_iter
        self.steps_per_epoch = steps_per_epoch
        self.learning_rate = learning_rate
        self.learning_rate_schedule = learning_rate_schedule
        self.weight_decay = weight_decay
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.device = device
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    @_fit_context(prefer_skip_nested_validation=True)
    @keeps_state_on_failure
    def fit(self, X, y=None, *, partial_labels=None, must_link=None, cannot_link=None):
        """Compute the maximum-weight k-spanning forest and its clusters.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, n_samples)
            Feature vectors, or a symmetric similarity matrix if
            ``metric='precomputed'`` (not sparse). With a module ``embedding``,
            samples may have another shape, ``(n_samples, *sample_shape)`` (images):
            the module gets them in that shape, the estimator sees flattened rows.

        y : Ignored
            Not used, present for API consistency by convention (a ``y`` holding
            ``-1``, the former partial labels, says so in a ``UserWarning``).

        partial_labels : array-like of shape (n_samples,), default=None
            Optional partial labels: non-negative integers, ``-1`` for unlabelled
            samples. Samples with the same label end in the same cluster
            (must-link), samples with different labels in different clusters
            (cannot-link).

        must_link : array-like of shape (n_pairs, 2), default=None
            Pairs of distinct sample indices that must share a cluster.

        cannot_link : array-like of shape (n_pairs, 2), default=None
            Pairs of distinct sample indices that must not share a cluster.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        warn_if_partial_labels_in_y(y)
        X, sample_shape = self._flatten_samples(X)
        X = validate_data(self, X, dtype=[np.float64, np.float32])
        n_samples = X.shape[0]
        precomputed = self.metric == "precomputed"
        if precomputed:
            if self.metric_params:  # a metric's parameters, where X is the matrix itself
                raise TypeError(
                    f"metric_params={self.metric_params!r} is not used with "
                    "metric='precomputed', where X is the similarity matrix itself: "
                    "leave metric_params None, or pass the features and their metric.")
            check_similarity_matrix(X)
            warn_if_distances(X, "X")
        else:
            check_magnitude(X)
            raw, unit = X, spread_unit(X)
            X = X if unit == 1.0 else X * unit  # exact (a power of two): spread_unit
        constraints = build_constraints(partial_labels, n_samples, must_link, cannot_link)
        check_n_clusters(self.n_clusters, n_samples, auto=True)
        params = None if precomputed else self._clustering_metric_params(X)
        with thread_limit(self.n_jobs):
            forest, count, trained, X = fit_forest(self, X, partial_labels, constraints,
                                                   params=params, sample_shape=sample_shape)
        # distances in the input's units (after a rescale of tiny data, spread_unit)
        units = 1.0 if precomputed or self.embedding is not None else input_units(
            X, forest.edges, forest.weights, unit, self._clustering_metric(), params, raw)
        if constraints is None:
            warn_if_duplicates_split(X, forest, precomputed)
        # what inference reads (set_params may change the parameters after the fit)
        fitted = {"n_iter_": 1, "device_": "cpu", "_embedding_template": None,
                  "_sample_shape": sample_shape, "_unit": 1.0 if precomputed else unit,
                  "embedding_state_": None, **trained}
        for name, value in fitted.items():
            setattr(self, name, value)
        set_count_attributes(self, count)
        self._fit_X = None if precomputed else X
        self._index = SimilarityIndex() if precomputed else NeighbourIndex(
            X, self._clustering_metric(), params, self.n_jobs)
        self._separation, self._units = forest.separation / units, units
        self.labels_ = forest.labels
        self.n_clusters_ = forest.n_clusters
        self.forest_edges_ = forest.edges
        self.forest_weights_ = forest.weights / units
        if constraints is None:  # constraints impose their own structure
            warn_if_unstructured("SpanningForestClustering", None if precomputed else X,
                                 forest.labels, count, self.random_state)
        return self

    def fit_predict(self, X, y=None, **fit_params):
        """Fit (``partial_labels``, ``must_link`` / ``cannot_link`` as in
        :meth:`fit`) and return the clusters of the training samples.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, n_samples)
        y : Ignored
            Not used, present for API consistency by convention.
        **fit_params : dict

        Returns
        -------
        labels : ndarray of shape (n_samples,)
        """
        warn_if_partial_labels_in_y(y)
        return self.fit(X, **fit_params).labels_

    def _flatten_samples(self, X, reset=True):
        """X as rows, and the shape of a sample when X came in another shape (a
        module embedding's images); None for rows."""
        check_host_array(X)
        ndim = getattr(X, "ndim", 2)
        if ndim <= 2:
            return X, None
        if (isinstance(self.embedding, (str, type(None))) if reset
                else self._embedding_template is None):  # no module to take them
            raise ValueError(
                f"X must be 2-D (n_samples, n_features), got an array of shape "
                f"{tuple(X.shape)}; samples of another shape (images) need a torch "
                "module as embedding.")
        sample_shape = tuple(int(d) for d in X.shape[1:])
        if not reset and sample_shape != getattr(self, "_sample_shape", None):
            raise ValueError(
                f"X's samples have shape {sample_shape}, but the estimator was fitted "
                f"on samples of shape {self._sample_shape}.")
        return np.asarray(X).reshape(X.shape[0], -1), sample_shape

    def _clustering_metric(self):
        # embeddings are trained for (squared) Euclidean similarities
        return "euclidean" if self.embedding is not None else self.metric

    def _clustering_metric_params(self, X):
        return None if self.embedding is not None else resolved_metric_params(
            self.metric, self.metric_params, X)  # seuclidean's V from X, as sklearn's

    def _clustered_features(self, X):
        """Validated X as the forest sees it: features (embedded if trained), or
        similarities to the training samples."""
        check_is_fitted(self)
        X, _ = self._flatten_samples(X, reset=False)
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        if self._fit_X is None:  # fitted on similarities (metric='precomputed')
            return X
        check_magnitude(X)
        X = X if self._unit == 1.0 else X * self._unit  # the training's rescale
        if self.embedding_state_ is not None:
            X = embed(X, self.embedding_state_, self._embedding_template,
                      getattr(self, "_sample_shape", None))
        return X

    @available_if(_has_embedding)
    def fit_transform(self, X, y=None, **fit_params):
        """Fit, then return the embedded training samples.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : Ignored
            Not used, present for API consistency by convention.
        **fit_params : dict
            ``partial_labels``, ``must_link`` / ``cannot_link``, passed to :meth:`fit`.

        Returns
        -------
        X_embedded : ndarray of shape (n_samples, n_components)
            In the dtype of ``X`` (float32 or float64).
        """
        warn_if_partial_labels_in_y(y)
        return self.fit(X, **fit_params)._fit_X

    @available_if(_has_embedding)
    def transform(self, X):
        """Embed samples with the trained embedding.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        X_embedded : ndarray of shape (n_samples, n_components)
            In the dtype of ``X`` (float32 or float64).
        """
        return self._clustered_features(X)

    @available_if(_has_embedding)
    def get_feature_names_out(self, input_features=None):
        """Names of the embedding's dimensions: ``spanningforestclustering0``, ...

        Parameters
        ----------
        input_features : array-like of str or None, default=None
            Only checked against the names seen in :meth:`fit`.

        Returns
        -------
        feature_names_out : ndarray of str objects
        """
        check_is_fitted(self, "_n_features_out")
        return _generate_get_feature_names_out(
            self, self._n_features_out, input_features=input_features)

    def predict(self, X):
        """Assign each sample to the cluster of its most similar training sample.

        This is what single linkage implies for a new point: it joins the tree it is
        closest to. The neighbour index over the training samples is built on the
        first call and kept (rebuilt after unpickling).

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features) or (n_queries, n_samples_fit)
            New samples, or their similarities to the training samples if
            ``metric='precomputed'``.

        Returns
        -------
        labels : ndarray of shape (n_queries,)
            Cluster of each sample.
        """
        X = self._clustered_features(X)
        return self.labels_[self._index.nearest(X)]

    def score(self, X, y=None):
        """How clearly the forest separates its clusters, new samples included.

        The samples of X join the fitted forest as leaves (as :meth:`predict`
        assigns them). With ``separation`` the smallest distance between two
        clusters and ``spread`` the widest gap a cluster bridges, the score is
        ``(separation - spread) / (|separation| + |spread|)``, in [-1, 1], higher
        is better (0 with a single cluster); unlike the forest's objective it can
        select ``n_clusters`` (:ref:`User Guide <spanning_forest_score>`).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, n_samples_fit)
            New samples, or their similarities to the training samples if
            ``metric='precomputed'``.

        y : Ignored
            Not used, present for API consistency by convention.

        Returns
        -------
        score : float
        """
        X = self._clustered_features(X)
        if self.n_clusters_ < 2:
            return 0.0
        nearest, own = self._index.nearest(X, return_distance=True)
        other = self._index.other_cluster_distance(X, self.labels_, self.labels_[nearest])
        return gap_score(self._separation, -self.forest_weights_, own / self._units,
                         other / self._units)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = self.metric == "precomputed"
        if self.embedding is not None:
            tags.transformer_tags = TransformerTags()
        return tags


# _SetOutputMixin replaced transform and fit_transform by plain functions that wrap
# their output (set_output); they must exist only with an embedding, so that a
# clusterer without one is no transformer
SpanningForestClustering.transform = available_if(_has_embedding)(
    vars(SpanningForestClustering)["transform"])
SpanningForestClustering.fit_transform = available_if(_has_embedding)(
    vars(SpanningForestClustering)["fit_transform"])

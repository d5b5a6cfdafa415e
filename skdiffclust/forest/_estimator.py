"""SpanningForestClustering: clusters as the trees of a maximum-weight k-spanning forest."""

import warnings
from numbers import Integral, Real

import numpy as np
from joblib import effective_n_jobs
from sklearn.base import BaseEstimator, ClusterMixin, _fit_context
from sklearn.neighbors import VALID_METRICS, NearestNeighbors
from sklearn.utils import TransformerTags
from sklearn.utils._available_if import available_if
from sklearn.utils._param_validation import HasMethods, StrOptions
from sklearn.utils._set_output import _SetOutputMixin
from sklearn.utils.validation import (
    _generate_get_feature_names_out,
    check_is_fitted,
    validate_data,
)

from skdiffclust._utils._optional import import_optional
from skdiffclust._utils._random import derive_seeds, numpy_generator
from skdiffclust._utils._state import keeps_state_on_failure
from skdiffclust._utils._validation import (
    ANY_INTEGER,
    NumberInterval,
    check_magnitude,
    check_similarity_matrix,
    check_spread,
)
from skdiffclust.forest._api import warn_if_distances
from skdiffclust.forest._constraints import UNLABELLED, Constraints, check_partial_labels
from skdiffclust.forest._solver import (
    forest_from_features,
    forest_from_similarity,
    thread_limit,
)

# rows embedded at a time by the NumPy forward pass (bounds its temporaries)
EMBED_BATCH = 1 << 16


def _has_embedding(estimator):
    return estimator.embedding is not None


class SpanningForestClustering(ClusterMixin, _SetOutputMixin, BaseEstimator):
    """Clustering by maximum-weight k-spanning forests, optionally constrained.

    The clusters are the k trees of the spanning forest of maximum total similarity
    (Stewart et al., 2023), which is single-linkage clustering: the maximum
    spanning tree minus its k - 1 weakest edges. Partial labels or must-link /
    cannot-link pairs constrain the forest, so that samples known to belong
    together end in the same tree and samples known to differ in different trees.

    Read more in the :ref:`User Guide <spanning_forest>`.

    Parameters
    ----------
    n_clusters : int, default=2
        Number of clusters k, i.e. trees of the forest.

    metric : str or callable, default='euclidean'
        How to compare feature vectors; any metric of
        :func:`sklearn.metrics.pairwise_distances`. The similarity of two samples is
        then minus their distance. With ``metric='precomputed'``, ``X`` is an
        ``(n_samples, n_samples)`` **similarity** matrix (larger means more
        similar, as in the paper, e.g. negative squared distances), not a distance
        matrix: a matrix that looks like distances (zero diagonal, positive
        elsewhere) gets a warning; pass ``-D`` instead. It must be symmetric.

    metric_params : dict, default=None
        Keyword arguments of the metric (e.g. ``{'p': 3}`` for ``'minkowski'``).

    algorithm : {'auto', 'kd_tree', 'prim'}, default='auto'
        How to build the spanning tree of feature vectors. ``'kd_tree'``: a k-d tree
        Borůvka algorithm (quitefastmst), for Euclidean metrics in 2 to 20
        dimensions. ``'prim'``: Prim's algorithm with distances computed on the
        fly, O(n^2) time and O(n) memory for any metric. ``'auto'`` picks the k-d
        tree for Euclidean data in at most 8 dimensions, a sort in one dimension,
        and Prim otherwise. Ignored when ``metric='precomputed'`` (always Prim).

    embedding : {'linear', 'mlp'}, torch.nn.Module or None, default=None
        ``None``: cluster the input as it is. Otherwise, first *learn through
        clustering* (Stewart et al., 2023, section 4): train an embedding of the
        features with the perturbed partial Fenchel-Young loss so that its spanning
        forests agree with the partial labels ``y``, then cluster the embedded
        samples. ``'linear'`` is a linear map, ``'mlp'`` a ReLU network with
        ``hidden_layer_sizes``; a module is copied and trained (its output is the
        embedding; it may take samples in their own shape, e.g. images, see
        :meth:`fit`). Training needs PyTorch (``pip install "skdiffclust[torch]"``);
        a fitted ``'linear'`` or ``'mlp'`` model embeds with NumPy, so it loads and
        predicts without PyTorch, while a fitted user module needs PyTorch to be
        unpickled and applied.

    n_components : int, default=2
        Dimension of the ``'linear'`` and ``'mlp'`` embeddings.

    hidden_layer_sizes : tuple of int, default=(128,)
        Hidden layers of the ``'mlp'`` embedding.

    epsilon : float, default=0.1
        Noise amplitude of the perturbed forests, on similarities standardised per
        batch.

    n_perturbations : int, default=100
        Monte-Carlo samples per gradient step.

    batch_size : int, default=64
        Samples per mini-batch (the paper's size); half labelled, half unlabelled
        when both exist. Larger batches give the loss more pairs to compare; on a
        GPU, batches of a few thousand samples are practical.

    max_iter : int, default=100
        Maximum number of training epochs (of ``steps_per_epoch`` batches); a
        ``ConvergenceWarning`` says when they ran out before training converged.

    steps_per_epoch : int, default=None
        Mini-batches (Adam steps) per epoch: the unit of ``max_iter``,
        ``n_iter_no_change``, ``loss_curve_`` and the validation. ``None``: one pass
        over the samples, ``ceil(n_samples / batch_size)``. A number of steps, as
        papers give them (Stewart et al. train 30,000 steps with a patience of
        10,000: ``max_iter=30, steps_per_epoch=1000, n_iter_no_change=10``),
        whatever the size of the data.

    learning_rate : float, default=1e-2
        Adam's learning rate. The paper uses 3e-4 over many more steps; at 1e-3,
        the paper's own denoising problem learns nothing in 100 epochs.

    weight_decay : float, default=0.0
        L2 penalty on the embedding's weights, added to the gradient (Adam's
        ``weight_decay``; the paper's 1e-4 for its CNNs).

    tol : float, default=1e-3
        Training stops when the epoch's mean loss (with ``early_stopping``, the
        validation error) has not decreased by more than ``tol`` times its best
        value for ``n_iter_no_change`` epochs (or the loss reached zero: every
        batch's constraints are met by its forests).

    n_iter_no_change : int, default=10
        Patience of the stopping rule, in epochs.

    early_stopping : bool, default=False
        Hold out ``validation_fraction`` of the labelled samples (drawn at random,
        never trained on) and stop training when their clustering error has not
        improved for ``n_iter_no_change`` epochs; the weights of the epoch with the
        lowest error are kept. The error is the paper's: the validation samples in
        batches of ``batch_size``, each clustered into ``n_clusters`` by the
        forest of its embeddings, compared pair by pair with their labels
        (:func:`~skdiffclust.metrics.batch_clustering_error`). The held-out labels
        still constrain the final forest.

    validation_fraction : float in (0, 1), default=0.1
        Fraction of the labelled samples held out by ``early_stopping``.

    device : {'auto', 'cpu', 'cuda'}, default='auto'
        Where the embedding is trained; ``'auto'`` picks CUDA when available. On
        CUDA, the data stay on the device, each epoch's batches are copied there
        once (they are drawn on the host, where the labels are), the perturbed
        forests are solved by CUDA kernels (see :mod:`skdiffclust.torch`) and the
        loss is read back once per epoch; on the CPU, numba kernels solve them.
        Fitted weights are NumPy arrays, so ``predict`` and pickling never need a
        GPU.

    n_jobs : int, default=None
        CPU threads of the parallel parts: the k-d tree spanning tree
        (quitefastmst's OpenMP loops), the perturbed forests while training an
        embedding on the CPU (numba), and the neighbour search of ``predict``.
        ``None`` keeps quitefastmst's default (every core, as scikit-learn's
        OpenMP estimators do) and uses one thread for the other two, like
        torch's training steps (always one thread): on batches of 64, numba on
        two threads beside torch's one made each step 2.7x slower. ``-1`` uses
        every core. The results do not depend on it.

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
        Number of clusters found. It equals ``n_clusters`` unless the constraints
        make that impossible (an :class:`~skdiffclust.exceptions.InfeasibleConstraintsWarning`
        is then issued).

    forest_edges_ : ndarray of shape (n_edges, 2)
        The edges of the forest, as pairs of training sample indices; there are
        ``n_samples - n_clusters_`` of them.

    forest_weights_ : ndarray of shape (n_edges,)
        The similarity of each edge: the input similarity for
        ``metric='precomputed'``, minus the distance otherwise.

    embedding_state_ : dict of str to ndarray
        Trained weights of the embedding (NumPy arrays). Only with ``embedding``.

    loss_curve_ : ndarray of shape (`n_iter_`,)
        Mean training loss of each epoch. Only with ``embedding``.

    validation_scores_ : ndarray of shape (`n_iter_`,) or None
        With ``early_stopping``, the batch-wise clustering precision (one minus
        the error) of the held-out samples after each epoch; ``None`` otherwise.
        Only with ``embedding``.

    best_validation_score_ : float or None
        The highest of ``validation_scores_``, whose weights were kept.

    n_iter_ : int
        With ``embedding``, the number of training epochs run (0 without labelled
        samples). Without it, 1: the exact forest is a single pass.

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
    Without constraints the forest is exact: the maximum spanning tree is built in
    O(n^2) time and O(n) memory by Prim's algorithm (or faster by a k-d tree for
    low-dimensional Euclidean data), then cut by union-find. Feature input never
    allocates an n x n matrix.

    With constraints, must-links are taken transitively and cannot-links extend to
    everything must-linked. The solver follows the greedy heuristic of Stewart et
    al. (2023, section 9.1): must-link edges first, then edges by decreasing
    similarity, skipping any edge that would join a cannot-linked pair, until k
    trees remain. When the constrained groups pairwise cannot link, as with partial
    labels, tying them to a virtual root restores the matroid structure: the forest
    is then the best one that contains its must-link edges and separates the
    groups, computed from the unconstrained spanning tree alone (O(n) extra
    memory). Its must-link edges are the group's own paths in that tree when they
    cross no other group, and the group's maximum spanning tree otherwise, so that
    constraints the unconstrained forest already satisfies change nothing. Other
    cannot-link structures use the group's maximum spanning trees and all
    n (n - 1) / 2 edges.

    Ties between equal similarities are broken by sample index, so results are
    deterministic.

    :meth:`score` rates a partition by the gap between its clusters: the
    forest's objective gains the weight of every edge it keeps, and a good
    k-forest cuts edges much weaker than any it keeps (see :meth:`score`).

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

    Partial labels (``-1`` for unlabelled) force samples apart:

    >>> y = np.array([0, 1, -1, -1, -1])
    >>> SpanningForestClustering(n_clusters=3).fit(X, y).labels_
    array([0, 1, 2, 2, 2])
    """

    _parameter_constraints: dict = {
        "n_clusters": [NumberInterval(Integral, 1, None, closed="left")],
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
        "weight_decay": [NumberInterval(Real, 0, None, closed="left")],
        "tol": [NumberInterval(Real, 0, None, closed="left")],
        "n_iter_no_change": [NumberInterval(Integral, 1, None, closed="left")],
        "early_stopping": ["boolean"],
        "validation_fraction": [NumberInterval(Real, 0, 1, closed="neither")],
        "device": [StrOptions({"auto", "cpu", "cuda"})],
        "n_jobs": [ANY_INTEGER, None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(self, n_clusters=2, *, metric="euclidean", metric_params=None,
                 algorithm="auto", embedding=None, n_components=2,
                 hidden_layer_sizes=(128,), epsilon=0.1, n_perturbations=100,
                 batch_size=64, max_iter=100, steps_per_epoch=None, learning_rate=1e-2,
                 weight_decay=0.0, tol=1e-3, n_iter_no_change=10, early_stopping=False,
                 validation_fraction=0.1, device="auto", n_jobs=None,
                 random_state=None, verbose=False):
        self.n_clusters = n_clusters
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
    def fit(self, X, y=None, *, must_link=None, cannot_link=None):
        """Compute the maximum-weight k-spanning forest and its clusters.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, n_samples)
            Feature vectors, or a symmetric similarity matrix if
            ``metric='precomputed'``. Sparse matrices are not supported. With
            a module ``embedding``, an array of shape ``(n_samples, *sample_shape)``
            (images, e.g. ``(n, 1, 28, 28)``): the module gets batches in that
            shape, and the estimator sees the flattened rows
            (``n_features_in_`` is their length); ``transform`` and ``predict``
            take either form.

        y : array-like of shape (n_samples,), default=None
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
        X, sample_shape = self._flatten_samples(X)
        X = validate_data(self, X, dtype=[np.float64, np.float32])
        n_samples = X.shape[0]
        precomputed = self.metric == "precomputed"
        if precomputed:
            check_similarity_matrix(X)
            warn_if_distances(X, "X", stacklevel=4)
        else:
            check_magnitude(X)
            check_spread(X)
        constraints = _build_constraints(y, n_samples, must_link, cannot_link)
        fitted = {"n_iter_": 1, "_embedding_template": None, "_sample_shape": sample_shape}
        with thread_limit(self.n_jobs):
            if self.embedding is not None:
                fitted.update(self._train_embedding(X, y, sample_shape))
                X = _embed(X, fitted["embedding_state_"], fitted["_embedding_template"],
                           sample_shape)
                fitted["_n_features_out"] = X.shape[1]
            if precomputed:
                forest = forest_from_similarity(X, self.n_clusters, constraints=constraints)
            else:
                forest = forest_from_features(
                    X, self.n_clusters, metric=self._clustering_metric(),
                    metric_params=self._clustering_metric_params(),
                    algorithm=self.algorithm, constraints=constraints,
                )
        if constraints is None:
            _warn_if_duplicates_split(X, forest, precomputed)
        for name, value in fitted.items():
            setattr(self, name, value)
        self._fit_X = None if precomputed else X
        self._index = None if precomputed else _NeighbourIndex(
            X, self._clustering_metric(), self._clustering_metric_params(), self.n_jobs)
        self._separation = forest.separation
        self.labels_ = forest.labels
        self.n_clusters_ = forest.n_clusters
        self.forest_edges_ = forest.edges
        self.forest_weights_ = forest.weights
        return self

    def _flatten_samples(self, X, reset=True):
        """X as rows, and the shape of a sample when X came in another shape (a
        module embedding's images); None for rows."""
        ndim = getattr(X, "ndim", 2)
        if ndim <= 2:
            return X, None
        if self.embedding is None or isinstance(self.embedding, str):
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

    def _clustering_metric_params(self):
        return None if self.embedding is not None else self.metric_params

    def _train_embedding(self, X, y, sample_shape):
        """Train the embedding; returns its fitted attributes."""
        if self.metric == "precomputed":
            raise ValueError(
                "embedding needs feature vectors; it cannot be used with "
                "metric='precomputed'."
            )
        embedding_module, torch_utils = _import_torch_training()
        labels = (np.full(X.shape[0], UNLABELLED) if y is None
                  else check_partial_labels(y, X.shape[0]))
        init_seed, train_seed, split_seed = derive_seeds(self.random_state, 3)
        module = embedding_module.make_embedding(
            self.embedding, X.shape[1], self.n_components, self.hidden_layer_sizes,
            torch_utils.make_generator(init_seed),
        )
        device = torch_utils.resolve_device(self.device)
        validation_data = None
        if self.early_stopping and np.count_nonzero(labels != UNLABELLED) >= 2:
            X, labels, validation_data = _hold_out(X, labels, self.validation_fraction,
                                                   split_seed)
        if np.count_nonzero(labels != UNLABELLED) < 2:
            warnings.warn(
                "Fewer than two labelled samples in y: nothing to learn from, the "
                "embedding keeps its initial weights.", UserWarning, stacklevel=5,
            )
            state, loss_curve, n_iter = torch_utils.state_to_numpy(module), np.empty(0), 0
            validation_curve = None
        else:
            state, result = embedding_module.train_embedding(
                module, X, labels, n_clusters=self.n_clusters, epsilon=self.epsilon,
                n_perturbations=self.n_perturbations, batch_size=self.batch_size,
                max_iter=self.max_iter, learning_rate=self.learning_rate, tol=self.tol,
                n_iter_no_change=self.n_iter_no_change, device=device, seed=train_seed,
                verbose=self.verbose, solver_threads=_solver_threads(self.n_jobs),
                weight_decay=self.weight_decay,
                steps_per_epoch=self.steps_per_epoch, validation_data=validation_data,
                sample_shape=sample_shape,
            )
            loss_curve, n_iter = result.loss_curve, result.n_iter
            validation_curve = result.validation_curve
        scores = None if validation_curve is None else 1.0 - validation_curve
        # 'linear' and 'mlp' embed with NumPy (no torch object is kept, so that the
        # fitted model loads without torch); a user module is kept as a CPU template
        template = (None if isinstance(self.embedding, str)
                    else torch_utils.module_from_state(module, state))
        return {"embedding_state_": state, "loss_curve_": loss_curve, "n_iter_": n_iter,
                "_embedding_template": template, "validation_scores_": scores,
                "best_validation_score_": (None if scores is None or not scores.size
                                           else float(scores.max()))}

    def _clustered_features(self, X):
        """Validated X as the forest sees it: features (embedded if trained), or
        similarities to the training samples."""
        check_is_fitted(self)
        X, _ = self._flatten_samples(X, reset=False)
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        if self.metric == "precomputed":
            return X
        check_magnitude(X)
        if self.embedding is not None:
            X = _embed(X, self.embedding_state_, self._embedding_template,
                       getattr(self, "_sample_shape", None))
        return X

    @available_if(_has_embedding)
    def fit_transform(self, X, y=None, **fit_params):
        """Fit, then return the embedded training samples.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,), default=None
            Partial labels, ``-1`` for unlabelled samples.
        **fit_params : dict
            ``must_link`` / ``cannot_link`` pairs, passed to :meth:`fit`.

        Returns
        -------
        X_embedded : ndarray of shape (n_samples, n_components)
            In the dtype of ``X`` (float32 or float64).
        """
        return self.fit(X, y, **fit_params)._fit_X

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
        if self.metric == "precomputed":
            return self.labels_[np.argmax(X, axis=1)]
        return self.labels_[self._index.nearest(X)]

    def score(self, X, y=None):
        """How clearly the forest separates its clusters, new samples included.

        The samples of X join the fitted forest as leaves, each by its strongest
        edge (to the cluster :meth:`predict` gives it). In distances (minus
        similarities for ``metric='precomputed'``; in the embedding's space, if
        any), ``separation`` is the smallest distance between two samples of
        different clusters, ``spread`` the widest gap a cluster bridges (its
        forest's longest edge, or a new sample's distance to its cluster), and
        the score is

        ``(separation - spread) / (|separation| + |spread|)``,

        in [-1, 1], higher is better (0 with a single cluster). On the training
        samples alone, they are the weakest edge the k-forest cuts and the
        strongest it keeps: the objective :math:`F_k` gains ``separation`` with
        the k-th tree and would gain ``spread`` with a (k+1)-th one, so the score
        is high when the k trees are separated by gaps much wider than any inside
        them. New samples lower it when they fall between clusters or far from
        theirs. Unlike :math:`F_k`, which always grows with ``n_clusters``, it can
        select ``n_clusters``, e.g. in
        :class:`~sklearn.model_selection.GridSearchCV` (which uses it when no
        scorer is given). Like single linkage, it is sensitive to outliers.

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
        if self.metric == "precomputed":
            own_label = self.labels_[np.argmax(X, axis=1)]
            own = -X.max(axis=1)
            other = -np.where(self.labels_[None, :] != own_label[:, None], X, -np.inf).max(1)
        else:
            nearest, own = self._index.nearest(X, return_distance=True)
            own_label = self.labels_[nearest]
            other = self._index.other_cluster_distance(X, self.labels_, own_label)
        kept = -self.forest_weights_
        separation = min(self._separation, float(other.min(initial=np.inf)))
        spread = max(float(kept.max(initial=-np.inf)), float(own.max(initial=-np.inf)))
        if not np.isfinite(spread):  # no edge and no sample: nothing is bridged
            spread = 0.0
        scale = abs(separation) + abs(spread)
        return float((separation - spread) / scale) if scale > 0 else 0.0

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


class _NeighbourIndex:
    """Nearest training samples of queries, by indexes built on first use and kept.

    Held by the estimator (whose attributes ``predict`` must not change); the
    indexes are not pickled but rebuilt, once, after unpickling. ``score`` adds one
    index per cluster.
    """

    def __init__(self, X, metric, metric_params, n_jobs):
        self.X, self.metric, self.metric_params, self.n_jobs = X, metric, metric_params, n_jobs
        self._search = None
        self._per_cluster = None

    def _new_search(self, X):
        return NearestNeighbors(n_neighbors=1, metric=self.metric,
                                metric_params=self.metric_params, n_jobs=self.n_jobs).fit(X)

    def nearest(self, queries, return_distance=False):
        """Index of the nearest training sample of each query (and its distance)."""
        if self._search is None:
            self._search = self._new_search(self.X)
        if not return_distance:
            return self._search.kneighbors(queries, return_distance=False)[:, 0]
        distance, index = self._search.kneighbors(queries)
        return index[:, 0], distance[:, 0]

    def other_cluster_distance(self, queries, labels, own):
        """Distance of each query to its nearest training sample outside cluster ``own``."""
        if self._per_cluster is None:
            self._per_cluster = [self._new_search(self.X[labels == c])
                                 for c in range(int(labels.max()) + 1)]
        best = np.full(queries.shape[0], np.inf)
        for c, search in enumerate(self._per_cluster):
            outside = own != c
            if outside.any():
                distance = search.kneighbors(queries[outside])[0][:, 0]
                best[outside] = np.minimum(best[outside], distance)
        return best

    def __getstate__(self):
        return {**vars(self), "_search": None, "_per_cluster": None}


def _dense_layers(state):
    """(weight, bias) of each layer of a 'linear' or 'mlp' embedding, in order."""
    if "weight" in state:
        return [(state["weight"], state["bias"])]
    indices = sorted(int(name.split(".")[0]) for name in state if name.endswith(".weight"))
    return [(state[f"{i}.weight"], state[f"{i}.bias"]) for i in indices]


def _numpy_embedding(state, X):
    """The 'linear' / 'mlp' embedding of X with NumPy: linear layers, ReLU between.

    Computed in X's dtype (float32 or float64), in row batches.
    """
    layers = [(W.astype(X.dtype, copy=False), b.astype(X.dtype, copy=False))
              for W, b in _dense_layers(state)]
    out = np.empty((X.shape[0], layers[-1][0].shape[0]), dtype=X.dtype)
    for start in range(0, X.shape[0], EMBED_BATCH):
        h = X[start : start + EMBED_BATCH]
        for i, (W, b) in enumerate(layers):
            h = h @ W.T + b
            if i < len(layers) - 1:
                np.maximum(h, 0, out=h)
        out[start : start + EMBED_BATCH] = h
    return out


def _embed(X, state, template, sample_shape=None):
    """X embedded by the trained weights: NumPy for 'linear' / 'mlp', torch for a
    user module (``template``, fed samples of ``sample_shape`` if not None)."""
    if template is None:
        return _numpy_embedding(state, X)
    _, torch_utils = _import_torch_training()
    module = torch_utils.module_from_state(template, state)
    samples = X if sample_shape is None else X.reshape(X.shape[0], *sample_shape)
    return torch_utils.apply_in_batches(module, samples, "cpu").astype(X.dtype, copy=False)


def _solver_threads(n_jobs):
    """Threads of numba's perturbed forests while training on the CPU: one (as
    torch's steps) unless ``n_jobs`` says otherwise."""
    return 1 if n_jobs is None else max(int(effective_n_jobs(n_jobs)), 1)


def _hold_out(X, labels, fraction, seed):
    """Early stopping's split: ``fraction`` of the labelled samples, drawn at random,
    are held out of training; returns the training samples, their labels and the
    held-out ``(X_val, y_val)``."""
    labelled = np.flatnonzero(labels != UNLABELLED)
    n_held = int(np.ceil(fraction * labelled.size))
    if n_held < 2 or labelled.size - n_held < 2:
        raise ValueError(
            f"early_stopping holds out validation_fraction={fraction:g} of the "
            f"{labelled.size} labelled samples: it needs at least 2 held out and 2 "
            "left to train on. Label more samples, change validation_fraction, or "
            "set early_stopping=False.")
    held = np.zeros(labels.size, dtype=bool)
    held[numpy_generator(seed).choice(labelled, n_held, replace=False)] = True
    return X[~held], labels[~held], (X[held], labels[held])


def _import_torch_training():
    import_optional("torch", "SpanningForestClustering(embedding=...)")
    from skdiffclust._utils import _torch
    from skdiffclust.forest import _embedding

    return _embedding, _torch


def _build_constraints(y, n_samples, must_link, cannot_link):
    if y is None and must_link is None and cannot_link is None:
        return None
    if y is None:
        return Constraints.from_pairs(n_samples, must_link, cannot_link)
    return Constraints.from_labels(y, n_samples, must_link, cannot_link)


def _warn_if_duplicates_split(X, forest, precomputed):
    """Warn when the forest splits samples at distance 0 (which of them go to which
    tree is then arbitrary): fewer distinct samples than trees."""
    if forest.n_clusters < 2:
        return
    if precomputed:
        tied = np.ptp(X) == 0
        message = ("All similarities in X are equal: the split into "
                   f"{forest.n_clusters} clusters is arbitrary.")
    else:
        tied = forest.separation == 0
        message = ("All samples are identical" if np.ptp(X) == 0 else
                   "Samples at distance 0 from each other are in different clusters")
        message += (f": X has fewer distinct samples than n_clusters="
                    f"{forest.n_clusters}, and which copies are split off is arbitrary.")
    if tied:
        warnings.warn(message, UserWarning, stacklevel=5)

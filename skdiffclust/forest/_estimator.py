"""SpanningForestClustering: clusters as the trees of a maximum-weight k-spanning forest."""

from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin, _fit_context
from sklearn.neighbors import VALID_METRICS, NearestNeighbors
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from skdiffclust._utils._validation import check_similarity_matrix
from skdiffclust.forest._constraints import Constraints
from skdiffclust.forest._solver import forest_from_features, forest_from_similarity

class SpanningForestClustering(ClusterMixin, BaseEstimator):
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
        matrix. It must be symmetric.

    metric_params : dict, default=None
        Keyword arguments of the metric (e.g. ``{'p': 3}`` for ``'minkowski'``).

    algorithm : {'auto', 'kd_tree', 'prim'}, default='auto'
        How to build the spanning tree of feature vectors. ``'kd_tree'``: a k-d tree
        Borůvka algorithm (quitefastmst), for Euclidean metrics in 2 to 20
        dimensions. ``'prim'``: Prim's algorithm with distances computed on the
        fly, O(n^2) time and O(n) memory for any metric. ``'auto'`` picks the k-d
        tree for Euclidean data in at most 8 dimensions, a sort in one dimension,
        and Prim otherwise. Ignored when ``metric='precomputed'`` (always Prim).

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

    With constraints, must-links are taken transitively and their edges first (the
    maximum spanning tree inside each must-linked group), then edges by decreasing
    similarity, skipping any edge that would join a cannot-linked pair, until k
    trees remain: the greedy heuristic of Stewart et al. (2023, section 9.1). When
    the constrained groups pairwise cannot link, as with partial labels, the
    problem keeps its matroid structure: the greedy forest is then the best forest
    that contains the must-link trees and separates the groups, and it is computed
    from the unconstrained spanning tree alone. Other cannot-link structures use
    all n (n - 1) / 2 edges.

    Ties between equal similarities are broken by sample index, so results are
    deterministic.

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
        "n_clusters": [Interval(Integral, 1, None, closed="left")],
        "metric": [StrOptions(set(VALID_METRICS["brute"])), callable],
        "metric_params": [dict, None],
        "algorithm": [StrOptions({"auto", "kd_tree", "prim"})],
    }

    def __init__(self, n_clusters=2, *, metric="euclidean", metric_params=None,
                 algorithm="auto"):
        self.n_clusters = n_clusters
        self.metric = metric
        self.metric_params = metric_params
        self.algorithm = algorithm

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, *, must_link=None, cannot_link=None):
        """Compute the maximum-weight k-spanning forest and its clusters.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, n_samples)
            Feature vectors, or a symmetric similarity matrix if
            ``metric='precomputed'``.

        y : array-like of shape (n_samples,), default=None
            Optional partial labels, ``-1`` for unlabelled samples. Samples with the
            same label end in the same cluster (must-link), samples with different
            labels in different clusters (cannot-link).

        must_link : array-like of shape (n_pairs, 2), default=None
            Pairs of sample indices that must share a cluster.

        cannot_link : array-like of shape (n_pairs, 2), default=None
            Pairs of sample indices that must not share a cluster.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        X = validate_data(self, X, dtype=[np.float64, np.float32])
        n_samples = X.shape[0]
        precomputed = self.metric == "precomputed"
        if precomputed:
            check_similarity_matrix(X)
        constraints = _build_constraints(y, n_samples, must_link, cannot_link)
        if precomputed:
            forest = forest_from_similarity(X, self.n_clusters, constraints=constraints)
        else:
            forest = forest_from_features(
                X, self.n_clusters, metric=self.metric,
                metric_params=self.metric_params, algorithm=self.algorithm,
                constraints=constraints,
            )
        self._fit_X = None if precomputed else X
        self.labels_ = forest.labels
        self.n_clusters_ = forest.n_clusters
        self.forest_edges_ = forest.edges
        self.forest_weights_ = forest.weights
        return self

    def predict(self, X):
        """Assign each sample to the cluster of its most similar training sample.

        This is what single linkage implies for a new point: it joins the tree it is
        closest to.

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
        check_is_fitted(self)
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        if self.metric == "precomputed":
            nearest = np.argmax(X, axis=1)
        else:
            neighbors = NearestNeighbors(
                n_neighbors=1, metric=self.metric, metric_params=self.metric_params
            ).fit(self._fit_X)
            nearest = neighbors.kneighbors(X, return_distance=False)[:, 0]
        return self.labels_[nearest]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = self.metric == "precomputed"
        return tags


def _build_constraints(y, n_samples, must_link, cannot_link):
    if y is None and must_link is None and cannot_link is None:
        return None
    if y is None:
        return Constraints.from_pairs(n_samples, must_link, cannot_link)
    return Constraints.from_labels(y, n_samples, must_link, cannot_link)

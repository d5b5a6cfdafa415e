"""Clustering metrics and scorers for unsupervised model selection."""

from numbers import Integral

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.metrics import calinski_harabasz_score, silhouette_score
from sklearn.metrics.cluster import contingency_matrix
from sklearn.pipeline import Pipeline
from sklearn.utils import check_array, check_scalar
from sklearn.utils.validation import check_consistent_length, column_or_1d

from skdiffclust._utils._validation import (array_ndim, check_host_array, check_magnitude,
                                            spread_unit)
from skdiffclust.forest._scores import batch_error, pair_error
from skdiffclust.prcut import ratio_cut

__all__ = [
    "batch_clustering_error",
    "calinski_harabasz_scorer",
    "clustering_accuracy",
    "pair_confusion_error",
    "ratio_cut",
    "silhouette_scorer",
]


def _check_labelings(y_true, y_pred):
    """1-D labels of one length, without NaN or infinity (a NaN class matched a
    cluster: accuracy 1.0), as scikit-learn's clustering metrics check them."""
    check_host_array(y_true, "y_true")
    check_host_array(y_pred, "y_pred")
    y_true, y_pred = (check_array(labels, ensure_2d=False, ensure_min_samples=0,
                                  dtype=None, input_name=name)
                      for labels, name in ((y_true, "y_true"), (y_pred, "y_pred")))
    y_true, y_pred = column_or_1d(y_true), column_or_1d(y_pred)
    check_consistent_length(y_true, y_pred)
    return y_true, y_pred


def clustering_accuracy(y_true, y_pred):
    """Accuracy of a clustering under the best one-to-one matching of labels.

    The clusters are matched to the classes by the Hungarian algorithm on their
    contingency table (each cluster to at most one class, unlike the many-to-one
    "majority" mapping), then the accuracy of the matched labels is returned.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Reference labels.
    y_pred : array-like of shape (n_samples,)
        Cluster labels; their number may differ from the number of classes.

    Returns
    -------
    accuracy : float
        In [0, 1].

    Examples
    --------
    >>> from skdiffclust.metrics import clustering_accuracy
    >>> clustering_accuracy([0, 0, 1, 1, 2], [2, 2, 0, 0, 0])
    0.8
    """
    y_true, y_pred = _check_labelings(y_true, y_pred)
    if y_true.size == 0:
        return 1.0
    table = contingency_matrix(y_true, y_pred)
    rows, cols = linear_sum_assignment(table, maximize=True)
    return float(table[rows, cols].sum() / y_true.size)


def pair_confusion_error(y_true, y_pred):
    """Fraction of sample pairs whose same-cluster status is wrong.

    The connectivity error of Stewart et al. (2023): the mean of
    ``|M_pred - M_true|`` over all n x n entries of the connectivity matrices
    (``M[i, j] = 1`` when i and j share a cluster), computed from the contingency
    table in O(n + n_classes n_clusters).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
    y_pred : array-like of shape (n_samples,)

    Returns
    -------
    error : float
        In [0, 1]; 0 for identical partitions (up to label names).

    Examples
    --------
    >>> from skdiffclust.metrics import pair_confusion_error
    >>> pair_confusion_error([0, 0, 1, 1], [1, 1, 0, 0])
    0.0
    >>> pair_confusion_error([0, 0, 1, 1], [0, 0, 0, 0])
    0.5
    """
    return pair_error(*_check_labelings(y_true, y_pred))


def batch_clustering_error(y_true, X, *, n_clusters, batch_size=64):
    """Clustering error of embeddings, batch by batch, as Stewart et al. (2023) report it.

    The samples are taken in their order in batches of ``batch_size`` (the last
    may be smaller); each batch is clustered on its own into ``n_clusters`` (at
    most its size) by single linkage, i.e. the maximum-weight spanning forest of
    minus the Euclidean distances, and compared with ``y_true`` by
    :func:`pair_confusion_error`. The paper's *batch-wise clustering precision*
    is one minus this error (the paper reports 0.99 on MNIST's test set with
    batches of 64).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        The classes.
    X : array-like of shape (n_samples, n_features)
        The samples as clustered, e.g. ``SpanningForestClustering.transform``'s
        embeddings.
    n_clusters : int
        Clusters per batch (the number of classes).
    batch_size : int, default=64
        Samples per batch (the paper's 64).

    Returns
    -------
    error : float
        The mean over the batches, weighted by their number of pairs, of the
        fraction of the n x n entries of the connectivity matrices that differ.

    Examples
    --------
    >>> import numpy as np
    >>> from skdiffclust.metrics import batch_clustering_error
    >>> X = np.array([[0.0], [0.1], [5.0], [5.1]])
    >>> batch_clustering_error([0, 0, 1, 1], X, n_clusters=2, batch_size=4)
    0.0
    """
    check_host_array(X, "X")
    check_host_array(y_true, "y_true")
    y_true = column_or_1d(y_true)
    # finite (NaN gave a number, inf a C++ assertion), 2-D, dense; squares that
    # neither overflow nor underflow (as SpanningForestClustering's input)
    X = check_array(X, dtype=np.float64, ensure_min_samples=0, input_name="X")
    check_magnitude(X)
    X = X * spread_unit(X)  # a power of two: exact
    check_consistent_length(y_true, X)
    for name, value in (("n_clusters", n_clusters), ("batch_size", batch_size)):
        if isinstance(value, bool):  # check_scalar takes True for 1
            raise TypeError(f"{name} must be an int, got {value!r}.")
        check_scalar(value, name, Integral, min_val=1)
    return batch_error(y_true, X, int(n_clusters), int(batch_size))


def _labels_and_space(estimator, X):
    """Cluster labels of X and the representation the clusterer saw.

    Uses ``predict`` when the estimator has it, else ``fit_predict`` on X (for
    clusterers such as AgglomerativeClustering). In a pipeline, the score is
    computed on X transformed by the steps before the clusterer. Images (X of
    more than two axes, as DeepImageClustering reads them) are scored as rows of
    their pixels: Euclidean distances between images, whatever their layout.
    """
    space = X
    if isinstance(estimator, Pipeline) and len(estimator.steps) > 1:
        space = estimator[:-1].transform(X)
    if hasattr(estimator, "predict"):
        labels = estimator.predict(X)
    else:
        labels = estimator.fit_predict(X)
    if array_ndim(space) > 2:
        space = np.asarray(space)
        space = space.reshape(space.shape[0], -1)
    return np.asarray(labels), space


def _n_usable_clusters(labels, n_samples):
    n_labels = np.unique(labels).size
    return 2 <= n_labels <= n_samples - 1


def silhouette_scorer(estimator, X, y=None):
    """Silhouette of the clustering an estimator gives X, for ``scoring=``.

    Usable as ``GridSearchCV(..., scoring=silhouette_scorer)``: it scores the fitted
    estimator on the data it is given (``predict`` if available, else
    ``fit_predict``), in the space the clusterer sees (after the preprocessing steps
    of a pipeline). A clustering with a single cluster (or one per sample), where
    the silhouette is undefined, scores -1, the worst value.

    Parameters
    ----------
    estimator : fitted clusterer or pipeline
    X : array-like of shape (n_samples, n_features) or (n_samples, ...)
        Samples, or images (scored as rows of their pixels).
    y : ignored

    Returns
    -------
    score : float
        In [-1, 1], higher is better.
    """
    labels, space = _labels_and_space(estimator, X)
    if not _n_usable_clusters(labels, len(labels)):
        return -1.0
    return float(silhouette_score(space, labels))


def calinski_harabasz_scorer(estimator, X, y=None):
    """Calinski-Harabasz index of the clustering an estimator gives X.

    Same conventions as :func:`silhouette_scorer`; an undefined index scores 0.

    Parameters
    ----------
    estimator : fitted clusterer or pipeline
    X : array-like of shape (n_samples, n_features) or (n_samples, ...)
        Samples, or images (scored as rows of their pixels).
    y : ignored

    Returns
    -------
    score : float
        Non-negative, higher is better.
    """
    labels, space = _labels_and_space(estimator, X)
    if not _n_usable_clusters(labels, len(labels)):
        return 0.0
    return float(calinski_harabasz_score(space, labels))

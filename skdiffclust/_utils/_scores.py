"""The silhouette behind ``score`` where a method has no graph: a criterion that
compares partitions with different numbers of clusters (no numba or torch import)."""

import numpy as np
import scipy.sparse as sp
from sklearn.metrics import silhouette_score

from skdiffclust._utils._threads import one_blas_thread

# silhouette's cost is quadratic: above this many rows it is that of a fixed sample
SILHOUETTE_SAMPLE = 4000


def silhouette(X, labels, metric="euclidean"):
    """The mean silhouette of ``labels`` of the rows of X, in [-1, 1]: -1 where it
    is undefined (one cluster, or one per sample), as ``metrics.silhouette_scorer``.

    Above :data:`SILHOUETTE_SAMPLE` rows, that of a sample of them drawn from a
    fixed seed, so that the same X and labels score the same; computed on one BLAS
    thread, so that the thread count changes no bit.
    """
    labels = np.asarray(labels)
    n_labels = np.unique(labels).size
    if not 2 <= n_labels <= labels.shape[0] - 1:
        return -1.0
    if labels.shape[0] > SILHOUETTE_SAMPLE:
        rows = np.sort(np.random.default_rng(0).choice(
            labels.shape[0], SILHOUETTE_SAMPLE, replace=False))
        X, labels = X[rows], labels[rows]
        if not 2 <= np.unique(labels).size <= labels.shape[0] - 1:
            return -1.0
    if sp.issparse(X):  # scikit-learn's kernels want one index dtype for both arrays
        X = sp.csr_matrix(X)
        index = np.int32 if max(X.nnz, X.shape[1]) < np.iinfo(np.int32).max else np.int64
        X.indices, X.indptr = X.indices.astype(index), X.indptr.astype(index)
    with one_blas_thread():
        return float(silhouette_score(X, labels, metric=metric))

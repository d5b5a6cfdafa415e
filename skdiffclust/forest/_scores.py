"""The forest's own score of embeddings: Stewart et al.'s batch-wise clustering
error, computed here, below the method's training (early stopping reads it) and
exposed as :func:`skdiffclust.metrics.batch_clustering_error`."""

from sklearn.metrics.cluster import pair_confusion_matrix


def pair_error(y_true, y_pred):
    """Fraction of the n x n pairs whose same-cluster status differs (validated input)."""
    n = y_true.size
    if n == 0:
        return 0.0
    confusion = pair_confusion_matrix(y_true, y_pred)
    return float((confusion[0, 1] + confusion[1, 0]) / n**2)


def batch_error(y_true, X, n_clusters, batch_size):
    """The batch-wise clustering error of ``X`` (float64 rows) against ``y_true``
    (1-D, same length): each batch of ``batch_size`` clustered into ``n_clusters``
    by single linkage, the pair errors weighted by the batches' pairs."""
    from skdiffclust.forest._solver import forest_from_features  # numba, on first use

    wrong, pairs = 0.0, 0
    for start in range(0, y_true.size, batch_size):
        rows = slice(start, start + batch_size)
        n = y_true[rows].size
        labels = forest_from_features(X[rows], min(n_clusters, n)).labels
        wrong += pair_error(y_true[rows], labels) * n**2
        pairs += n**2
    return float(wrong / pairs) if pairs else 0.0

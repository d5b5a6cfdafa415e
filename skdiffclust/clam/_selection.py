"""ClAM's selections: beta by silhouette, the restart by loss, and helpers of both.

Kept apart from the estimator; ``_estimator`` (``fit``) and ``_stream``
(``partial_fit``) use them.
"""

import numpy as np
from sklearn.metrics import silhouette_score

from skdiffclust.clam._data import squared_distances

# the silhouettes of the candidate betas' partitions; the softest beta within
# SILHOUETTE_TOLERANCE of the best silhouette is chosen (differences below it are
# within the sampling noise of a 1,000-point silhouette, and sharper fits depend
# more on the last bits of the data)
SILHOUETTE_TOLERANCE = 0.005
# restarts whose masked loss is within this fraction of the lowest tie (the first wins)
RESTART_MARGIN = 1e-3
# the spread is estimated on at most this many points, evenly spaced in the data
SPREAD_POINTS = 10_000


def spread_of(data, initial):
    """Mean squared distance of the points to their nearest initial prototype
    (averaged over the restarts, on at most ``SPREAD_POINTS`` points evenly spaced
    in the data): the scale of the clusters, in the units of the centred and scaled
    data. If the prototypes sit on every point, the points' own mean squared norm."""
    rows = data.take(np.arange(0, data.n_samples, -(-data.n_samples // SPREAD_POINTS)))
    spread = float(np.mean([squared_distances(rows, P).min(axis=1).mean() for P in initial]))
    if spread > 1e-12 * data.n_features:
        return spread
    total = float(np.mean(squared_distances(rows, np.zeros((1, data.n_features)))))
    return total if total > 0 else 1.0


def softest_near_best(keys):
    """Index of the first (softest) key with the most clusters and a silhouette
    within ``SILHOUETTE_TOLERANCE`` of the best: sharper fits are more sensitive to
    the last bits of the data, and a tie should not be decided by them."""
    most = max(n_clusters for n_clusters, _ in keys)
    best = max(silhouette for n_clusters, silhouette in keys if n_clusters == most)
    return next(i for i, (n_clusters, silhouette) in enumerate(keys)
                if n_clusters == most and silhouette >= best - SILHOUETTE_TOLERANCE)


def row_sample(rng, n, size):
    """All of 0..n-1 if n <= size, else ``size`` of them drawn at random, sorted."""
    if n <= size:
        return np.arange(n)
    return np.sort(rng.choice(n, size, replace=False))


def silhouette(X, labels, metric):
    """The silhouette of a partition; -1 where it is undefined (one cluster, or as
    many clusters as points)."""
    n_labels = np.unique(labels).size
    if not 2 <= n_labels < X.shape[0]:
        return -1.0
    return float(silhouette_score(X, labels, metric=metric))


def unit_rows(X):
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.maximum(norms, np.finfo(X.dtype).tiny)


def normalised_weights(log_weights):
    shifted = np.exp(log_weights - log_weights.max())
    return shifted / shifted.sum()


def best_restart(losses, prototypes):
    """The first restart whose loss is within ``RESTART_MARGIN`` (relative) of the
    lowest: restarts that found the same minimum differ only in the data's last
    bits, and the order of the restarts, not those bits, must break the tie."""
    finite = np.isfinite(losses) & np.isfinite(prototypes).all(axis=(1, 2))
    if not finite.any():
        raise FloatingPointError(
            "ClAM training diverged (non-finite loss in every restart); lower "
            "learning_rate or beta."
        )
    losses = np.where(finite, losses, np.inf)
    best = losses.min()
    return int(np.flatnonzero(losses <= best + RESTART_MARGIN * abs(best))[0])


def relabel_by_first_appearance(labels, n_clusters):
    """Renumber occupied clusters 0..m-1 by first appearance; empty ones go last."""
    _, first = np.unique(labels, return_index=True)
    occupied = labels[np.sort(first)]
    empty = np.setdiff1d(np.arange(n_clusters), occupied)
    order = np.concatenate([occupied, empty])
    rank = np.empty(n_clusters, dtype=np.intp)
    rank[order] = np.arange(n_clusters)
    return order, rank[labels]

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


def scales_of(data, initial):
    """``(spread, competition)`` in the units of the centred and scaled data.

    The spread is the mean squared distance of the points to their nearest initial
    prototype (averaged over the restarts, on at most ``SPREAD_POINTS`` points
    evenly spaced in the data): the scale of the clusters (if the prototypes sit
    on every point, the points' own mean squared norm). The competition is the
    scale at which the prototypes compete for a point, the smaller of the spread and the
    median over the points of the gap between their squared distances to their
    nearest and second nearest initial prototypes (averaged over the restarts).

    The attraction of prototype mu is ``softmax(-beta ||rho_mu - v||^2)``: a term
    that all the squared distances share, such as a point's own deviation from its
    cluster's centre, cancels in it; the gap does not. In low dimension the gap is
    about the spread or larger, but in high dimension the spread (which grows with
    every feature of the within-cluster deviation) dwarfs it: ``beta = 1 / spread``
    then makes every prototype attract every point about equally (MNIST's 50
    principal components: gap 0.2 times the spread).
    """
    rows = data.take(np.arange(0, data.n_samples, -(-data.n_samples // SPREAD_POINTS)))
    spreads, gaps = [], []
    for prototypes in initial:
        distances = squared_distances(rows, prototypes)
        nearest = distances.min(axis=1)
        spreads.append(nearest.mean())
        if prototypes.shape[0] > 1:
            second = np.partition(distances, 1, axis=1)[:, 1]
            gaps.append(np.median(second - nearest))
    spread = float(np.mean(spreads))
    if not spread > 1e-12 * data.n_features:
        total = float(np.mean(squared_distances(rows, np.zeros((1, data.n_features)))))
        spread = total if total > 0 else 1.0
    gap = float(np.mean(gaps)) if gaps else spread
    return spread, min(spread, gap) if gap > 1e-12 * spread else spread


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

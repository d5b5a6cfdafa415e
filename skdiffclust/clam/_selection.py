"""ClAM's choices: the initial prototypes, beta by silhouette, the restart by
loss, and helpers of them.

Kept apart from the estimator; ``_estimator`` (``fit``) and ``_stream``
(``partial_fit``) use them.
"""

import warnings

import numpy as np
from sklearn.cluster import kmeans_plusplus
from sklearn.metrics import silhouette_score

from skdiffclust._utils._random import numpy_generator
from skdiffclust._utils._validation import check_magnitude
from skdiffclust.clam._data import squared_distances

# beta='auto' is a multiple of one over the scale at which the initial prototypes
# compete (_selection.scales_of: the spread, mean squared distance of the points to
# their nearest initial prototype, or the gap to the second nearest when smaller),
# the multiple being chosen among
# AUTO_BETA_GRID by the silhouette of the partition it gives, on at most
# SELECTION_POINTS points (the paper selects beta by silhouette, dataset by
# dataset); learning_rate='auto' is AUTO_LEARNING_RATE times the spread per
# feature, sqrt(spread / d): both follow the scale of the clusters
AUTO_BETA_GRID = (0.5, 1.0, 2.0, 4.0)
SELECTION_POINTS = 5000
# on more points, the selection fits this many of them, drawn at random (then the
# chosen beta is fitted on all of them)
SELECTION_SAMPLE = 2500
# the silhouettes are computed on at most this many of those points (the softest
# beta within _selection.SILHOUETTE_TOLERANCE of the best silhouette is chosen)
SILHOUETTE_POINTS = 1000
AUTO_LEARNING_RATE = 0.05
# k-means++ seeds on at most this many points, drawn at random
SEEDING_POINTS = 20_000

# the silhouettes of the candidate betas' partitions; the softest beta within
# SILHOUETTE_TOLERANCE of the best silhouette is chosen. Differences below it are
# noise of the data's last digits, not structure: mini-batch training at a sharp
# beta is chaotic (data 1e-6 apart end in different local minima), and on copies
# of the 33 development datasets jittered by 1e-6 a candidate's silhouette varies
# by up to 0.026 (95th percentile 0.004; user guide, clam_stability). With 0.005,
# below that spread, the chosen beta flipped between copies
SILHOUETTE_TOLERANCE = 0.03
# restarts whose masked loss is within this fraction of the lowest tie (the first
# wins): on copies of the development datasets jittered by 1e-6, one restart's
# final loss varies by up to 1.8% (95th percentile; 0.85% at the 90th): smaller
# differences are decided by the data's last digits (1e-3 before: user guide,
# clam_stability)
RESTART_MARGIN = 0.03
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
    the last bits of the data (their silhouettes vary by that much between copies
    jittered by 1e-6), and a tie should not be decided by them."""
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


def initial_prototypes(data, seed, *, n_clusters, init, n_init, cosine):
    """Initial prototypes of every restart, (n_init, n_clusters, n_features),
    float64, in the units of the centred and scaled ``data``: ``init`` as given
    (one restart), or drawn from ``seed`` (k-means++ or ``'random'``)."""
    k, d = n_clusters, data.n_features
    if not isinstance(init, str):
        given = np.asarray(init, dtype=np.float64)
        if given.shape != (k, d):
            raise ValueError(
                f"init must have shape (n_clusters, n_features) = ({k}, {d}), "
                f"got {given.shape}."
            )
        if not np.isfinite(given).all():
            raise ValueError("init contains NaN or infinity.")
        check_magnitude(given, "init")
        if not cosine:
            given = (given - data.shift) / data.scale
        return given[None].copy()
    rng = numpy_generator(seed)
    # k-means++ on at most SEEDING_POINTS points drawn at random (all of them on
    # smaller data), so that seeding stays cheap next to training on large data
    pool = np.arange(data.n_samples)
    if data.n_samples > SEEDING_POINTS:
        pool = np.sort(rng.choice(data.n_samples, SEEDING_POINTS, replace=False))
    seeding_rows = data.seeding_rows(pool)
    restarts = []
    for _ in range(n_init):
        if init == "random":
            chosen = rng.choice(data.n_samples, k, replace=False)
        else:
            _, chosen = kmeans_plusplus(seeding_rows, k,
                                        random_state=int(rng.integers(2**31 - 1)))
            chosen = pool[chosen]
        restarts.append(data.take(chosen))
    return np.stack(restarts)


def select_sharpness(fit_at, X, selection_seed, metric):
    """The multiple of beta='auto' (in ``AUTO_BETA_GRID``) whose partition of at
    most ``SELECTION_POINTS`` points of ``X`` has the best silhouette, among those
    that keep the most clusters.

    ``fit_at(rows, sharpness)`` fits ClAM and returns its ``FittedState``. Returns
    ``(sharpness, state, warnings)``: the winning fit's state and the warnings it
    gave when it was made on all of X, else ``None`` and no warnings.
    """
    rng = numpy_generator(selection_seed)
    n_sample = X.shape[0] if X.shape[0] <= SELECTION_POINTS else SELECTION_SAMPLE
    sample = X[row_sample(rng, X.shape[0], n_sample)]
    scored = row_sample(rng, sample.shape[0], SILHOUETTE_POINTS)
    metric = "cosine" if metric == "cosine" else "euclidean"
    # centred (dense, Euclidean), so that a large offset costs no precision
    scored_rows = sample[scored]
    if metric == "euclidean" and isinstance(scored_rows, np.ndarray):
        scored_rows = scored_rows - scored_rows.mean(axis=0)
    fits, keys = [], []
    for sharpness in AUTO_BETA_GRID:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            state = fit_at(sample, sharpness)
        fits.append((sharpness, state, caught))
        keys.append((state.n_clusters_,
                     silhouette(scored_rows, state.labels_[scored], metric)))
    sharpness, state, caught = fits[softest_near_best(keys)]
    if sample.shape[0] < X.shape[0]:
        return sharpness, None, []
    return sharpness, state, caught


def keep_best(rows, fill, trained, dynamics, score_seed, n_threads, *, weighted, mask_prob,
              cosine):
    """The restart of lowest loss (same masks for all, among those not pruned), its
    labels, loss and training record, as a dict (the ``kept`` of ``FittedState.of``)."""
    from skdiffclust.clam._inference import converge, evaluate_loss

    candidates = np.flatnonzero(trained.selectable)  # not pruned
    log_weights = trained.log_weights[candidates] if weighted else None
    losses = evaluate_loss(rows, fill, trained.prototypes[candidates], log_weights,
                           dynamics, mask_prob, score_seed, n_threads)
    best = candidates[best_restart(losses, trained.prototypes[candidates])]
    loss = float(losses[candidates == best][0])
    prototypes = trained.prototypes[best].astype(np.float64)
    if cosine:
        prototypes = unit_rows(prototypes)
    weights = normalised_weights(trained.log_weights[best].astype(np.float64))
    labels, _ = converge(rows, prototypes, np.log(weights) if weighted else None,
                         dynamics, n_threads)
    return {"prototypes": prototypes, "weights": weights, "labels": labels,
            "loss": loss, "n_iter": int(trained.n_iter[best]),
            "loss_curve": np.asarray(trained.loss_curves[best], dtype=np.float64)}


def scaled_beta(beta, competition, sharpness, cosine):
    """beta in the units of the centred and scaled data: a float as given, 'auto'
    ``sharpness`` over the scale at which the prototypes compete (``scales_of``)."""
    if beta != "auto":
        return float(beta)
    # cosine logits are beta <rho~, v> = -beta/2 ||rho~ - v||^2 + const
    return (2.0 if cosine else 1.0) * sharpness / competition


def scaled_learning_rate(learning_rate, spread, competition, n_features, beta, cosine):
    """'auto': a fraction of the clusters' spread per feature, divided by the
    sharpness ``s = beta * competition`` as ``max(s, 1/2) * sqrt(max(s, 1))``:
    the loss steepens with beta, and steps of the same length make mini-batch
    training chaotic (its result then hangs on the data's last bits)."""
    if learning_rate != "auto":
        return float(learning_rate)
    sharpness = beta * competition / (2.0 if cosine else 1.0)
    return (AUTO_LEARNING_RATE * float(np.sqrt(spread / n_features))
            / (max(sharpness, 0.5) * np.sqrt(max(sharpness, 1.0))))

"""ClAM's choices: the initial prototypes, the scales that beta='auto' and
learning_rate='auto' read (``scales_of``; ``_settings`` resolves them), the
restart by loss, and helpers of them.

Kept apart from the estimator; ``_estimator`` (``fit``) and ``_stream``
(``partial_fit``) use them.
"""


import numpy as np
from sklearn.cluster import kmeans_plusplus

from skdiffclust._utils._random import numpy_generator
from skdiffclust._utils._validation import check_magnitude, real_array
from skdiffclust._utils._warn import warn_user
from skdiffclust.clam._data import squared_distances

# k-means++ seeds on at most this many points, drawn at random
SEEDING_POINTS = 20_000
# init='k-means': Lloyd's iterations on at most LLOYD_POINTS points (drawn at
# random) from max(n_init, LLOYD_SEEDS) k-means++ seeds (KMeans' n_init), then on
# larger data on all the points, of which the n_init of lowest inertia are
# trained. With 5 seeds refined on the sample alone, ClAM started from minima 1% to
# 6% above KMeans(n_init=10)'s (Fashion-MNIST, blobs) and kept a partition that
# agreed less with the classes (user guide, clam_starts)
LLOYD_POINTS = 5000
LLOYD_SEEDS = 10
# restarts whose masked loss is within this fraction of the lowest tie (the first,
# in the order of their starts, wins): the data's last digits must not pick the
# restart (user guide, clam_stability)
RESTART_MARGIN = 0.03
# the spread is estimated on at most this many points, evenly spaced in the data
SPREAD_POINTS = 10_000
# two sets of prototypes are the same when they match one to one, each within this
# fraction of its distance to the nearest other prototype of its set: restarts that
# are the same are pruned, and init='k-means' trains distinct starts only
DUPLICATE_TOLERANCE = 0.1


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


def settled_prototypes(data, initial, n_threads=1):
    """The starts moved to the k-means fixed points they lead to (Lloyd's iterations
    on at most ``LLOYD_POINTS`` rows evenly spaced in the data), for the scales of
    ``scales_of``: the scale of beta='auto' is then that of the clusters whatever
    the start (two random starts in one cluster would make the gap, and beta, that
    of the points within it)."""
    from skdiffclust.clam._lloyd import refine_by_lloyd

    rows = np.arange(0, data.n_samples, -(-data.n_samples // LLOYD_POINTS))
    return refine_by_lloyd(data, rows, initial, n_threads)[0]


def same_prototypes(A, B, tolerance=DUPLICATE_TOLERANCE):
    """Whether two sets of prototypes match one to one, each within ``tolerance``
    times its distance to the nearest other prototype of its set."""
    A, B = np.asarray(A, dtype=np.float64), np.asarray(B, dtype=np.float64)
    k = A.shape[0]
    if k < 2:
        return bool(squared_distances(A, B)[0, 0] <= 0.0)
    cross = squared_distances(A, B)
    match = cross.argmin(axis=1)
    if np.unique(match).size < k:
        return False
    spacing = squared_distances(A, A)
    spacing[np.arange(k), np.arange(k)] = np.inf
    return bool(np.all(cross[np.arange(k), match] <= tolerance**2 * spacing.min(axis=1)))


def row_sample(rng, n, size):
    """All of 0..n-1 if n <= size, else ``size`` of them drawn at random, sorted."""
    if n <= size:
        return np.arange(n)
    return np.sort(rng.choice(n, size, replace=False))


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


def warn_repeated_rows(init):
    """A warning where a given ``init`` repeats a row: prototypes that start at
    one place are pulled alike (init=np.zeros((3, 4)) on three blobs left one
    cluster of 10 points, ARI 0.53, and said nothing)."""
    init = np.asarray(init, dtype=np.float64)
    n_distinct = np.unique(init, axis=0).shape[0]
    if n_distinct < init.shape[0]:
        warn_user(
            f"init holds {n_distinct} distinct rows for {init.shape[0]} prototypes: "
            "prototypes that start at the same place are pulled alike and may never "
            "part. Give distinct rows (or init='k-means').", UserWarning)


def initial_prototypes(data, seed, *, n_clusters, init, n_init, cosine, n_threads=1):
    """Initial prototypes of every restart, (n_init, n_clusters, n_features),
    float64, in the units of the centred and scaled ``data``: ``init`` as given
    (one restart), or drawn from ``seed`` (k-means++ seeds, refined by Lloyd's
    iterations for ``'k-means'``: a sample's minima, then every point's; or
    ``'random'``)."""
    k, d = n_clusters, data.n_features
    if not isinstance(init, str):
        given = real_array(init, "init")
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
    for _ in range(max(n_init, LLOYD_SEEDS) if init == "k-means" else n_init):
        if init == "random":
            chosen = rng.choice(data.n_samples, k, replace=False)
        else:
            _, chosen = kmeans_plusplus(seeding_rows, k,
                                        random_state=int(rng.integers(2**31 - 1)))
            chosen = pool[chosen]
        restarts.append(data.take(chosen))
    starts = np.stack(restarts)
    if init == "k-means":
        from skdiffclust.clam._lloyd import refine_by_lloyd

        starts, inertia = refine_by_lloyd(
            data, row_sample(rng, data.n_samples, LLOYD_POINTS), starts, n_threads)
        if data.n_samples > LLOYD_POINTS:  # from the sample's minima to all points'
            starts, inertia = refine_by_lloyd(data, None, starts, n_threads)
        starts = distinct_best(starts, inertia, n_init)
    return starts


def distinct_best(starts, inertia, n_kept):
    """Up to ``n_kept`` of the ``starts`` in increasing ``inertia``, each not the
    same (``same_prototypes``) as one kept before it: training one minimum twice
    would only be pruned after an epoch."""
    kept = []
    for r in np.argsort(inertia, kind="stable"):
        if not any(same_prototypes(starts[r], starts[q]) for q in kept):
            kept.append(r)
        if len(kept) == n_kept:
            break
    return starts[kept]


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

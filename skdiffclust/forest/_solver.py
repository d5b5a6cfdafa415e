"""Maximum-weight k-spanning forests: backends, constraints and the functional API.

Plain-array glue between the estimator and the numba kernels. Every path builds a
spanning tree first (Prim, a k-d tree Borůvka from quitefastmst, or a sort in 1-D),
then cuts it: without constraints by dropping its heaviest edges
(:func:`~skdiffclust.forest._kruskal.forest_of_spanning_tree`), with them by
Kruskal over the tree (:func:`~skdiffclust.forest._kruskal.forest_from_tree`); only
cannot-link structures that are not complete between groups need every edge.
"""

import contextlib
import functools
import math
import numbers
from dataclasses import dataclass

import numba
import numpy as np
from sklearn.metrics import pairwise_distances, pairwise_distances_chunked
from sklearn.neighbors import NearestNeighbors

from skdiffclust._utils._numba import interruptible
from skdiffclust._utils._threads import host_threads, one_blas_thread
from skdiffclust._utils._validation import check_n_clusters
from skdiffclust._utils._warn import warn_user
from skdiffclust.exceptions import InfeasibleConstraintsWarning
from skdiffclust.forest._kruskal import (
    component_labels,
    forest_from_tree,
    forest_of_spanning_tree,
    greedy_forest_with_conflicts,
    tree_connectors,
)
from skdiffclust.forest._mst import (
    CHEBYSHEV,
    COSINE,
    FRONT_SIZE,
    ITERATION,
    MANHATTAN,
    MINKOWSKI,
    NUMBA_METRICS,
    SQEUCLIDEAN,
    feature_sweep,
    feature_sweep_in_parts,
    new_feature_front,
    new_prim_state,
    relax_keys,
    similarity_sweep,
)
from skdiffclust.forest._settings import subset_algorithm, tree_algorithm
from skdiffclust.forest._dense import (
    constrained_forest,
    kernel_constraints,
    unconstrained_forest,
    upper_triangle_edges,
)

EUCLIDEAN_METRICS = ("euclidean", "l2", "sqeuclidean")
# metrics for which the distance between scalars is |x - y| (or its square)
ABSOLUTE_DIFFERENCE_METRICS = EUCLIDEAN_METRICS + (
    "manhattan", "cityblock", "l1", "chebyshev", "infinity", "minkowski",
)
KD_TREE_MAX_FEATURES = 20  # quitefastmst's k-d trees stop there
# Minkowski powers swept as another metric (the same distances)
MINKOWSKI_AS = {1.0: MANHATTAN, 2.0: SQEUCLIDEAN, math.inf: CHEBYSHEV}
PROBE_ROWS = 8  # rows on which metric_params are tried (_check_metric_takes)
KD_TREE_SINGLE_MIN_FEATURES = 5
KD_TREE_SINGLE_LEAF_SIZE = 128
# Prim's kernels run this many distance terms per call (a few milliseconds), then
# return to Python, which sees Ctrl-C between calls
PRIM_TERMS_PER_CALL = 1 << 23
# Prim's steps with at least this many distance terms (front size times features)
# spread their rows over numba's threads: on the 2-core machine 54,000 x 84 took
# 14 s against 28 s in one thread, 10,000 x 16 0.14 against 0.17 s (a prototype
# gained alike from 2^14 to 2^18 terms; a parallel region costs microseconds a step)
PARALLEL_PRIM_MIN_TERMS = 1 << 16
# All-pairs edge lists (general cannot-links on feature input) above this size
# are refused rather than risking the machine's memory.
MAX_ALL_PAIRS_BYTES = 2 * 1024**3


@dataclass(frozen=True)
class SpanningForest:
    """A k-spanning forest: its edges, their similarity weights and its clusters.

    ``separation`` is the smallest distance (minus similarity) between two samples
    of different trees, infinite for a single tree. The first ``n_fixed`` edges are
    must-link edges; the others were accepted by Kruskal's order, and a forest of
    more clusters drops them heaviest first.
    """

    edges: np.ndarray
    weights: np.ndarray
    labels: np.ndarray
    n_clusters: int
    separation: float = np.inf
    n_fixed: int = 0


# --------------------------------------------------------------------------- trees
def _numba_metric(metric, metric_params):
    """Kernel code and power for metrics computed in numba, or ``None``."""
    if not isinstance(metric, str) or metric not in NUMBA_METRICS:
        return None
    params = dict(metric_params or {})
    p = float(params.pop("p", 2.0)) if metric == "minkowski" else 2.0
    if params:
        return None
    if metric == "minkowski" and p in MINKOWSKI_AS:
        # the same distances without a power per term (p=1: |d| ** 1 is |d| exactly);
        # p=inf summed as powers gave every pair the distance 1: an arbitrary tree
        return MINKOWSKI_AS[p], p
    return NUMBA_METRICS[metric], p


def _is_euclidean(metric, metric_params):
    code = _numba_metric(metric, metric_params)
    return code is not None and code[0] == SQEUCLIDEAN


def _choose_algorithm(algorithm, metric, metric_params, n_features):
    if algorithm == "kd_tree":
        if not _is_euclidean(metric, metric_params):
            raise ValueError(
                "algorithm='kd_tree' needs a Euclidean metric ('euclidean', 'l2', "
                f"'sqeuclidean' or 'minkowski' with p=2), got metric={metric!r}."
            )
        if not 2 <= n_features <= KD_TREE_MAX_FEATURES:
            raise ValueError(
                "algorithm='kd_tree' needs between 2 and "
                f"{KD_TREE_MAX_FEATURES} features, got {n_features}."
            )
        return "kd_tree"
    scalar_difference = metric in ABSOLUTE_DIFFERENCE_METRICS and not (
        set(metric_params or {}) - {"p"})
    return tree_algorithm(algorithm, n_features, scalar_difference=scalar_difference,
                          euclidean=lambda: _is_euclidean(metric, metric_params))


def _tree_by_sort(x):
    order = np.argsort(x, kind="stable")
    src, dst = order[:-1], order[1:]
    return src.astype(np.int64), dst.astype(np.int64), np.abs(x[dst] - x[src])


def _tree_by_kd_tree(X):
    """quitefastmst's Borůvka tree, on one OpenMP thread: on two it kept other
    edges among equally long ones (281 of the 4,999 edges of 5,000 blobs rounded
    to a grid), so that the forest's edges depended on the thread count."""
    import quitefastmst

    X = np.ascontiguousarray(X, dtype=np.float64)
    previous = quitefastmst.omp_get_max_threads()
    quitefastmst.omp_set_num_threads(1)
    try:
        if X.shape[1] >= KD_TREE_SINGLE_MIN_FEATURES:
            # measured on 20000-100000 points in 5-8 dimensions: 20-25% faster than
            # quitefastmst's default (sesqui-tree, leaves of 32)
            dist, index = quitefastmst.mst_euclid(
                X, algorithm="single_kd_tree", max_leaf_size=KD_TREE_SINGLE_LEAF_SIZE
            )
        else:
            dist, index = quitefastmst.mst_euclid(X)
    finally:
        quitefastmst.omp_set_num_threads(previous)
    return index[:, 0].astype(np.int64), index[:, 1].astype(np.int64), dist


def _tree_by_python_prim(X, metric, metric_params):
    """Prim with scikit-learn's pairwise_distances for metrics numba lacks."""
    n = X.shape[0]
    src = np.empty(n - 1, dtype=np.int64)
    dst = np.empty(n - 1, dtype=np.int64)
    dist = np.empty(n - 1)
    remaining = np.arange(1, n)
    key = np.full(n - 1, np.inf)
    parent = np.zeros(n - 1, dtype=np.int64)
    cur = 0
    for it in range(n - 1):
        m = n - 1 - it
        row = pairwise_distances(
            X[cur : cur + 1], X[remaining[:m]], metric=metric, **(metric_params or {})
        ).ravel()
        pos = relax_keys(row.astype(np.float64), key, parent, cur, m)
        cur = remaining[pos]
        src[it], dst[it], dist[it] = parent[pos], cur, key[pos]
        last = m - 1
        remaining[pos], key[pos], parent[pos] = remaining[last], key[last], parent[last]
    return src, dst, dist


def _run_prim(sweep, data, n, terms_per_point):
    """Prim's tree of n points by ``sweep(*data, state, tree, stop)``, a chunk of
    iterations at a time."""
    state, tree = new_prim_state(n)
    counters = state[4]
    while counters[ITERATION] < n - 1:
        terms = max(counters[FRONT_SIZE] * terms_per_point, 1)
        stop = min(n - 1, counters[ITERATION] + max(PRIM_TERMS_PER_CALL // terms, 1))
        sweep(*data, state, tree, stop)
    return tree


def _sweep_in_parts(n_threads, *args):
    feature_sweep_in_parts(*args, n_threads, PARALLEL_PRIM_MIN_TERMS)


# float32 features are swept in float32 unless their squares could leave its range:
# values beyond this (times sqrt(n_features)) could overflow a square or a squared
# norm, and Euclidean differences below ``F32_SMALLEST_SPREAD`` (or cosine rows
# below it) have squares under float32's smallest normal number. Such data are
# swept in float64 (no rounding: float32 values are float64 values).
F32_LARGEST = 2.0**62
F32_SMALLEST_SPREAD = 2.0**-60


def _float32_squares_unsafe(X, code):
    """Whether the float32 features ``X`` give squared differences or squared norms
    that overflow or underflow float32 in the sweep (``code``: its metric)."""
    if X.shape[0] == 0 or X.shape[1] == 0:
        return False
    largest = max(float(X.max()), -float(X.min()))
    if largest * np.sqrt(X.shape[1]) > F32_LARGEST:
        return True
    if code == SQEUCLIDEAN:
        return 0.0 < float(np.ptp(X, axis=0).max()) < F32_SMALLEST_SPREAD
    if code == COSINE:
        rows = np.abs(X).max(axis=1)
        return bool(np.any((rows > 0.0) & (rows < F32_SMALLEST_SPREAD)))
    return False


def _tree_by_numba_prim(X, code, p):
    if X.dtype == np.float32 and _float32_squares_unsafe(X, code):
        X = X.astype(np.float64)
    if code == COSINE:
        norms = np.linalg.norm(X, axis=1, keepdims=True)
        X = X / np.where(norms > 0, norms, 1.0)
    Xp, current = new_feature_front(X)
    n_threads = numba.get_num_threads()
    sweep = feature_sweep
    if n_threads > 1 and X.shape[0] * X.shape[1] >= PARALLEL_PRIM_MIN_TERMS:
        sweep = functools.partial(_sweep_in_parts, n_threads)
    src, dst, reduced = _run_prim(sweep, (code, Xp, current, float(p)), X.shape[0],
                                  X.shape[1])
    if code == SQEUCLIDEAN:
        return src, dst, np.sqrt(np.maximum(reduced, 0.0))
    if code == MINKOWSKI:
        return src, dst, reduced ** (1.0 / p)
    return src, dst, reduced


def feature_tree(X, *, metric="euclidean", metric_params=None, algorithm="auto"):
    """Minimum spanning tree of feature vectors: (src, dst, distance) per edge."""
    n, d = X.shape
    if n < 2:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty, np.empty(0)
    how = _choose_algorithm(algorithm, metric, metric_params, d)
    if how == "sort":
        src, dst, dist = _tree_by_sort(X[:, 0].astype(np.float64))
    elif how == "kd_tree":
        src, dst, dist = _tree_by_kd_tree(X)
    else:
        code = _numba_metric(metric, metric_params)
        if code is None:
            src, dst, dist = _tree_by_python_prim(X, metric, metric_params)
        else:
            src, dst, dist = _tree_by_numba_prim(X, *code)
    if metric == "sqeuclidean":  # every backend above measured Euclidean distances
        dist = dist**2
    if not np.all(np.isfinite(dist)):  # gave an arbitrary forest and a NaN score
        raise ValueError(
            f"metric={metric!r} gives NaN or infinite distances on X (values whose "
            "distances overflow, e.g. a large Minkowski power p, or 'correlation' or "
            "'cosine' of constant or zero rows): rescale X, choose another metric, or "
            "remove those rows.")
    # the tree holds the smallest distance of all: a negative one (a callable's
    # similarity, say) made the forest join the most distant samples, silently
    if dist.size and dist.min() < -np.sqrt(np.finfo(np.float64).eps) * np.abs(dist).max():
        raise ValueError(
            f"metric={metric!r} gives negative distances on X (down to "
            f"{dist.min():.4g}): a metric must return distances (non-negative, smaller "
            "for closer samples). For similarities pass metric='precomputed' with the "
            "similarity matrix.")
    return src, dst, dist


def resolved_metric_params(metric, params, X):
    """``metric_params`` completed as scikit-learn's ``pairwise_distances(X)``
    completes them from X (seuclidean's ``V``, mahalanobis' ``VI``, a ValueError
    where X's covariance is singular): the searches here pass a second set of
    points, for which scikit-learn requires them, so that these metrics failed
    without them; a Minkowski ``p`` must be a positive number (0 divided by zero
    inside, a negative one failed only at ``predict``); parameters the metric
    does not take are refused (:func:`_check_metric_takes`)."""
    params = dict(params or {})
    if metric == "seuclidean" and "V" not in params:
        params["V"] = np.var(X, axis=0, ddof=1)
    if metric == "mahalanobis" and "VI" not in params and "V" not in params:
        try:
            params["VI"] = np.linalg.inv(np.cov(np.asarray(X, dtype=np.float64).T)).T
        except np.linalg.LinAlgError:
            raise ValueError(
                "metric='mahalanobis' needs the inverse of X's covariance, which is "
                "singular (a feature constant or a combination of others, or fewer "
                "samples than features): remove those features, or pass "
                "metric_params={'VI': ...}.") from None
    if metric == "minkowski":
        power = params.get("p", 2)
        if isinstance(power, bool) or not isinstance(power, numbers.Real):
            raise TypeError("metric_params['p'] must be a real number for "
                            f"metric='minkowski', got {power!r}.")
        if not power > 0:
            raise ValueError(f"metric_params['p'] must be > 0 for metric='minkowski', got "
                             f"{power!r}.")
    if params and X.shape[0]:
        _check_metric_takes(metric, params, X)
    return params or None


def neighbour_search(metric, metric_params, n_jobs=None):
    """The (unfitted) search of ``predict``'s nearest training sample.

    Minkowski's power goes in as NearestNeighbors' ``p``: in ``metric_params`` it
    is used too, but with a SyntaxWarning at every fit of the index.
    """
    params = dict(metric_params or {})
    power = params.pop("p", 2) if metric == "minkowski" else 2
    return NearestNeighbors(n_neighbors=1, metric=metric, p=power,
                            metric_params=params or None, n_jobs=n_jobs)


def _check_metric_takes(metric, params, X):
    """A TypeError naming ``metric_params`` where ``metric`` does not take them,
    in the forest's distances (scikit-learn's ``pairwise_distances``) or in
    ``predict``'s search (its ``NearestNeighbors``). Their own messages, from deep
    inside, named neither: a Minkowski ``q`` failed with SciPy's list of a C
    function's signatures, and Chebyshev's ``w`` fitted, then failed at
    ``predict``."""
    # eight rows: NearestNeighbors then builds the tree (or not) that the whole X
    # gets (its 'auto' goes brute below four rows), whose metric may refuse them
    rows = np.asarray(X[:PROBE_ROWS], dtype=np.float64)
    for user, probe in (
            ("scikit-learn's pairwise_distances",
             lambda: pairwise_distances(rows[:1], rows[:1], metric=metric, **params)),
            ("predict's search, scikit-learn's NearestNeighbors",
             lambda: neighbour_search(metric, params).fit(rows).kneighbors(rows[:1]))):
        try:
            probe()
        except TypeError as error:
            reason = str(error).strip().splitlines()[0].rstrip(":")
            raise TypeError(f"metric_params={params!r} does not suit metric={metric!r}: "
                            f"{user} refused them ({reason}).") from None


def similarity_tree(S):
    """Maximum spanning tree of a similarity matrix: (src, dst, -similarity)."""
    return _run_prim(similarity_sweep, (S,), S.shape[0], 1)


@contextlib.contextmanager
def thread_limit(n_jobs):
    """Run numba's parallel kernels on ``n_jobs`` threads
    (:func:`~skdiffclust._utils._threads.host_threads`: ``None`` means 1 unless in
    a ``joblib.parallel_config`` context), restoring the previous count. (The k-d
    tree runs on one: :func:`_tree_by_kd_tree`.)"""
    previous = numba.get_num_threads()
    try:
        numba.set_num_threads(min(host_threads(n_jobs), numba.config.NUMBA_NUM_THREADS))
        yield
    finally:
        numba.set_num_threads(previous)


# ------------------------------------------------------------------------- forests
def _group_trees(tree_of_subset, members, wanted):
    """The minimum spanning tree inside each wanted must-link group."""
    parts_src, parts_dst, parts_dist = [], [], []
    for group_members, want in zip(members, wanted):
        if group_members.size < 2 or not want:
            continue
        src, dst, dist = tree_of_subset(group_members)
        parts_src.append(group_members[src])
        parts_dst.append(group_members[dst])
        parts_dist.append(dist)
    if not parts_src:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty, np.empty(0)
    return np.concatenate(parts_src), np.concatenate(parts_dst), np.concatenate(parts_dist)


def _warn_if_infeasible(n_reached, n_clusters):
    if n_reached > n_clusters:
        warn_user(
            f"The cannot-link constraints keep {n_reached} clusters apart, more than "
            f"n_clusters={n_clusters}; returning {n_reached} clusters.",
            InfeasibleConstraintsWarning,
        )
    elif n_reached < n_clusters:
        warn_user(
            f"The must-link constraints leave only {n_reached} clusters, fewer than "
            f"n_clusters={n_clusters}; returning {n_reached} clusters.",
            InfeasibleConstraintsWarning,
        )


def _assemble(n, edge_src, edge_dst, edge_dist, n_reached, n_clusters, candidates,
              n_fixed=0, warn=True):
    """The forest of the given edges; ``candidates`` ``(src, dst, dist)`` holds a
    minimum spanning tree (or every edge) of the samples, for the separation. The
    first ``n_fixed`` edges are must-link edges. ``warn``: warn when ``n_clusters``
    was not reached.

    The lightest edge between two clusters is an edge of any minimum spanning tree
    (it is the lightest edge leaving its cluster): the tree gives the separation.
    """
    edges = np.column_stack([edge_src, edge_dst]).astype(np.int64)
    labels, n_labels = component_labels(n, np.ascontiguousarray(edges[:, 0]),
                                        np.ascontiguousarray(edges[:, 1]))
    if warn:
        _warn_if_infeasible(n_labels, n_clusters)
    src, dst, dist = candidates
    crossing = labels[src] != labels[dst]
    return SpanningForest(
        edges=edges, weights=-np.asarray(edge_dist, dtype=np.float64),
        labels=labels, n_clusters=int(n_labels),
        separation=float(dist[crossing].min()) if crossing.any() else np.inf,
        n_fixed=int(n_fixed),
    )


def solve_forest(n, n_clusters, constraints, tree_of_subset, all_edges, warn=True):
    """Maximum-weight k-forest under constraints, whatever the input.

    Parameters
    ----------
    n : int
    n_clusters : int
    constraints : Constraints or None
    tree_of_subset : callable
        ``tree_of_subset(indices or None) -> (src, dst, dist)``, a minimum spanning
        tree (distance = minus similarity) of a subset of the samples.
    all_edges : callable
        ``all_edges() -> (src, dst, dist)`` for every pair, needed only for
        cannot-link structures that are not complete between groups.
    warn : bool, default=True
        Warn when the constraints do not allow ``n_clusters`` trees.
    """
    check_n_clusters(n_clusters, n)
    if constraints is None or constraints.is_empty:
        src, dst, dist = tree_of_subset(None)
        kept, n_reached = forest_of_spanning_tree(src, dst, dist, n_clusters)
        return _assemble(n, src[kept], dst[kept], dist[kept], n_reached, n_clusters,
                         (src, dst, dist), warn=warn)

    members = constraints.members()
    rooted = constraints.rooted_samples()
    if rooted is not None:
        src, dst, dist = tree_of_subset(None)
        group_ptr, group_members, group, *_ = constraints.kernel_arrays()
        path_src, path_dst, path_dist, needs_own_tree = tree_connectors(
            n, src, dst, dist, group_ptr, group_members, group, n_clusters
        )
        own = _group_trees(tree_of_subset, members, needs_own_tree)
        fixed_src = np.concatenate([path_src, own[0]])
        fixed_dst = np.concatenate([path_dst, own[1]])
        fixed_dist = np.concatenate([path_dist, own[2]])
        kept, n_reached = forest_from_tree(
            n, src, dst, dist, fixed_src, fixed_dst, rooted, n_clusters
        )
        candidates = src, dst, dist
        src, dst, dist = src[kept], dst[kept], dist[kept]
    else:
        fixed_src, fixed_dst, fixed_dist = _group_trees(
            tree_of_subset, members, np.ones(len(members), dtype=bool)
        )
        src, dst, dist = all_edges()
        accepted, n_reached = greedy_forest_with_conflicts(
            n, src, dst, dist, fixed_src, fixed_dst, constraints.group,
            constraints.conflict, n_clusters,
        )
        candidates = src, dst, dist
        src, dst, dist = src[accepted], dst[accepted], dist[accepted]
    return _assemble(
        n,
        np.concatenate([fixed_src, src]),
        np.concatenate([fixed_dst, dst]),
        np.concatenate([fixed_dist, dist]),
        n_reached,
        n_clusters,
        candidates,
        n_fixed=fixed_src.shape[0],
        warn=warn,
    )


def _check_all_pairs_memory(n):
    n_pairs = n * (n - 1) // 2
    if n_pairs * 24 > MAX_ALL_PAIRS_BYTES:
        raise ValueError(
            f"These cannot-link constraints are not complete between must-link groups "
            f"(unlike partial labels), so the greedy solver needs all {n_pairs} pairs "
            f"of the {n} samples, more memory than allowed. Give the constraints as "
            "partial labels y, or make every constrained group cannot-link with every "
            "other one, to use the exact O(n)-memory solver."
        )


class FeatureForests:
    """The k-forests of feature vectors (similarity = minus distance), for any k:
    the spanning tree (and, for general cannot-links, every pair's distance) is
    computed once, on first use. ``similarity_reference``: 0, so that the length
    of an edge, ``similarity_reference - similarity``, is its distance."""

    similarity_reference = 0.0

    def __init__(self, X, *, metric="euclidean", metric_params=None, algorithm="auto",
                 constraints=None):
        self.X, self.metric, self.metric_params = X, metric, metric_params
        self.algorithm, self.constraints = algorithm, constraints
        self.n_samples = X.shape[0]
        self._tree = self._edges = None

    def _tree_of_subset(self, indices):
        if indices is not None:
            return feature_tree(self.X[indices], metric=self.metric,
                                metric_params=self.metric_params,
                                algorithm=subset_algorithm(self.algorithm, indices.size))
        if self._tree is None:
            self._tree = feature_tree(self.X, metric=self.metric,
                                      metric_params=self.metric_params,
                                      algorithm=self.algorithm)
        return self._tree

    def tree(self):
        """The minimum spanning tree, ``(src, dst, distance)``."""
        return self._tree_of_subset(None)

    def _all_edges(self):
        if self._edges is None:
            self._edges = _all_feature_edges(self.X, self.metric, self.metric_params)
        return self._edges

    @interruptible
    def forest(self, n_clusters):
        """The maximum-weight forest of ``n_clusters`` trees (under the constraints)."""
        return solve_forest(self.n_samples, n_clusters, self.constraints,
                            self._tree_of_subset, self._all_edges)

    @interruptible
    def fewest(self):
        """The forest of the fewest trees the constraints allow (one without them)."""
        return solve_forest(self.n_samples, 1, self.constraints, self._tree_of_subset,
                            self._all_edges, warn=False)


def _all_feature_edges(X, metric, metric_params):
    n = X.shape[0]
    _check_all_pairs_memory(n)
    src, dst = np.triu_indices(n, k=1)
    dist = np.empty(src.shape[0])
    start = 0
    # one BLAS thread: the Euclidean products' last bits, the same on any count
    with one_blas_thread():
        for chunk in pairwise_distances_chunked(X, metric=metric, **(metric_params or {})):
            rows = np.arange(start, start + chunk.shape[0])
            lo = _triu_offset(rows[0], n)
            hi = _triu_offset(rows[-1] + 1, n)
            mask = np.triu(np.ones_like(chunk, dtype=bool), k=start + 1)
            dist[lo:hi] = chunk[mask]
            start += chunk.shape[0]
    return src.astype(np.int64), dst.astype(np.int64), dist


def forest_from_features(X, n_clusters, *, metric="euclidean", metric_params=None,
                         algorithm="auto", constraints=None):
    """Maximum-weight k-forest of feature vectors (similarity = minus distance)."""
    return FeatureForests(X, metric=metric, metric_params=metric_params,
                          algorithm=algorithm, constraints=constraints).forest(n_clusters)


def _triu_offset(row, n):
    """Index in the row-major upper triangle (k=1) where ``row`` starts."""
    return row * n - row * (row + 1) // 2


class SimilarityForests:
    """The k-forests of a dense symmetric similarity matrix, for any k: its maximum
    spanning tree is computed once. ``similarity_reference``: the largest
    similarity, so that edge lengths, ``similarity_reference - similarity``, are
    the distances of ``S = -D``."""

    def __init__(self, S, *, constraints=None):
        self.S, self.constraints, self.n_samples = S, constraints, S.shape[0]
        self._tree = None

    @property
    def similarity_reference(self):
        return float(self.S.max()) if self.S.size else 0.0

    def _tree_of_subset(self, indices):
        if indices is not None:
            return similarity_tree(np.ascontiguousarray(self.S[np.ix_(indices, indices)]))
        if self._tree is None:
            self._tree = similarity_tree(self.S)
        return self._tree

    def tree(self):
        """The maximum spanning tree, ``(src, dst, -similarity)``."""
        return self._tree_of_subset(None)

    @interruptible
    def forest(self, n_clusters):
        """The maximum-weight forest of ``n_clusters`` trees (under the constraints)."""
        n = self.n_samples
        check_n_clusters(n_clusters, n)
        tree = self._tree_of_subset(None)
        if self.constraints is None or self.constraints.is_empty:
            src, dst, dist, n_reached = unconstrained_forest(*tree, n_clusters)
        else:
            src, dst, dist, n_reached = constrained_forest(
                self.S, n_clusters, *tree, *kernel_constraints(self.constraints)
            )
        return _assemble(n, src, dst, dist, n_reached, n_clusters, tree)

    @interruptible
    def fewest(self):
        """The forest of the fewest trees the constraints allow (one without them),
        which tells the edges a forest of more trees drops (``n_fixed``): by the
        plain solver, as for features, on the same spanning tree."""
        return solve_forest(self.n_samples, 1, self.constraints, self._tree_of_subset,
                            lambda: upper_triangle_edges(self.S), warn=False)


def forest_from_similarity(S, n_clusters, *, constraints=None):
    """Maximum-weight k-forest of a dense symmetric similarity matrix."""
    return SimilarityForests(S, constraints=constraints).forest(n_clusters)


def warn_if_duplicates_split(X, forest, precomputed):
    """Warn when the forest splits samples at distance 0 (which of them go to which
    tree is then arbitrary): fewer distinct samples than trees."""
    if forest.n_clusters < 2:
        return
    if precomputed:
        tied = np.ptp(X[0]) == 0 and np.ptp(X) == 0  # the first row settles most
        message = ("All similarities in X are equal: the split into "
                   f"{forest.n_clusters} clusters is arbitrary.")
    else:
        tied = forest.separation == 0
        message = ("All samples are identical" if tied and np.ptp(X) == 0 else
                   "Samples at distance 0 from each other are in different clusters")
        message += (f": X has fewer distinct samples than n_clusters="
                    f"{forest.n_clusters}, and which copies are split off is arbitrary.")
    if tied:
        warn_user(message, UserWarning)

"""Lloyd's iterations from ClAM's seeds (``init='k-means'``), in numba.

ClAM's prototypes are trained through the attractor dynamics, whose sharp limit
is k-means (the paper's eq. 6 and 8). Started from k-means centroids rather than
from k-means++ seeds (data points), that training has less ground to cover, and
mini-batch training over less ground has less room to be chaotic (the user guide,
:ref:`clam_stability`).

scikit-learn's ``KMeans`` adds each thread's share of the points into the
centroids in the order the threads finish, so its last bits may change from run to
run on several threads. Here each restart is one thread's sums, in the order of the
points, and sparse rows (made dense a block at a time) give the bits of dense ones:
the result depends neither on ``n_jobs`` nor on the input's format.

As ClAM's inference (``_inference``), small data run in NumPy, which computes the
numba kernel's bits without compiling it (``tests/clam/test_clam_starts.py`` checks it).
On larger data, after the first pass, the kernels skip the distances of the rows
that Hamerly's bounds (an upper bound on the distance to their centroid, a lower
bound on the others) show cannot change cluster: most rows, once the centroids
move little. The bounds clear a row only by a margin far above rounding, so the
passes compute the bits of passes that compute every distance (the tests check
it); on 60,000 images of 784 pixels a pass takes about 40 ms instead of 280.
"""

import numpy as np

from skdiffclust._utils._numba import jit
from skdiffclust.clam._data import squared_distances
from skdiffclust.clam._kernels import _map_in_threads

# at most this many iterations (on a few thousand points Lloyd's converges in tens)
MAX_ITER = 100
# sparse rows are made dense this many values at a time
BLOCK_VALUES = 1 << 22
# restarts of at most this much work per iteration (rows x clusters x features)
# run in NumPy (about 1 ms an iteration); the kernel would take most of a second to
# compile
NUMPY_WORK = 1 << 18


def refine_by_lloyd(data, indices, starts, n_threads=1, max_iter=MAX_ITER):
    """Lloyd's algorithm on the rows ``indices`` of ``data`` from each start, to
    convergence (no point changes cluster: a fixed point, which data a few last
    bits apart reach alike) or ``max_iter`` iterations.

    Parameters
    ----------
    data : ScaledData
        The centred and scaled (or unit) rows.
    indices : ndarray of int or None
        The rows to cluster; ``None``: all of them, in order (dense rows are then
        read in place, not copied).
    starts : ndarray of shape (R, k, d)
        Initial centroids, one set per restart.
    n_threads : int
        Restarts run in parallel, one per thread.
    max_iter : int

    Returns
    -------
    centroids : ndarray of shape (R, k, d), float64
        A centroid whose cluster empties stays where it was.
    inertia : ndarray of shape (R,)
        Sum of the squared distances of the rows to their nearest centroid.
    """
    centroids = np.array(starts, dtype=np.float64)
    n_restarts, k, d = centroids.shape
    every_row = indices is None
    if every_row:
        indices = np.arange(data.n_samples)
    if data.sparse:
        step = max(BLOCK_VALUES // max(d, 1), 1)
        blocks = [indices[i:i + step] for i in range(0, len(indices), step)]

        def rows_of_block(block):
            return data.take(block)
    else:
        # a copy, in the order of ``indices`` (all rows: the data themselves)
        rows = data.dense() if every_row else data.take(indices)
        blocks = [slice(0, len(indices))]

        def rows_of_block(block):
            return rows[block]

    inertia = np.zeros(n_restarts)
    bounded = len(indices) * k * d > NUMPY_WORK  # the kernels (NumPy: every distance)
    assign_and_sum = _assign_and_sum if bounded else _assign_and_sum_numpy
    margin = BOUND_MARGIN * 2.0 * _largest_norm(blocks, rows_of_block) if bounded else 0.0

    def refine(r):
        n = len(indices)
        labels = np.full(n, -1, dtype=np.int64)
        # distance bounds of each row (Hamerly's): above, to its centroid; below,
        # to every other centroid
        upper, lower = (np.zeros(n), np.zeros(n)) if bounded else (np.empty(0),) * 2
        sums, counts = np.zeros((k, d)), np.zeros(k, dtype=np.int64)
        moves = None
        for iteration in range(max_iter + 1):
            sums[:], counts[:], inertia[r] = 0.0, 0, 0.0
            changed, start = 0, 0
            for block in blocks:
                block_rows = rows_of_block(block)
                part = slice(start, start + len(block_rows))
                if moves is None:
                    changed += assign_and_sum(block_rows, centroids[r], labels[part], sums,
                                              counts, inertia[r:r + 1], upper[part],
                                              lower[part])
                else:
                    changed += _assign_and_sum_bounded(
                        block_rows, centroids[r], moves.transposed, labels[part],
                        upper[part], lower[part], moves.own, moves.others, moves.half_gap,
                        margin, sums, counts)
                start += len(block_rows)
            if changed == 0 or iteration == max_iter:
                break
            move = counts > 0  # an empty cluster's centroid stays
            previous = centroids[r].copy()
            centroids[r][move] = sums[move] / counts[move, None]
            if bounded:
                moves = _Moves(previous, centroids[r])
        if moves is not None:  # the inertia of the last pass, added as a full pass would
            start = 0
            for block in blocks:
                block_rows = rows_of_block(block)
                _add_inertia(block_rows, centroids[r], labels[start:start + len(block_rows)],
                             inertia[r:r + 1])
                start += len(block_rows)

    _map_in_threads(refine, range(n_restarts), n_threads)
    return centroids, inertia


# Hamerly's bounds skip a row only when they clear it by this fraction of the
# largest distance the data allow (twice the largest row norm; centroids, means of
# rows, are no farther out): far more than the rounding of the distances and of the
# bounds' updates (about 1e-13 of it), so that a skipped row would have kept its
# cluster in an exact pass too, and the bounded passes give a full pass's bits
BOUND_MARGIN = 1e-9


def _largest_norm(blocks, rows_of_block):
    largest = 0.0
    for block in blocks:
        rows = rows_of_block(block)
        largest = max(largest, float(np.einsum("ij,ij->i", rows, rows).max(initial=0.0)))
    return float(np.sqrt(largest))


class _Moves:
    """What the bounds of the rows need after the centroids moved from ``previous``
    to ``current``: each centroid's move (``own``), the largest move of the others
    (``others``), half the distance to its nearest other centroid (``half_gap``),
    and the centroids feature-major (``transposed``)."""

    def __init__(self, previous, current):
        own = np.sqrt(np.einsum("ij,ij->i", current - previous, current - previous))
        k = own.shape[0]
        order = np.argsort(own, kind="stable")
        largest = own[order[-1]]
        self.own = own
        self.others = np.full(k, largest)
        if k > 1:
            self.others[order[-1]] = own[order[-2]]
        gaps = np.sqrt(squared_distances(current, current))
        gaps[np.arange(k), np.arange(k)] = np.inf
        self.half_gap = 0.5 * gaps.min(axis=1)
        self.transposed = np.ascontiguousarray(current.T)


# rows per lane block of ``_assign_and_sum``
LANES = 64


@jit(nogil=True)
def _assign_and_sum(rows, centroids, labels, sums, counts, inertia, upper, lower):
    """Assign each row to its nearest centroid (``labels`` updated in place), add it
    to its cluster's sum and count and its squared distance to ``inertia[0]``, row
    by row; returns how many rows changed cluster. Unless they are empty, ``upper``
    and ``lower`` receive each row's distance to its centroid and to the next
    nearest (the bounds of :func:`_assign_and_sum_bounded`).

    Rows go in blocks of :data:`LANES`, feature-major, so that the inner loop runs
    over the rows of a block (vectorised) while each distance still adds its terms
    in the order of the features: the bits of a row-by-row loop.
    """
    n, d = rows.shape
    k = centroids.shape[0]
    block = np.empty((d, LANES))
    distances = np.empty((k, LANES))
    changed = 0
    for start in range(0, n, LANES):
        m = min(LANES, n - start)
        for b in range(m):
            for c in range(d):
                block[c, b] = rows[start + b, c]
        distances[:, :m] = 0.0
        for mu in range(k):
            for c in range(d):
                centre = centroids[mu, c]
                for b in range(m):
                    difference = block[c, b] - centre
                    distances[mu, b] += difference * difference
        for b in range(m):
            best = 0
            for mu in range(1, k):
                if distances[mu, b] < distances[best, b]:
                    best = mu
            i = start + b
            if labels[i] != best:
                labels[i] = best
                changed += 1
            if upper.shape[0] > 0:
                second = np.inf
                for mu in range(k):
                    if mu != best and distances[mu, b] < second:
                        second = distances[mu, b]
                upper[i] = np.sqrt(distances[best, b])
                lower[i] = np.sqrt(second)
            inertia[0] += distances[best, b]
            counts[best] += 1
            for c in range(d):
                sums[best, c] += rows[i, c]
    return changed


def _assign_and_sum_numpy(rows, centroids, labels, sums, counts, inertia, upper, lower):
    """:func:`_assign_and_sum` in NumPy, in the same order of operations: each
    distance adds its features in order, the rows are added to their cluster's sum
    and to the inertia one after the other (without the bounds: small data run
    every pass in full)."""
    distances = np.zeros((rows.shape[0], centroids.shape[0]))
    for c in range(rows.shape[1]):
        difference = rows[:, c, None] - centroids[None, :, c]
        distances += difference * difference
    best = distances.argmin(axis=1)  # the first of tied minima, as the kernel's
    changed = int(np.count_nonzero(labels != best))
    labels[:] = best
    np.add.at(counts, best, 1)
    np.add.at(sums, best, rows)  # row by row, in order
    nearest = distances[np.arange(rows.shape[0]), best]
    inertia[0] = np.cumsum(np.concatenate([inertia[:1], nearest]))[-1]  # in order
    return changed


@jit(inline="always")
def _squared_distance(rows, i, centroids, mu):
    """The squared distance of row i to centroid mu, its features added in order:
    the bits of a lane of :func:`_assign_and_sum`."""
    total = 0.0
    for c in range(rows.shape[1]):
        difference = rows[i, c] - centroids[mu, c]
        total += difference * difference
    return total


@jit(nogil=True)
def _assign_and_sum_bounded(rows, centroids, transposed, labels, upper, lower, own,
                            others, half_gap, margin, sums, counts):
    """:func:`_assign_and_sum` after the centroids moved, with Hamerly's bounds (no
    inertia): each row's ``upper`` grows by its centroid's move (``own``), its
    ``lower`` shrinks by the largest move of the others; a row whose upper bound,
    plus ``margin``, stays below its lower bound and below half the distance from
    its centroid to the nearest other (``half_gap``) keeps its cluster without a
    distance. Otherwise its distance to its centroid tightens the upper bound, and
    if that is not enough, every distance is computed (``transposed``: the
    centroids feature-major), in the order of a full pass."""
    n, d = rows.shape
    k = centroids.shape[0]
    distances = np.empty(k)
    changed = 0
    for i in range(n):
        a = labels[i]
        bound_above = upper[i] + own[a]
        bound_below = lower[i] - others[a]
        clearance = max(half_gap[a], bound_below)
        if bound_above + margin > clearance:
            bound_above = np.sqrt(_squared_distance(rows, i, centroids, a))
            if bound_above + margin > clearance:
                distances[:] = 0.0
                for c in range(d):
                    value = rows[i, c]
                    for mu in range(k):
                        difference = value - transposed[c, mu]
                        distances[mu] += difference * difference
                best = 0
                for mu in range(1, k):
                    if distances[mu] < distances[best]:
                        best = mu
                second = np.inf
                for mu in range(k):
                    if mu != best and distances[mu] < second:
                        second = distances[mu]
                if best != a:
                    labels[i] = best
                    changed += 1
                bound_above = np.sqrt(distances[best])
                bound_below = np.sqrt(second)
        upper[i] = bound_above
        lower[i] = bound_below
        cluster = labels[i]
        counts[cluster] += 1
        for c in range(d):
            sums[cluster, c] += rows[i, c]
    return changed


@jit(nogil=True)
def _add_inertia(rows, centroids, labels, inertia):
    """Add each row's squared distance to its centroid to ``inertia[0]``, in order:
    the inertia of a full pass that keeps ``labels``."""
    for i in range(rows.shape[0]):
        inertia[0] += _squared_distance(rows, i, centroids, labels[i])

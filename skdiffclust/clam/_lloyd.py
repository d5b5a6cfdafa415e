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
numba kernel's bits without compiling it (``tests/test_clam_starts.py`` checks it).
"""

import numpy as np

from skdiffclust._utils._numba import jit
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
    indices : ndarray of int
        The rows to cluster.
    starts : ndarray of shape (R, k, d)
        Initial centroids, one set per restart.
    n_threads : int
        Restarts run in parallel, one per thread.

    Returns
    -------
    centroids : ndarray of shape (R, k, d), float64
        A centroid whose cluster empties stays where it was.
    inertia : ndarray of shape (R,)
        Sum of the squared distances of the rows to their nearest centroid.
    """
    centroids = np.array(starts, dtype=np.float64)
    n_restarts, k, d = centroids.shape
    if data.sparse:
        step = max(BLOCK_VALUES // max(d, 1), 1)
        blocks = [indices[i:i + step] for i in range(0, len(indices), step)]

        def rows_of_block(block):
            return data.take(block)
    else:
        rows = data.take(indices)  # a copy, in the order of ``indices``
        blocks = [slice(0, len(indices))]

        def rows_of_block(block):
            return rows[block]

    inertia = np.zeros(n_restarts)
    assign_and_sum = (_assign_and_sum_numpy if len(indices) * k * d <= NUMPY_WORK
                      else _assign_and_sum)

    def refine(r):
        labels = np.full(len(indices), -1, dtype=np.int64)
        sums, counts = np.zeros((k, d)), np.zeros(k, dtype=np.int64)
        for iteration in range(max_iter + 1):
            sums[:], counts[:], inertia[r] = 0.0, 0, 0.0
            changed, start = 0, 0
            for block in blocks:
                block_rows = rows_of_block(block)
                changed += assign_and_sum(block_rows, centroids[r],
                                          labels[start:start + len(block_rows)], sums,
                                          counts, inertia[r:r + 1])
                start += len(block_rows)
            if changed == 0 or iteration == max_iter:
                break
            move = counts > 0  # an empty cluster's centroid stays
            centroids[r][move] = sums[move] / counts[move, None]

    _map_in_threads(refine, range(n_restarts), n_threads)
    return centroids, inertia


# rows per lane block of ``_assign_and_sum``
LANES = 64


@jit(nogil=True)
def _assign_and_sum(rows, centroids, labels, sums, counts, inertia):
    """Assign each row to its nearest centroid (``labels`` updated in place), add it
    to its cluster's sum and count and its squared distance to ``inertia[0]``, row
    by row; returns how many rows changed cluster.

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
            inertia[0] += distances[best, b]
            counts[best] += 1
            for c in range(d):
                sums[best, c] += rows[i, c]
    return changed


def _assign_and_sum_numpy(rows, centroids, labels, sums, counts, inertia):
    """:func:`_assign_and_sum` in NumPy, in the same order of operations: each
    distance adds its features in order, the rows are added to their cluster's sum
    and to the inertia one after the other."""
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

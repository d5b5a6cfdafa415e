"""The approximate kNN search: an inverted-file index in numba, distances by BLAS.

:func:`ivf_kneighbors` finds each row's nearest other rows among the rows of the
cells nearest to it, as FAISS's ``IndexIVFFlat`` does:

1. **cells**: k-means (Lloyd, :data:`KMEANS_ITERATIONS` rounds, seeded) on a
   sample of :data:`KMEANS_SAMPLES_PER_CELL` rows per cell puts about sqrt(n)
   centres among the rows;
2. **probes**: each row's :data:`N_PROBE` nearest centres; the nearest is its
   home cell, and the rows are sorted by home cell, so that each cell's rows lie
   together;
3. **scan**: each row is compared with every row of its probed cells and keeps
   the ``n_neighbors`` nearest in a heap.

Where FAISS compares a query with a candidate by a loop over the features (on
MNIST's pixels, 18 times slower per feature than a matrix product), the scan here
groups the work so that BLAS does it: the rows of a chunk (at most
:data:`CHUNK_ROWS` rows of one home cell) that probe a cell are gathered, and one
product ``-2 Q Y^T`` gives their inner products with the cell's rows; adding the
squared norms of Y gives each squared distance up to the query's own norm, which
does not change its order. The heaps are updated in the same pass. Steps 1 and 2
are the same kernel, with the centres as the one cell every row probes.

Deterministic whatever the thread count: the chunks are fixed by the data (not
by the threads), each chunk writes only the heaps of its own rows, each product
runs on one BLAS thread (``threadpool_limits``) with shapes fixed by the chunk,
and a row sees its cells in the same order; k-means sums its clusters in one
sequential pass. The cost is ``n * N_PROBE * n / n_cells`` pairs: O(n^1.5) with
sqrt(n) cells, the recall falling slowly with n (measured in
``doc/benchmarks.rst``).

The kernels index their arrays without bounds checks, so what they are given is
checked first: the rows finite, with float32 squares that cannot overflow
(:func:`check_points`; ``skdiffclust._neighbors`` centres and scales them), each
row's cells found (an infinite distance would leave a placeholder where a cell's
number belongs), and the scan's cells, probes, chunks and heaps in range
(:func:`_check_scan_inputs`). The tests also run with ``NUMBA_BOUNDSCHECK=1``.
"""

import math

import numba
import numpy as np
from numba import prange
from threadpoolctl import threadpool_limits

from skdiffclust._utils._numba import jit

# cells probed per row (all cells when there are fewer), at least enough cells to
# hold CANDIDATES_PER_NEIGHBOUR candidates per neighbour sought
N_PROBE = 32
CANDIDATES_PER_NEIGHBOUR = 16
# k-means of the cells: about sqrt(n) centres, with at least MIN_ROWS_PER_CELL
# rows each; Lloyd's rounds on a sample of KMEANS_SAMPLES_PER_CELL rows per cell
MIN_ROWS_PER_CELL = 39
KMEANS_SAMPLES_PER_CELL = 64
KMEANS_ITERATIONS = 10
# query rows per chunk of the scan (of which those probing a cell make one
# product) and of the search of the nearest centres; candidate rows per product
CHUNK_ROWS = 1024
CENTRE_CHUNK_ROWS = 256
BLOCK_COLUMNS = 1024
# chunks per call of the scan kernel (Ctrl-C is seen between calls)
CHUNKS_PER_CALL = 64


def ivf_kneighbors(points, n_neighbors, *, seed, n_threads=1, n_probe=None):
    """Approximate ``n_neighbors`` nearest other rows of every row of ``points``.

    Parameters
    ----------
    points : ndarray of shape (n_samples, n_features), float32, C-contiguous
        The rows (centred: the float32 inner products lose less precision).

    n_neighbors : int
        Neighbours per row.

    seed : int
        Seeds the k-means of the cells.

    n_threads : int, default=1
        numba threads of the search; the result does not depend on it.

    n_probe : int or None, default=None
        Cells probed per row; ``None``: :func:`probed_cells`.

    Returns
    -------
    neighbours : ndarray of shape (n_samples, n_neighbors), int64
        Row numbers, in no particular order; -1 where the probed cells held
        fewer than ``n_neighbors`` other rows.

    Raises
    ------
    ValueError
        For points that are not finite, or so large that their squared distances
        overflow float32 (:func:`check_points`), and ``n_neighbors`` below 1.
    """
    points, n_cells, n_probe = index_plan(points, n_neighbors, n_probe)
    n_samples = points.shape[0]
    rng = np.random.default_rng(seed)
    previous = numba.get_num_threads()
    numba.set_num_threads(max(1, min(int(n_threads), numba.config.NUMBA_NUM_THREADS)))
    try:
        # one BLAS thread per product: the threads are numba's, and a product's
        # bits then depend on its shape only
        with threadpool_limits(1, user_api="blas"):
            centres = _kmeans(points, n_cells, rng)
            probes, home = _nearest_centres(points, centres, n_probe)
            order = np.argsort(home, kind="stable")
            cell_start = np.zeros(n_cells + 1, dtype=np.int64)
            np.cumsum(np.bincount(home, minlength=n_cells), out=cell_start[1:])
            sorted_points = _with_squared_norms(points[order])
            probes = probes.astype(np.int32)[order]  # int32: 128 MB at 1M x 32
            distances = np.full((n_samples, n_neighbors), np.inf, dtype=np.float32)
            found = np.full((n_samples, n_neighbors), n_samples, dtype=np.int64)
            _scan_in_calls(sorted_points, sorted_points, cell_start, probes,
                           _chunk_starts(cell_start), True, distances, found)
    finally:
        numba.set_num_threads(previous)
    del probes, sorted_points, distances
    complete = found < n_samples
    neighbours = np.empty_like(found)
    neighbours[order] = np.where(complete, order[np.where(complete, found, 0)], -1)
    return neighbours


def index_plan(points, n_neighbors, n_probe):
    """What both indexes (this one and ``skdiffclust._ivf_torch``'s) check and
    decide before a search: the points checked (:func:`check_points`; no feature
    at all becomes one constant feature), ``n_neighbors`` a positive integer, the
    number of cells and of cells probed per row. Returns
    ``(points, n_cells, n_probe)``."""
    check_points(points)
    if isinstance(n_neighbors, (bool, np.bool_)) or not isinstance(
            n_neighbors, (int, np.integer)) or n_neighbors < 1:
        raise ValueError(f"n_neighbors must be a positive integer; got {n_neighbors!r}.")
    n_samples = points.shape[0]
    if points.shape[1] == 0:  # every feature constant: all distances 0
        points = np.zeros((n_samples, 1), dtype=np.float32)
    n_cells = cell_count(n_samples)
    if n_probe is None:
        n_probe = probed_cells(n_samples, n_cells, n_neighbors)
    return points, n_cells, max(1, min(int(n_probe), n_cells))


def check_points(points):
    """Refuse rows the kernels cannot search safely: they must be a C-contiguous
    2-D float32 array of at least 2 rows, finite, with magnitudes whose squared
    distances summed over the features stay below float32's largest value (a NaN
    or an infinity would leave a placeholder where a cell's number belongs, and the
    kernels index without bounds checks). ``skdiffclust._neighbors`` hands the
    index centred rows scaled to at most 2**32."""
    if not (isinstance(points, np.ndarray) and points.dtype == np.float32
            and points.ndim == 2 and points.flags.c_contiguous):
        raise TypeError("points must be a C-contiguous 2-D float32 array; got "
                        f"{type(points).__name__} of dtype "
                        f"{getattr(points, 'dtype', None)} and shape "
                        f"{getattr(points, 'shape', None)}.")
    if points.shape[0] < 2:
        raise ValueError(f"points must hold at least 2 rows; got {points.shape[0]}.")
    if points.size == 0:
        return
    peak = max(float(points.max()), -float(points.min()))
    # a product (-2 q, 1) . (y, ||y||^2) is at most 3 * n_features * peak**2
    limit = math.sqrt(float(np.finfo(np.float32).max) / (4 * (points.shape[1] + 1)))
    if not peak <= limit:  # NaN too
        raise ValueError(
            f"points must be finite with magnitudes up to {limit:.3g} at "
            f"{points.shape[1]} features (their squared distances overflow "
            f"float32); got {peak:.3g}. Centre and scale them first, as "
            "skdiffclust._neighbors.kneighbors does.")


def cell_count(n_samples):
    """About sqrt(n_samples) cells, each of at least ``MIN_ROWS_PER_CELL`` rows."""
    return max(1, min(int(round(math.sqrt(n_samples))), n_samples // MIN_ROWS_PER_CELL))


def probed_cells(n_samples, n_cells, n_neighbors):
    """``N_PROBE`` cells, more where they would hold fewer than
    ``CANDIDATES_PER_NEIGHBOUR`` candidates per neighbour; at most all."""
    per_cell = n_samples / n_cells
    wanted = math.ceil(CANDIDATES_PER_NEIGHBOUR * (n_neighbors + 1) / per_cell)
    return int(min(n_cells, max(N_PROBE, wanted)))


def _with_squared_norms(points):
    """The rows with their squared norms appended as a last column (float32)."""
    augmented = np.empty((points.shape[0], points.shape[1] + 1), dtype=np.float32)
    augmented[:, :-1] = points
    augmented[:, -1] = np.einsum("ij,ij->i", augmented[:, :-1], augmented[:, :-1])
    return augmented


def _chunk_starts(cell_start):
    """Boundaries of the scan's chunks: each cell's rows, in pieces of at most
    ``CHUNK_ROWS`` rows."""
    starts = [np.arange(start, stop, CHUNK_ROWS)
              for start, stop in zip(cell_start[:-1], cell_start[1:])]
    return np.concatenate(starts + [cell_start[-1:]]).astype(np.int64)


def _kmeans(points, n_cells, rng):
    """Centres of ``n_cells`` cells: Lloyd's k-means on a sample of the rows,
    started from random rows; an emptied cell restarts from a random row."""
    n_samples = points.shape[0]
    size = min(n_samples, KMEANS_SAMPLES_PER_CELL * n_cells)
    sample = points
    if size < n_samples:
        sample = points[np.sort(rng.choice(n_samples, size, replace=False))]
    centres = sample[np.sort(rng.choice(size, n_cells, replace=False))].astype(np.float64)
    for _ in range(KMEANS_ITERATIONS):
        _, labels = _nearest_centres(sample, centres.astype(np.float32), 1)
        sums = np.zeros_like(centres)
        counts = np.zeros(n_cells, dtype=np.int64)
        _sum_by_label(sample, labels, sums, counts)
        filled = counts > 0
        centres[filled] = sums[filled] / counts[filled, None]
        empty = np.flatnonzero(~filled)
        if empty.size:
            centres[empty] = sample[rng.choice(size, empty.size, replace=False)]
    return centres.astype(np.float32)


@jit
def _sum_by_label(points, labels, sums, counts):
    """Sums and sizes of each label's rows, in row order (float64)."""
    for i in range(points.shape[0]):
        label = labels[i]
        counts[label] += 1
        for f in range(points.shape[1]):
            sums[label, f] += points[i, f]


def _nearest_centres(points, centres, n_nearest):
    """Each row's ``n_nearest`` nearest centres (in no particular order), and the
    nearest one."""
    n_samples = points.shape[0]
    distances = np.full((n_samples, n_nearest), np.inf, dtype=np.float32)
    nearest = np.full((n_samples, n_nearest), centres.shape[0], dtype=np.int64)
    chunk_start = np.append(np.arange(0, n_samples, CENTRE_CHUNK_ROWS), n_samples)
    _scan_in_calls(points, _with_squared_norms(centres),
                   np.array([0, centres.shape[0]], dtype=np.int64),
                   np.zeros((n_samples, 1), dtype=np.int32), chunk_start.astype(np.int64),
                   False, distances, nearest)
    # every centre is at a finite distance (check_points), so none of the
    # placeholders (centres.shape[0], infinitely far) is left: checked, as the
    # cells' numbers index the kernels' arrays
    if n_samples and (nearest.min() < 0 or nearest.max() >= centres.shape[0]):
        raise RuntimeError("The approximate neighbour search did not find each row's "
                           "nearest cells; its input was not checked.")
    best = np.argmin(distances, axis=1)
    return nearest, nearest[np.arange(n_samples), best]


def _scan_in_calls(queries, reference, cell_start, probes, chunk_start, exclude_self,
                   heap_distances, heap_rows):
    """:func:`_scan`, ``CHUNKS_PER_CALL`` chunks per call (Ctrl-C is seen between
    calls), after :func:`_check_scan_inputs`."""
    _check_scan_inputs(queries, reference, cell_start, probes, chunk_start,
                       heap_distances, heap_rows)
    for first in range(0, chunk_start.size - 1, CHUNKS_PER_CALL):
        _scan(queries, reference, cell_start, probes,
              chunk_start[first:first + CHUNKS_PER_CALL + 1], exclude_self,
              heap_distances, heap_rows)


def _check_scan_inputs(queries, reference, cell_start, probes, chunk_start,
                       heap_distances, heap_rows):
    """What :func:`_scan` needs to index in range (it has no bounds checks): cells
    that tile the reference rows in order, probes naming cells, chunks within the
    queries, one heap per query; a RuntimeError otherwise (a fault of the caller,
    never of the data)."""
    n_cells = cell_start.shape[0] - 1
    problems = []
    if n_cells < 1 or cell_start[0] != 0 or cell_start[-1] != reference.shape[0] \
            or np.any(np.diff(cell_start) < 0):
        problems.append("cells that do not tile the reference rows")
    if probes.ndim != 2 or probes.shape[0] != queries.shape[0] or probes.shape[1] < 1 \
            or probes.min() < 0 or probes.max() >= n_cells:
        problems.append(f"probes that are not cell numbers from 0 to {n_cells - 1}")
    if chunk_start.shape[0] < 1 or chunk_start[0] < 0 \
            or chunk_start[-1] > queries.shape[0] or np.any(np.diff(chunk_start) < 0):
        problems.append("chunks outside the queries")
    if heap_rows.shape != heap_distances.shape or heap_rows.ndim != 2 \
            or heap_rows.shape[0] != queries.shape[0] or heap_rows.shape[1] < 1:
        problems.append("heaps that are not one non-empty row per query")
    if queries.shape[1] < reference.shape[1] - 1:
        problems.append("queries with fewer features than the reference rows")
    if problems:
        raise RuntimeError("The approximate neighbour search's scan was given "
                           + "; ".join(problems) + ".")


@jit(parallel=True)
def _scan(queries, reference, cell_start, probes, chunk_start, exclude_self,
          heap_distances, heap_rows):
    """Push every reference row of each query's probed cells into its heap.

    ``reference`` holds the candidates' features and, last, their squared norms;
    ``queries`` the queries' features (and possibly more columns, ignored).
    Chunk by chunk (in parallel): the chunk's (row, cell) pairs are grouped by
    cell; for each cell, its rows of the chunk are gathered as ``(-2 q, 1)``, and
    one product per block of the cell's rows gives their squared distances, up to
    the query's own norm. ``exclude_self``: queries and reference are the same
    rows, and a row is not its own neighbour.
    """
    n_cells = cell_start.shape[0] - 1
    n_probe = probes.shape[1]
    n_features = reference.shape[1] - 1
    for chunk in prange(chunk_start.shape[0] - 1):
        lo = chunk_start[chunk]
        hi = chunk_start[chunk + 1]
        # counting sort of the chunk's (row, cell) pairs by cell, rows in order
        offsets = np.zeros(n_cells + 1, dtype=np.int64)
        for r in range(lo, hi):
            for s in range(n_probe):
                offsets[probes[r, s] + 1] += 1
        for p in range(n_cells):
            offsets[p + 1] += offsets[p]
        fill = offsets[:-1].copy()
        rows_by_cell = np.empty((hi - lo) * n_probe, dtype=np.int64)
        for r in range(lo, hi):
            for s in range(n_probe):
                p = probes[r, s]
                rows_by_cell[fill[p]] = r
                fill[p] += 1
        # as many rows as the chunk's most probed cell takes (its rows, unless a
        # row were to list a cell twice)
        most = 0
        for p in range(n_cells):
            most = max(most, offsets[p + 1] - offsets[p])
        gathered = np.ones((most, n_features + 1), dtype=reference.dtype)
        for p in range(n_cells):
            count = offsets[p + 1] - offsets[p]
            if count == 0:
                continue
            rows = rows_by_cell[offsets[p]:offsets[p + 1]]
            for t in range(count):
                for f in range(n_features):
                    gathered[t, f] = np.float32(-2.0) * queries[rows[t], f]
            for start in range(cell_start[p], cell_start[p + 1], BLOCK_COLUMNS):
                stop = min(start + BLOCK_COLUMNS, cell_start[p + 1])
                distances = np.dot(gathered[:count], reference[start:stop].T)
                _push_block(distances, start, rows, exclude_self, heap_distances,
                            heap_rows)


@jit(inline="always")
def _push_block(distances, start, rows, exclude_self, heap_distances, heap_rows):
    """Push the candidates ``start, start + 1, ...`` at ``distances`` from the
    queries ``rows`` into the queries' heaps.

    Each run of 32 candidates is first tested as a whole against the heap's root
    (a vectorised pass: 0.3 ns per candidate, against 1.7 for a test and a branch
    per candidate); most runs hold none nearer. A query's candidates come in
    increasing row order, so a tie with the root never enters: the heap keeps the
    first found.
    """
    n_candidates = distances.shape[1]
    for r in range(distances.shape[0]):
        i = rows[r]
        root = heap_distances[i, 0]
        row = distances[r]
        for run in range(0, n_candidates, 32):
            stop = min(run + 32, n_candidates)
            nearer = False
            for c in range(run, stop):
                nearer |= row[c] < root
            if not nearer:
                continue
            for c in range(run, stop):
                if row[c] < root and not (exclude_self and start + c == i):
                    _replace_root(heap_distances, heap_rows, i, row[c], start + c)
                    root = heap_distances[i, 0]


@jit(inline="always")
def _replace_root(heap_distances, heap_rows, i, distance, row):
    """Replace the root of row i's max-heap by (distance, row), and sift it down."""
    size = heap_distances.shape[1]
    position = 0
    while True:
        child = 2 * position + 1
        if child >= size:
            break
        if child + 1 < size and heap_distances[i, child + 1] > heap_distances[i, child]:
            child += 1
        if distance >= heap_distances[i, child]:
            break
        heap_distances[i, position] = heap_distances[i, child]
        heap_rows[i, position] = heap_rows[i, child]
        position = child
    heap_distances[i, position] = distance
    heap_rows[i, position] = row

"""Duplicated samples in PRCut's kNN graph: found exactly, searched once, joined.

Copies of a point are at distance 0 from one another: a point repeated more than
``n_neighbors`` times fills its copies' neighbour lists with themselves, and the
graph falls apart into groups of copies that are not the clusters (blobs whose
points were repeated five times gave three such components, ARI 0.58 against 0.90
on the points themselves). The graph is built instead on the distinct points, and
each copy keeps its own edges: the distinct points' neighbour lists (copies of a
point counting once) are handed to the copies of each point, the t-th copy of
point i linking to the (t + s)-th copy of each neighbour j (cyclically), so that
every sample keeps ``n_neighbors`` edges and no copy becomes a hub; the copies of a
point are joined in a ring (two copies: one edge) of the largest connectivity
weight, 1. The network gives copies the same output whatever their edges, so the
graph only has to say that they belong together and where they belong.

The shift s is a hash of the pair (i, j). With s = 0 the t-th copies of all points
formed one layer, a copy of the distinct points' graph, and the layers were joined
only by the rings: the cheapest cuts of such a graph separate layers rather than
clusters, and the ratio cut and its spectral start took them (600 blobs rounded to
a grid of 28 distinct points: one cluster where four were given, ARI 0). Shifted per
pair, the layers are mixed, as in a random lift of the distinct points' graph,
whose spectrum gains no small eigenvalue: ARI 0.46 there; over 24 rounded sets of
blobs (six seeds; 2, 3 and 5 features) the mean ARI given the number rose from
0.81 to 0.87 (lower on two sets), and with ``n_clusters='auto'`` it stayed about
level (0.79). Data without copies are not touched.

Rows are found equal by a hash of their values (order-free over the non-zero
entries, so that dense and sparse rows hash alike) and then compared exactly;
data without copies go through the search as they would without this module.
"""

import numpy as np
import scipy.sparse as sp
from numba import prange

from skdiffclust._utils._numba import jit

# splitmix64's constants (Steele, Lea & Flood, 2014): the hash of an entry
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)
_ZERO, _NEGATIVE_ZERO = np.uint64(0), np.uint64(0x8000000000000000)
_30, _27, _31 = np.uint64(30), np.uint64(27), np.uint64(31)

# rows compared at a time with their first copy (a bounded temporary)
COMPARE_ROWS = 4096


@jit(inline="always")
def _entry_hash(column, bits):
    """splitmix64 of a value's bits and its column (-0.0 is 0.0, which is skipped)."""
    x = bits ^ (np.uint64(column + 1) * _GOLDEN)
    x = (x ^ (x >> _30)) * _MIX_1
    x = (x ^ (x >> _27)) * _MIX_2
    return x ^ (x >> _31)


@jit(parallel=True)
def _dense_row_hashes(bits, hashes):
    """``hashes[i]``: the sum (mod 2**64) of the hashes of row i's non-zero entries;
    ``bits`` is a C-contiguous float64 array viewed as uint64."""
    for i in prange(bits.shape[0]):
        total = _ZERO
        for j in range(bits.shape[1]):
            value = bits[i, j]
            if value != _ZERO and value != _NEGATIVE_ZERO:
                total += _entry_hash(j, value)
        hashes[i] = total


@jit(parallel=True)
def _sparse_row_hashes(indptr, indices, bits, hashes):
    """:func:`_dense_row_hashes` of a CSR matrix's rows (checked: ``indptr`` has
    ``hashes.size + 1`` increasing entries within ``bits``)."""
    for i in prange(hashes.shape[0]):
        total = _ZERO
        for entry in range(indptr[i], indptr[i + 1]):
            value = bits[entry]
            if value != _ZERO and value != _NEGATIVE_ZERO:
                total += _entry_hash(indices[entry], value)
        hashes[i] = total


def row_hashes(Z):
    """A uint64 hash of each row of a dense array or CSR matrix (finite values):
    equal rows have equal hashes, dense or sparse."""
    hashes = np.empty(Z.shape[0], dtype=np.uint64)
    if sp.issparse(Z):
        Z = sp.csr_matrix(Z, dtype=np.float64)
        data = np.ascontiguousarray(Z.data)
        _sparse_row_hashes(Z.indptr.astype(np.int64), Z.indices.astype(np.int64),
                           data.view(np.uint64), hashes)
    else:
        values = np.ascontiguousarray(Z, dtype=np.float64)
        _dense_row_hashes(values.view(np.uint64), hashes)
    return hashes


class Copies:
    """Samples whose rows are equal, as groups of copies of ``n_distinct`` points.

    Attributes
    ----------
    first : ndarray of shape (n_distinct,)
        The first sample of each distinct point, in the samples' order.
    point : ndarray of shape (n_samples,)
        The distinct point of each sample (``first[point[i]]`` equals sample i).
    counts : ndarray of shape (n_distinct,)
        Copies of each point.
    copy : ndarray of shape (n_samples,)
        Which copy of its point each sample is (0 for the first).
    """

    def __init__(self, point):
        self.point = point
        self.counts = np.bincount(point)
        self.n_distinct = self.counts.size
        order = np.argsort(point, kind="stable")  # the copies of each point, in order
        self._starts = np.concatenate([[0], np.cumsum(self.counts)[:-1]])
        self._by_point = order
        self.first = order[self._starts]
        self.copy = np.empty_like(point)
        self.copy[order] = np.arange(point.size) - self._starts[point[order]]

    @property
    def n_duplicates(self):
        """Samples that are a copy of an earlier one."""
        return int(self.point.size - self.n_distinct)

    def sample(self, points, copies):
        """The sample that is copy ``copies % counts`` of each of ``points``."""
        return self._by_point[self._starts[points] + copies % self.counts[points]]

    def each_copy(self, distances, neighbors):
        """The distinct points' neighbour lists (rows of the ``n_distinct`` points)
        handed to every sample: the t-th copy of point i links to the
        (t + s(i, j))-th copy (cyclically) of each of its neighbours j."""
        neighbors = neighbors[self.point]
        shifts = _pair_shifts(self.point[:, None], neighbors)
        return distances[self.point], self.sample(neighbors, self.copy[:, None] + shifts)

    def joined(self, W):
        """W (CSR, on the samples) with the copies of each point joined in a ring
        of weight 1 (one edge between two copies)."""
        repeated = np.flatnonzero(self.counts[self.point] > 1)
        successors = self.sample(self.point[repeated], self.copy[repeated] + 1)
        n = self.point.size
        ring = sp.csr_matrix((np.ones(repeated.size), (repeated, successors)),
                             shape=(n, n))
        ring = ring.maximum(ring.T)  # two copies: one edge of weight 1, not 2
        W = sp.csr_matrix(W + ring, dtype=np.float64)
        W.sort_indices()
        return W


def _pair_shifts(points, neighbors):
    """The shift of each pair (point i, neighbour j): a hash of the unordered pair
    (splitmix64's mixing of the two indices, its top 31 bits), negated from the
    larger index, so that s(j, i) = -s(i, j) and a mutual pair of copies is one
    edge, as without copies (a lift: the t-th copy of i and the (t + s)-th of j
    are neighbours either way round)."""
    low, high = np.minimum(points, neighbors), np.maximum(points, neighbors)
    x = low.astype(np.uint64) * _GOLDEN ^ high.astype(np.uint64) * _MIX_1
    x = (x ^ (x >> _30)) * _MIX_2
    shift = ((x ^ (x >> _31)) >> np.uint64(33)).astype(np.int64)
    return np.where(points < neighbors, shift, -shift)


def find_copies(Z):
    """The :class:`Copies` of the rows of Z (dense or CSR, finite), or ``None`` when
    all rows are distinct, or all equal (then there is nothing to search)."""
    n = Z.shape[0]
    if n < 2:
        return None
    _, first_of_hash, hash_of = np.unique(row_hashes(Z), return_index=True,
                                          return_inverse=True)
    if first_of_hash.size == n:
        return None
    # a row and the first with its hash are copies if equal (else a hash collision:
    # the row stays a point of its own)
    candidates = np.flatnonzero(first_of_hash[hash_of] != np.arange(n))
    representative = np.arange(n)
    for start in range(0, candidates.size, COMPARE_ROWS):
        rows = candidates[start:start + COMPARE_ROWS]
        firsts = first_of_hash[hash_of[rows]]
        if sp.issparse(Z):
            equal = np.asarray((Z[rows] != Z[firsts]).sum(axis=1)).ravel() == 0
        else:
            equal = np.all(Z[rows] == Z[firsts], axis=1)
        representative[rows[equal]] = firsts[equal]
    # points numbered in the order of their first sample
    firsts, point = np.unique(representative, return_inverse=True)
    if firsts.size in (1, n):
        return None
    return Copies(point.ravel().astype(np.int64))

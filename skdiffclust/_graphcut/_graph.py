"""Sparse similarity graphs for PRCut, their batch pairs, and the ratio cut.

NumPy, SciPy and small numba kernels: the graph is built once, kept in CSR
form (memory O(n_samples * n_neighbors), never n x n), and every training step
reads the block of W between a left and a right batch straight from the CSR
arrays. ``init='spectral_snn'`` reweights its edges by shared neighbours for the
spectral start.
"""

import numba
import numpy as np
import scipy.sparse as sp
from numba import prange
from scipy.sparse.csgraph import connected_components

from skdiffclust._neighbors import kneighbors
from skdiffclust._utils._numba import jit
from skdiffclust._utils._symmetry import summarise
from skdiffclust._utils._validation import check_host_array, check_sparse_structure
from skdiffclust._utils._warn import warn_user

AFFINITIES = ("nearest_neighbors", "rbf", "precomputed")

# A cluster's share P-bar is floored at this fraction of the uniform share 1/k:
# 1/P-bar and 1/P-bar^2 stay finite (and Adam's moments sane) as a cluster empties.
PBAR_FLOOR_FRACTION = 1e-2


def pbar_floor(n_clusters):
    return PBAR_FLOOR_FRACTION / n_clusters


def knn_affinity(X, n_neighbors, *, kernel="connectivity", rbf_gamma=None,
                 algorithm="auto", device=None, n_jobs=None, random_state=None):
    """Symmetric k-nearest-neighbour affinity of the rows of X, in CSR form.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
        Feature vectors.

    n_neighbors : int
        Neighbours of each sample (itself excluded); must be below ``n_samples``.

    kernel : {'connectivity', 'rbf'}, default='connectivity'
        ``'connectivity'``: W_ij = 1 when i and j are among each other's
        neighbours, 1/2 when only one is among the other's (the kNN graph of
        Ghriss & Monteleoni, 2025, section 4.4, symmetrised as scikit-learn's
        ``SpectralClustering(affinity='nearest_neighbors')`` symmetrises its
        own: ``(A + A.T) / 2``). ``'rbf'``: the same, times
        exp(-rbf_gamma * ||x_i - x_j||^2).

    rbf_gamma : float or None, default=None
        Inverse squared bandwidth of ``'rbf'``. ``None``: one over the median
        squared distance along the edges.

    algorithm : {'auto', 'exact', 'approximate'}, default='auto'
        The neighbour search (:func:`skdiffclust._neighbors.kneighbors`).

    device : torch.device or None, default=None
        Where an exact dense search runs (CUDA: torch, blockwise).

    n_jobs : int or None, default=None
        CPU threads of the neighbour search.

    random_state : int, RandomState instance or None, default=None
        Seeds the approximate search.

    Returns
    -------
    W : scipy.sparse.csr_matrix of shape (n_samples, n_samples)
        Symmetric, non-negative, zero diagonal, float64, at most
        ``2 * n_samples * n_neighbors`` stored entries.
    """
    distances, neighbors = kneighbors(X, n_neighbors, algorithm=algorithm, device=device,
                                      n_jobs=n_jobs, random_state=random_state)
    return affinity_from_neighbors(distances, neighbors, kernel=kernel, rbf_gamma=rbf_gamma)


def scaled_knn_graph(scaling, *, n_neighbors, affinity, rbf_gamma, algorithm, device,
                     n_jobs, random_state, warn=True):
    """PRCut's graph of features: :func:`knn_affinity` of the globally centred and
    scaled data (``scaling.metric``, see ``_scaling.FeatureScaling``), with
    ``rbf_gamma`` given in the units of X. Duplicated samples are searched once
    and joined (``_duplicates``). ``n_neighbors`` is clipped to the distinct
    samples less one, with a warning when ``warn``, as is a graph that is complete
    or nearly so."""
    from skdiffclust._graphcut._duplicates import find_copies

    Z = scaling.metric
    copies = find_copies(Z)
    n_points = Z.shape[0] if copies is None else copies.n_distinct
    if warn:
        warn_on_neighbourhoods(n_neighbors, n_points, Z.shape[0], affinity=affinity,
                               identical=scaling.identical)
    n_neighbors = min(n_neighbors, n_points - 1)
    kernel = "connectivity" if affinity == "nearest_neighbors" else "rbf"
    # rbf_gamma is in the units of X; the distances are in those of Z
    if rbf_gamma is not None:
        rbf_gamma = rbf_gamma * scaling.metric_scale ** 2
    if copies is None:
        return knn_affinity(Z, n_neighbors, kernel=kernel, rbf_gamma=rbf_gamma,
                            algorithm=algorithm, device=device, n_jobs=n_jobs,
                            random_state=random_state)
    distances, neighbors = kneighbors(Z[copies.first], n_neighbors, algorithm=algorithm,
                                      device=device, n_jobs=n_jobs,
                                      random_state=random_state)
    distances, neighbors = copies.each_copy(distances, neighbors)
    return copies.joined(affinity_from_neighbors(distances, neighbors, kernel=kernel,
                                                 rbf_gamma=rbf_gamma))


# a kNN graph whose samples each reach at least this fraction of the others is
# nearly complete: no two clusters of balanced sizes then hold their members'
# neighbour lists, and connectivity weights (1 or 1/2) say little more
NEARLY_COMPLETE = 0.5


def warn_on_neighbourhoods(n_neighbors, n_points, n_samples, *, affinity, identical):
    """Warn when ``n_neighbors`` exceeds the ``n_points`` distinct samples less one
    (it is clipped), and when the connectivity graph is complete or nearly so
    (:data:`NEARLY_COMPLETE`): its edges then join samples whatever their clusters.
    An RBF graph's weights still decrease with the distance: no warning."""
    if identical:  # warned about as such
        return
    distinct = "" if n_points == n_samples else f" ({n_points} distinct)"
    if n_neighbors >= n_points:
        warn_user(
            f"n_neighbors={n_neighbors} >= n_samples={n_samples}{distinct}; using "
            f"n_neighbors={n_points - 1} (every other sample).",
            UserWarning,
        )
    n_neighbors = min(n_neighbors, n_points - 1)
    if affinity == "nearest_neighbors" and n_points > 2 and \
            n_neighbors >= NEARLY_COMPLETE * (n_points - 1):
        share = ("every other sample" if n_neighbors == n_points - 1 else
                 f"{n_neighbors} of the {n_points - 1} others")
        warn_user(
            f"The kNN graph joins each of the {n_samples} samples{distinct} to "
            f"{share}: it is complete or nearly so, and its edges hardly depend on "
            "which samples are close, so its ratio cut cannot tell clusters apart. "
            "Use fewer neighbours (n_neighbors well below the size of a cluster), or "
            "affinity='rbf', whose weights decrease with the distance.",
            UserWarning,
        )


def build_graph(scaling, start, device=None, *, warn=True):
    """The kNN graph of the scaled features with ``start``'s settings
    (:func:`scaled_knn_graph`)."""
    return scaled_knn_graph(
        scaling, n_neighbors=start.n_neighbors, affinity=start.affinity,
        rbf_gamma=start.rbf_gamma, algorithm=start.algorithm, device=device,
        n_jobs=start.n_jobs, random_state=start.random_state, warn=warn)


def affinity_from_neighbors(distances, neighbors, *, kernel="connectivity", rbf_gamma=None):
    """The symmetric affinity W of :func:`knn_affinity` from a neighbour search.

    ``distances`` and ``neighbors`` have shape (n_samples, n_neighbors): each
    sample's neighbours (itself excluded) and their Euclidean distances.
    """
    n_samples, n_neighbors = neighbors.shape
    if kernel == "connectivity":
        weights = np.ones(distances.size)
    else:
        squared = distances.ravel() ** 2
        weights = np.exp(-_rbf_gamma(squared, rbf_gamma) * squared)
        # far edges must stay edges (an underflow would silently delete them)
        weights = np.maximum(weights, np.finfo(np.float64).tiny)
    rows = np.repeat(np.arange(n_samples), n_neighbors)
    W = sp.csr_matrix((weights, (rows, neighbors.ravel())),
                      shape=(n_samples, n_samples))
    # (A + A.T) / 2: mutual neighbours weigh twice a one-way pair. On the
    # development batteries the spectral partitions of this graph have lower
    # ratio cuts, on the union graph's own weights too, than those of the union
    # max(A, A.T) (sipu/jain: 0.007 against 0.28, the reference's own cut)
    return _canonical((W + W.T) * 0.5)


# init='spectral_snn': the start's graph weighs each edge by the Jaccard index of
# its ends' closed neighbourhoods, cubed (the cube sharpens the contrast between
# edges inside a dense region and the bridges between regions, which share few
# neighbours); rows per kernel call, so that Ctrl-C is heard
SNN_POWER, SNN_ROWS_PER_CALL = 3, 4096
# graphs whose count touches at most this many neighbour entries (the kernel's
# inner loop: the sum over the edges (i, j) of j's degree) are counted by SciPy's
# sparse product, which compiles nothing (the kernel's first use costs about 1.5 s
# of CPU in a fresh environment, 1 s when loaded from numba's cache); both count
# in integers, so the weights are the same bits. That is, for instance, the
# 10-neighbour graph DeepImageClustering builds of scikit-learn's 1,797 digits
# (about 330,000)
SNN_SCIPY_WORK = 1 << 20


def degree_skewness(W):
    """The skewness of the graph's weighted degrees (its diagonal ignored); 0 for
    a graph whose degrees are all equal."""
    degrees = np.asarray(W.sum(axis=1)).ravel() - np.asarray(W.diagonal()).ravel()
    spread = degrees.std()
    if not spread > 1e-12 * max(abs(degrees.mean()), 1e-300):
        return 0.0
    return float(np.mean(((degrees - degrees.mean()) / spread) ** 3))


def mean_neighbourhood(W):
    """The graph's mean closed neighbourhood: a sample and its neighbours (its
    diagonal ignored; a dense affinity's nonzero entries are its edges)."""
    edges = W.nnz if sp.issparse(W) else np.count_nonzero(W)
    return 1 + (edges - np.count_nonzero(W.diagonal())) / W.shape[0]


def shared_neighbor_graph(W, n_threads=1):
    """W's edges reweighted by their shared neighbours (SNN, Jarvis & Patrick 1973).

    Each edge (i, j) of W gets the Jaccard index of the closed neighbourhoods
    N[i] = {i} + neighbours of i and N[j] in W, ``|N[i] & N[j]| / |N[i] | N[j]|``,
    to the power :data:`SNN_POWER`; the pattern of W (its components) is kept, as
    every edge's ends share themselves. Numba threads: ``n_threads``.
    """
    W = _canonical(W)
    degrees = np.diff(W.indptr)
    if degrees[W.indices].sum() <= SNN_SCIPY_WORK:
        shared = _shared_neighbor_counts_scipy(W)
    else:
        shared = np.empty(W.nnz)
        marks = np.zeros((max(1, int(n_threads)), W.shape[0]), dtype=np.bool_)
        previous = numba.get_num_threads()
        numba.set_num_threads(max(1, min(int(n_threads), numba.config.NUMBA_NUM_THREADS)))
        try:
            for start in range(0, W.shape[0], SNN_ROWS_PER_CALL):
                _shared_neighbor_counts(W.indptr, W.indices, start,
                                        min(start + SNN_ROWS_PER_CALL, W.shape[0]), marks,
                                        shared)
        finally:
            numba.set_num_threads(previous)
    sizes = degrees + 1.0  # |N[i]|
    rows = np.repeat(np.arange(W.shape[0]), np.diff(W.indptr))
    jaccard = shared / (sizes[rows] + sizes[W.indices] - shared)
    return sp.csr_matrix((jaccard ** SNN_POWER, W.indices.copy(), W.indptr.copy()),
                         shape=W.shape)


def _shared_neighbor_counts_scipy(W):
    """``|N[i] & N[j]|`` for the edges (i, j) of the canonical CSR graph W, in the
    order of its entries, as :func:`_shared_neighbor_counts` counts them: i and j,
    plus the common entries of rows i and j (a product of the 0/1 pattern with its
    transpose: integers, exact in float64)."""
    if W.nnz == 0:
        return np.empty(0)
    pattern = sp.csr_matrix((np.ones(W.nnz), W.indices, W.indptr), shape=W.shape)
    common = (pattern @ pattern.T).tocsr()
    rows = np.repeat(np.arange(W.shape[0]), np.diff(W.indptr))
    return 2.0 + np.asarray(common[rows, W.indices], dtype=np.float64).ravel()


@jit(parallel=True)
def _shared_neighbor_counts(indptr, indices, start, stop, marks, shared):
    """``shared[e] = |N[i] & N[j]|`` for the edges e = (i, j) of rows start..stop;
    one row of ``marks`` (all False) per thread marks N(i)."""
    n_parts = marks.shape[0]
    for part in prange(n_parts):
        mark = marks[part]
        for i in range(start + part, stop, n_parts):
            for e in range(indptr[i], indptr[i + 1]):
                mark[indices[e]] = True
            for e in range(indptr[i], indptr[i + 1]):
                j = indices[e]
                count = 2  # i and j belong to both closed neighbourhoods
                for f in range(indptr[j], indptr[j + 1]):
                    if mark[indices[f]]:
                        count += 1
                shared[e] = count
            for e in range(indptr[i], indptr[i + 1]):
                mark[indices[e]] = False


def _rbf_gamma(squared_distances, rbf_gamma):
    if rbf_gamma is not None:
        return float(rbf_gamma)
    median = float(np.median(squared_distances))
    if median > 0:
        return 1.0 / median
    positive = squared_distances[squared_distances > 0]
    # all neighbours at distance 0 (duplicated samples): any bandwidth is as good
    return 1.0 / float(positive.min()) if positive.size else 1.0


def check_precomputed_affinity(affinity, name="X"):
    """A user's affinity matrix as PRCut's graph, or a clear ValueError.

    It must be square, finite, non-negative and symmetric; the diagonal is
    ignored (a sample is never cut from itself; the paper assumes W_ii = 0).

    Sparse input, and dense input that is mostly zeros, become a canonical CSR
    graph without diagonal. A dense affinity with more non-zero entries than its
    CSR form could hold in half its memory is returned as it is, without a copy:
    PRCut reads it block by block, and a CSR copy of it (12 bytes per entry)
    would take 1.5 times the input.
    """
    if affinity.ndim != 2 or affinity.shape[0] != affinity.shape[1]:
        raise ValueError(
            f"With affinity='precomputed', {name} must be a square (n_samples, "
            f"n_samples) affinity matrix, got shape {affinity.shape}."
        )
    if sp.issparse(affinity):
        check_sparse_structure(affinity, name)  # SciPy reads its indices unchecked
        return _checked_sparse(sp.csr_matrix(affinity, dtype=np.float64), name)
    affinity = np.asarray(affinity)
    _check_dense_affinity(affinity, name)
    if _sparse_is_smaller(affinity):
        return _checked_sparse(sp.csr_matrix(affinity, dtype=np.float64), name)
    return affinity


def _sparse_is_smaller(affinity):
    """Whether a CSR copy (12 bytes per non-zero) fits in half the dense matrix."""
    return 12 * np.count_nonzero(affinity) <= affinity.nbytes // 2


def _check_dense_affinity(affinity, name):
    """Finite, non-negative, symmetric; no temporary of the matrix's size."""
    if not np.isfinite(affinity.sum()) and not np.all(
            [np.isfinite(row).all() for row in affinity]):
        raise ValueError(f"The affinity matrix {name} contains NaN or infinite values.")
    # a symmetric matrix in Fortran order is its transpose in C order: no copy
    rows = affinity.T if affinity.flags.f_contiguous else np.ascontiguousarray(affinity)
    asymmetry, smallest, scale = summarise(rows)
    if smallest < 0:
        raise ValueError(
            f"Negative values in data: the affinity matrix {name} "
            f"must be non-negative; its smallest entry is {smallest:.3g}."
        )
    _check_not_vanishing(scale, name)
    tolerance = float(np.sqrt(np.finfo(np.float32).eps)) * scale  # float32 would underflow
    excess = asymmetry - tolerance
    if excess > 0:
        raise ValueError(
            f"The affinity matrix {name} must be symmetric; |{name} - {name}.T| "
            f"exceeds {tolerance:.3g} by up to {excess:.3g}."
        )


# below this largest weight an affinity's entries are subnormal numbers (float64's
# smallest normal is 2.2e-308), whose digits are lost: at 1e-308 times a Gaussian
# affinity of 60 points the spectral start's SVD met infinities, at 1e-307 and 3e-308
# it ran as at 1 (a margin of ten above the first)
MIN_LARGEST_WEIGHT = 1e-306


def _check_not_vanishing(largest, name):
    """A ValueError where an affinity's largest weight, though positive, is too small
    to compute with (:data:`MIN_LARGEST_WEIGHT`)."""
    if 0 < largest < MIN_LARGEST_WEIGHT:
        raise ValueError(
            f"The affinity matrix {name}'s largest entry is {largest:.3g}: so small that "
            f"its sums and products underflow float64. Rescale it (for example "
            f"{name} / {name}.max()): a common factor does not change the ratio cut.")


def _checked_sparse(W, name):
    if not np.all(np.isfinite(W.data)):
        raise ValueError(f"The affinity matrix {name} contains NaN or infinite values.")
    if W.data.size and W.data.min() < 0:
        raise ValueError(
            f"Negative values in data: the affinity matrix {name} "
            f"must be non-negative; its smallest entry is {W.data.min():.3g}."
        )
    asymmetry = abs(W - W.T)
    scale = float(W.data.max()) if W.data.size else 0.0
    _check_not_vanishing(scale, name)
    tolerance = float(np.sqrt(np.finfo(np.float32).eps)) * scale  # float32 would underflow
    if asymmetry.nnz and asymmetry.data.max() > tolerance:
        raise ValueError(
            f"The affinity matrix {name} must be symmetric; |{name} - {name}.T| "
            "reaches "
            f"{asymmetry.data.max():.3g}."
        )
    return _canonical(W - sp.diags(W.diagonal()))


def _canonical(W):
    W = sp.csr_matrix(W, dtype=np.float64)
    W.eliminate_zeros()
    W.sum_duplicates()
    W.sort_indices()
    return W


def n_connected_components(W):
    """Number of connected components of the graph W (CSR or dense)."""
    return int(connected_component_labels(W).max()) + 1 if W.shape[0] else 0


def connected_component_labels(W):
    """Component of each vertex of the graph W, numbered from 0.

    CSR: SciPy's. Dense: breadth-first search reading a few rows at a time, so
    that no copy of the matrix is made (O(n^2) time, as reading it takes).
    """
    if sp.issparse(W):
        return connected_components(W, directed=False)[1].astype(np.int64)
    n = W.shape[0]
    labels = np.full(n, -1, dtype=np.int64)
    rows_per_read = max(1, (1 << 20) // max(n, 1))  # 8 MiB of float64 per read
    component = 0
    for start in range(n):
        if labels[start] >= 0:
            continue
        labels[start] = component
        frontier = np.array([start])
        while frontier.size:
            reached = np.zeros(n, dtype=bool)
            for chunk in range(0, frontier.size, rows_per_read):
                reached |= (W[frontier[chunk:chunk + rows_per_read]] > 0).any(0)
            frontier = np.flatnonzero(reached & (labels < 0))
            labels[frontier] = component
        component += 1
    return labels


def group_components(components, n_clusters):
    """Whole components in ``n_clusters`` groups of balanced sizes (ratio cut 0).

    Largest component first, each to the group with the fewest samples so far
    (longest-processing-time scheduling); with as many components as clusters,
    each component is a cluster.
    """
    sizes = np.bincount(components)
    group_of = np.empty(sizes.size, dtype=np.int64)
    load = np.zeros(n_clusters)
    for component in np.argsort(-sizes, kind="stable"):
        group = int(np.argmin(load))
        group_of[component] = group
        load[group] += sizes[component]
    return group_of[components]


def degrees(W):
    """Weighted degree of each vertex, the diagonal of W left out."""
    if sp.issparse(W):
        return np.asarray(W.sum(1), dtype=np.float64).ravel() - W.diagonal()
    return W.sum(1, dtype=np.float64) - np.diagonal(W)


def times(W, P):
    """W @ P with the diagonal of W left out (CSR or dense W, dense P)."""
    diagonal = W.diagonal() if sp.issparse(W) else np.diagonal(W)
    return np.asarray(W @ P, dtype=np.float64) - diagonal[:, None] * P


class BatchPairExtractor:
    """The entries of W between a left batch and a right batch, as edge lists.

    Only the rows of the left batch are read and their columns are mapped through
    a position array, so one call costs O(batch_size * degree), whatever
    n_samples; nothing is densified. The position array is allocated once and
    restored after each call.

    Parameters
    ----------
    W : scipy.sparse.csr_matrix of shape (n_samples, n_samples)
        Canonical graph (sorted indices, no duplicates).
    """

    def __init__(self, W):
        self.indptr = W.indptr.astype(np.int64)
        self.indices = W.indices.astype(np.int64)
        self.data = W.data
        self.position = np.full(W.shape[0], -1, dtype=np.int64)

    def __call__(self, left, right):
        """Edges (i, j, W[left[i], right[j]]) with a non-zero weight.

        Parameters
        ----------
        left, right : ndarray of int
            Sample indices; ``right`` holds no duplicates.

        Returns
        -------
        rows, cols : ndarray of int64
            Positions in ``left`` and in ``right``.
        weights : ndarray of float64
        """
        left = np.ascontiguousarray(left, dtype=np.int64)
        right = np.ascontiguousarray(right, dtype=np.int64)
        self.position[right] = np.arange(right.size)
        try:
            # one pass to count, one to fill: a NumPy version made five
            # temporaries of every entry of the left rows (1.1 ms a step at
            # 70,000 samples, 10 neighbours; 0.2 ms here)
            n_edges = _count_block_edges(self.indptr, self.indices, self.position, left)
            rows = np.empty(n_edges, dtype=np.int64)
            cols = np.empty(n_edges, dtype=np.int64)
            weights = np.empty(n_edges, dtype=self.data.dtype)
            _fill_block_edges(self.indptr, self.indices, self.data, self.position, left,
                              rows, cols, weights)
        finally:
            self.position[right] = -1
        return rows, cols, weights


@jit
def _count_block_edges(indptr, indices, position, left):
    count = 0
    for i in range(left.shape[0]):
        for entry in range(indptr[left[i]], indptr[left[i] + 1]):
            if position[indices[entry]] >= 0:
                count += 1
    return count


@jit
def _fill_block_edges(indptr, indices, data, position, left, rows, cols, weights):
    edge = 0
    for i in range(left.shape[0]):
        for entry in range(indptr[left[i]], indptr[left[i] + 1]):
            column = position[indices[entry]]
            if column >= 0:
                rows[edge], cols[edge], weights[edge] = i, column, data[entry]
                edge += 1


def _check_symmetric(W, values):
    """A ratio cut counts each edge from both ends: a one-sided graph (scikit-
    learn's ``kneighbors_graph``) gave half its cuts, without a word."""
    largest = float(values.max()) if values.size else 0.0
    if sp.issparse(W):
        asymmetry = abs(W - W.T).data
        asymmetry = float(asymmetry.max()) if asymmetry.size else 0.0
    else:  # one pass, no n x n temporary (the precomputed affinity's check)
        asymmetry = summarise(np.ascontiguousarray(W))[0]
    if asymmetry > float(np.sqrt(np.finfo(np.float32).eps)) * largest:
        raise ValueError("affinity must be symmetric (W equal to W.T): symmetrise a "
                         "k-nearest-neighbour graph first, e.g. (W + W.T) / 2.")


def ratio_cut(affinity, labels):
    """Ratio cut of a partition of a similarity graph.

    ``RatioCut = 1/2 * sum_C cut(C, complement of C) / size(C)``, the
    quantity PRCut minimises (Ghriss & Monteleoni, 2025, eq. 1; von Luxburg, 2007).
    Lower is better; it is 0 when no edge joins two clusters.

    Parameters
    ----------
    affinity : {ndarray, sparse matrix} of shape (n_samples, n_samples)
        Symmetric non-negative similarities W (e.g. ``PRCut().affinity_matrix_`` or
        a k-nearest-neighbour graph). The diagonal is ignored, but must be finite too.

    labels : array-like of shape (n_samples,)
        Cluster of each sample (any integer labels).

    Returns
    -------
    ratio_cut : float

    Raises
    ------
    ValueError
        If the affinity is not square or not symmetric, has NaN, infinite or
        negative entries, if the labels do not match it or hold NaN, or if either
        is a torch tensor that requires grad.
    TypeError
        If the affinity is complex.

    Examples
    --------
    >>> import numpy as np
    >>> from skdiffclust.prcut import ratio_cut
    >>> W = np.array([[0, 1, 0.1, 0], [1, 0, 0, 0], [0.1, 0, 0, 1], [0, 0, 1, 0]])
    >>> float(ratio_cut(W, [0, 0, 1, 1]))  # one edge of weight 0.1 is cut
    0.05
    """
    check_host_array(affinity, "affinity")
    check_host_array(labels, "labels")
    if np.iscomplexobj(affinity.data if sp.issparse(affinity) else np.asarray(affinity)):
        raise TypeError("affinity must hold real weights, got complex ones.")
    if sp.issparse(affinity):
        check_sparse_structure(affinity, "affinity")
        W = sp.csr_matrix(affinity)
        values = W.data
    else:
        W = np.asarray(affinity, dtype=np.float64)
        values = W
    if W.ndim != 2 or W.shape[0] != W.shape[1]:
        raise ValueError(f"affinity must be a square matrix, got shape {W.shape}.")
    if not np.all(np.isfinite(values)):
        raise ValueError("affinity contains NaN or infinite values.")
    if values.size and values.min() < 0:
        raise ValueError(
            "affinity must be non-negative (a similarity graph); its smallest entry "
            f"is {values.min():.3g}."
        )
    _check_symmetric(W, values)
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.shape[0] != W.shape[0]:
        raise ValueError(
            f"labels must have shape ({W.shape[0]},) to match the affinity, got "
            f"{labels.shape}."
        )
    if labels.dtype.kind in "fc" and not np.all(np.isfinite(labels)):
        raise ValueError("labels contain NaN or infinity: give every sample a cluster "
                         "(NaN labels were counted as one cluster).")
    _, clusters = np.unique(labels, return_inverse=True)
    sizes = np.bincount(clusters)
    return 0.5 * float(np.sum(_cuts(W, clusters, sizes.size) / sizes))


def _cuts(W, clusters, n_clusters):
    """Weight of the edges leaving each cluster, summed edge by edge."""
    if sp.issparse(W):
        W = W.tocoo()
        crossing = clusters[W.row] != clusters[W.col]
        return np.bincount(clusters[W.row[crossing]], weights=W.data[crossing],
                           minlength=n_clusters)
    cut = np.zeros(n_clusters)
    step = max(1, (1 << 20) // max(W.shape[0], 1))  # rows per block: 8 MiB
    for start in range(0, W.shape[0], step):
        rows = clusters[start:start + step]
        leaving = np.where(rows[:, None] != clusters[None, :], W[start:start + step], 0.0)
        cut += np.bincount(rows, weights=leaving.sum(1), minlength=n_clusters)
    return cut


def prcut_objective(W, P, gamma):
    """The PRCut objective of soft assignments P on the whole graph.

    ``sum_l cut_l / p_bar_l`` in units of the total weight of W, plus
    ``gamma * KL(p_bar || uniform)``, with p_bar the mean of P (floored as in
    training). For hard assignments the first term is ``4 n / sum(W)`` times the
    ratio cut. O(nnz(W) * k) time, O(n * k) memory; the diagonal of W is ignored.

    Parameters
    ----------
    W : scipy.sparse.csr_matrix or ndarray of shape (n_samples, n_samples)
    P : ndarray of shape (n_samples, n_clusters)
    gamma : float

    Returns
    -------
    bound, kl : float
    """
    degree = degrees(W)
    total = degree.sum()
    k = P.shape[1]
    p_bar = np.maximum(P.mean(0), pbar_floor(k))
    if total > 0:
        # sum_ij W_ij (p_i + p_j - 2 p_i p_j) = 2 sum_i d_i p_i - 2 sum_i p_i (W p)_i
        cut = 2.0 * (degree @ P) - 2.0 * np.einsum("il,il->l", P, times(W, P))
        bound = float(np.sum(np.maximum(cut, 0.0) / p_bar) / total)
    else:
        bound = 0.0
    mean = P.mean(0)
    kl = float(np.sum(mean * np.log(np.maximum(mean, pbar_floor(k)) * k)))
    return bound, kl


def partition_objective(W, labels, n_clusters, gamma):
    """The PRCut objective of a hard partition: :func:`prcut_objective` of its
    one-hot assignments, ``4 n / sum(W)`` times its ratio cut plus ``gamma`` times
    the KL divergence of its cluster proportions from uniform."""
    bound, kl = prcut_objective(W, np.eye(n_clusters)[labels], gamma)
    return bound + gamma * kl


def bipartite_objective(B, labels_left, labels_right, n_clusters, gamma):
    """The PRCut objective of hard partitions of both sides of a bipartite graph.

    ``B`` (n_left, n_right) holds the weights between the two sides, as in a
    training step between a left and a right batch: the cut of cluster l is
    ``sum_ij B_ij (p_il + q_jl - 2 p_il q_jl)``, divided by the share of cluster l
    over both sides and by the total weight, plus ``gamma`` times the KL divergence
    of those shares from uniform. With B = W and the same labels on both sides it
    is :func:`partition_objective`.
    """
    P = np.eye(n_clusters)[labels_left]
    Q = np.eye(n_clusters)[labels_right]
    rows = np.asarray(B.sum(1), dtype=np.float64).ravel()
    cols = np.asarray(B.sum(0), dtype=np.float64).ravel()
    total = rows.sum()
    shares = np.concatenate([P, Q]).mean(0)
    p_bar = np.maximum(shares, pbar_floor(n_clusters))
    if total > 0:
        cut = rows @ P + cols @ Q - 2.0 * np.einsum("il,il->l", P, np.asarray(B @ Q))
        bound = float(np.sum(np.maximum(cut, 0.0) / p_bar) / total)
    else:
        bound = 0.0
    kl = float(np.sum(shares * np.log(np.maximum(shares, pbar_floor(n_clusters))
                                      * n_clusters)))
    return bound + gamma * kl


def bipartite_modularity(B, labels_left, labels_right, n_clusters):
    """Barber's modularity of hard partitions of both sides of a bipartite graph
    ``B`` (n_left, n_right): the share of its weight between vertices of the same
    cluster less the product of the clusters' shares of the row and column
    weights."""
    B = sp.coo_matrix(B)
    total = B.data.sum()
    if total <= 0:
        return 0.0
    rows = np.bincount(labels_left[B.row], B.data, minlength=n_clusters) / total
    cols = np.bincount(labels_right[B.col], B.data, minlength=n_clusters) / total
    within = B.data[labels_left[B.row] == labels_right[B.col]].sum() / total
    return float(within - rows @ cols)


def graph_measures(graph, labels, n_clusters):
    """Newman's modularity of the partition ``labels`` of the graph (the share of
    its weight within clusters less its expectation were the edges drawn at
    random between vertices of the same weighted degrees), and its relative cut:
    the share of the weight between clusters over that expectation (``1 -
    sum_c (vol_c / vol)^2``): 0 for clusters joined by no edge, about 1 for a
    partition the graph does not see."""
    graph = graph.tocoo()
    total = graph.data.sum()
    if total <= 0:
        return 0.0, 0.0
    volumes = np.bincount(labels[graph.row], graph.data, minlength=n_clusters) / total
    expected = 1.0 - np.sum(volumes ** 2)
    between = graph.data[labels[graph.row] != labels[graph.col]].sum() / total
    return float(expected - between), float(between / expected) if expected > 0 else 0.0


def warn_on_degenerate_graph(components, identical, n_clusters, keep_components):
    """Warn when the graph's partition is decided by its components, not its cuts
    (no edge, at least ``n_clusters`` components) or all samples are identical;
    for ``PRCut.fit``."""
    n_components = int(components.max()) + 1
    if n_components == components.size:
        warn_user(
            "The affinity graph has no edge: every partition has ratio cut 0, and "
            "only the KL term shapes the clusters.", UserWarning,
        )
    elif n_components > n_clusters and keep_components:
        warn_user(
            f"The affinity graph has {n_components} connected components for "
            f"n_clusters={n_clusters}: PRCut returns whole components (ratio cut 0), "
            "grouped into clusters of balanced sizes.", UserWarning,
        )
    elif n_components >= n_clusters and not keep_components:
        warn_user(
            f"The affinity graph has {n_components} connected components: any "
            "partition keeping each component whole has ratio cut 0 (with "
            "keep_components=False, the balance term may still cut through them).",
            UserWarning,
        )
    if identical:
        warn_user(
            "All samples are identical (up to float64's rounding): they all get "
            "the same cluster.",
            UserWarning,
        )
    isolated = np.flatnonzero(np.bincount(components)[components] == 1)
    if 0 < isolated.size < components.size:
        count = "1 sample has" if isolated.size == 1 else f"{isolated.size} samples have"
        warn_user(
            f"{count} no edge in the affinity graph (all its affinities are zero), "
            f"the first at index {isolated[0]}: each is a connected component of its "
            "own, which PRCut may make a cluster of its own. Give such samples positive "
            "affinities to others, or leave them out.", UserWarning,
        )

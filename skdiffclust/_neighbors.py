"""k-nearest-neighbour search: the one function behind every kNN graph of the package.

:func:`kneighbors` returns each sample's ``n_neighbors`` nearest other samples
(Euclidean) and their distances, by one of three searches:

* **exact on the CPU**: scikit-learn's ``NearestNeighbors`` (brute force for
  dense data in more than 15 dimensions, a tree below; dense or CSR input) up
  to ``AUTO_EXACT_MAX_SAMPLES`` samples or for sparse input; above, for dense
  input, the blockwise torch search below on CPU threads when torch is
  installed (at 60,000 x 784, 3.0 s of CPU per 3,000 rows against
  scikit-learn's 5.5 s);
* **exact on CUDA** (and the CPU above): a blockwise search in torch
  (:func:`torch_kneighbors`): squared distances of a block of rows to all rows
  by one matrix product, then ``topk``; memory O(block_rows * n);
* **approximate** (:func:`approximate_kneighbors`): an inverted-file index of
  the package's own (``skdiffclust._ivf``: numba, the distances by BLAS matrix
  products; no extra dependency). The samples are grouped into about sqrt(n)
  cells by k-means; each sample's neighbours are searched in the 32 cells whose
  centres are nearest to it, so a neighbour lying in a cell that was not
  visited is missed. The distances returned are recomputed exactly, in float64,
  for the pairs found;
* **approximate on CUDA**: the same index, built and searched on the device by
  torch (``skdiffclust._ivf_torch``: the same cells and probes, the cells
  searched one after the other by ``addmm`` and ``topk``), then completed and
  measured on the host as the numba index's lists are (on an H200, 1,000,000 x
  32 blobs, k=10: 1.7 s on the device, 3.5 s in all, recall@10 0.91).

Every path checks its arguments alike (:func:`check_kneighbors_arguments`: NaN
and infinity refused, ``n_neighbors`` an integer in range), and every path works
at any scale float64 holds: data whose squares would overflow or underflow the
search's float type (float32 for the index and torch, beyond 2**-32 to 2**32
after centring; float64 for scikit-learn's, beyond 2**-400 to 2**400) are searched
times the power of two that brings their largest magnitude to [0.5, 1), which is
exact, and the distances are divided by it. Other data are searched as they are.

``algorithm='auto'`` searches exactly up to ``AUTO_EXACT_MAX_SAMPLES`` samples,
and above while the exact search is expected to cost at most
``EXACT_COST_FACTOR`` times the approximate one (:func:`exact_is_affordable`:
many features and up to about 95,000 samples, e.g. MNIST's 60,000 x 784
pixels, where PRCut's results on the exact graph were the better ones),
approximately otherwise; sparse input is always searched exactly
(scikit-learn). On CUDA the same rule chooses between the exact search on the
device and the index on the device (the exact search of 1,000,000 x 32 samples,
k=10, took 24 s on an H200: 1,866 blocks, each against every sample).

Why an index of our own. The searches were measured side by side on the
project's 2-core CPU machine (shared: load average 6 to 7, so wall times were
about twice these CPU times), 2 threads: CPU seconds and recall@k against the
exact neighbours of 2,000 random samples (``benchmarks/bench_neighbors.py``;
blobs: ``make_blobs(n, 32, centers=10, cluster_std=6)`` as PRCut scales them;
MNIST: the 60,000 training images' raw pixels / 255; the full table with wall
times in ``doc/benchmarks.rst``):

=====================  ===============  ===============  =============  =============
search                 blobs 70,000,    blobs 1,000,000, MNIST, k=150   MNIST, k=10
                       k=10             k=10
=====================  ===============  ===============  =============  =============
exact (blockwise)      21.5 s, 1        ~80 min (extr.)  58.7 s, 1      47.9 s, 1
pynndescent 0.7.0      9.0 s, 0.757     119 s, 0.48      91 s, 0.9997   7.1 s, 0.977
FAISS IVF-Flat         4.2 s, 0.9986    264 s, 0.906     150 s, 0.995   91 s, 0.999
this index             1.7 s, 0.998     53 s, 0.91       23 s, 0.994    14.5 s, 0.998
=====================  ===============  ===============  =============  =============

FAISS's IVF-Flat and this index visit the same cells (32 of about sqrt(n)), so
their recalls agree; FAISS compares a sample with a candidate by a loop over the
features, this index by BLAS products (at 784 features, 18 times faster per
feature), and selects the neighbours in a vectorised pass. Its times include the
centring and the exact float64 distances of the pairs found (7 of the 23 s at
k=150), the libraries' do not. The other libraries' 1,000,000 column is from
runs of 2026-11-22 (load 6 to 8), when FAISS was the package's approximate search.

* First call: this index compiles its numba kernels, about 5 s of CPU in a fresh
  environment (cached afterwards); pynndescent's take 48 to 56 s; FAISS
  compiles nothing.
* Dependencies: none new (numba, SciPy's BLAS, threadpoolctl are the
  package's); faiss-cpu would add an 18.8 MB wheel (68 MB installed, its own
  OpenBLAS and OpenMP runtime), pynndescent 0.1 MB.
* Recall: on the isotropic 32-dimensional blobs (a hard case: the neighbours of
  a sample are hardly nearer than the rest of its blob) pynndescent's defaults
  reach 0.76 at 70,000 samples; on MNIST it is the most accurate (0.9997 at
  k=150), in four times this index's time.

Determinism: the k-means is seeded from ``random_state``, and the index's work
is split in chunks fixed by the data, each computed on one thread with
single-threaded matrix products, so the neighbours do not depend on the thread
count (tested). HNSW's parallel construction inserts the samples in an order
that depends on the threads' timing, and pynndescent's parallel updates
likewise.
"""

import contextlib
import math
import numbers
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import prange
import scipy.sparse as sp
from sklearn import get_config
from sklearn.neighbors import NearestNeighbors

from skdiffclust._utils._numba import jit
from skdiffclust._utils._random import derive_seeds
from skdiffclust._utils._threads import host_threads, one_blas_thread, openmp_threads
from skdiffclust._utils._validation import check_array, consistent_sparse_indices

ALGORITHMS = ("auto", "exact", "approximate")

# 'auto' searches exactly up to this many samples: measured on the 2-core
# machine, the exact search takes about a second there, and the approximate one
# is at least twice as fast above it (doc/benchmarks.rst)
AUTO_EXACT_MAX_SAMPLES = 20_000

# Above, 'auto' still searches exactly while that is expected to cost at most
# EXACT_COST_FACTOR times the index's CPU time: many features and up to about
# 95,000 samples at 784 (MNIST's 60,000 x 784: 60 s of CPU exact, 24 s approximate),
# where the exact graph is affordable and PRCut's MNIST results on it are the
# better ones (mean ACC 0.885 over random_state 0 to 2, against 0.860 on the
# index's graph, recall@150 0.994; doc/benchmarks.rst)
EXACT_COST_FACTOR = 3.0
# CPU nanoseconds per pair of samples, measured on the 2-core machine at 70,000
# x 32 and 60,000 x 784: the blockwise exact search (per feature: the product;
# per pair: torch's topk) and the index (per feature: its products and the exact
# distances of the pairs found; per pair: the gather and the selection)
EXACT_NS_PER_FEATURE, EXACT_NS_PER_PAIR = 0.017, 3.7
INDEX_NS_PER_FEATURE, INDEX_NS_PER_PAIR = 0.07, 0.7

# Magnitudes (powers of two) within which each search takes the data as they are;
# outside, the data are multiplied by the power of two that brings their largest
# magnitude to [0.5, 1) (exact: the same neighbours as exact arithmetic on the
# given values would find) and the distances divided by it. float32 searches (the
# index, torch): squares of 2**-32 to 2**32 neither underflow nor overflow, and
# sums of them over any number of features stay finite; float64 (scikit-learn's):
# 2**-400 to 2**400
FLOAT32_SAFE_EXPONENTS = (-32, 32)
FLOAT64_SAFE_EXPONENTS = (-400, 400)
# values beyond 2**PRESCALE_EXPONENT are scaled before their mean is taken (a sum
# of n of them could overflow float64)
PRESCALE_EXPONENT = 500


def kneighbors(X, n_neighbors, *, algorithm="auto", device=None, n_jobs=None,
               random_state=None):
    """The ``n_neighbors`` nearest neighbours of every sample, itself excluded.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
        Samples (dense, or CSR with int32 or int64 indices).

    n_neighbors : int
        Neighbours per sample; between 1 and ``n_samples - 1``.

    algorithm : {'auto', 'exact', 'approximate'}, default='auto'
        ``'exact'``: scikit-learn's ``NearestNeighbors`` on the CPU, or the
        blockwise torch search when ``device`` is CUDA (dense input).
        ``'approximate'``: the inverted-file index (see the module
        docstring): numba's on the CPU, torch's on the device when ``device``
        is CUDA; dense input only.
        ``'auto'``: exact up to ``AUTO_EXACT_MAX_SAMPLES`` samples, while
        affordable (:func:`exact_is_affordable`) or for sparse input;
        approximate otherwise, on the CPU and on CUDA alike.

    device : torch.device, str or None, default=None
        Where a dense search runs: CUDA, the exact search or the index in
        torch on the device (the neighbour lists then completed and their
        distances computed on the host); ``None`` or a CPU device: the CPU's
        searches.

    n_jobs : int or None, default=None
        CPU threads of every search: ``None`` means 1 unless in a
        ``joblib.parallel_config`` context, ``-1`` every core (scikit-learn's
        glossary). The neighbours found do not depend on it
        (:func:`same_neighbours_on_any_threads` for scikit-learn's search).

    random_state : int, RandomState instance or None, default=None
        Seeds the approximate index's k-means (drawn only when it is used).

    Returns
    -------
    distances : ndarray of shape (n_samples, n_neighbors), float64
        Euclidean distances to the neighbours, in increasing order (exact
        values, recomputed in float64 for the pairs an approximate or torch
        search found).

    indices : ndarray of shape (n_samples, n_neighbors), int64
        The neighbours' row numbers.

    Raises
    ------
    ValueError
        For NaN or infinite values in X, an X that is not 2-D or holds fewer than
        2 samples, an unknown ``algorithm``, ``n_neighbors`` out of range, or
        values so large that the distances exceed float64's range. Other scales
        are searched on X times a power of two (exact) and the distances given in
        X's units.
    TypeError
        For an ``n_neighbors`` that is not an integer, or
        ``algorithm='approximate'`` on sparse input.
    """
    X = check_kneighbors_arguments(X, n_neighbors, algorithm=algorithm, n_jobs=n_jobs)
    n_samples = X.shape[0]
    sparse = sp.issparse(X)
    if algorithm == "approximate" and sparse:
        raise TypeError(
            "The approximate neighbour search needs dense features; X is sparse. "
            "Use the exact search (algorithm='exact' or 'auto'), which reads "
            "sparse input as it is."
        )
    cuda = device is not None and _device_type(device) == "cuda"
    threads = host_threads(n_jobs)
    if algorithm == "approximate" or (
            algorithm == "auto" and not sparse
            and not exact_is_affordable(n_samples, X.shape[1], n_neighbors)):
        seed = derive_seeds(random_state, 1)[0]
        # on CUDA the index is built and searched on the device
        return _approximate(X, n_neighbors, n_threads=threads, seed=seed,
                            device=device if cuda else None)
    if not sparse and (cuda or (n_samples > AUTO_EXACT_MAX_SAMPLES and _has_torch())):
        return _torch_search(X, n_neighbors, device or "cpu", n_threads=threads)
    return _scikit_learn_search(X, n_neighbors, threads)


def check_kneighbors_arguments(X, n_neighbors, *, algorithm="exact", n_jobs=None):
    """The checks of every search, with one wording: ``X`` a 2-D numeric array
    (or sparse matrix) of finite values and at least 2 samples, ``n_neighbors`` an
    integer from 1 to ``n_samples - 1``, a known ``algorithm``, ``n_jobs`` None or
    a non-zero integer. Returns X as the searches read it (sparse: CSR with
    consistent index dtypes).

    Raises
    ------
    TypeError
        For an ``n_neighbors`` or ``n_jobs`` that is not an integer (a bool
        included).
    ValueError
        For NaN or infinite values, an X that is not 2-D or holds fewer than 2
        samples or no feature, non-numeric data, an unknown ``algorithm``,
        ``n_neighbors`` out of range or ``n_jobs=0``.
    """
    if not isinstance(algorithm, str) or algorithm not in ALGORITHMS:
        raise ValueError(
            f"algorithm must be one of {', '.join(map(repr, ALGORITHMS))}; got "
            f"{algorithm!r}."
        )
    if not _is_integer(n_neighbors):
        raise TypeError(
            f"n_neighbors must be an integer; got {n_neighbors!r} "
            f"({type(n_neighbors).__name__})."
        )
    if n_jobs is not None and not _is_integer(n_jobs):
        raise TypeError(
            f"n_jobs must be None or an integer; got {n_jobs!r} "
            f"({type(n_jobs).__name__})."
        )
    if n_jobs == 0:
        raise ValueError("n_jobs=0 means no thread; use None (1, unless in a "
                         "joblib.parallel_config context), -1 (all cores) or a "
                         "positive number of threads.")
    # NaN or infinity: a ValueError naming it, in every search (the index and the
    # torch search would drop a feature holding a NaN, or index out of range)
    X = check_array(X, accept_sparse="csr", dtype="numeric", ensure_min_samples=2,
                    input_name="X")
    if sp.issparse(X):
        X = consistent_sparse_indices(sp.csr_matrix(X))
    n_samples = X.shape[0]
    if not 1 <= n_neighbors < n_samples:
        raise ValueError(
            f"n_neighbors={n_neighbors} must be between 1 and n_samples - 1 = "
            f"{n_samples - 1}."
        )
    return X


def _is_integer(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _power_of_two_shift(peak, exponents):
    """0 where ``peak`` (a largest magnitude) lies in ``[2**low, 2**high]`` (or is
    0), else the exponent e that brings ``peak * 2**e`` to [0.5, 1)."""
    low, high = exponents
    if peak == 0.0 or 2.0 ** low <= peak <= 2.0 ** high:
        return 0
    return -math.frexp(peak)[1]


def _peak(values):
    """The largest magnitude of an array's values (0 for none): max and min, no
    temporary copy."""
    return max(float(values.max()), -float(values.min())) if values.size else 0.0


def _unscaled(distances, shift):
    """Distances computed on data times ``2**shift``, in the data's units; a
    ValueError where they exceed float64's range."""
    if shift == 0:
        return distances
    with np.errstate(over="ignore"):
        distances = np.ldexp(distances, -shift)
    if not np.isfinite(distances).all():
        raise ValueError(
            "X's values are so large that the distances between samples exceed "
            f"float64's range (up to {np.finfo(np.float64).max:.3g}). Rescale the "
            "data first (for example with sklearn.preprocessing.StandardScaler or "
            "MaxAbsScaler).")
    return distances


def _scikit_learn_search(X, n_neighbors, n_threads=1):
    """scikit-learn's exact search, on X times a power of two where its squares
    would overflow or underflow, on up to ``n_threads`` threads
    (:func:`same_neighbours_on_any_threads`)."""
    values = X.data if sp.issparse(X) else X
    narrow = values.dtype in (np.float32, np.float16)
    shift = _power_of_two_shift(
        _peak(values), FLOAT32_SAFE_EXPONENTS if narrow else FLOAT64_SAFE_EXPONENTS)
    if shift:
        if sp.issparse(X):
            X = sp.csr_matrix((np.ldexp(X.data, shift), X.indices, X.indptr),
                              shape=X.shape)
        else:
            X = np.ldexp(X, shift)
    n_samples = X.shape[0]
    with same_neighbours_on_any_threads(n_samples, n_samples, n_threads):
        search = NearestNeighbors(n_neighbors=n_neighbors, n_jobs=n_threads).fit(X)
        # kneighbors() without X leaves each sample out of its own neighbours
        distances, indices = search.kneighbors()
    return _unscaled(distances, shift), indices.astype(np.int64, copy=False)


@contextlib.contextmanager
def same_neighbours_on_any_threads(n_queries, n_samples, n_threads):
    """A context in which scikit-learn's exact search of ``n_queries`` rows among
    ``n_samples`` finds the same neighbours on any number of threads, using up to
    ``n_threads`` of them (OpenMP; BLAS on one thread).

    Its brute-force reduction (scikit-learn 1.1 to 1.9; the tests check the rule
    holds) shares out chunks of the queries among its OpenMP threads when there
    are more than ``4 * chunk_size`` queries per thread (or fewer samples than
    queries), each chunk searched by one thread: then the neighbours do not
    depend on the thread count. Otherwise it shares out the samples, and merges
    the threads' heaps: among samples at equal distances (on scikit-learn's
    digits, integer pixels, many) the ones kept then depend on the count (30 of
    the 1,797 digits' 10 neighbours differed between 1 and 2 threads). The
    threads are therefore limited to those that keep the first sharing, and to
    one where there are too few queries: the neighbours of one thread, whatever
    ``n_threads`` (at 20,000 samples, as many threads as before).
    """
    n_threads = max(int(n_threads), 1)
    if n_samples >= n_queries:
        chunk = int(get_config().get("pairwise_dist_chunk_size", 256))
        n_threads = min(n_threads, max(1, (n_queries - 1) // (4 * chunk)))
    with openmp_threads(n_threads), one_blas_thread():
        yield


def exact_is_affordable(n_samples, n_features, n_neighbors):
    """Whether 'auto' searches exactly: up to ``AUTO_EXACT_MAX_SAMPLES`` samples,
    and above while the blockwise exact search's expected CPU time (a product and
    a selection per pair of samples) is at most ``EXACT_COST_FACTOR`` times the
    index's (a product and a selection per pair of a sample and a candidate of its
    probed cells). On CUDA too: both searches are bound by the same products and
    selections there, the ratio of their work holds (measured on the CPU)."""
    if n_samples <= AUTO_EXACT_MAX_SAMPLES:
        return True
    from skdiffclust._ivf import cell_count, probed_cells

    n_cells = cell_count(n_samples)
    candidates = n_samples / n_cells * probed_cells(n_samples, n_cells, n_neighbors)
    exact = n_samples * (EXACT_NS_PER_FEATURE * n_features + EXACT_NS_PER_PAIR)
    index = candidates * (INDEX_NS_PER_FEATURE * n_features + INDEX_NS_PER_PAIR)
    return exact <= EXACT_COST_FACTOR * index


def _has_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def _device_type(device):
    return device if isinstance(device, str) else device.type


def _centred_float32(X):
    """Rows centred in float64, then cast to float32 (an offset costs no precision),
    without the constant features (zero in every difference: 67 of MNIST's 784
    pixels); returns ``(X, points, shift)``: the float64 rows and their float32
    copy, both times ``2**shift``.

    ``shift`` is 0 unless the centred values' largest magnitude lies outside
    ``2**FLOAT32_SAFE_EXPONENTS``; then it brings it to [0.5, 1), so that the
    float32 squares neither overflow nor underflow (a power of two: the float32
    products are those of the given values, scaled). X must be finite.
    """
    X = np.asarray(X, dtype=np.float64)
    highest, lowest = X.max(axis=0), X.min(axis=0)
    varying = highest > lowest
    if not varying.all():
        X, highest, lowest = X[:, varying], highest[varying], lowest[varying]
    shift = 0
    if X.size and max(highest.max(), -lowest.min()) > 2.0 ** PRESCALE_EXPONENT:
        # scaled before the mean, whose sum could overflow
        shift = -math.frexp(max(highest.max(), -lowest.min()))[1]
        X = np.ldexp(X, shift)
        highest, lowest = X.max(axis=0), X.min(axis=0)
    mean = X.mean(axis=0)
    X = X - mean
    # the centred values' extremes, as the subtraction rounds them
    peak = max((highest - mean).max(), (mean - lowest).max()) if X.size else 0.0
    extra = _power_of_two_shift(float(peak), FLOAT32_SAFE_EXPONENTS)
    if extra:
        X = np.ldexp(X, extra)
        shift += extra
    return X, np.ascontiguousarray(X, dtype=np.float32), shift


def approximate_kneighbors(X, n_neighbors, *, n_threads=1, seed=0, n_probe=None,
                           device=None):
    """Approximate neighbours by the inverted-file index; see :func:`kneighbors`.

    The index holds the float32 rows (centred in float64 first) in about
    sqrt(n_samples) cells found by k-means (seeded by ``seed``); each row is
    searched in its ``n_probe`` nearest cells (``None``:
    ``skdiffclust._ivf.probed_cells``). A row whose cells hold too few others
    (tiny data) is searched exactly instead. X and ``n_neighbors`` are checked
    as :func:`kneighbors` checks them. ``device``: ``None`` for the numba index
    on the CPU, or a torch device (CUDA; the CPU works too) where the same
    index is built and searched by torch (``skdiffclust._ivf_torch``).
    """
    X = check_kneighbors_arguments(X, n_neighbors, algorithm="approximate")
    if sp.issparse(X):
        raise TypeError("The approximate neighbour search needs dense features; X "
                        "is sparse.")
    return _approximate(X, n_neighbors, n_threads=n_threads, seed=seed, n_probe=n_probe,
                        device=device)


def _approximate(X, n_neighbors, *, n_threads=1, seed=0, n_probe=None, device=None):
    """The index's neighbours (numba's on the CPU where ``device`` is None, torch's
    on ``device`` otherwise), completed and measured by :func:`_exact_lists`."""
    X, points, shift = _centred_float32(X)
    if device is None:
        from skdiffclust._ivf import ivf_kneighbors  # numba kernels: compiled on first use

        indices = ivf_kneighbors(points, n_neighbors, seed=seed, n_threads=n_threads,
                                 n_probe=n_probe)
    else:
        from skdiffclust._ivf_torch import device_ivf_kneighbors

        indices = device_ivf_kneighbors(points, n_neighbors, seed=seed, device=device,
                                        n_probe=n_probe)
    del points
    return _exact_lists(X, indices, n_neighbors, shift, n_threads)


def _exact_lists(X, indices, n_neighbors, shift, n_threads):
    """An index's neighbour lists of the centred rows X (times ``2**shift``) as
    :func:`kneighbors` returns them: the rows the index left incomplete (a -1)
    searched exactly by scikit-learn, then every list sorted by its exact float64
    distances, given in the data's units."""
    incomplete = np.flatnonzero((indices < 0).any(1))
    if incomplete.size:
        with same_neighbours_on_any_threads(incomplete.size, X.shape[0], n_threads):
            search = NearestNeighbors(n_neighbors=n_neighbors + 1).fit(X)
            rows = search.kneighbors(X[incomplete], return_distance=False)
        indices[incomplete] = _without_self(rows, n_neighbors, incomplete)
    distances, indices = _sorted_by_exact_distance(X, indices, n_threads)
    return _unscaled(distances, shift), indices


def _without_self(found, n_neighbors, rows=None):
    """Each row's first ``n_neighbors`` entries other than itself (its own index is
    dropped where found, the last entry otherwise)."""
    rows = np.arange(found.shape[0]) if rows is None else rows
    is_self = found == rows[:, None]
    # where the row itself was not found, drop the farthest candidate instead
    is_self[~is_self.any(1), -1] = True
    return found[~is_self].reshape(found.shape[0], n_neighbors).astype(np.int64)


def torch_kneighbors(X, n_neighbors, device, block_rows=None, n_threads=1):
    """Exact k nearest neighbours of every row of X (itself excluded), on ``device``.

    Blockwise: squared distances of ``block_rows`` rows to all rows by a matrix
    product, then ``topk``; memory O(block_rows * n). Distances are computed in
    float32 from features centred in float64 (so that a large offset does not
    cost precision; constant features, which add nothing to any distance, are
    left out), then recomputed exactly for the selected pairs.

    On the CPU the blocks are shared among ``n_threads`` threads, each product
    and ``topk`` running on one thread: the neighbours found do not depend on the
    thread count (a multi-threaded product may split its sums differently).

    X and ``n_neighbors`` are checked as :func:`kneighbors` checks them; data far
    from unit scale are searched times a power of two (exact), the distances
    given in X's units.

    Returns ``(distances, neighbours)`` as NumPy arrays of shape (n, n_neighbors).
    """
    X = check_kneighbors_arguments(X, n_neighbors)
    if sp.issparse(X):
        raise TypeError("The blockwise torch search needs dense features; X is sparse.")
    return _torch_search(X, n_neighbors, device, block_rows=block_rows,
                         n_threads=n_threads)


def _torch_search(X, n_neighbors, device, block_rows=None, n_threads=1):
    import torch

    X, points, shift = _centred_float32(X)
    n = X.shape[0]
    device = torch.device(device)
    points = torch.as_tensor(points, device=device)
    sq_norms = (points * points).sum(1)
    if block_rows is None:
        block_rows = _knn_block_rows(n, device)
    neighbours = torch.empty((n, n_neighbors), dtype=torch.int64, device=device)

    def search(start):
        stop = min(start + block_rows, n)
        # ||y||^2 - 2 <x, y> in one fused product: the row's own ||x||^2 does not
        # change its order, and each pass over the block is a pass over n x block
        # floats (the search is bound by memory traffic on CUDA)
        partial = torch.addmm(sq_norms[None, :], points[start:stop], points.T, alpha=-2.0)
        rows = torch.arange(stop - start, device=device)
        partial[rows, rows + start] = float("inf")  # never its own neighbour
        neighbours[start:stop] = partial.topk(n_neighbors, dim=1, largest=False).indices

    starts = range(0, n, block_rows)
    if device.type == "cuda":
        for start in starts:
            search(start)
    else:
        _run_single_threaded_blocks(search, starts, n_threads)
    distances, neighbours = _sorted_by_exact_distance(X, neighbours.to("cpu").numpy(),
                                                      n_threads)
    return _unscaled(distances, shift), neighbours


def _run_single_threaded_blocks(function, starts, n_threads):
    """``function(start)`` for every start, on ``n_threads`` Python threads, with
    torch's operations on one thread each (torch releases the GIL)."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with ThreadPoolExecutor(max(int(n_threads), 1)) as pool:
            list(pool.map(function, starts))
    finally:
        torch.set_num_threads(previous)


# entries of one block of squared distances: 256 MB of float32 on the CPU; on CUDA
# up to 2 GB, within an eighth of the free memory (the block, topk's scratch). At
# n = 1,000,000 the CPU's budget means blocks of 67 rows, 15,000 products and topks
# whose launch latency a GPU would wait on
CPU_BLOCK_ENTRIES = 1 << 26
CUDA_BLOCK_ENTRIES = 1 << 29


def _knn_block_rows(n, device):
    import torch

    entries = CPU_BLOCK_ENTRIES
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        entries = max(CPU_BLOCK_ENTRIES, min(CUDA_BLOCK_ENTRIES, free // 32))
    return max(1, min(n, entries // max(n, 1)))


# rows of the exact distances per kernel call (Ctrl-C is seen between calls)
DISTANCE_ROWS_PER_CALL = 1 << 14


@jit(parallel=True, fastmath=True)
def _squared_distances_to(X, neighbours, start, stop, out):
    """``out[i, t] = ||X[i] - X[neighbours[i, t]]||^2`` for rows i in [start, stop),
    in float64, each sum on one thread (the same bits whatever the thread count)."""
    for i in prange(start, stop):
        for t in range(neighbours.shape[1]):
            j = neighbours[i, t]
            total = 0.0
            for f in range(X.shape[1]):
                diff = X[i, f] - X[j, f]
                total += diff * diff
            out[i, t] = total


def _sorted_by_exact_distance(X, neighbours, n_threads=1):
    """Float64 Euclidean distances of each row to its listed neighbours, both sorted
    by increasing distance (ties in the order found).

    A numba kernel reads the rows in place (a NumPy difference of each row with
    its neighbours made temporaries of n_neighbors times the data: 70 s of CPU at
    60,000 x 784 and 150 neighbours, against 2 s). Its inputs are checked first
    (:func:`_check_distance_inputs`): it indexes without bounds checks.
    """
    import numba

    X = np.ascontiguousarray(X, dtype=np.float64)
    neighbours = np.ascontiguousarray(neighbours, dtype=np.int64)
    _check_distance_inputs(X, neighbours)
    squared = np.empty(neighbours.shape)
    previous = numba.get_num_threads()
    numba.set_num_threads(max(1, min(int(n_threads), numba.config.NUMBA_NUM_THREADS)))
    try:
        for start in range(0, X.shape[0], DISTANCE_ROWS_PER_CALL):
            _squared_distances_to(X, neighbours, start,
                                  min(start + DISTANCE_ROWS_PER_CALL, X.shape[0]), squared)
    finally:
        numba.set_num_threads(previous)
    distances = np.sqrt(squared)
    order = np.argsort(distances, axis=1, kind="stable")
    return (np.take_along_axis(distances, order, 1),
            np.take_along_axis(neighbours, order, 1))


def _check_distance_inputs(X, neighbours):
    """What :func:`_squared_distances_to` needs to index in range and to sum
    finite squares: one list of neighbours per row, each a row number, and finite
    values whose squared differences summed over the features stay below
    float64's largest (the searches hand it their centred, scaled rows)."""
    n_samples, n_features = X.shape
    if neighbours.ndim != 2 or neighbours.shape[0] != n_samples:
        raise ValueError(f"neighbours must have one row per sample ({n_samples}); got "
                         f"shape {neighbours.shape}.")
    if neighbours.size and (neighbours.min() < 0 or neighbours.max() >= n_samples):
        raise ValueError(f"neighbours must be row numbers from 0 to {n_samples - 1}; "
                         f"got {neighbours.min()} to {neighbours.max()}.")
    peak = _peak(X)
    limit = math.sqrt(np.finfo(np.float64).max / (4 * max(n_features, 1)))
    if not peak <= limit:  # NaN too
        raise ValueError(f"X must be finite with magnitudes up to {limit:.3g} (their "
                         f"squared distances overflow float64); got {peak:.3g}.")


def recall(found, exact):
    """Mean fraction of each row's exact neighbours that ``found`` lists too.

    Parameters
    ----------
    found, exact : ndarray of int of shape (n_rows, n_neighbors)
        Neighbour lists of the same rows (in any order).

    Returns
    -------
    recall : float
    """
    hits = 0
    for start in range(0, exact.shape[0], 4096):
        rows = slice(start, start + 4096)
        hits += int((found[rows, :, None] == exact[rows, None, :]).any(2).sum())
    return hits / exact.size

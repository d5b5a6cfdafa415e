"""Validation helpers shared by the estimators and the functional API."""

import functools
import math
import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_array as sklearn_check_array
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import validate_data as sklearn_validate_data

from skdiffclust._utils._symmetry import summarise
from skdiffclust._utils._warn import warn_user
from skdiffclust.exceptions import ClusterCountWarning


class NumberInterval(Interval):
    """scikit-learn's ``Interval`` constraint, refusing bools.

    To Python ``True`` is an int and a real number, so ``Interval(Integral, 1,
    None)`` takes ``n_clusters=True`` as 1; a bool is never a count or a rate.
    """

    def is_satisfied_by(self, val):
        return not isinstance(val, (bool, np.bool_)) and super().is_satisfied_by(val)


# n_jobs: any integer but 0 (negative counts back from the number of CPUs; 0 threads
# failed inside joblib), None, no bool
N_JOBS = [NumberInterval(numbers.Integral, None, -1, closed="right"),
          NumberInterval(numbers.Integral, 1, None, closed="left"), None]


# torch dtypes without a NumPy counterpart (``Tensor.numpy()`` refuses them)
TORCH_DTYPES_NUMPY_LACKS = ("torch.bfloat16", "torch.complex32")


def check_host_array(X, name="X"):
    """Refuse, clearly, a torch tensor that NumPy cannot read: one that requires grad
    or lives elsewhere than on the CPU (NumPy's conversion would raise torch's own
    error). Duck-typed: imports no torch. A CPU tensor is data like any array."""
    if type(X).__module__.split(".")[0] != "torch":
        return
    if getattr(X, "requires_grad", False):
        raise ValueError(
            f"{name} is a torch tensor that requires grad: its values are read as a "
            f"NumPy array, and nothing backpropagates into it. Pass {name}.detach().")
    device = getattr(X, "device", None)
    if getattr(device, "type", "cpu") != "cpu":
        raise ValueError(
            f"{name} is a torch tensor on {device}: the estimator reads host (NumPy) "
            f"arrays, its device parameter says where it trains. Pass {name}.cpu().")
    dtype = str(getattr(X, "dtype", ""))
    if dtype in TORCH_DTYPES_NUMPY_LACKS or dtype.startswith("torch.float8"):
        raise TypeError(
            f"{name} is a torch tensor of dtype {dtype}, which NumPy cannot read. Pass "
            f"{name}.float() (float32) or {name}.double().")


def real_array(values, name, dtype=np.float64):
    """``values`` as a NumPy array of ``dtype`` (float64; None: its own dtype, which
    the caller checks), or a clear error naming ``name``: a torch tensor NumPy
    cannot read (:func:`check_host_array`), a ragged sequence, complex numbers
    (their imaginary parts would be dropped with only NumPy's ComplexWarning) or
    values that are not numbers."""
    check_host_array(values, name)
    check_not_ragged(values, name)
    array = np.asarray(values)
    if np.iscomplexobj(array):
        raise ValueError(f"{name} is complex: complex data is not supported.")
    if dtype is None:
        return array
    try:
        return array.astype(dtype, copy=False)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} must hold real numbers, got an array of dtype "
                         f"{array.dtype} ({error}).") from None


def check_not_ragged(X, name="X"):
    """Refuse, clearly, a list or tuple whose rows (or images) differ in length or
    shape: NumPy's own error speaks of an "inhomogeneous shape"."""
    if not isinstance(X, (list, tuple)):
        return
    try:
        np.asarray(X)
    except ValueError as error:
        if "inhomogeneous" not in str(error):
            raise
        raise ValueError(
            f"{name} is a ragged sequence: its rows (or images) do not all have the "
            "same length or shape. Give one array of shape (n_samples, n_features), or "
            "of images of one shape.") from None


def check_sparse_structure(X, name="X"):
    """Refuse, clearly, a scipy sparse matrix whose index arrays are inconsistent
    (an index beyond its shape, a decreasing ``indptr``): SciPy's own routines read
    them unchecked, and a column index of 10**7 in a 30 x 30 CSR matrix crashed the
    interpreter in its subtraction. O(nnz); the matrix is not modified."""
    if not sp.issparse(X):
        return
    n_rows, n_cols = X.shape
    if X.format in ("csr", "csc"):
        n_major, n_minor = (n_rows, n_cols) if X.format == "csr" else (n_cols, n_rows)
        indptr, indices = np.asarray(X.indptr), np.asarray(X.indices)
        problem = None
        if indptr.ndim != 1 or indptr.size != n_major + 1:
            problem = f"indptr has {indptr.size} entries, not {n_major + 1}"
        elif indptr[0] != 0 or np.any(np.diff(indptr) < 0):
            problem = "indptr does not start at 0 and increase"
        elif indptr[-1] > min(indices.size, np.size(X.data)):
            problem = (f"indptr ends at {indptr[-1]}, beyond the {indices.size} stored "
                       f"indices or {np.size(X.data)} stored values")
        elif indptr[-1] and (indices[:indptr[-1]].min() < 0
                             or indices[:indptr[-1]].max() >= n_minor):
            problem = f"an index is outside [0, {n_minor})"
    elif X.format == "coo":
        row, col = np.asarray(X.row), np.asarray(X.col)
        problem = None
        if row.size != col.size or row.size != np.size(X.data):
            problem = "row, col and data have different lengths"
        elif row.size and (row.min() < 0 or row.max() >= n_rows
                           or col.min() < 0 or col.max() >= n_cols):
            problem = "an index is outside the matrix's shape"
    else:
        return
    if problem is not None:
        raise ValueError(
            f"{name} is a malformed {X.format.upper()} sparse matrix of shape {X.shape}: "
            f"{problem}. Build it again (for example with scipy.sparse.csr_matrix"
            "((data, (row, col)), shape=...)).")


def validate_data(estimator, X, **params):
    """scikit-learn's ``validate_data``, after :func:`check_host_array`,
    :func:`check_not_ragged` and :func:`check_sparse_structure`."""
    check_host_array(X)
    check_not_ragged(X)
    check_sparse_structure(X)
    return sklearn_validate_data(estimator, X, **params)


def check_array(array, **params):
    """scikit-learn's ``check_array``, after :func:`check_host_array`,
    :func:`check_not_ragged` and :func:`check_sparse_structure`."""
    name = params.get("input_name") or "X"
    check_host_array(array, name)
    check_not_ragged(array, name)
    check_sparse_structure(array, name)
    return sklearn_check_array(array, **params)


def symmetry_tolerance(dtype, lowest, highest):
    """Tolerance on |S - S.T|: sqrt(machine epsilon) of S's dtype times its scale
    (the largest magnitude of its entries, from ``lowest`` to ``highest``).

    Relative to the whole matrix, so that float32 similarities computed from
    distances (torch.cdist, matrix products) pass while real asymmetry does not.
    """
    return float(np.sqrt(np.finfo(dtype).eps)) * max(abs(lowest), abs(highest))


def asymmetry_excess(S):
    """By how much the largest |S[i, j] - S[j, i]| of a finite square matrix exceeds
    :func:`symmetry_tolerance` (0 when within it), from one pass over S."""
    asymmetry, lowest, highest = summarise(S)
    return max(asymmetry - symmetry_tolerance(S.dtype, lowest, highest), 0.0)


def is_symmetric(S):
    return asymmetry_excess(S) == 0


def check_similarity_matrix(S, name="X"):
    """Raise a ValueError unless ``S`` is a square, symmetric similarity matrix."""
    if S.ndim != 2 or S.shape[0] != S.shape[1]:
        raise ValueError(
            f"{name} must be a square (n_samples, n_samples) similarity matrix, "
            f"got shape {S.shape}."
        )
    excess = asymmetry_excess(S)
    if excess > 0:
        raise ValueError(
            f"{name} must be a symmetric similarity matrix; "
            f"|{name} - {name}.T| exceeds the tolerance by up to {excess:.3g}."
        )


# triplets of samples whose square-rooted entries must satisfy the triangle
# inequality for a matrix to pass for distances
N_TRIPLETS = 1000


def looks_like_distances(S):
    """Whether a dense square matrix looks like distances rather than similarities.

    Each sample strictly nearer itself than any other (every off-diagonal entry of
    a row above its diagonal entry, which is non-negative: zero for distances, a
    constant for distances plus one), and square roots of the off-diagonal entries
    that satisfy the triangle inequality on sampled triplets (those of a metric's
    distances, of squared Euclidean distances, and of either plus a constant do; a
    kernel with its diagonal set to zero, as some papers ask of an affinity, does
    not: two close samples and a far one break it). Similarities put the diagonal
    at the top of its row instead (an RBF kernel, cosine similarities, a kNN
    graph with self-loops), or have zeros off the diagonal (a kNN graph).
    """
    n = S.shape[0]
    # cheap tests first: most similarity matrices fail them on their first row
    if n < 2 or not _nearest_itself(S, 0, 1) or S.min() < 0:
        return False
    step = max(1, (1 << 20) // n)  # rows per block: 8 MiB of float64
    if not all(_nearest_itself(S, start, min(start + step, n))
               for start in range(0, n, step)):
        return False
    i, j, k = np.random.default_rng(0).integers(0, n, size=(3, N_TRIPLETS))
    distinct = (i != j) & (j != k) & (i != k)
    i, j, k = i[distinct], j[distinct], k[distinct]
    root = np.sqrt(S[j, k], dtype=np.float64)
    excess = root - np.sqrt(S[i, j], dtype=np.float64) - np.sqrt(S[i, k], dtype=np.float64)
    tolerance = 1e-6 * float(root.max()) if root.size else 0.0
    return not np.any(excess > tolerance)


def _nearest_itself(S, start, stop):
    """Whether each row of S[start:stop] has a non-negative diagonal entry below
    every other entry of the row."""
    rows = np.array(S[start:stop], dtype=np.float64)
    positions = np.arange(start, stop)
    diagonal = rows[positions - start, positions].copy()
    rows[positions - start, positions] = np.inf
    return bool(np.all(diagonal >= 0) and np.all(rows.min(axis=1) > diagonal))


def warn_if_looks_like_distances(S, name, *, kind, consequence, fix):
    """Warn when ``S``, where ``kind`` of matrix is expected (larger means more
    similar), looks like distances (:func:`looks_like_distances`): say what the
    method would do with it (``consequence``) and what to pass instead (``fix``).
    Dense matrices only."""
    if isinstance(S, np.ndarray) and looks_like_distances(S):
        warn_user(
            f"{name} looks like a distance matrix (each sample is nearer itself than "
            f"any other: its diagonal is the smallest entry of each row), but {kind} "
            f"matrix is expected (larger means more similar): {consequence}. "
            f"Pass {fix} instead of D; silence this warning if {name} really is "
            f"{kind} matrix.",
            UserWarning,
        )


def check_n_clusters(n_clusters, n_samples, *, auto=False):
    """Raise unless ``n_clusters`` is an integer between 1 and ``n_samples`` (or
    ``'auto'`` where the estimator can choose it: ``auto``)."""
    if auto and isinstance(n_clusters, str) and n_clusters == "auto":
        return
    if not isinstance(n_clusters, numbers.Integral) or isinstance(n_clusters, bool):
        expected = "an integer or 'auto'" if auto else "an integer"
        raise TypeError(f"n_clusters must be {expected}, got {n_clusters!r}.")
    if n_clusters < 1:
        raise ValueError(f"n_clusters must be >= 1, got {n_clusters}.")
    if n_clusters > n_samples:
        raise ValueError(
            f"n_clusters={n_clusters} must be <= n_samples={n_samples}: every cluster "
            "needs at least one sample."
        )


def warn_empty_clusters(name, n_found, n_clusters, *, cause, remedy, relabelled=True,
                        counted=False):
    """The warning of a fit that left clusters empty (``n_clusters_ < n_clusters``).

    ``cause`` says why the method's clusters stay empty, ``remedy`` which
    parameters may help (None where none can: identical samples);
    ``relabelled`` whether the labels were renumbered 0 .. n_clusters_ - 1 (or
    keep the model's numbers); ``counted`` whether ``n_clusters='auto'`` counted
    the ``n_clusters``.
    """
    numbering = ("Labels are numbered 0 .. n_clusters_ - 1" if relabelled
                 else "Labels keep the numbers of the model's clusters")
    if counted and remedy is None:  # nothing to count among identical samples
        warn_user(f"{name}(n_clusters='auto') found {n_found} cluster(s): {cause}.",
                  UserWarning)
        return
    asked = (f"{n_clusters} that n_clusters='auto' counted" if counted else
             f"n_clusters={n_clusters} asked")
    advice = "" if remedy is None else f" {remedy} may help."
    warn_user(f"{name} found {n_found} non-empty clusters of the {asked}: {cause}. "
              f"{numbering}.{advice}", UserWarning)


def warn_unclear_count(name, count, decided_by):
    """The warning of ``n_clusters='auto'`` when no number stands out (``count``:
    a ``ClusterCount`` by stability whose ``clear`` is False); ``decided_by``
    says what chose the number fitted instead."""
    best = int(np.argmax(count.scores))
    warn_user(
        f"{name}(n_clusters='auto') found no number of clusters that stands out: the "
        f"most stable, {count.candidates[best]} (stability {count.scores[best]:.2f}), "
        "either reproduces poorly or is poorly separated in the graph. "
        f"It fitted {count.n_clusters} clusters, {decided_by}, which may be far "
        "from the data's number; n_clusters_scores_ holds every candidate's stability. "
        "Pass n_clusters if you know it.",
        ClusterCountWarning,
    )


def warn_unclear_merge(name, count):
    """The warning of ``n_clusters='auto'`` by merging when no number stands out
    (``count``: a ``ClusterCount`` of merges whose ``clear`` is False: the
    clusters found are linked almost as strongly as those merged)."""
    link = count.scores[count.candidates == count.n_clusters].min(initial=np.inf)
    warn_user(
        f"{name}(n_clusters='auto') found no number of clusters that stands out: "
        f"the {count.n_clusters} clusters it kept are still linked (strongest link "
        f"{link:.3f}) almost as much as those it merged, so the number "
        "may be far from the data's; n_clusters_scores_ holds the strongest link at "
        "every number of clusters. Pass n_clusters if you know it.",
        ClusterCountWarning,
    )


# Squares of differences of values beyond this overflow float64 (sqrt of its max is
# 1.3e154), and sums of squares over features overflow sooner: refuse such data
# with a clear message rather than compute with infinities.
MAX_MAGNITUDE = 1e150


def check_magnitude(X, name="X"):
    """Raise a ValueError when values of X are so large that squared distances overflow.

    X must be finite (``validate_data`` checks that first). Works for dense arrays
    and scipy sparse matrices.
    """
    values = X.data if hasattr(X, "data") and not isinstance(X, np.ndarray) else X
    # max and min instead of abs: no temporary copy of a large X
    largest = max(float(values.max()), -float(values.min())) if np.size(values) else 0.0
    if largest > MAX_MAGNITUDE:
        raise ValueError(
            f"{name} contains values up to {largest:.3g} in magnitude: their squared "
            "distances overflow float64. Rescale the data first (for example with "
            "sklearn.preprocessing.StandardScaler or MaxAbsScaler)."
        )


# Differences below this have squares under 1e-280, near float64's smallest normal
# number (2.2e-308): below it squared distances lose their digits, then vanish,
# and ClAM's beta in the units of the input (one over their square) overflows.
MIN_SPREAD = 1e-140


# numpy reduces a C-ordered array along axis 0 row by row, with an inner loop as
# long as a row: np.ptp(X, axis=0) took 58 ms on 1,000,000 x 2 (half of the spanning
# forest's fit after its tree), one reduction per column 2 ms; from 32 features on
# the rows are long enough (4.5 against 5.9 ms on 62,500 x 32)
COLUMNWISE_MAX_FEATURES = 16


def _spread(X):
    """The largest range of a feature of X (0 for a single sample or no feature)."""
    if X.shape[0] < 2 or X.shape[1] == 0:
        return 0.0
    if hasattr(X, "toarray"):
        return float((X.max(axis=0).toarray() - X.min(axis=0).toarray()).max())
    if X.shape[1] <= COLUMNWISE_MAX_FEATURES:
        return float(max(np.ptp(X[:, j]) for j in range(X.shape[1])))
    return float(np.ptp(X, axis=0).max())


def check_spread(X, name="X", spread=None):
    """Raise a ValueError when X's values differ by so little (though not all
    equal) that their squared distances underflow float64."""
    spread = _spread(X) if spread is None else spread
    if 0 < spread < MIN_SPREAD:
        raise ValueError(
            f"{name}'s values differ by at most {spread:.3g}: their squared distances "
            "underflow float64. Rescale the data first (for example with "
            "sklearn.preprocessing.StandardScaler or MaxAbsScaler).")


def spread_unit(X, name="X"):
    """1.0, or the power of two that brings X's spread to about 1 where its squared
    differences would underflow float64 (:func:`check_spread`'s case).

    Multiplying by a power of two is exact: a method whose partition a global
    rescale does not change works on X times it and finds the partition exact
    arithmetic would. Values differing by less than float64's smallest normal
    number have lost their digits: a ValueError, as :func:`check_spread`'s.
    """
    spread = _spread(X)
    if spread == 0.0 or spread >= MIN_SPREAD:
        return 1.0
    if spread < np.finfo(np.float64).tiny:
        check_spread(X, name, spread)
    return 2.0 ** -math.floor(math.log2(spread))


def center_and_scale(X):
    """X centred in float64 and divided by one global scale; returns (Z, shift, scale).

    For methods whose result should not change under a shift or a global rescale
    of the data: centring in float64 before any float32 cast keeps the precision
    of data far from the origin, and one scale for all features keeps the metric.
    The scale is the root mean squared deviation (1 for constant data).
    """
    X = np.asarray(X, dtype=np.float64)
    shift = X.mean(axis=0)
    Z = X - shift
    # max-abs first, so that squaring cannot overflow before the mean is taken
    peak = float(np.max(np.abs(Z))) if Z.size else 0.0
    if peak == 0.0:
        return Z, shift, 1.0
    # a constant feature's deviations are rounding: exactly 0 instead
    constant = constant_features(X)
    if constant.any():
        Z[:, constant] = 0.0
        peak = float(np.max(np.abs(Z)))
        if peak == 0.0:
            return Z, shift, 1.0
    scale = peak * float(np.sqrt(np.mean((Z / peak) ** 2)))
    return Z / scale, shift, scale


# the relative range of a feature that is a constant's rounding
CONSTANT_EPS = 2 * float(np.finfo(np.float64).eps)


def constant_features(X):
    """The features of X (dense or sparse; finite) that are constant up to rounding:
    their range (largest minus smallest value) is at most :data:`CONSTANT_EPS`
    times their largest magnitude, two to four units in the last place of float64
    (0.1 and 0.3 - 0.2 differ by two).

    Centred by their computed mean, such features have deviations of 1e-17 that,
    divided by their own spread, would be noise of order 1. The test reads the
    values themselves, not the mean and the variance: a bound on the variance that
    grew with ``n_samples * |mean| * eps`` (scikit-learn's, for its scalers) took
    300 distinct samples shifted by 1e14, whose differences float64 still holds,
    for identical.
    """
    lowest, highest = column_extremes(X)
    magnitude = np.maximum(np.abs(lowest), np.abs(highest))
    return highest - lowest <= CONSTANT_EPS * magnitude


def column_extremes(X):
    """Each column's smallest and largest value, float64 (implicit zeros count)."""
    if X.shape[0] == 0:
        return np.zeros(X.shape[1]), np.zeros(X.shape[1])
    if hasattr(X, "toarray"):
        return (np.asarray(X.min(axis=0).toarray(), dtype=np.float64).ravel(),
                np.asarray(X.max(axis=0).toarray(), dtype=np.float64).ravel())
    if X.shape[1] <= COLUMNWISE_MAX_FEATURES:
        return (np.array([X[:, j].min() for j in range(X.shape[1])], dtype=np.float64),
                np.array([X[:, j].max() for j in range(X.shape[1])], dtype=np.float64))
    return (np.asarray(X.min(axis=0), dtype=np.float64),
            np.asarray(X.max(axis=0), dtype=np.float64))


def consistent_sparse_indices(X):
    """A CSR/CSC matrix whose ``indices`` and ``indptr`` share one integer dtype.

    SciPy makes both int64 for large matrices, and a user may set only one of them
    to int64; scikit-learn's Cython routines (``mean_variance_axis``, the sparse
    distance reductions) need both alike. They become int32 where every index and
    ``nnz`` fit in it (scikit-learn's fastest paths), int64 otherwise. The data are
    not copied; the index arrays only when their dtype changes.
    """
    limit = np.iinfo(np.int32).max
    fits = max(X.nnz, *X.shape) <= limit
    dtype = np.int32 if fits else np.int64
    if X.indices.dtype == dtype and X.indptr.dtype == dtype:
        return X
    return X.__class__((X.data, X.indices.astype(dtype), X.indptr.astype(dtype)),
                       shape=X.shape, copy=False)


def check_hidden_layer_sizes(hidden_layer_sizes):
    """``hidden_layer_sizes`` as a tuple of positive ints (``()`` allowed)."""
    sizes = np.asarray(hidden_layer_sizes)
    valid = sizes.ndim == 1 and (
        sizes.size == 0 or (sizes.dtype.kind in "iu" and sizes.min() >= 1))
    if not valid:
        raise ValueError(
            "hidden_layer_sizes must be a sequence of positive integers, got "
            f"{hidden_layer_sizes!r}."
        )
    return tuple(int(s) for s in sizes)


def array_ndim(X):
    """Dimensions of X without NumPy's array functions (scikit-learn's checks pass
    objects that refuse them); 2 for what NumPy cannot read (left to
    ``validate_data``'s error)."""
    if sp.issparse(X):
        return 2
    n_dims = getattr(X, "ndim", None)
    if isinstance(n_dims, int):
        return n_dims
    try:
        return np.asarray(X).ndim
    except (TypeError, ValueError):
        return 2


def refusing_former_names(init):
    """Decorate an estimator's ``__init__`` so that a parameter's former name
    (its class's ``_renamed_parameters``, see :class:`RenamedParameters`) is
    refused with a message naming the new one. The signature stays the
    undecorated one, which scikit-learn reads."""
    @functools.wraps(init)
    def wrapper(self, *args, **kwargs):
        self._refuse_former_names(kwargs)
        return init(self, *args, **kwargs)
    return wrapper


class RenamedParameters:
    """Refuses a parameter's former name with a message naming its new one, in
    ``__init__`` (decorated by :func:`refusing_former_names`) and in
    ``set_params``.

    A subclass lists them in ``_renamed_parameters`` (former name: new name).
    Without it, ``PRCut(gamma=1)`` would raise Python's bare "unexpected keyword"
    error, and a setting copied from another estimator (SpectralClustering's
    ``gamma`` is an RBF width) could not be told from a typo.
    """

    _renamed_parameters = {}

    def _refuse_former_names(self, names):
        for name in names:
            new = self._renamed_parameters.get(name)
            if new is not None:
                raise TypeError(
                    f"{type(self).__name__}'s parameter {name!r} is now named {new!r}; "
                    f"pass {new}= instead.")

    def set_params(self, **params):
        self._refuse_former_names(params)
        return super().set_params(**params)

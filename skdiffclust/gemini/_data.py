"""What SparseGEMINI trains on: standardised model inputs and the GEMINI's geometry.

Two views of the same data, both centred in float64 before anything else:

* the **model** sees each feature standardised, ``z = (x - mean) / std``: its
  weights, the group-lasso penalty and the learning rate then mean the same on
  any data, whatever its offset and units (the fitted estimator folds the
  standardisation back into its weights, see ``_models.fold_standardisation``);
* the **kernel / distance** of the GEMINI sees the data centred and divided by
  *one* global scale (the root mean squared deviation), which keeps its metric:
  the clusters it prefers do not change under a shift or a global rescale of the
  data, and neither do the GEMINI's units, in which the path's penalties are
  expressed.

:class:`Inputs` keeps a CSR matrix sparse (the centring is applied implicitly in
its products). :class:`LinearKernel` is the default linear kernel written as
``K = Phi Phi'`` with ``Phi`` the globally scaled data: every MMD quantity then
costs O(n d K) and no n x n matrix exists. Other kernels and the Wasserstein
distances are n x n matrices of the samples of a batch.
"""

from numbers import Real

import numpy as np
import scipy.sparse as sp
from sklearn.metrics import pairwise_distances, pairwise_kernels
from sklearn.metrics.pairwise import KERNEL_PARAMS

# kernels that need non-negative inputs: scaled, never centred
NON_NEGATIVE_KERNELS = ("chi2", "additive_chi2")
# kernels and distances that a shift does not change: sparse rows stay sparse
TRANSLATION_INVARIANT_KERNELS = ("rbf", "laplacian")
TRANSLATION_INVARIANT_METRICS = ("euclidean", "l2", "l1", "manhattan", "cityblock",
                                 "sqeuclidean", "chebyshev", "minkowski")
# rows per block when transforming data into Nyström features
CHUNK = 4096


def feature_statistics(X):
    """Mean and standard deviation of each column, in float64, without overflow.

    Dense or CSR ``X`` with finite values (``check_magnitude`` has bounded them);
    each column is divided by its largest magnitude before squaring, so that
    neither 1e150 nor 1e-200 over- or underflows.
    """
    if sp.issparse(X):
        peak = np.asarray(abs(X).max(axis=0).todense(), dtype=np.float64).ravel()
        safe = np.where(peak > 0, peak, 1.0)
        scaled = X @ sp.diags(1.0 / safe)
        mean = np.asarray(scaled.mean(axis=0), dtype=np.float64).ravel()
        second = np.asarray(scaled.multiply(scaled).mean(axis=0), dtype=np.float64).ravel()
        variance = np.maximum(second - mean**2, 0.0)
        return mean * safe, np.sqrt(variance) * safe
    X = np.asarray(X, dtype=np.float64)
    mean = X.mean(axis=0)
    deviation = X - mean
    peak = np.abs(deviation).max(axis=0) if X.shape[0] else np.zeros(X.shape[1])
    safe = np.where(peak > 0, peak, 1.0)
    std = np.sqrt(np.mean((deviation / safe) ** 2, axis=0)) * safe
    return mean, std


class Standardisation:
    """The two scalings of the data (see the module docstring), fitted once.

    Attributes
    ----------
    mean : ndarray of shape (n_features,)
    scale : ndarray of shape (n_features,)
        Each feature's standard deviation (1 for a constant feature): the model's.
    global_scale : float
        Root mean squared deviation over all features (1 for constant data): the
        kernel's and the distance's.
    """

    def __init__(self, X):
        self.mean, std = feature_statistics(X)
        self.scale = np.where(std > 0, std, 1.0)
        peak = float(std.max()) if std.size else 0.0
        self.global_scale = (peak * float(np.sqrt(np.mean((std / peak) ** 2)))
                             if peak > 0 else 1.0)
        # kernel coordinates = model coordinates * kernel_weights (0 for constants)
        self.kernel_weights = std / self.global_scale

    def inputs(self, X):
        return Inputs(X, self.mean, self.scale)


class Inputs:
    """Rows of ``(X - mean) / scale`` for a dense or CSR ``X``, as products need them.

    Dense data are centred and scaled once (in float64, then kept in X's
    precision: float32 input trains in float32, whose matrix products run twice
    as fast). CSR data stay sparse: ``Z = A - 1 offset'`` with ``A = X / scale``
    (still CSR) and the centring applied inside :meth:`dot` and :meth:`tdot`.
    Products are computed in the data's precision.
    """

    def __init__(self, X, mean, scale):
        dtype = np.float32 if X.dtype == np.float32 else np.float64
        if sp.issparse(X):
            self.data = sp.csr_matrix(X @ sp.diags(1.0 / scale), dtype=dtype)
            self.offset = (mean / scale).astype(dtype)
        else:
            self.data = ((np.asarray(X, dtype=np.float64) - mean) / scale).astype(
                dtype, copy=False)
            self.offset = None

    @property
    def dtype(self):
        return self.data.dtype

    @classmethod
    def _of(cls, data, offset):
        inputs = cls.__new__(cls)
        inputs.data, inputs.offset = data, offset
        return inputs

    @classmethod
    def of_features(cls, features):
        """Dense features used as they are (not centred, not scaled)."""
        return cls._of(features, None)

    @property
    def shape(self):
        return self.data.shape

    @property
    def n_samples(self):
        return self.data.shape[0]

    def rows(self, index):
        if index is None:
            return self
        return Inputs._of(self.data[index], self.offset)

    def dot(self, W):
        """``Z @ W`` for W of shape (n_features, m)."""
        W = np.asarray(W, dtype=self.dtype)
        out = np.asarray(self.data @ W)
        if self.offset is not None:
            out -= self.offset @ W
        return out

    def tdot(self, U):
        """``Z.T @ U`` for U of shape (n_samples, m)."""
        U = np.asarray(U, dtype=self.dtype)
        out = np.asarray(self.data.T @ U)
        if self.offset is not None:
            out -= np.outer(self.offset, U.sum(axis=0))
        return out

    def weighted_row_squares(self, weights):
        """``|z_i * weights|^2`` of each row."""
        if self.offset is None:
            return ((self.data * weights) ** 2).sum(axis=1)
        scaled = self.data.multiply(weights.reshape(1, -1)).tocsr()
        origin = self.offset * weights
        return (np.asarray(scaled.multiply(scaled).sum(axis=1)).ravel()
                - 2.0 * (scaled @ origin) + origin @ origin)

    def column_sums(self):
        return self.tdot(np.ones((self.n_samples, 1)))[:, 0]

    def dense(self):
        """The rows as a dense array (a CSR batch is densified only here)."""
        if self.offset is None:
            return self.data
        return self.data.toarray() - self.offset


class LinearKernel:
    """``K = Phi Phi'`` with ``Phi = Z diag(w)``: MMD statistics in O(n d K).

    With importance weights ``alpha`` of shape (R, n, K) (R restarts), the MMD
    objectives need only ``Q = alpha' K alpha``, ``u = alpha' K 1`` and
    ``c = 1' K 1`` (:meth:`statistics`), and back-propagate through
    ``K alpha S + K 1 g'`` (:meth:`backward`); here both go through
    ``G = Phi' alpha`` (d x RK).
    """

    def __init__(self, inputs, weights):
        self.inputs = inputs
        self.squared_weights = weights**2
        self.n_samples = inputs.n_samples
        ones = inputs.column_sums()  # Phi' 1, in model coordinates
        self.weighted_ones = self.squared_weights * ones
        self.c = float(ones @ self.weighted_ones)

    def statistics(self, alpha):
        R, n, K = alpha.shape
        G = self.inputs.tdot(side_by_side(alpha)).reshape(-1, R, K)
        G_weighted = self.squared_weights[:, None, None] * G
        Q = np.einsum("dri,drj->rij", G_weighted, G)
        u = np.einsum("dri,d->ri", G, self.weighted_ones)
        return Q, u, self.c, G_weighted

    def backward(self, G_weighted, S, g):
        """``K alpha_r S_r + K 1 g_r'`` for each restart r, shape (R, n, K)."""
        R, K = g.shape
        H = np.einsum("drk,rkl->drl", G_weighted, S) + self.weighted_ones[:, None, None] * g
        return per_restart(self.inputs.dot(H.reshape(-1, R * K)), R)


class MatrixKernel:
    """An explicit (n, n) kernel matrix, with :class:`LinearKernel`'s interface."""

    def __init__(self, K):
        self.K = K
        self.n_samples = K.shape[0]
        self.row_sums = K.sum(axis=1)

    def statistics(self, alpha):
        R = alpha.shape[0]
        K_alpha = per_restart(self.K @ side_by_side(alpha), R)
        Q = np.einsum("rni,rnj->rij", alpha, K_alpha)
        u = np.einsum("rni,n->ri", alpha, self.row_sums)
        return Q, u, float(self.row_sums.sum()), K_alpha

    def backward(self, K_alpha, S, g):
        return K_alpha @ S + self.row_sums[None, :, None] * g[:, None, :]


def side_by_side(A):
    """(R, n, m) -> (n, R m): restarts side by side, for one product with the data."""
    R, n, m = A.shape
    return np.ascontiguousarray(A.transpose(1, 0, 2)).reshape(n, R * m)


def per_restart(A, R):
    """(n, R m) -> (R, n, m): the inverse of :func:`side_by_side`."""
    return A.reshape(A.shape[0], R, -1).transpose(1, 0, 2)


def check_kernel_params(kernel, params):
    """Refuse parameters a named kernel does not take: scikit-learn's kernels
    drop them without a word (``filter_params``), so that a misspelt ``gamma``
    fitted the default kernel. A callable kernel gets them all."""
    if callable(kernel):
        return
    accepted = set(KERNEL_PARAMS.get(kernel, ()))
    unknown = sorted(set(params) - accepted)
    if unknown:
        takes = ", ".join(sorted(accepted)) if accepted else "none"
        raise ValueError(f"kernel_params has {unknown}, which kernel={kernel!r} does not "
                         f"take (it takes: {takes}).")
    gamma = params.get("gamma")  # exp(+gamma d^2) grows with distance: no kernel
    if gamma is not None and kernel in ("rbf", "laplacian", "chi2") and not (
            isinstance(gamma, Real) and 0 < gamma < np.inf):
        raise ValueError(f"kernel_params['gamma'] must be a positive number for "
                         f"kernel={kernel!r}, got {gamma!r}.")
    degree = params.get("degree")  # a fractional power of a negative base is NaN
    if degree is not None and kernel == "poly" and (
            isinstance(degree, bool) or not isinstance(degree, Real)
            or not (1 <= degree < np.inf and float(degree).is_integer())):
        raise ValueError(f"kernel_params['degree'] must be a whole number of at least 1 "
                         f"for kernel='poly' (a fractional power of a negative "
                         f"gamma <x, y> + coef0 is NaN), got {degree!r}.")


class Geometry:
    """The kernel (MMD) or distance (Wasserstein) of a GEMINI, on given rows.

    Both are evaluated on the kernel coordinates: the data centred and divided by
    the global scale. A non-linear kernel is, by default, replaced by
    ``n_kernel_features`` Nyström features ``F`` (``K ~ F F'``, landmarks drawn
    from the training data), so that its MMD costs what a linear kernel's does;
    with ``n_kernel_features=None`` each batch gets its exact kernel matrix.
    """

    def __init__(self, standardisation, objective, kernel, kernel_params, metric,
                 n_kernel_features=None):
        self.kernel_weights = standardisation.kernel_weights
        # where the origin was, in kernel coordinates (chi2 kernels: not centred)
        self.origin = standardisation.mean / standardisation.global_scale
        self.objective = objective
        self.kernel = kernel
        self.kernel_params = dict(kernel_params or {})
        if self.is_mmd:
            check_kernel_params(kernel, self.kernel_params)
        if kernel == "rbf" and "gamma" not in self.kernel_params:
            # the inverse of the mean squared distance between two samples: the
            # scaled data have a total variance of n_features
            self.kernel_params["gamma"] = 1.0 / (2.0 * max(self.kernel_weights.size, 1))
        self.metric = metric
        self.n_kernel_features = n_kernel_features
        self.nystroem = None

    @property
    def is_mmd(self):
        return self.objective.startswith("mmd")

    @property
    def uses_features(self):
        """Whether the MMD's kernel is a product of features (linear or Nyström)."""
        return self.is_mmd and (self.kernel == "linear" or self.n_kernel_features is not None)

    @property
    def needs_matrix(self):
        """Whether the GEMINI needs an n x n matrix of the batch."""
        return self.objective != "mi" and not self.uses_features

    def fit(self, inputs, seed):
        """Draw the Nyström landmarks from the training data (when they are used)."""
        if self.uses_features and self.kernel != "linear":
            from sklearn.kernel_approximation import Nystroem

            n_landmarks = min(int(self.n_kernel_features), inputs.n_samples)
            landmarks = np.random.default_rng(seed).choice(inputs.n_samples, n_landmarks,
                                                           replace=False)
            coordinates = self._coordinates(inputs.rows(np.sort(landmarks)))
            self._checked(pairwise_kernels(coordinates, metric=self.kernel,
                                           filter_params=True, **self.kernel_params))
            self.nystroem = Nystroem(
                kernel=self.kernel, kernel_params=self.kernel_params or None,
                n_components=n_landmarks, random_state=0,
            ).fit(coordinates)
            self._landmarks_uncentred = self._uncentred(inputs)
        return self

    def _uncentred(self, inputs):
        """Whether ``_coordinates`` gives these inputs uncentred (a CSR matrix under a
        translation-invariant kernel) rather than centred (dense)."""
        return inputs.offset is not None and self._translation_invariant

    def _in_landmarks_frame(self, coordinates, inputs):
        """Coordinates in the frame of the Nyström landmarks: the same kernel in
        another frame gave other features (dense and CSR chunks of one stream, or
        CSR rows scored by a model fitted on dense ones)."""
        landmarks = getattr(self, "_landmarks_uncentred", self._uncentred(inputs))
        if not self._translation_invariant or landmarks == self._uncentred(inputs):
            return coordinates
        # uncentred = centred + origin, on the features the kernel sees (weight > 0)
        shift = np.where(self.kernel_weights > 0, self.origin, 0.0)
        if landmarks:  # centred rows, uncentred landmarks
            return coordinates + shift
        return coordinates.toarray() - shift

    def affinity(self, inputs):
        """The kernel operator, distance matrix, or None (``'mi'``) of ``inputs``."""
        if self.objective == "mi":
            return None
        if self.kernel == "linear" and self.is_mmd:
            return LinearKernel(inputs, self.kernel_weights)
        if self.uses_features:
            features = Inputs.of_features(self.kernel_features(inputs))
            return LinearKernel(features, np.ones(features.shape[1]))
        coordinates = self._coordinates(inputs)
        if self.is_mmd:
            return MatrixKernel(self._checked(pairwise_kernels(
                coordinates, metric=self.kernel, filter_params=True, **self.kernel_params)))
        return self._checked(pairwise_distances(coordinates, metric=self.metric))

    def distances(self, inputs):
        """The distances between ``inputs`` in the GEMINI's geometry (an n x n
        array): those of the exact kernel's feature space for the MMD
        (``sqrt(k(x, x) + k(y, y) - 2 k(x, y))``, Nyström features or not), the
        metric's for Wasserstein, Euclidean ones for ``'mi'``; on the kernel
        coordinates."""
        coordinates = self._coordinates(inputs)
        if not self.is_mmd:
            if self.objective == "mi":
                return pairwise_distances(coordinates, metric="euclidean")
            return self._checked(pairwise_distances(coordinates, metric=self.metric))
        kernel = self._checked(pairwise_kernels(coordinates, metric=self.kernel,
                                                filter_params=True, **self.kernel_params))
        diagonal = np.diag(kernel)
        return np.sqrt(np.maximum(diagonal[:, None] + diagonal[None, :] - 2.0 * kernel, 0.0))

    def _checked(self, matrix):
        """``matrix``, the kernel's or the metric's on some rows, where its values
        can be used: a ValueError naming the kernel or metric where they are NaN or
        infinite (a callable's, 'correlation' of a constant row: NumPy's "SVD did not
        converge" or the transport solver's "Problem unbounded" came instead), or
        where distances are negative."""
        source = (f"kernel={self.kernel!r}" if self.is_mmd else f"metric={self.metric!r}")
        if not np.all(np.isfinite(matrix)):
            raise ValueError(f"{source} gives NaN or infinite values on these data (in "
                             "kernel coordinates: centred, scaled): check it, or choose "
                             "another.")
        if not self.is_mmd and matrix.size and matrix.min() < 0:
            raise ValueError(f"{source} gives negative distances on these data: a "
                             "Wasserstein GEMINI needs a distance (a cost of at least 0).")
        if self.is_mmd and callable(self.kernel):
            self._check_spread(source, *diagonal_and_mean(matrix))
        return matrix

    @staticmethod
    def _check_spread(source, mean_diagonal, mean_entry, slack):
        """A callable kernel must tell the rows apart (:func:`diagonal_and_mean`)."""
        if mean_diagonal - mean_entry <= slack:
            raise ValueError(
                f"{source} is not a kernel that tells these data apart: its mean "
                f"diagonal entry ({mean_diagonal:.4g}) is not above its mean "
                f"entry ({mean_entry:.4g}), as a positive semi-definite kernel's is "
                "unless it maps every sample to one point (a distance, or a constant?). "
                "An MMD GEMINI needs a kernel; for distances use "
                "gemini='wasserstein_ovo' with metric=.")

    def kernel_features(self, inputs):
        """Nyström features of the rows, computed by blocks of CHUNK rows."""
        blocks = [self.nystroem.transform(self._in_landmarks_frame(
                      self._coordinates(rows), rows)).astype(inputs.dtype, copy=False)
                  for rows in (inputs.rows(slice(i, i + CHUNK))
                               for i in range(0, inputs.n_samples, CHUNK))]
        return (np.concatenate(blocks) if blocks
                else np.empty((0, self.nystroem.n_components), dtype=inputs.dtype))

    def _coordinates(self, inputs):
        """Rows in kernel coordinates: dense, or CSR where no centring is needed."""
        if self.is_mmd and self.kernel in NON_NEGATIVE_KERNELS:
            return inputs.dense() * self.kernel_weights + self.origin
        if inputs.offset is not None and self._translation_invariant:
            return inputs.data.multiply(self.kernel_weights.reshape(1, -1)).tocsr()
        return inputs.dense() * self.kernel_weights

    @property
    def _translation_invariant(self):
        if self.is_mmd:
            return self.kernel in TRANSLATION_INVARIANT_KERNELS
        return self.metric in TRANSLATION_INVARIANT_METRICS


def diagonal_and_mean(matrix):
    """A square matrix's mean diagonal entry, its mean entry, and the rounding slack
    of their difference. Twice the difference of a kernel matrix's is the mean
    squared distance between its rows in the kernel's feature space: at least 0
    for any positive semi-definite kernel, and 0 only where it maps every row to
    one point (every MMD is then 0); a distance matrix's is negative."""
    mean_diagonal, mean_entry = float(np.mean(np.diag(matrix))), float(np.mean(matrix))
    slack = np.sqrt(np.finfo(np.float64).eps) * (abs(mean_diagonal) + abs(mean_entry))
    return mean_diagonal, mean_entry, slack


def check_groups(groups, n_features):
    """Group index per feature, numbered 0 .. n_groups - 1 (the ``groups`` parameter)."""
    if groups is None:
        return np.arange(n_features), n_features
    groups = np.asarray(groups)
    if groups.shape != (n_features,):
        raise ValueError(
            f"groups must give one group per feature: shape ({n_features},), "
            f"got {groups.shape}."
        )
    if groups.dtype.kind in "fc" and not np.all(np.isfinite(groups)):
        raise ValueError("groups contains NaN or infinity: give every feature a group "
                         "(NaN entries made one group).")
    _, group = np.unique(groups, return_inverse=True)
    return group.astype(np.int64), int(group.max()) + 1

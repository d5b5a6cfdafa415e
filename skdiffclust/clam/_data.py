"""ClAM's view of its input: centred and scaled in float64, dense or sparse CSR.

ClAM is invariant to a shift of the data and equivariant to a global rescale: it
works on ``Z = (X - shift) / scale``, with ``shift`` the mean point and ``scale``
the root mean squared deviation of the coordinates, both computed in float64
before anything is cast to the float32 of training (a float32 cast of data far
from the origin would keep little of their spread). The spherical variant
(``metric='cosine'``) uses unit rows instead: directions need neither.

Every reduction over the points (the shift, the scale, the spread) goes block by
block of :data:`BLOCK_ROWS` rows in a fixed order, on the same dense float64
blocks whether ``X`` is a dense array or a sparse CSR matrix, so that the two give
the same bits; a sparse matrix is never densified as a whole.
"""

import numpy as np
import scipy.sparse as sp
from sklearn.preprocessing import normalize

from skdiffclust._utils._warn import warn_user

BLOCK_ROWS = 4096


class ScaledData:
    """Rows of ``(X - shift) / scale`` (or unit rows), dense float64 on demand.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features)
        Validated input (finite, float32 or float64).
    cosine : bool
        Unit rows, no shift, unit scale.
    shift, scale : ndarray of shape (n_features,) and float, optional
        Those of the training data (for new data); computed from ``X`` when absent.
    """

    def __init__(self, X, cosine, shift=None, scale=None):
        self.X = X
        self.cosine = cosine
        self.sparse = sp.issparse(X)
        self.n_samples, self.n_features = X.shape
        if shift is None:
            shift, scale = _shift_and_scale(self, cosine)
        self.shift = shift
        self.scale = float(scale)
        self._dense = None
        if not self.sparse:
            self._dense = self._transform(np.asarray(X, dtype=np.float64))

    def _transform(self, rows):
        """Raw float64 rows -> centred and scaled (or unit) rows."""
        if self.cosine:
            norms = np.sqrt(np.einsum("ij,ij->i", rows, rows))
            return rows / np.maximum(norms, np.finfo(np.float64).tiny)[:, None]
        return (rows - self.shift) / self.scale

    def _raw(self, rows):
        X = self.X[rows]
        return X.toarray().astype(np.float64, copy=False) if self.sparse else \
            np.asarray(X, dtype=np.float64)

    def block(self, start, stop):
        """Rows ``start:stop``, float64, C-contiguous."""
        if self._dense is not None:
            return self._dense[start:stop]
        return self._transform(self._raw(slice(start, stop)))

    def take(self, indices):
        """Rows at ``indices``, float64."""
        indices = np.asarray(indices, dtype=np.intp)
        if self._dense is not None:
            return self._dense[indices]
        return self._transform(self._raw(indices))

    def dense(self):
        """The whole float64 matrix for dense input, else None (use blocks)."""
        return self._dense

    def blocks(self):
        """``(start, stop, rows)`` over the points, :data:`BLOCK_ROWS` at a time."""
        for start in range(0, self.n_samples, BLOCK_ROWS):
            stop = min(start + BLOCK_ROWS, self.n_samples)
            yield start, stop, self.block(start, stop)

    def seeding_rows(self, indices):
        """Rows at ``indices`` for k-means++, which needs only their distances: the
        transformed rows of dense input; sparse rows stay sparse (uncentred: the
        same distances up to the global scale; unit rows for cosine)."""
        if not self.sparse:
            return self._dense[indices]
        rows = self.X[indices]
        return normalize(rows) if self.cosine else rows

    def float32_rows(self):
        """Dense float32 copy for training (dense input), or None (sparse)."""
        return None if self._dense is None else self._dense.astype(np.float32)

    def training_rows(self):
        """float32 rows for training: an array (dense input), or this row source."""
        rows = self.float32_rows()
        return self if rows is None else rows

    def inference_rows(self):
        """float64 rows for inference: an array (dense input), or this row source."""
        return self if self._dense is None else self._dense

    def column_reduction(self, name):
        """Column-wise mean, min or max of the transformed rows."""
        if name == "mean":
            total = np.zeros(self.n_features)
            for _, _, rows in self.blocks():
                total += rows.sum(axis=0)
            return total / max(self.n_samples, 1)
        reduce = np.minimum if name == "min" else np.maximum
        result = None
        for _, _, rows in self.blocks():
            extreme = rows.min(axis=0) if name == "min" else rows.max(axis=0)
            result = extreme if result is None else reduce(result, extreme)
        return result

    def nearest_squared_distances(self, centers):
        """Squared distance of every row to its nearest center (direct differences:
        no BLAS, so the same bits with any thread count)."""
        out = np.empty(self.n_samples)
        for start, stop, rows in self.blocks():
            out[start:stop] = squared_distances(rows, centers).min(axis=1)
        return out


def check_directions(X, metric, training=True):
    """For ``metric='cosine'``: refuse training data without a direction (all zero
    rows made training diverge, and the error blamed the learning rate), and warn
    of the zero rows among others: they have no direction either, and the
    dynamics from the origin give them all one cluster, whatever it holds."""
    if metric != "cosine":
        return
    zero = _zero_rows(X)
    if training and zero == X.shape[0]:
        raise ValueError("Every sample is a zero vector: metric='cosine' clusters "
                         "directions, and zero vectors have none.")
    if zero:
        warn_user(
            f"{zero} of the {X.shape[0]} samples are zero vectors: with "
            "metric='cosine' they have no direction, and all of them get the cluster "
            "the dynamics from the origin reach, whatever it holds. Drop them, or "
            "use metric='euclidean'.", UserWarning)


def _zero_rows(X):
    """The number of rows of X without a non-zero entry."""
    if sp.issparse(X):
        return int(np.count_nonzero(abs(X).sum(axis=1) == 0))
    return int(X.shape[0] - np.count_nonzero(np.any(X, axis=1)))


def dense_rows(X):
    """The training points as one float32 array, for a GPU: X itself (dense input)
    or a row source's blocks made dense (sparse input)."""
    if isinstance(X, np.ndarray):
        return np.ascontiguousarray(X, dtype=np.float32)
    return np.concatenate([block for _, _, block in X.blocks()]).astype(np.float32)


def squared_distances(rows, centers):
    """(m, k) squared distances by direct differences, in slices of rows."""
    out = np.empty((rows.shape[0], centers.shape[0]))
    step = max(1, (1 << 20) // max(centers.size, 1))
    for start in range(0, rows.shape[0], step):
        diff = rows[start:start + step, None, :] - centers[None, :, :]
        out[start:start + step] = np.einsum("ikj,ikj->ik", diff, diff)
    return out


def _shift_and_scale(data, cosine):
    """Mean point and root mean squared deviation, block by block in float64."""
    if cosine:
        return np.zeros(data.n_features), 1.0
    total = np.zeros(data.n_features)
    for start in range(0, data.n_samples, BLOCK_ROWS):
        total += data._raw(slice(start, min(start + BLOCK_ROWS, data.n_samples))).sum(axis=0)
    shift = total / max(data.n_samples, 1)
    # max-abs first, so that squaring cannot overflow before the mean is taken
    peak = 0.0
    for start in range(0, data.n_samples, BLOCK_ROWS):
        rows = data._raw(slice(start, min(start + BLOCK_ROWS, data.n_samples))) - shift
        peak = max(peak, float(np.max(np.abs(rows), initial=0.0)))
    if peak == 0.0:
        return shift, 1.0
    squares = 0.0
    for start in range(0, data.n_samples, BLOCK_ROWS):
        rows = (data._raw(slice(start, min(start + BLOCK_ROWS, data.n_samples))) - shift) / peak
        squares += float(np.einsum("ij,ij->", rows, rows))
    return shift, peak * float(np.sqrt(squares / (data.n_samples * data.n_features)))

"""How PRCut's built-in network reads the data: scaled features, or affinity rows.

Kept apart from the estimator (no torch): the graph is built from the scaled
features, the built-in network reads them standardised and the standardisation
is folded into its exported weights. A user's module (``PRCut(module=...)``) reads
the rows of X as given instead.
"""

import copy

import numpy as np
import scipy.sparse as sp
from sklearn.utils.sparsefuncs import mean_variance_axis

from skdiffclust._utils._validation import (
    center_and_scale,
    consistent_sparse_indices,
    constant_features,
)


class FeatureScaling:
    """How PRCut rescales features: one global scale for the kNN graph, one per
    feature for the network.

    The data are centred in float64 before any cast to the network's float32, so
    that an offset costs no precision, and divided by one global scale (the root
    mean squared deviation), so that the graph's metric is the data's whatever
    their units (``metric``). The network reads each feature standardised
    (``network_input``); sparse features are only divided by their standard
    deviation, never densified, and their centring ``offset = mean / std`` is
    subtracted inside the network's first layer.
    """

    def __init__(self, X):
        self.sparse = sp.issparse(X)
        if self.sparse:
            # scikit-learn's mean_variance_axis needs indices and indptr alike
            X = consistent_sparse_indices(sp.csr_matrix(X, dtype=np.float64))
            self.mean, variance = mean_variance_axis(X, axis=0)
            variance[constant_features(X)] = 0.0
            self.metric_scale = float(np.sqrt(np.mean(variance))) or 1.0
            self.metric = X * (1.0 / self.metric_scale)
            unit_std = np.sqrt(variance) / self.metric_scale
        else:
            self.metric, self.mean, self.metric_scale = center_and_scale(X)
            unit_std = self.metric.std(axis=0)
        self.identical = not np.any(unit_std > 0)
        unit_std[unit_std == 0] = 1.0
        self.unit_std = unit_std
        self.std = unit_std * self.metric_scale  # in the units of X
        self.offset = self.mean / self.std if self.sparse else None

    def applied_to(self, X):
        """This scaling (the mean and scales of the data it was made from) applied
        to other data X, whose own are not computed: ``partial_fit``'s later
        chunks are seen in the first chunk's units.

        Sparse scaling centres nothing (the network's first layer does); a dense
        chunk is then divided only, and a sparse chunk under dense scaling is
        densified (a chunk at a time).
        """
        scaling = copy.copy(self)
        if self.sparse and sp.issparse(X):
            X = consistent_sparse_indices(sp.csr_matrix(X, dtype=np.float64))
            scaling.metric = X * (1.0 / self.metric_scale)
            return scaling
        X = np.asarray(X.toarray() if sp.issparse(X) else X, dtype=np.float64)
        centre = 0.0 if self.sparse else self.mean
        scaling.metric = (X - centre) / self.metric_scale
        return scaling

    def without_data(self):
        """The scaling without the scaled data (``metric``): what a stream keeps."""
        scaling = copy.copy(self)
        scaling.metric = None
        return scaling

    def network_input(self):
        """Features standardised per feature (the dense ``metric`` is reused in place)."""
        if sp.issparse(self.metric):
            return sp.csr_matrix(self.metric @ sp.diags(1.0 / self.unit_std))
        self.metric /= self.unit_std
        return self.metric

    def on_raw_features(self, coefs, intercepts):
        """Weights on raw features: ``(x - mean) / std @ A + b = x @ A' + b'``."""
        first = coefs[0] / self.std[:, None]
        return [first, *coefs[1:]], [intercepts[0] - self.mean @ first, *intercepts[1:]]


class AffinityRows:
    """The network's input with ``affinity='precomputed'``: the rows, read by the
    built-in network divided by ``scale``, the power of two at their largest
    entry. An affinity's units are arbitrary, but the network's first layer is
    drawn for inputs of order 1: rows of weights of order 1e-5 gave it the same
    output for every sample, and the fit one cluster (``settings.input_scale``;
    ``FeatureBatches`` divides each batch)."""

    offset = None
    identical = False

    def __init__(self, X):
        self.X = X
        self.largest = largest_entry(X)
        self.scale = power_of_two_below(self.largest)

    def network_input(self):
        return self.X

    def on_raw_features(self, coefs, intercepts):
        """The network read the rows divided by ``scale`` (a power of two: exact)."""
        return [coefs[0] / self.scale, *coefs[1:]], intercepts


# a graph whose largest weight is within 2**+-60 of 1 trains as it is: float32
# adds up its blocks (up to 2**40 samples) without overflow or underflow
GRAPH_RANGE = 2.0 ** 60


def in_float32_range(graph, largest):
    """A precomputed graph (CSR or dense) whose ``largest`` weight is extreme,
    divided by a power of two (exact; a copy); others as they are. The training
    casts blocks of weights to float32 before dividing them by their total:
    weights of 1e100 became infinite, of 1e-200 zero."""
    if 1.0 / GRAPH_RANGE <= largest <= GRAPH_RANGE or largest == 0.0:
        return graph
    return graph * (1.0 / power_of_two_below(largest))


def power_of_two_below(value):
    """The power of two in (value / 2, value], 1 for 0: dividing by it is exact,
    and leaves weights whose largest is in [1, 2) (kernels, connectivities) as
    they are."""
    return float(2.0 ** np.floor(np.log2(value))) if value > 0 else 1.0


def largest_entry(X):
    """The largest absolute entry of a dense or sparse matrix, a block of rows at
    a time (no temporary of the size of a dense affinity)."""
    if sp.issparse(X):
        return float(abs(X).max()) if X.nnz else 0.0
    X = np.asarray(X)
    step = max(1, (1 << 22) // max(X.shape[1] if X.ndim > 1 else 1, 1))
    return max((float(np.abs(X[start:start + step]).max())
                for start in range(0, X.shape[0], step) if X[start:start + step].size),
               default=0.0)

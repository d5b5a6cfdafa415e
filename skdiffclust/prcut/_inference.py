"""The trained network's forward pass: the built-in network's in NumPy (predict needs
no torch, no GPU), a user's module in torch on the CPU."""

import math

import numpy as np
from numba import prange
from scipy.special import softmax

from skdiffclust._utils._count import COUNT_ATTRIBUTES, count_attributes  # noqa: F401
from skdiffclust._utils._count import fitted_count as count_of_fit
from skdiffclust._utils._numba import jit
from skdiffclust._utils._threads import one_blas_thread
from skdiffclust._utils._validation import warn_empty_clusters, warn_unclear_count
from skdiffclust.prcut._settings import FittedWith


def gelu(x):
    """The exact (erf) GELU, as torch.nn.GELU() computes it, of a 2-d float array,
    in place (the hidden layer is a fresh array): numba's threads over the rows,
    several times faster than SciPy's single-threaded ``erf`` (0.18 s for
    70,000 x 64)."""
    x = np.ascontiguousarray(x)
    _gelu_rows(x)
    return x


@jit(parallel=True)
def _gelu_rows(x):
    scale = 1.0 / math.sqrt(2.0)
    for i in prange(x.shape[0]):
        for j in range(x.shape[1]):
            value = x[i, j]
            x[i, j] = 0.5 * value * (1.0 + math.erf(value * scale))


def predict_logits(X, coefs, intercepts):
    """Logits of the network for dense or sparse X, in float64 (BLAS on one thread,
    whose results do not depend on the machine's thread count)."""
    hidden = X
    with one_blas_thread():
        for depth, (coef, intercept) in enumerate(zip(coefs, intercepts)):
            hidden = np.asarray(hidden @ coef) + intercept
            if depth < len(coefs) - 1:
                hidden = gelu(hidden)
    return hidden


def predict_probabilities(X, coefs, intercepts):
    """Assignment probabilities: the softmax of the logits."""
    return softmax(predict_logits(X, coefs, intercepts), axis=1)


def module_logits(module, X):
    """A module's logits of X (float64, on the CPU), all finite."""
    from skdiffclust._utils._torch import apply_in_batches

    logits = apply_in_batches(module, X, "cpu")
    if not np.all(np.isfinite(logits)):
        raise ValueError(
            "The trained module gives non-finite logits (NaN or infinity) for some "
            "rows of X; if its training diverged, lower learning_rate.")
    return logits


# the fitted attributes of the two kinds of network, and of the graph path (one per fit)
NETWORK_ATTRIBUTES = ("coefs_", "intercepts_", "module_", "module_outputs_", "X_fit_",
                      "_query_scaling")


def exported_network(weights, X, scaling, module):
    """The fitted network from exported weights (the built-in network's, moved
    onto raw features by ``scaling``, or ``module``'s state) and its labels of X,
    as ``predict`` gives them."""
    if module is None:
        weights = scaling.on_raw_features(*weights)
        return weights, predict_logits(X, *weights).argmax(1)
    from skdiffclust._utils._torch import module_from_state  # a user's module: torch

    network = module_from_state(module, weights)
    return network, module_logits(network, X).argmax(1)


def fitted_count(estimator):
    """The ``ClusterCount`` of a fitted estimator (``partial_fit``'s later calls
    keep the first call's)."""
    return count_of_fit(estimator, estimator._fitted_with.n_clusters)


def fitted_attributes(network, labels, graph, curve, *, count, gamma, module,
                      start, keep_all=False, X_fit=None):
    """PRCut's fitted attributes (by name) for a network and its ``labels`` of the
    samples of ``graph``, keeping the clusters some sample chose (the others are
    left out, with a warning): the built-in network's other output columns are
    dropped; a ``module``'s trained copy is kept whole, its outputs mapped to the
    clusters (``module_outputs_``); without a network (``network`` None, the
    graph path), the training samples ``X_fit`` its ``predict`` searches; what
    ``score`` reads of the fit, the graph's
    ``start`` settings (``_fitted_with``); with ``n_clusters='auto'``, the candidates and their
    scores (``count``, a ``ClusterCount``). ``keep_all``: keep every cluster (a
    chunk of ``partial_fit`` too small to fill them says nothing of them)."""
    from skdiffclust._graphcut._graph import partition_objective

    n_clusters = count.n_clusters
    if not count.clear:
        warn_unclear_count("PRCut", count, "the number after which the spectrum jumps most")
    used = np.arange(n_clusters) if keep_all else np.unique(labels)
    if used.size < n_clusters:
        warn_empty_clusters(
            "PRCut", used.size, n_clusters,
            cause="no training sample has the others as its most likely cluster, "
            "and they are removed", remedy="A larger balance (balanced clusters)",
            counted=count.candidates is not None)
    if network is None:  # X_fit: the training samples' FeatureScaling
        attributes = {"X_fit_": X_fit.metric, "_query_scaling": X_fit.without_data()}
    elif module is None:
        coefs, intercepts = network
        attributes = {"coefs_": [*coefs[:-1], coefs[-1][:, used]],
                      "intercepts_": [*intercepts[:-1], intercepts[-1][used]]}
    else:
        attributes = {"module_": network, "module_outputs_": used}
    labels = np.searchsorted(used, labels).astype(np.int64)
    return dict(attributes, labels_=labels, affinity_matrix_=graph,
                objective_=partition_objective(graph, labels, n_clusters, gamma),
                loss_curve_=curve, n_iter_=int(curve.shape[0]), n_clusters_=int(used.size),
                solver_="network" if network is not None else "graph",
                _fitted_with=FittedWith(start, n_clusters),
                **count_attributes(count))

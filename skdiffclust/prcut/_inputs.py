"""What PRCut's network reads and what its graph is built from (no torch).

The network reads X: rows of features (the built-in network), or, with a user's
``module``, any array whose first axis is the samples (images of shape (n, 28, 28)
or (n, 1, 28, 28)), passed to the module as it is. The graph is built from X
flattened, or from ``graph_input`` when ``fit`` is given one: other features of
the same samples (PCA, a pretrained embedding), or with ``affinity='precomputed'``
the affinity matrix itself; X is then only the network's input.
"""

import numpy as np
import scipy.sparse as sp

from skdiffclust._utils._validation import (
    check_array,
    check_magnitude,
    validate_data,
    warn_if_looks_like_distances,
)
from skdiffclust.prcut._graph import check_precomputed_affinity
from skdiffclust.prcut._scaling import AffinityRows, FeatureScaling

DTYPES = [np.float64, np.float32]


def check_samples(estimator, X, *, reset, ensure_min_samples=1):
    """X validated as the network's input (``reset``: in ``fit``, recording its shape).

    Two dimensions: scikit-learn's ``validate_data`` (dense or CSR, feature names).
    More, with a module: ``check_array(allow_nd=True)``; ``n_features_in_`` is then
    the number of values per sample, and later calls must give samples of the
    same shape. More without a module: a ValueError saying what to do.
    """
    with_module = estimator.module is not None if reset else hasattr(estimator, "module_")
    shape = getattr(estimator, "_sample_shape", None)
    n_dims = _n_dims(X)
    if n_dims > 2 and not with_module:
        raise ValueError(
            f"X has {n_dims} dimensions (shape {np.shape(X)}), but PRCut's built-in "
            "network reads rows of features, of shape (n_samples, n_features): "
            "flatten each sample (X.reshape(len(X), -1)), or pass a torch module "
            "that reads arrays of this shape (PRCut(module=...)).")
    if n_dims <= 2 and (reset or shape is None or len(shape) == 1):
        X = validate_data(estimator, X, accept_sparse="csr", dtype=DTYPES,
                          ensure_min_samples=ensure_min_samples, reset=reset)
        if reset:
            estimator._sample_shape = X.shape[1:]
        return X
    X = check_array(X, allow_nd=True, dtype=DTYPES, ensure_min_samples=ensure_min_samples)
    if reset:
        estimator.n_features_in_ = int(np.prod(X.shape[1:]))
        estimator._sample_shape = X.shape[1:]
        vars(estimator).pop("feature_names_in_", None)
    elif X.shape[1:] != shape:
        raise ValueError(
            f"X has samples of shape {X.shape[1:]}, but PRCut was fitted on samples "
            f"of shape {shape}.")
    return X


def _n_dims(X):
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


def x_is_affinity(estimator):
    """Whether the fitted estimator's X holds affinities (``affinity='precomputed'``
    without a ``graph_input``), not features."""
    return estimator.affinity == "precomputed" and not getattr(
        estimator, "_graph_input_used", False)


def flat(X):
    """The samples of X as rows (a view of a contiguous array)."""
    return X if sp.issparse(X) or X.ndim == 2 else X.reshape(X.shape[0], -1)


def check_graph_input(graph_input, n_samples, precomputed):
    """``fit``'s ``graph_input``: features of the same samples (dense or CSR), or
    with ``affinity='precomputed'`` their (n_samples, n_samples) affinity matrix."""
    graph_input = check_array(graph_input, accept_sparse="csr", dtype=DTYPES,
                              input_name="graph_input")
    if graph_input.shape[0] != n_samples:
        raise ValueError(
            f"graph_input must describe the samples of X: it has "
            f"{graph_input.shape[0]} rows, X has {n_samples} samples.")
    if precomputed:
        return check_precomputed_affinity(graph_input, name="graph_input")
    check_magnitude(graph_input, name="graph_input")
    return graph_input


def graph_source_and_input(X, graph_input, *, precomputed, builtin):
    """``(graph_source, network_scaling)``.

    ``graph_source`` is the affinity graph itself (precomputed) or the
    :class:`FeatureScaling` of the features it is built from; ``network_scaling``
    says how the network reads X: standardised features (built-in network),
    rows as they are (a module, or the rows of a precomputed affinity).
    """
    if precomputed:  # from PRCut.fit, through training_start
        warn_if_looks_like_distances(
            X if graph_input is None else graph_input,
            "X" if graph_input is None else "graph_input", kind="an affinity",
            consequence="PRCut would keep the most distant samples together",
            fix="an affinity, such as np.exp(-D**2 / D.var()),", stacklevel=6)
    if graph_input is None:
        if precomputed:
            return check_precomputed_affinity(X), AffinityRows(X)
        scaling = FeatureScaling(flat(X))
        return scaling, scaling if builtin else AffinityRows(X)
    graph_source = graph_input if precomputed else FeatureScaling(graph_input)
    return graph_source, FeatureScaling(X) if builtin else AffinityRows(X)


def score_graph_source(estimator, X, graph_input):
    """What ``score`` builds its graph from: ``graph_input`` when ``fit`` had one
    (required then), X otherwise (flattened; with ``affinity='precomputed'``, the
    queries' affinities to the training samples)."""
    if graph_input is None:
        if getattr(estimator, "_graph_input_used", False):
            raise ValueError(
                "PRCut was fitted with a graph_input: pass the queries' own to score "
                "(score(X, graph_input=...)).")
        return flat(X)
    graph_input = check_array(graph_input, accept_sparse="csr", dtype=DTYPES,
                              input_name="graph_input")
    if graph_input.shape[0] != X.shape[0]:
        raise ValueError(
            f"graph_input must describe the samples of X: it has "
            f"{graph_input.shape[0]} rows, X has {X.shape[0]} samples.")
    if estimator.affinity == "precomputed" \
            and graph_input.shape[1] != estimator.labels_.shape[0]:
        raise ValueError(
            f"With affinity='precomputed', graph_input holds the affinities of the "
            f"queries to the {estimator.labels_.shape[0]} training samples; got "
            f"shape {graph_input.shape}.")
    if estimator.affinity != "precomputed":
        check_magnitude(graph_input, name="graph_input")
    return graph_input

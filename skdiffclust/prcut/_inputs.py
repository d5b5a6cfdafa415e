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
    array_ndim,
    check_array,
    check_magnitude,
    validate_data,
    warn_if_looks_like_distances,
)
from skdiffclust._utils._scores import silhouette
from skdiffclust._utils._structure import warn_if_unstructured
from skdiffclust._graphcut._graph import bipartite_modularity, check_precomputed_affinity
from skdiffclust.prcut._scaling import (
    AffinityRows,
    FeatureScaling,
    in_float32_range,
    largest_entry,
)

DTYPES = [np.float64, np.float32]


def reads_rows(X, *, with_module, sample_shape=None):
    """Whether X is checked as rows of features, by scikit-learn's ``validate_data``
    (dense or CSR, feature names), or else as samples of any shape
    (:func:`check_nd_samples`).

    Rows: two dimensions, unless the fitted samples (``sample_shape``, ``None``
    in ``fit``) had more. More dimensions need a network that reads them
    (``with_module``): a ValueError saying what to do otherwise.
    """
    n_dims = array_ndim(X)
    if n_dims > 2 and not with_module:
        raise ValueError(
            f"X has {n_dims} dimensions (shape {np.shape(X)}), but PRCut's built-in "
            "network reads rows of features, of shape (n_samples, n_features): "
            "flatten each sample (X.reshape(len(X), -1)), or pass a torch module "
            "that reads arrays of this shape (PRCut(module=...)).")
    return n_dims <= 2 and (sample_shape is None or len(sample_shape) == 1)


def check_nd_samples(X, *, sample_shape=None, ensure_min_samples=1):
    """X as samples of any shape, for a module (``check_array(allow_nd=True)``);
    after ``fit``, samples of the fitted ``sample_shape``. Its number of features
    (``n_features_in_``) is then the number of values per sample."""
    X = check_array(X, allow_nd=True, dtype=DTYPES, ensure_min_samples=ensure_min_samples)
    if sample_shape is not None and X.shape[1:] != sample_shape:
        raise ValueError(
            f"X has samples of shape {X.shape[1:]}, but PRCut was fitted on samples "
            f"of shape {sample_shape}.")
    return X


def x_is_affinity(affinity, graph_input_used):
    """Whether X holds affinities (``affinity='precomputed'`` without a
    ``graph_input`` in ``fit``), not features."""
    return affinity == "precomputed" and not graph_input_used


def flat(X):
    """The samples of X as rows (a view of a contiguous array)."""
    return X if sp.issparse(X) or X.ndim == 2 else X.reshape(X.shape[0], -1)


def check_stream_affinity(affinity):
    """``partial_fit`` reads features: a ValueError for ``affinity='precomputed'``."""
    if affinity == "precomputed":
        raise ValueError(
            "partial_fit needs features: with affinity='precomputed' the network's "
            "input is a row of affinities to the training samples, which a stream "
            "does not keep. Use fit.")


def check_fit_inputs(X, graph_input, *, affinity):
    """``fit``'s X (values whose squared distances stay finite, unless X holds
    affinities) and its ``graph_input`` (:func:`check_graph_input`, ``None``
    when not given)."""
    if not x_is_affinity(affinity, graph_input is not None):
        check_magnitude(X)
    if graph_input is None:
        return None
    return check_graph_input(graph_input, X.shape[0], affinity == "precomputed")


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
            fix="an affinity, such as np.exp(-D**2 / D.var()),")
    if graph_input is None:
        if precomputed:
            graph, rows = check_precomputed_affinity(X), AffinityRows(X)
            return in_float32_range(graph, rows.largest), rows
        scaling = FeatureScaling(flat(X))
        return scaling, scaling if builtin else AffinityRows(X)
    graph_source = in_float32_range(graph_input, largest_entry(graph_input)) \
        if precomputed else FeatureScaling(graph_input)
    return graph_source, FeatureScaling(X) if builtin else AffinityRows(X)


def validated_queries(estimator, X):
    """The X of ``predict``, ``predict_proba`` and ``transform``, validated as the
    fitted ``estimator`` reads it: features of finite squares, or with
    ``affinity='precomputed'`` non-negative affinities to the training samples."""
    X = check_samples(estimator, X, reset=False)
    if x_is_affinity(estimator._fitted_with.start.affinity,
                     getattr(estimator, "_graph_input_used", False)):
        return check_query_affinities(X)
    check_magnitude(X)
    return X


def check_query_affinities(A, name="X"):
    """Queries' affinities to the training samples (``affinity='precomputed'``):
    non-negative, as ``fit``'s are, or a ValueError; a sign mistake (``-D``) gave
    other labels without a word."""
    values = A.data if sp.issparse(A) else A
    if values.size and values.min() < 0:
        raise ValueError(
            f"With affinity='precomputed', {name} holds the queries' affinities to the "
            f"training samples, which must be non-negative as fit's were; its smallest "
            f"entry is {values.min():.4g}.")
    return A


def score_graph_source(X, graph_input, *, precomputed, graph_input_used, n_train,
                       graph_width=None):
    """What ``score`` builds its graph from: ``graph_input`` when ``fit`` had one
    (``graph_input_used``: required then, of fit's ``graph_width`` features), X
    otherwise (flattened; with ``affinity='precomputed'``, the queries' affinities
    to the ``n_train`` training samples)."""
    if graph_input is None:
        if graph_input_used:
            raise ValueError(
                "PRCut was fitted with a graph_input: pass the queries' own to score "
                "(score(X, graph_input=...)); in a model search, route it with "
                "sklearn.set_config(enable_metadata_routing=True) and "
                "PRCut(...).set_fit_request(graph_input=True)"
                ".set_score_request(graph_input=True).")
        return flat(X)
    if not graph_input_used:  # it was scored in another space than fit's graph
        raise ValueError(
            "PRCut was fitted without a graph_input: score builds its graph from X, as "
            "fit did; leave graph_input out.")
    graph_input = check_array(graph_input, accept_sparse="csr", dtype=DTYPES,
                              input_name="graph_input")
    if graph_input.shape[0] != X.shape[0]:
        raise ValueError(
            f"graph_input must describe the samples of X: it has "
            f"{graph_input.shape[0]} rows, X has {X.shape[0]} samples.")
    if precomputed and graph_input.shape[1] != n_train:
        raise ValueError(
            f"With affinity='precomputed', graph_input holds the affinities of the "
            f"queries to the {n_train} training samples; got "
            f"shape {graph_input.shape}.")
    if precomputed:
        check_query_affinities(graph_input, "graph_input")
    elif graph_width is not None and graph_input.shape[1] != graph_width:
        raise ValueError(
            f"graph_input has {graph_input.shape[1]} features, but the graph_input of "
            f"fit had {graph_width}: pass the queries' in the same features.")
    else:
        check_magnitude(graph_input, name="graph_input")
    return graph_input


def check_samples(estimator, X, *, reset, ensure_min_samples=1):
    """X validated as PRCut's network reads it (:func:`reads_rows`: rows of
    features, or any samples for a module), its shape recorded on ``estimator`` in
    ``fit`` and ``partial_fit``'s first call (``reset``)."""
    shape = None if reset else getattr(estimator, "_sample_shape", None)
    if reads_rows(X, with_module=estimator.module is not None if reset
                  else hasattr(estimator, "module_"), sample_shape=shape):
        X = validate_data(estimator, X, accept_sparse="csr", dtype=DTYPES,
                          ensure_min_samples=ensure_min_samples, reset=reset)
    else:
        X = check_nd_samples(X, sample_shape=shape, ensure_min_samples=ensure_min_samples)
        if reset:
            estimator.n_features_in_ = int(np.prod(X.shape[1:]))
            vars(estimator).pop("feature_names_in_", None)
    if reset:
        estimator._sample_shape = X.shape[1:]
    return X


def score_of_predictions(estimator, X, labels, graph_input):
    """``PRCut.score``: the silhouette of the partition ``labels`` of the queries X
    (validated) in the features the fit's graph was built from, or with
    ``affinity='precomputed'`` Barber's modularity of their affinities to the
    training samples."""
    if X.shape[0] < 2:
        raise ValueError(f"score needs at least 2 samples, got {X.shape[0]}.")
    fitted = estimator._fitted_with  # the fit's graph, whatever set_params
    source = score_graph_source(
        X, graph_input, precomputed=fitted.start.affinity == "precomputed",
        graph_input_used=getattr(estimator, "_graph_input_used", False),
        n_train=estimator.labels_.shape[0],
        graph_width=getattr(estimator, "_graph_input_width", None))
    if fitted.start.affinity == "precomputed":
        return bipartite_modularity(source, labels, estimator.labels_, fitted.n_clusters)
    return silhouette(source, labels)


def warn_if_no_clusters(estimator, X, graph_input, count):
    """``fit``'s warning where the data (X, or ``graph_input``) show no clusters
    (``_utils._structure.warn_if_unstructured``); returns the estimator."""
    warn_if_unstructured("PRCut", None if estimator.affinity == "precomputed" else (
        X if graph_input is None else graph_input), estimator.labels_, count,
        estimator.random_state)
    return estimator

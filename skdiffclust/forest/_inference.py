"""What a fitted SpanningForestClustering applies without torch.

The indexes of ``predict`` and ``score`` (a new sample joins the tree of its most
similar training sample), the score itself, and the NumPy forward pass of the
``'linear'`` and ``'mlp'`` embeddings, whose weights are NumPy arrays so that a
fitted model loads and predicts without PyTorch.
"""

import numpy as np
from sklearn.metrics import pairwise_distances

from skdiffclust._neighbors import same_neighbours_on_any_threads
from skdiffclust._utils._threads import host_threads
from skdiffclust._utils._validation import check_spread
from skdiffclust.forest._solver import neighbour_search

# rows embedded at a time by the NumPy forward pass (bounds its temporaries)
EMBED_BATCH = 1 << 16


class NeighbourIndex:
    """Nearest training samples of queries, by indexes built on first use and kept.

    Held by the estimator (whose attributes ``predict`` must not change); the
    indexes are not pickled but rebuilt, once, after unpickling. ``score`` adds one
    index per cluster.
    """

    def __init__(self, X, metric, metric_params, n_jobs):
        self.X, self.metric, self.metric_params, self.n_jobs = X, metric, metric_params, n_jobs
        self._search = None
        self._per_cluster = None

    def _new_search(self, X):
        return neighbour_search(self.metric, self.metric_params, self.n_jobs).fit(X)

    def _kneighbors(self, search, queries, **kwargs):
        """``search.kneighbors(queries)``: the same nearest sample (among equally
        near ones) on any number of threads."""
        with same_neighbours_on_any_threads(queries.shape[0], search.n_samples_fit_,
                                            host_threads(self.n_jobs)):
            return search.kneighbors(queries, **kwargs)

    def nearest(self, queries, return_distance=False):
        """Index of the nearest training sample of each query (and its distance)."""
        if self._search is None:
            self._search = self._new_search(self.X)
        if not return_distance:
            return self._kneighbors(self._search, queries, return_distance=False)[:, 0]
        distance, index = self._kneighbors(self._search, queries)
        return index[:, 0], distance[:, 0]

    def other_cluster_distance(self, queries, labels, own):
        """Distance of each query to its nearest training sample outside cluster ``own``."""
        if self._per_cluster is None:
            self._per_cluster = [self._new_search(self.X[labels == c])
                                 for c in range(int(labels.max()) + 1)]
        best = np.full(queries.shape[0], np.inf)
        for c, search in enumerate(self._per_cluster):
            outside = own != c
            if outside.any():
                distance = self._kneighbors(search, queries[outside])[0][:, 0]
                best[outside] = np.minimum(best[outside], distance)
        return best

    def __getstate__(self):
        return {**vars(self), "_search": None, "_per_cluster": None}


def dense_layers(state):
    """(weight, bias) of each layer of a 'linear' or 'mlp' embedding, in order."""
    if "weight" in state:
        return [(state["weight"], state["bias"])]
    indices = sorted(int(name.split(".")[0]) for name in state if name.endswith(".weight"))
    return [(state[f"{i}.weight"], state[f"{i}.bias"]) for i in indices]


def numpy_embedding(state, X):
    """The 'linear' / 'mlp' embedding of X with NumPy: linear layers, ReLU between.

    Computed in X's dtype (float32 or float64), in row batches.
    """
    layers = [(W.astype(X.dtype, copy=False), b.astype(X.dtype, copy=False))
              for W, b in dense_layers(state)]
    out = np.empty((X.shape[0], layers[-1][0].shape[0]), dtype=X.dtype)
    for start in range(0, X.shape[0], EMBED_BATCH):
        h = X[start : start + EMBED_BATCH]
        for i, (W, b) in enumerate(layers):
            h = h @ W.T + b
            if i < len(layers) - 1:
                np.maximum(h, 0, out=h)
        out[start : start + EMBED_BATCH] = h
    return out


def embed(X, state, template, sample_shape=None):
    """X embedded by the trained weights: NumPy for 'linear' / 'mlp', torch for a
    user module (``template``, fed samples of ``sample_shape`` if not None)."""
    if template is None:
        return numpy_embedding(state, X)
    from skdiffclust.forest._embedding import apply_module  # torch: a user's module

    return apply_module(template, state, X, sample_shape)


def input_units(X, edges, weights, unit, metric, metric_params, raw):
    """What divides distances computed on ``X`` (the training features ``raw``
    times ``unit``, a power of two: ``_utils._validation.spread_unit``) to give
    them in the units of ``raw``: ``unit`` to the metric's degree of homogeneity,
    measured on the forest's longest edge (1 for Euclidean or Manhattan distances,
    0 for cosine ones). A metric of no such degree (a callable) cannot work on
    rescaled data: ``check_spread``'s ValueError, saying to rescale."""
    if unit == 1.0 or edges.shape[0] == 0:
        return 1.0
    a, b = X[edges[np.argmin(weights)]]  # weights: minus the distances
    d = np.diagonal(pairwise_distances(np.stack([a, 2.0 * a]), np.stack([b, 2.0 * b]),
                                       metric=metric, **(metric_params or {})))
    degree = np.log2(d[1] / d[0]) if d[0] > 0 else 1.0
    if not any(np.isclose(degree, (0.0, 1.0, 2.0), rtol=0, atol=1e-9)):
        check_spread(raw)
    return unit ** round(float(degree))


class SimilarityIndex:
    """:class:`NeighbourIndex`'s queries on precomputed similarities to the training
    samples (``metric='precomputed'``), distances being minus similarities."""

    def nearest(self, similarities, return_distance=False):
        index = np.argmax(similarities, axis=1)
        if not return_distance:
            return index
        return index, -similarities.max(axis=1)

    def other_cluster_distance(self, similarities, labels, own):
        outside = labels[None, :] != own[:, None]
        return -np.where(outside, similarities, -np.inf).max(1)


def gap_score(separation, kept, own, other):
    """``(separation - spread) / (|separation| + |spread|)`` of
    :meth:`SpanningForestClustering.score`: the training forest's separation and
    kept edge lengths, each new sample's distance to its own cluster and to the
    nearest other one."""
    separation = min(separation, float(other.min(initial=np.inf)))
    spread = max(float(kept.max(initial=-np.inf)), float(own.max(initial=-np.inf)))
    if not np.isfinite(spread):  # no edge and no sample: nothing is bridged
        spread = 0.0
    scale = abs(separation) + abs(spread)
    return float((separation - spread) / scale) if scale > 0 else 0.0

"""PRCut's choice among trained networks (``n_init``), without torch.

Kept apart from the estimator; ``_estimator`` (``fit``) and ``_stream``
(``partial_fit``'s first chunk) use it.
"""

import numpy as np

from skdiffclust._graphcut._graph import partition_objective

# a candidate network replaces the kept one when its objective is lower by more than
# this fraction
SELECTION_MARGIN = 1e-3


def partition_rank(graph, labels, n_clusters, gamma):
    """``(unused clusters, objective)`` of a candidate's partition of the graph:
    partitions using every cluster first, as asked; then the objective."""
    unused = n_clusters - np.unique(labels).size
    return unused, partition_objective(graph, labels, n_clusters, gamma)


def clearly_better(rank, best):
    """Whether ``(unused clusters, objective)`` beats ``best`` beyond the margin:
    near-ties are decided by the order of the candidates, not the data's last bits."""
    if rank[0] != best[0]:
        return rank[0] < best[0]
    return rank[1] < best[1] - SELECTION_MARGIN * abs(best[1])


def check_finite(weights):
    """Built-in ``(coefs, intercepts)`` or a module's state: all finite."""
    arrays = weights.values() if isinstance(weights, dict) else [*weights[0], *weights[1]]
    if not all(np.all(np.isfinite(a)) for a in arrays):
        raise FloatingPointError(
            "PRCut's training diverged (non-finite weights); lower learning_rate."
        )


def keep_best(candidates, graph, n_clusters, gamma):
    """The weights and the payload of the first best candidate, of the ``(weights,
    labels, payload)`` given in order: the one whose partition of the graph uses
    the most clusters, then has the lowest objective; a later candidate replaces
    the kept one only if its objective is lower by more than ``SELECTION_MARGIN``
    (relative), so that near-ties are decided by the order of the candidates
    (the spectral start first), not by the data's last bits."""
    best = None
    for weights, labels, payload in candidates:
        check_finite(weights)
        rank = partition_rank(graph, labels, n_clusters, gamma)
        if best is None or clearly_better(rank, best[0]):
            best = (rank, weights, payload)
    return best[1], best[2]

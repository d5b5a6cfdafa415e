"""PRCut without a network (``solver='graph'``): the objective descended on the
whole graph from the better of two starts, and new samples assigned by their
nearest training samples. Imports no torch (the start, computed before, needs it).

On a table that fits in memory, fitting a network to the start and training it
by mini-batches (``solver='network'``, the paper's) costs seconds where the
graph and its spectral start cost tenths; the network's partition of the
training samples was within 0.003 of the start's mean ARI on the development
batteries. Here the start is the spectral start or the partition of the graph's
spanning tree by Genie's rule (``_graphcut._tree``), whichever has the lower
objective, and sweeps of single-sample moves then descend the objective
(``_graphcut._descent``) until no move lowers it.
"""


import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.neighbors import NearestNeighbors

from skdiffclust._graphcut._descent import ObjectiveDescent
from skdiffclust._graphcut._duplicates import find_copies
from skdiffclust._graphcut._selection import partition_rank
from skdiffclust._graphcut._tree import tree_partition
from skdiffclust._training._loop import SettledWhen, TrainingSession, run_epochs
from skdiffclust._utils._threads import one_blas_thread
from skdiffclust._utils._warn import warn_user

# the spanning tree's partition replaces the spectral start where its objective is
# at most this share of the start's: on the development batteries every ratio from
# 0 to 0.8 chose the same three (0.69 to 0.79; flame, engytime, ionosphere), and
# the middle of that range leaves the published start where the two are near
TREE_START_RATIO = 0.9


def graph_start(graph, features, spectral_labels, n_clusters, gamma):
    """The spectral start's labels, or the spanning tree's partition where it uses
    as many clusters and its objective on the graph is at most
    :data:`TREE_START_RATIO` times theirs."""
    tree = tree_partition(graph, features, n_clusters)
    if tree is None:
        return spectral_labels
    unused, objective = partition_rank(graph, tree, n_clusters, gamma)
    spectral_unused, spectral_objective = partition_rank(graph, spectral_labels, n_clusters, gamma)
    if unused <= spectral_unused and objective < TREE_START_RATIO * spectral_objective:
        return tree
    return spectral_labels


def descend(graph, labels, settings, name="PRCut"):
    """Sweeps of :class:`~skdiffclust._graphcut._descent.ObjectiveDescent` from
    ``labels`` until one moves no sample, at most ``settings.max_iter`` (then a
    ConvergenceWarning). Returns the labels and the objective after each sweep."""
    descent = ObjectiveDescent(graph, labels, settings.n_clusters, settings.gamma)
    # the engine's loop and bar: its rule holds from the first sweep (a patience of
    # 0), and the descent has converged once a sweep moves no sample
    with TrainingSession(name, verbose=settings.verbose, total=settings.max_iter,
                         warn=False) as session:
        result = run_epochs(descent.sweep, max_iter=settings.max_iter, tol=0.0,
                            n_iter_no_change=0, name=name, session=session,
                            hooks=[SettledWhen(lambda: descent.moves == 0)])
    if not result.converged:  # the engine's wording speaks of tol, unused here
        warn_user(
            f"{name} ran max_iter={settings.max_iter} sweeps of its descent on the graph "
            f"and the last still moved {descent.moves} samples: increase max_iter.",
            ConvergenceWarning)
    return descent.labels, result.loss_curve


def fit_on_graph(begun, settings):
    """The labels of the training samples and the loss curve of a graph-path fit
    from ``begun`` (a ``_start.TrainingStart``): the graph's whole components
    where they are the clusters, else the descent from :func:`graph_start`;
    copies of a sample in its cluster."""
    if begun.whole:
        return np.asarray(begun.initial_labels, dtype=np.int64), np.empty(0)
    features = begun.scaling.metric
    labels = graph_start(begun.graph, features, begun.initial_labels,
                         settings.n_clusters, settings.gamma)
    labels, curve = descend(begun.graph, labels, settings)
    return copies_together(labels, features, begun.scaling.identical), curve


def copies_together(labels, features, identical):
    """``labels`` with every copy of a sample in its first copy's cluster (all
    samples in the first's where they are ``identical``), as a network, which
    cannot tell copies apart, would put them."""
    if identical:
        return np.full_like(labels, labels[0])
    copies = find_copies(features)
    return labels if copies is None else labels[copies.first][copies.point]


def neighbour_votes(X_fit, labels, n_clusters, X, n_neighbors):
    """Each query's share of votes for each cluster among its ``n_neighbors``
    nearest training samples ``X_fit`` (Euclidean, exact, in one BLAS thread),
    or the cluster of the training sample it equals."""
    n_neighbors = min(n_neighbors, X_fit.shape[0])
    with one_blas_thread():
        search = NearestNeighbors(n_neighbors=n_neighbors).fit(X_fit)
        distances, neighbours = search.kneighbors(X)
    votes = np.zeros((X.shape[0], n_clusters))
    rows = np.repeat(np.arange(X.shape[0]), n_neighbors)
    np.add.at(votes, (rows, labels[neighbours].ravel()), 1.0 / n_neighbors)
    equal = distances[:, 0] == 0.0  # a training sample itself: its own cluster
    votes[equal] = np.eye(n_clusters)[labels[neighbours[equal, 0]]]
    return votes

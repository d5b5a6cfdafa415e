"""Merging the clusters of a partition along a graph: the count of
DeepImageClustering's ``n_clusters='auto'``, which trains on more clusters than
it expects and merges those its network does not keep apart.

Two clusters are *linked* by the share of the smaller one's edges that go to the
other: ``w(a, b) / min(vol(a), vol(b))``, where ``w(a, b)`` is the weight of the
edges between them and ``vol`` a cluster's weighted degree (0 for clusters no
edge joins, 1 where every edge of the smaller cluster leads into the other).
Pieces of one class, cut apart by an over-clustered network, keep many of their
nearest-neighbour edges across the cut; distinct classes few. Where the
network's *moves* are given too (how often a random view of an image of one
cluster lands in the other: a piece of a class is a few degrees of rotation or a
stroke's width away from the next piece, another class is not), the link is the
mean of the two shares. The pair most strongly linked is merged, and the links
recomputed, until the strongest link is below a threshold (:data:`MERGE_LINK`):
the number of clusters then is the count. The merges go on to
:data:`MIN_CLUSTERS` clusters, so that the strongest link at every number of
clusters is kept as the count's evidence. Costs O(k^3) for k clusters (k at most
``max_clusters``), after one pass over the graph's edges. Imports no torch.
"""

from typing import NamedTuple

import numpy as np

# the threshold of the strongest link below which merging stops. Chosen on the
# image battery's tuning half (benchmarks/_image_battery.py) by the mean NMI of
# the merged partitions of networks trained on 50 clusters, the exact numbers
# breaking ties. Links of the kNN graph alone: on the first eleven sets 0.873 at
# 0.02, 0.890 to 0.893 from 0.03 to 0.04, 0.886 at 0.05; on all fourteen run,
# 0.839 at 0.02, 0.859 to 0.865 from 0.03 to 0.04, 0.857 at 0.05 (0.035 kept
# then). With the network's moves (the mean of the two links, as fit merges): on
# the fourteen, 0.865 at 0.0225, 0.868 at 0.025 and 0.0275, 0.867 at 0.03 (six
# exact numbers, five at 0.025 and 0.0275, four with the graph alone), 0.866 at
# 0.0325, 0.864 at 0.0375; fit's own views (other draws) at 0.03: six exact,
# 0.863 (see the user guide)
MERGE_LINK = 0.03
# the count stands out where its strongest link is at most this share of the
# threshold (otherwise a ClusterCountWarning). On the tuning half's fourteen
# sets fitted, seven of the ten counts above it were wrong, one of the four below
MERGE_CLEAR = 0.5
# the fewest clusters n_clusters='auto' returns
MIN_CLUSTERS = 2


class MergeSequence(NamedTuple):
    """What :func:`merge_clusters` found: ``groups``, the merged cluster of each
    cluster (0 .. ``n_clusters - 1``, numbered in the order of their smallest
    member); ``n_clusters``, their number; ``candidates``, every number of
    clusters the merges passed through (increasing, :data:`MIN_CLUSTERS` to the
    clusters given); ``links``, the strongest link between the clusters at each;
    and whether the count is ``clear``."""

    groups: np.ndarray
    n_clusters: int
    candidates: np.ndarray
    links: np.ndarray
    clear: bool


def cluster_weights(graph, labels, n_clusters):
    """The (n_clusters, n_clusters) weights of the edges of ``graph`` (a
    symmetric sparse affinity) within and between the clusters of ``labels``."""
    edges = graph.tocoo()
    weights = np.zeros((n_clusters, n_clusters))
    np.add.at(weights, (labels[edges.row], labels[edges.col]), edges.data)
    return weights


def link_strengths(weights):
    """The link of each pair of clusters (see the module's docstring), from
    their edge ``weights``; the diagonal is -inf (a cluster is not merged with
    itself)."""
    volumes = weights.sum(1)
    smaller = np.minimum.outer(volumes, volumes)
    links = np.divide(weights, smaller, out=np.zeros_like(weights), where=smaller > 0)
    np.fill_diagonal(links, -np.inf)
    return links


def move_weights(labels, moved, n_clusters):
    """The (n_clusters, n_clusters) symmetric count of moves: image i of cluster
    ``labels[i]`` seen in cluster ``moved[v, i]`` by view v (``moved`` of shape
    (n_views, n); a view outside the clusters, -1, is not counted), plus its
    transpose, so that the moves' link (:func:`link_strengths`) is the share of
    the smaller cluster's moves that go to or come from the other."""
    counts = np.zeros((n_clusters, n_clusters))
    for view in np.atleast_2d(moved):
        kept = view >= 0
        np.add.at(counts, (labels[kept], view[kept]), 1.0)
    return counts + counts.T


def merged_pair(weights, a, b):
    """``weights`` with cluster ``b`` added into cluster ``a`` (a < b), row and
    column ``b`` removed."""
    weights = weights.copy()
    weights[a] += weights[b]
    weights[:, a] += weights[:, b]
    return np.delete(np.delete(weights, b, 0), b, 1)


def merge_clusters(graph, labels, n_clusters, *, moves=None, min_link=MERGE_LINK):
    """Merge the clusters of ``labels`` (0 .. ``n_clusters - 1``, each
    non-empty) along ``graph`` while the strongest link is at least ``min_link``
    (ties: the pair of lowest indices). ``moves``, where given, is an
    (n_clusters, n_clusters) symmetric count of the network's moves between
    clusters (:func:`move_weights`); the link is then the mean of the graph's
    and the moves'. The count stands out where its strongest link is at most
    :data:`MERGE_CLEAR` times ``min_link``; where every number down to
    :data:`MIN_CLUSTERS` is linked more than ``min_link``, the count is
    :data:`MIN_CLUSTERS`, not clear.

    Returns
    -------
    MergeSequence
    """
    stacked = [cluster_weights(graph, labels, n_clusters)]
    if moves is not None:
        stacked.append(np.array(moves, dtype=np.float64))
    members = [[c] for c in range(n_clusters)]
    links_at, chosen = {}, None
    while True:
        links = np.mean([link_strengths(weights) for weights in stacked], axis=0)
        count = len(members)
        strongest = float(links.max()) if count > 1 else 0.0
        links_at[count] = strongest
        if chosen is None and strongest < min_link:
            chosen = [list(group) for group in members]
        if count <= MIN_CLUSTERS:
            break
        a, b = np.unravel_index(np.argmax(links), links.shape)
        a, b = min(a, b), max(a, b)
        stacked = [merged_pair(weights, a, b) for weights in stacked]
        members[a] += members.pop(b)
    if chosen is None:  # linked at every number: the fewest
        chosen = members
    groups = np.empty(n_clusters, dtype=np.int64)
    for index, group in enumerate(sorted(chosen, key=min)):
        groups[group] = index
    candidates = np.array(sorted(links_at), dtype=np.int64)
    links = np.array([links_at[c] for c in candidates])
    found = len(chosen)
    return MergeSequence(groups, found, candidates, links,
                         bool(links_at[found] <= MERGE_CLEAR * min_link))

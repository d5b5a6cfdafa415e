"""DeepImageClustering's ``n_clusters='auto'``: the network is trained on more
clusters than the images are expected to hold (``max_clusters``), and its clusters
are then merged along the nearest-neighbour graph of its embedding and the
network's moves between them under random views of the images
(``_graphcut._merge``): each output belongs to one cluster (``output_clusters``),
whose probability is the sum of its outputs'. The merged partition is then the
start of a network trained on it (``_fit.refit_network``), with one output per
cluster, in whose embedding the number is refined by the silhouette and the
clusters become the nearest centres (``_centres``); ``occupied_first`` numbers a
network's clusters as the estimator does.

Why over-cluster and merge rather than count first: the images' graph features
(gradient histograms) tell coarse groups well and classes of many (30 to 40
pairs of digits side by side) poorly, and every criterion read from their graph
counted too few there; a network trained on 50 clusters separates such classes
(NMI 0.87 on 40 classes of 25 images, against 0.81 at the count of the graph),
and pieces of one class stay joined in its embedding. Why the moves too: the
network cuts a class where its images vary the way a view varies them (a few
degrees of slant, a stroke's width), so the views of a piece's images land in
the next piece; on the tuning half, the graph alone linked such pieces no more
than distinct classes (0.013 to 0.019 on MNIST's test images, 4 and 9 at 0.019).
Imports no torch.
"""

import numpy as np

from skdiffclust._graphcut._graph import affinity_from_neighbors
from skdiffclust._graphcut._merge import merge_clusters, move_weights
from skdiffclust._neighbors import kneighbors
from skdiffclust._utils._count import ClusterCount


def merged_outputs(embedding, proba, *, n_neighbors, moved=None, device=None,
                   n_threads=1):
    """Each head output's cluster after merging, and the count.

    The training images' clusters (the head's most probable outputs) are merged
    along the symmetric kNN graph of their ``embedding`` (``n_neighbors``; an
    exact search, on ``device`` where it is CUDA) and, where ``moved`` is given
    (the most probable output of every image under each of a few random views,
    shape (n_views, n)), the network's moves between them. An output no
    training image goes to joins the cluster whose images give it the most
    probability.

    Returns
    -------
    output_clusters : ndarray of int64, shape (n_outputs,)
    count : ClusterCount
        The number found; candidates, every number the merges passed through, and
        scores, the strongest link between the clusters at each (lower: more
        apart).
    """
    labels = proba.argmax(1)
    occupied, compact = np.unique(labels, return_inverse=True)
    n_neighbors = min(n_neighbors, embedding.shape[0] - 1)
    _, neighbours = kneighbors(np.asarray(embedding, dtype=np.float64), n_neighbors,
                               algorithm="exact", device=device, n_jobs=n_threads)
    graph = affinity_from_neighbors(np.zeros(neighbours.shape), neighbours)
    moves = None
    if moved is not None:  # outputs no training image chose count for none
        cluster_of = np.full(proba.shape[1], -1, dtype=np.int64)
        cluster_of[occupied] = np.arange(occupied.size)
        moves = move_weights(compact, cluster_of[np.asarray(moved)], occupied.size)
    sequence = merge_clusters(graph, compact, occupied.size, moves=moves)
    output_clusters = np.full(proba.shape[1], -1, dtype=np.int64)
    output_clusters[occupied] = sequence.groups
    merged = sequence.groups[compact]
    for output in np.flatnonzero(output_clusters < 0):
        mass = np.bincount(merged, proba[:, output], minlength=sequence.n_clusters)
        output_clusters[output] = int(np.argmax(mass))
    output_clusters = _every_cluster_chosen(proba, output_clusters)
    count = ClusterCount(int(output_clusters.max()) + 1, sequence.candidates,
                         sequence.links, sequence.clear)
    return output_clusters, count


def _every_cluster_chosen(proba, output_clusters):
    """``output_clusters`` such that every cluster is the most probable of some
    training image: a merged cluster that none chooses (its outputs' summed
    probability lost everywhere) joins the cluster whose images give its
    outputs the most probability; the clusters are then numbered 0, 1, ...
    in their order."""
    while True:
        labels = merge_columns(proba, output_clusters).argmax(1)
        n_clusters = int(output_clusters.max()) + 1
        empty = np.setdiff1d(np.arange(n_clusters), labels)
        if empty.size == 0:
            return output_clusters
        outputs = output_clusters == empty[0]
        mass = np.bincount(labels, proba[:, outputs].sum(1), minlength=n_clusters)
        mass[empty[0]] = -1.0
        output_clusters = output_clusters.copy()
        output_clusters[outputs] = int(np.argmax(mass))
        output_clusters = np.unique(output_clusters, return_inverse=True)[1].astype(np.int64)


def merge_columns(proba, output_clusters):
    """The clusters' probabilities: the sum of their outputs' (``proba``'s
    columns). The identity mapping returns ``proba`` itself."""
    n_clusters = int(output_clusters.max()) + 1
    if n_clusters == output_clusters.size and \
            np.array_equal(output_clusters, np.arange(n_clusters)):
        return proba
    merged = np.zeros((proba.shape[0], n_clusters), dtype=proba.dtype)
    for output, cluster in enumerate(output_clusters):
        merged[:, cluster] += proba[:, output]
    return merged


def occupied_first(state, labels):
    """The training ``labels`` numbered 0 .. n_clusters_ - 1: where clusters stay
    empty, the kept head's outputs are reordered in ``state`` (occupied clusters
    first, in their order), so that ``predict`` and ``predict_proba`` agree with
    the labels. Without empty clusters, nothing changes."""
    n_outputs = state["heads.0.bias"].shape[0]
    occupied = np.unique(labels)
    if occupied.size == n_outputs:
        return labels.astype(np.int64)
    order = np.concatenate([occupied, np.setdiff1d(np.arange(n_outputs), occupied)])
    for name in ("heads.0.weight", "heads.0.bias"):
        state[name] = np.ascontiguousarray(state[name][order])
    return np.searchsorted(occupied, labels).astype(np.int64)

"""How DeepImageClustering trains: one frozen record, built once by ``fit`` from the
parameters and passed down whole to the training (``_fit``), every ``'auto'``
resolved here (``max_iter`` from the data's size, ``n_eigenvectors`` by
PRCut's rule on the start's graph, ``n_clusters`` as the number trained on,
merged after training (``_merge``), ``channels`` from the images' shape:
:func:`channels_layout`). Imports no torch."""

import math
from dataclasses import dataclass

from skdiffclust._utils._threads import host_threads
from skdiffclust._graphcut._start import resolve_start

# 'auto' max_iter: about this many steps of the clustering phase in all (at
# least MIN_EPOCHS epochs): 4 epochs of 60,000 images in batches of 256, 140 of
# scikit-learn's 1,797 digits
CLUSTERING_STEPS = 1000
MIN_EPOCHS = 3
# n_clusters='auto' with max_iter='auto': the first network's clustering phase
# (on max_clusters clusters) runs at most OVER_CLUSTER_STEPS steps, but never
# fewer than OVER_CLUSTER_EPOCHS epochs, so that sets of 67 batches or more
# (17,152 images in batches of 256) keep their whole schedule. Its objective
# keeps falling by about 1% an epoch long after a fit on fewer clusters stops
# (34 to 61 epochs of 2,000 to 5,000 images on the tuning half, against 12 to 34
# given the number): so capped, the count's CPU time fell by a fifth there, its
# mean NMI and exact numbers unchanged. Capped at 15 or 25 epochs instead, sets
# of many small classes (few steps an epoch) were counted too few
OVER_CLUSTER_STEPS = 300
OVER_CLUSTER_EPOCHS = 15

# channels='auto': the channel counts read on an image's last axis (grey, RGB,
# RGBA: as PIL, imageio and matplotlib give images)
LAST_AXIS_CHANNELS = (1, 3, 4)

# n_clusters='auto': the network trains on max_clusters clusters (at most an
# integer n_eigenvectors and the images less one), which are then merged along
# the kNN graph of its embedding (deep/_merge.py). Counting first, on the graph
# of the gradient histograms (by the stability of its partitions, as PRCut
# counts images), counted too few where classes are many: 5 for 32 pairs of
# images, 2 for 40 pairs of small classes (see the user guide)

# n_clusters='auto' merges along a kNN graph of at least this many neighbours
MIN_MERGE_NEIGHBORS = 3


def over_clusters(max_clusters, n_eigenvectors, n_samples):
    """The number of clusters ``n_clusters='auto'`` trains on: ``max_clusters``,
    at most an integer ``n_eigenvectors`` and ``n_samples - 1``."""
    bound = max_clusters if n_eigenvectors == "auto" else min(max_clusters, n_eigenvectors)
    return int(max(min(bound, n_samples - 1), 1))


def over_cluster_epochs(steps_per_epoch):
    """The most epochs of the first network's clustering phase with
    ``n_clusters='auto'`` and ``max_iter='auto'``: :data:`OVER_CLUSTER_STEPS`
    steps, at least :data:`OVER_CLUSTER_EPOCHS` epochs."""
    return max(OVER_CLUSTER_EPOCHS, math.ceil(OVER_CLUSTER_STEPS / steps_per_epoch))


def merge_neighbors(n_neighbors, n_samples, n_clusters):
    """The neighbours of the graph ``n_clusters='auto'`` merges along:
    ``n_neighbors``, at most half the mean size of the ``n_clusters`` clusters
    trained on, at least :data:`MIN_MERGE_NEIGHBORS` (and at most the images
    less one).

    Why at most half a cluster's size: a cluster of m images keeps at most m - 1
    of an image's neighbours, so with more neighbours than its images every
    small cluster is linked to the next whatever the data (10 neighbours merged
    40 classes of 10 images into 2 on the tuning half; 4 neighbours, into 17).
    """
    bound = max(MIN_MERGE_NEIGHBORS, n_samples // (2 * n_clusters))
    return int(max(min(n_neighbors, bound, n_samples - 1), 1))


def channels_layout(axes, channels):
    """Where the channels of a 3-axis image shape ``axes`` are, 'first' or 'last';
    ``None`` where ``'auto'`` reads it both ways.

    ``channels='auto'`` reads two signs: a channel count of grey, RGB or RGBA
    (1, 3 or 4) on one end and not on the other, and square images (height equal
    to width) on one reading and not on the other, so that 5 or 6 channels last
    of square images, ``(8, 8, 5)``, are not read as 8 channels of 8 x 5 pixels.
    With a count on both ends, the squares decide; where the signs disagree, or
    neither speaks and the last axis, shorter than the first, could hold the
    channels, it reads both ways; where neither speaks otherwise, channels first
    (as torch holds images).
    """
    if channels != "auto":
        return channels
    count, square = _count_sign(axes), _square_sign(axes)
    if count == "both":
        return square
    signs = {sign for sign in (count, square) if sign}
    if len(signs) == 1:
        return signs.pop()
    if signs or axes[2] < axes[0]:
        return None
    return "first"


def _count_sign(axes):
    """'first' or 'last' where one end of ``axes`` holds 1, 3 or 4 and the other
    not, 'both' where both do, None where neither does."""
    first, last = (axes[i] in LAST_AXIS_CHANNELS for i in (0, 2))
    return ("both" if first else None) if first == last else "last" if last else "first"


def _square_sign(axes):
    """'first' or 'last' where the images are square read one way only."""
    square_first, square_last = axes[1] == axes[2], axes[0] == axes[1]
    return None if square_first == square_last else "first" if square_first else "last"


@dataclass(frozen=True)
class Augmentation:
    """The ranges of the weak random view of an image (``_augment``); the strong
    view doubles them.

    Attributes
    ----------
    rotation : float
        Largest rotation, in degrees (uniform in [-rotation, rotation]).
    scale : float
        Largest relative change of size (a factor uniform in [1 - scale, 1 + scale]).
    shift : float
        Largest translation, as a fraction of the image's side.
    """

    rotation: float = 15.0
    scale: float = 0.1
    shift: float = 0.1


@dataclass(frozen=True)
class DeepSettings:
    """The training's settings (every ``'auto'`` resolved, :meth:`of`;
    ``n_eigenvectors``' on the start's graph, :meth:`resolved_start`)."""

    n_clusters: int
    n_neighbors: int
    n_eigenvectors: object  # int or 'auto'
    n_heads: int
    gamma: float
    batch_size: int
    learning_rate: float
    max_iter: int  # the clustering phase's epochs (with 'auto': the first network's)
    # max_iter='auto' is a schedule (a fixed number of steps, as IIC's and SCAN's
    # epochs), not a cap on a training expected to converge: no ConvergenceWarning
    scheduled: bool
    tol: float
    n_iter_no_change: int
    self_labelling: int
    confidence: float
    augmentation: Augmentation
    max_side: object = 32  # int or None: the network reduces larger images
    device: object = "cpu"
    n_threads: int = 1
    verbose: bool = False
    max_clusters: int = 50
    # n_clusters='auto': n_clusters is the number trained on, merged after training
    # along a kNN graph of merge_neighbors neighbours
    merge: bool = False
    merge_neighbors: int = 0
    # n_clusters='auto': the epochs of the second network's clustering phase
    refit_max_iter: int = 0

    @classmethod
    def of(cls, estimator, n_samples):
        """A DeepImageClustering estimator's settings for ``n_samples`` images (a
        ValueError where ``n_eigenvectors`` is below ``n_clusters``): the batches
        at most the images, ``max_iter='auto'`` about :data:`CLUSTERING_STEPS`
        steps (at least :data:`MIN_EPOCHS` epochs), a schedule; ``n_eigenvectors``
        at most the images (``'auto'`` is resolved on the graph,
        :meth:`resolved_start`). Needs torch (the device)."""
        n_clusters, n_eigenvectors = estimator.n_clusters, estimator.n_eigenvectors
        if n_eigenvectors != "auto" and n_clusters != "auto" and \
                n_eigenvectors < n_clusters:
            raise ValueError(
                f"n_eigenvectors={n_eigenvectors} is smaller than n_clusters="
                f"{n_clusters}: the spectral start needs at least one eigenvector "
                "per cluster.")
        batch_size = min(estimator.batch_size, n_samples)
        steps_per_epoch = max(n_samples // batch_size, 1)
        scheduled = estimator.max_iter == "auto"
        max_iter = (max(MIN_EPOCHS, math.ceil(CLUSTERING_STEPS / steps_per_epoch))
                    if scheduled else estimator.max_iter)
        refit_max_iter = max_iter
        from skdiffclust._utils._optional import import_optional

        import_optional("torch", "DeepImageClustering")
        from skdiffclust._utils._torch import resolve_device

        merge = n_clusters == "auto"
        if merge:
            n_clusters = over_clusters(estimator.max_clusters, n_eigenvectors, n_samples)
            if scheduled:
                max_iter = min(max_iter, over_cluster_epochs(steps_per_epoch))
        return cls(
            n_clusters=n_clusters, n_neighbors=estimator.n_neighbors,
            n_eigenvectors=(n_eigenvectors if n_eigenvectors == "auto"
                            else min(n_eigenvectors, n_samples)),
            n_heads=estimator.n_heads, gamma=float(estimator.balance),
            batch_size=batch_size, learning_rate=float(estimator.learning_rate),
            max_iter=int(max_iter), scheduled=scheduled, tol=float(estimator.tol),
            n_iter_no_change=int(estimator.n_iter_no_change),
            self_labelling=int(estimator.self_labelling),
            confidence=float(estimator.confidence),
            augmentation=Augmentation(rotation=float(estimator.max_rotation),
                                      scale=float(estimator.max_scale),
                                      shift=float(estimator.max_shift)),
            max_side=None if estimator.max_side is None else int(estimator.max_side),
            device=resolve_device(estimator.device),
            n_threads=host_threads(estimator.n_jobs), verbose=bool(estimator.verbose),
            max_clusters=int(estimator.max_clusters), merge=merge,
            merge_neighbors=(merge_neighbors(estimator.n_neighbors, n_samples, n_clusters)
                             if merge else 0),
            refit_max_iter=int(refit_max_iter))

    def resolved_start(self, n_clusters, graph):
        """The spectral start on ``graph`` (a ``_graphcut._measures.GraphMeasures``): the
        shared-neighbour weights, which undo the hubs of features in many
        dimensions, ``n_eigenvectors`` resolved by PRCut's rule
        (``_graphcut._start.resolve_start``); asked once per fit."""
        return resolve_start("spectral_snn", self.n_eigenvectors, n_clusters, graph)

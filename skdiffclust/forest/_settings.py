"""The settings of learning through clustering, in one frozen record (no torch import).

:class:`SpanningForestClustering` builds an :class:`EmbeddingSettings` once per
``fit`` (``_embedding_settings``), from its validated parameters and the values it
derives from them (the training seed, the resolved device, the solver's threads,
below), and passes it whole to :func:`skdiffclust.forest._embedding.train_embedding`.
Its ``'auto'`` values are decided here: ``device`` by :func:`training_device`,
``algorithm`` (the spanning tree's) by :func:`tree_algorithm` and, for the
trees of must-link groups, :func:`subset_algorithm`, ``n_clusters`` by
:func:`counted` from the edges of the spanning tree (or of the forest of the
fewest trees the constraints allow).
"""

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from skdiffclust._utils._count import ClusterCount, counts_clusters
from skdiffclust._utils._random import numpy_generator
from skdiffclust._utils._warn import warn_user
from skdiffclust.exceptions import InfeasibleConstraintsWarning
from skdiffclust.forest._constraints import UNLABELLED


# algorithm='auto': the k-d tree for Euclidean metrics up to this many features;
# beyond, Prim's O(n^2 d) sweep is faster
AUTO_KD_TREE_MAX_FEATURES = 8
# must-link groups smaller than this get Prim's tree: a k-d tree's set-up took about
# 2 ms per group (10,000 groups of 2 points: 17 s against 0.1 s)
SMALL_SUBSET = 512


def tree_algorithm(algorithm, n_features, *, scalar_difference, euclidean):
    """How the spanning tree of feature vectors is built: ``'kd_tree'`` and
    ``'prim'`` as given; ``'auto'``: ``'sort'`` for one feature whose distance is
    ``|x - y|`` (``scalar_difference``), the k-d tree for a Euclidean metric
    (``euclidean()``, asked only then) in 2 to :data:`AUTO_KD_TREE_MAX_FEATURES`
    features, else ``'prim'``."""
    if algorithm != "auto":
        return algorithm
    if n_features == 1 and scalar_difference:
        return "sort"
    if euclidean() and 2 <= n_features <= AUTO_KD_TREE_MAX_FEATURES:
        return "kd_tree"
    return "prim"


def subset_algorithm(algorithm, n_points):
    """The algorithm of the tree of a must-link group of ``n_points``: groups are
    small, so Prim (O(m^2 d), no set-up) up to :data:`SMALL_SUBSET` points, where
    a k-d tree's set-up (OpenMP threads) costs more; then ``'auto'``
    (:func:`tree_algorithm`), or ``'prim'`` as asked."""
    return "prim" if algorithm == "prim" or n_points < SMALL_SUBSET else "auto"


# device='auto' trains the built-in embeddings ('linear', 'mlp') on the CPU at these
# batch sizes (half-open ranges), on CUDA otherwise. Measured on an H100 (16-core
# host), digits, 'mlp', 100 perturbations, ms an epoch on CUDA against the CPU:
# batch 64, 86 against 181 (2026-11-26 evening: the forests solved on the host's 16
# cores beside CUDA's steps; 246 against 206 on one core); 128, 214 against 170 (the
# device solver, below); 192, 95 against 222 (132 against 226 in the evening); 256, 91
# against 309; 1024, 35 against 1,580. The H100's batch 128 was kept on the CPU until
# the H200 (2026-11-27, benchmarks/results/gpu.csv, 8 epochs each) measured it at 97
# ms on CUDA against 224, and batch 64 at 100 against 138: the newer measurement, of
# the code as it stands, decides. Below 64 (not measured) a step is a few launches
# more than the CPU's whole step. A user's module (a CNN) stays on CUDA, where its
# own layers weigh more: LeNet-5 at batch 64, 5.4 ms a step against 7.0.
CPU_BATCH_SIZES = ((1, 64),)


def training_device(device, embedding, batch_size):
    """The torch device that trains ``embedding`` for the estimator's ``device``
    (``'auto'``: CUDA where available, but the CPU for the built-in embeddings at
    the batch sizes :data:`CPU_BATCH_SIZES`). Imports torch."""
    import torch

    from skdiffclust._utils import _torch

    resolved = _torch.resolve_device(device)
    if (device == "auto" and resolved.type == "cuda" and isinstance(embedding, str)
            and any(low <= batch_size < high for low, high in CPU_BATCH_SIZES)):
        return torch.device("cpu")
    return resolved


@dataclass(frozen=True)
class EmbeddingSettings:
    """How an embedding is trained with the perturbed partial Fenchel-Young loss.

    The estimator's parameters of the same names (``seed`` is the training seed
    derived from ``random_state``); ``device`` is resolved (``'cpu'``, ``'cuda'``
    or a ``torch.device``). ``device_solver``: solve the forests with the device
    solver (``_gpu``); ``None`` means when ``device`` is CUDA and the batch has
    ``DEVICE_SOLVER_MIN_BATCH_SIZE`` samples or more. On CPU tensors it
    runs on numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``), which is how the
    CUDA path is tested without a GPU. ``steps_per_epoch``: batches per epoch
    (``None``: ``ceil(n / batch_size)``). ``solver_threads``: numba's threads for
    the CPU solver (torch's CPU steps run on one thread,
    :func:`~skdiffclust._utils._torch.one_thread`).
    """

    n_clusters: int
    epsilon: float
    n_perturbations: int
    batch_size: int
    max_iter: int
    learning_rate: float
    tol: float
    n_iter_no_change: int
    device: object
    seed: int
    verbose: bool = False
    weight_decay: float = 0.0
    learning_rate_schedule: str = "constant"
    steps_per_epoch: int | None = None
    solver_threads: int = 1
    device_solver: bool | None = None


def hold_out(X, labels, fraction, seed):
    """Early stopping's split: ``fraction`` of the labelled samples, drawn at random,
    are held out of training; returns the training samples, their labels and the
    held-out ``(X_val, y_val)``."""
    labelled = np.flatnonzero(labels != UNLABELLED)
    n_held = int(np.ceil(fraction * labelled.size))
    if n_held < 2 or labelled.size - n_held < 2:
        raise ValueError(
            f"early_stopping holds out validation_fraction={fraction:g} of the "
            f"{labelled.size} labelled samples: it needs at least 2 held out and 2 "
            "left to train on. Label more samples, change validation_fraction, or "
            "set early_stopping=False.")
    held = np.zeros(labels.size, dtype=bool)
    held[numpy_generator(seed).choice(labelled, n_held, replace=False)] = True
    return X[~held], labels[~held], (X[held], labels[held])


# n_clusters='auto': the candidate k at which the spanning tree's edge lengths, sorted
# from the heaviest, h_1 >= h_2 >= ..., fall most in ratio, log(h_(k-1) / h_k): the
# gap between the lightest edge the k-forest removes and the heaviest it keeps (the
# forest's own criterion: a k-forest is the tree less its k - 1 heaviest edges).
# Lengths are floored at COUNT_FLOOR times the heaviest, so that the duplicates'
# zero lengths give finite ratios. No constant was tuned: measured with scipy's
# single linkage on the evaluation batteries (wut, graves, other), mean ARI 0.480
# against 0.466 at the true number of clusters (see the user guide)
COUNT_FLOOR = 1e-12


class CountedForests(Protocol):
    """What :func:`counted` reads of an input (``_solver.FeatureForests`` and
    ``SimilarityForests``): the forest of the fewest trees the constraints allow,
    the spanning tree, and the similarity from which edge lengths are measured (0
    for features, whose similarity is minus the distance)."""

    n_samples: int
    similarity_reference: float

    def fewest(self):
        """A ``_solver.SpanningForest``."""

    def tree(self):
        """The spanning tree, ``(src, dst, distance)`` (minus similarity)."""


def counted(n_clusters, max_clusters, forests):
    """``n_clusters`` as an integer, and how it was found.

    ``n_clusters='auto'``: from the forest of the fewest trees the constraints
    allow (``forests.fewest()``, the spanning tree without constraints), the
    candidate of highest :func:`count_scores` (the smallest of equal scores)
    among :func:`count_candidates`. An edge's length is
    ``forests.similarity_reference`` minus its similarity: its distance for
    features, the largest similarity minus its own for a similarity matrix. The
    must-link edges, which every forest keeps, are not read; the fewest number
    itself (with constraints) compares the heaviest edge kept with the heaviest
    edge of the spanning tree the constraints cut.

    Returns
    -------
    count : ClusterCount
    """
    if not counts_clusters(n_clusters):
        return ClusterCount(n_clusters)
    fewest = forests.fewest()
    reference = forests.similarity_reference
    lengths = np.sort(reference - fewest.weights[fewest.n_fixed:])[::-1]
    n_fewest = fewest.n_clusters
    if n_fewest > max_clusters:
        warn_user(
            f"The cannot-link constraints keep {n_fewest} clusters apart, more than "
            f"max_clusters={max_clusters} (n_clusters='auto'); returning {n_fewest} "
            "clusters.", InfeasibleConstraintsWarning)
    candidates = count_candidates(max_clusters, n_fewest, lengths.size)
    if candidates.size == 0:  # nothing to compare: the fewest, two with two samples,
        # the only number, unscored
        n_clusters = min(max(2, n_fewest), forests.n_samples)
        return ClusterCount(n_clusters, np.array([n_clusters]), np.full(1, np.nan))
    cut = np.inf
    if n_fewest > 1:
        src, dst, dist = forests.tree()
        cut = reference + float(dist[fewest.labels[src] != fewest.labels[dst]].max())
    scores = count_scores(lengths, cut)[candidates - n_fewest]
    return ClusterCount(int(candidates[int(np.argmax(scores))]), candidates, scores)


def count_candidates(max_clusters, n_fewest, n_removable):
    """The numbers of clusters ``n_clusters='auto'`` chooses among: from 2, or the
    fewest the constraints allow (``n_fewest``, the lower end even beyond
    ``max_clusters``), to ``max_clusters``, and at most the numbers whose forest
    keeps one of the ``n_removable`` edges a larger forest may drop (``n_samples -
    1`` without constraints)."""
    low = max(2, n_fewest)
    high = min(max(max_clusters, low), n_fewest + n_removable - 1)
    return np.arange(low, high + 1)


def count_scores(lengths, cut):
    """The score of each number of clusters ``n_fewest + j``, j = 0 .. m - 1, from
    the ``m`` lengths of the edges the forests drop, heaviest first (h_1 >= ... >=
    h_m): ``log(h_j / h_(j+1))``, the lightest edge removed against the heaviest
    kept, with ``h_0 = cut``, the heaviest tree edge between the fewest trees
    (infinite for one tree), floored at :data:`COUNT_FLOOR` times the heaviest
    finite length."""
    values = np.concatenate([[cut], np.asarray(lengths, dtype=np.float64)])
    finite = values[np.isfinite(values)]
    largest = float(finite.max()) if finite.size else 0.0
    floored = np.maximum(values, max(COUNT_FLOOR * largest, np.finfo(np.float64).tiny))
    with np.errstate(over="ignore"):
        return np.log(floored[:-1] / floored[1:])

"""DeepImageClustering's training: the graph, the start, and three phases on the engine.

1. **The graph and the start.** The kNN graph of the images' gradient
   histograms (``_features``), and the partition spectral clustering reads off
   its shared-neighbour weights (PRCut's start, ``'spectral_snn'``: of
   ``n_eigenvectors`` eigenvectors, or of the width its objective picks).
2. **Warm-up** (:class:`PartitionTask`, up to ``WARMUP_STEPS`` steps in whole
   epochs, ending earlier once its loss stops falling): every head learns the
   start by cross-entropy on weak views of the images, so that the network
   begins where spectral clustering ends.
3. **Clustering** (:class:`PairTask`, up to ``max_iter`` epochs, the engine's
   stopping rule): each step pairs a batch of images with one partner each,
   drawn from the image's neighbours in the graph or, with probability
   ``SELF_PAIR_FRACTION``, the image itself; both are seen through independent
   weak views, and each head minimises PRCut's bound of the ratio cut
   (:class:`skdiffclust.torch.PRCutLoss`) of the graph of these pairs, plus
   ``balance`` times the KL divergence of the batch's cluster proportions from
   uniform. The pairs are the graph's edges, drawn one per image, plus the
   edges from each image to its other views: the partition the heads learn
   keeps neighbours together and does not change when an image moves a little.
   The head of the lowest objective over the last epoch is kept.
4. **Self-labelling** (:class:`SelfLabelTask`, ``self_labelling`` epochs,
   SCAN's last step with FixMatch's views): images whose weak view the network
   assigns with probability above ``confidence`` are taught that cluster from a
   strong view, their cross-entropy weighted by one over their cluster's count
   among the confident ones (so that large clusters do not grow by it). Its
   network is kept only if its partition of the images has an objective on
   the graph (PRCut's, at hard assignments: ratio cut plus ``balance`` times the
   KL term) no higher than the clustering phase's: on 600 digits one epoch of
   it emptied a cluster (ACC 0.84 to 0.73), which the objective sees.

With ``n_clusters='auto'`` the network is trained on more clusters than
expected, which the estimator merges (``_merge``); :func:`refit_network` then
trains a fresh network on the merged clusters, phases 2 to 4 with the merged
partition as the start, on the same graph.
"""

import copy
from dataclasses import replace
from typing import NamedTuple

import numpy as np
import torch
from torch.nn import functional as F

from skdiffclust._neighbors import kneighbors
from skdiffclust._training._torch import (TrainOptions, UniformBatches, one_thread,
                                          torch_threads, train)
from skdiffclust._utils._scores import silhouette
from skdiffclust._utils._torch import float32_by_default, make_generator
from skdiffclust.deep._augment import strong_view, weak_view
from skdiffclust.deep._features import graph_features
from skdiffclust.deep._network import build_network, evaluate
from skdiffclust._graphcut._graph import affinity_from_neighbors, partition_objective
from skdiffclust._graphcut._loss import EdgeBlock, PRCutLoss
from skdiffclust._graphcut._measures import GraphMeasures, spectral_start

# the probability that an image's partner is another view of itself rather than
# one of its neighbours
SELF_PAIR_FRACTION = 0.5
# the rate of PRCut's moving average of the cluster proportions (its default)
MOMENTUM = 0.8
# the warm-up's steps, at most (in whole epochs, at least one: one of 60,000
# images), ended earlier by the engine's rule at WARMUP_TOL and WARMUP_PATIENCE
# (the defaults of tol and n_iter_no_change, not the user's: those are the
# clustering phase's, and tol=0.2 cut the warm-up to 24 steps, ARI 0.68 on 600
# digits where 168 steps gave 0.75, as 200 did). A
# network that has not learnt the start begins the clustering phase from a
# partition of its own: on 500 digits, 7 warm-up steps left it at ACC 0.41 to
# 0.51 (the start's 0.89) and the clustering phase ended at 0.76; 105 steps
# reproduced the start (0.89) and it ended at 0.92
WARMUP_STEPS = 200
WARMUP_TOL, WARMUP_PATIENCE = 1e-3, 5
# n_clusters='auto': the random weak views of every training image whose
# clusters the merge reads (deep/_merge.py); four forward passes over the images
MERGE_VIEWS = 4


class PartitionTask:
    """The warm-up: every head learns ``labels`` by cross-entropy on weak views,
    each cluster weighted by one over its size (so that the network learns the
    start's small clusters too: unweighted, on Fashion-MNIST, a cluster of 545
    of the 60,000 images was lost in the warm-up, and the fit ended with 9)."""

    def __init__(self, network, images, labels, augmentation, generator):
        self.network, self.images = network, images
        self.labels = torch.as_tensor(labels, device=images.device)
        self.augmentation, self.generator = augmentation, generator
        counts = torch.bincount(self.labels, minlength=network.heads[0].out_features)
        counts = counts.to(torch.float32)
        self.weights = torch.where(counts > 0, counts.sum() / counts.clamp_min(1.0)
                                   / counts.count_nonzero(), 0.0)

    def parameters(self):
        return self.network.parameters()

    def loss(self, batch):
        views = weak_view(self.images[batch], self.augmentation, self.generator)
        _, logits = self.network.all_logits(views)
        target = self.labels[batch]
        total = sum(F.cross_entropy(head, target, weight=self.weights) for head in logits)
        return total, total.detach() / len(logits)


class PairTask:
    """The clustering phase: PRCut's bound on pairs (image, neighbour or itself),
    each seen through its own weak view, one :class:`PRCutLoss` per head. The
    objective is one value per head (the engine stops on their sum)."""

    def __init__(self, network, images, neighbours, settings, generator):
        self.network, self.images, self.neighbours = network, images, neighbours
        self.settings, self.generator = settings, generator
        device = images.device
        self.criteria = [PRCutLoss(settings.n_clusters, gamma=settings.gamma,
                                   momentum=MOMENTUM, device=device)
                         for _ in range(settings.n_heads)]
        self._blocks = {}

    def parameters(self):
        return self.network.parameters()

    def _block(self, size):
        """The graph of the step's pairs: left sample i joined to right sample i."""
        if size not in self._blocks:
            device = self.images.device  # all three on it (CUDA crashed without)
            index = torch.arange(size, device=device)
            self._blocks[size] = EdgeBlock(index, index, torch.ones(size, device=device),
                                           size, size, torch.float32)
        return self._blocks[size]

    def partners(self, batch):
        """One partner per image: a random neighbour, or itself."""
        size = batch.shape[0]
        device = batch.device
        pick = torch.randint(0, self.neighbours.shape[1], (size,), generator=self.generator,
                             device=device)
        itself = torch.rand(size, generator=self.generator, device=device) < SELF_PAIR_FRACTION
        return torch.where(itself, batch, self.neighbours[batch, pick])

    def loss(self, batch):
        size = batch.shape[0]
        both = torch.cat([batch, self.partners(batch)])
        views = weak_view(self.images[both], self.settings.augmentation, self.generator)
        _, logits = self.network.all_logits(views)
        block = self._block(size)
        objectives = []
        for head, criterion in zip(logits, self.criteria):
            proba = torch.softmax(head, 1)
            objectives.append(criterion(proba[:size], proba[size:], block))
        stacked = torch.stack(objectives)
        return stacked.sum(), stacked.detach()


class SelfLabelTask:
    """Self-labelling: the confident weak views' clusters, taught from strong views.

    The network runs in evaluation mode throughout: its batch normalisation keeps
    the statistics of the clustering phase's weak views. Left to follow the strong
    views (rotated twice as far, a square erased), the statistics moved away from
    those of the images themselves, and the partition of the unmoved images
    degraded: on MNIST's 60,000 images, ACC 0.981 before two epochs, 0.967
    after, one cluster gathering the others' strays.
    """

    def __init__(self, network, images, settings, generator):
        self.network, self.images = network, images
        self.settings, self.generator = settings, generator
        network.eval()

    def parameters(self):
        return self.network.parameters()

    def loss(self, batch):
        images = self.images[batch]
        ranges = self.settings.augmentation
        with torch.no_grad():
            proba = torch.softmax(self.network(weak_view(images, ranges, self.generator)), 1)
        confidence, target = proba.max(1)
        confident = (confidence > self.settings.confidence).to(proba.dtype)
        counts = torch.zeros(proba.shape[1], device=proba.device).index_add_(
            0, target, confident)
        weights = confident / counts.clamp_min(1.0)[target]
        weights = weights / weights.sum().clamp_min(1e-12) * confident.sum()
        logits = self.network(strong_view(images, ranges, self.generator))
        total = (F.cross_entropy(logits, target, reduction="none") * weights).sum()
        total = total / confident.sum().clamp_min(1.0)
        return total, total.detach()


def graph_of(images, n_neighbors, feature_seed, n_threads, device=None):
    """The neighbour lists (n, n_neighbors) of the images' graph features (at most
    n - 1 neighbours) and the symmetric kNN graph; the exact search runs on
    ``device`` when it is CUDA (torch, blockwise), else on the host."""
    features = graph_features(images, feature_seed, device=device)
    n_neighbors = min(n_neighbors, images.shape[0] - 1)
    _, neighbours = kneighbors(features, n_neighbors, algorithm="exact", device=device,
                               n_jobs=n_threads)
    return neighbours, affinity_from_neighbors(np.zeros(neighbours.shape), neighbours)


def feature_silhouette(images, labels, *, feature_seed, n_threads):
    """The silhouette of the partition ``labels`` of the (n, C, H, W) float32
    images (scaled) in their graph features, computed as a fit on the CPU computes
    them, whatever device the fit ran on (``score``: the same number on any
    machine): a space that does not depend on the number of clusters, so that
    fits with different numbers compare."""
    with float32_by_default(), torch_threads(n_threads):
        features = graph_features(images, feature_seed)
    return silhouette(features, labels)


def start_of(images, settings, *, feature_seed, start_seed):
    """The neighbour lists (n, n_neighbors) of the images' graph features, the
    symmetric kNN graph, the spectral start's labels (PRCut's start from the
    graph's shared-neighbour weights, which undo the hubs of features in many
    dimensions, its width chosen by the objective for ``'auto'``). On CUDA the
    neighbour search and the start's eigenproblem run on the device, as PRCut's
    do."""
    device = torch.device(settings.device)
    neighbours, graph = graph_of(images, settings.n_neighbors, feature_seed,
                                 settings.n_threads, device=device)
    measures = GraphMeasures(graph, device=device, seed=start_seed,
                             n_threads=settings.n_threads)
    _, labels = spectral_start(measures, settings.n_clusters, start=settings,
                               gamma=settings.gamma)
    return neighbours, graph, labels


def fit_network(images, settings, seeds, name, session=None):
    """Train the network on (n, C, H, W) float32 images (already scaled); its
    clustering phase reports to ``session`` where given (a TrainingSession).

    Returns a :class:`FittedNetwork`.
    """
    with float32_by_default():  # the same fit whatever default dtype a user set
        return _fit_network(images, settings, seeds, name, session=session)


def refit_network(images, settings, seeds, name, fitted, labels, session=None):
    """n_clusters='auto''s last step: a fresh network trained on the clusters the
    merge found, ``labels`` (0 .. k - 1, each occupied, of the images ``fitted``
    was trained on), as a fit given k is trained on the spectral start's: the
    warm-up learns the merged partition, the clustering phase refines it on the
    same graph and neighbours, with the fit's seeds. The merge only joins the
    over-clustered network's clusters; this lets images near a joined border
    move; its clustering phase reports to ``session`` as the first network's
    does. Returns a :class:`FittedNetwork` (``moved`` None)."""
    settings = replace(settings, n_clusters=int(labels.max()) + 1, merge=False,
                       merge_neighbors=0, max_iter=settings.refit_max_iter)
    with float32_by_default():
        return _fit_network(images, settings, seeds, name,
                            prepared=(fitted.neighbours, fitted.graph, labels),
                            session=session)


def _fit_network(images, settings, seeds, name, prepared=None, session=None):
    # exactly seven (unpacked by name: an eighth must not shift the views' seed)
    (feature_seed, start_seed, network_seed, warm_up_seed, clustering_seed,
     self_labelling_seed, view_seed) = seeds
    batch_seeds = (warm_up_seed, clustering_seed, self_labelling_seed)
    device = torch.device(settings.device)
    with torch_threads(settings.n_threads):
        if prepared is None:
            prepared = start_of(images, settings, feature_seed=feature_seed,
                                start_seed=start_seed)
        neighbours, graph, start = prepared
        network = build_network(images.shape[1:], settings.n_clusters, settings.n_heads,
                                network_seed, settings.max_side).to(device)
    data = torch.as_tensor(images, device=device)
    n = data.shape[0]
    common = TrainOptions(name=name, device=device, learning_rate=settings.learning_rate,
                          max_iter=settings.max_iter, tol=settings.tol,
                          n_iter_no_change=settings.n_iter_no_change,
                          verbose=settings.verbose, warn=not settings.scheduled,
                          session=session)
    generators = [make_generator(seed, device) for seed in batch_seeds]

    def batches(generator):
        return UniformBatches(n, settings.batch_size, generator, device)

    steps_per_epoch = batches(generators[0]).n_batches
    train(PartitionTask(network, data, start, settings.augmentation, generators[0]),
          batches(generators[0]), replace(
              common, max_iter=-(-WARMUP_STEPS // steps_per_epoch), warn=False, verbose=False,
              tol=WARMUP_TOL, n_iter_no_change=WARMUP_PATIENCE, session=None))
    pairs = PairTask(network, data, torch.as_tensor(neighbours, device=device), settings,
                     generators[1])
    result = train(pairs, batches(generators[1]), common)
    kept = int(np.argmin(np.atleast_2d(result.loss_curve)[-1]))
    network.keep_head(kept)
    self_labelled = False
    if settings.self_labelling:
        before = copy.deepcopy(network.state_dict())
        objective = _objective_of(network, data, graph, settings)
        train(SelfLabelTask(network, data, settings, generators[2]),
              batches(generators[2]), replace(
                  common, max_iter=settings.self_labelling, warn=False, verbose=False, tol=0.0,
                  session=None))
        self_labelled = _objective_of(network, data, graph, settings) <= objective
        if not self_labelled:
            network.load_state_dict(before)
    moved = (views_of(network, data, settings.augmentation, make_generator(view_seed, device))
             if settings.merge else None)
    network = network.to("cpu").eval()
    return FittedNetwork(network, graph, start, result, kept, self_labelled, moved,
                         neighbours)


@torch.no_grad()
def views_of(network, data, augmentation, generator, batch_size=2048):
    """The kept head's most probable output of :data:`MERGE_VIEWS` random weak
    views of every image, (MERGE_VIEWS, n) int64, in evaluation mode on one
    thread (the same views and outputs whatever the thread count)."""
    network.eval()
    with one_thread(data.device):
        views = [torch.cat([network(weak_view(data[start:start + batch_size], augmentation,
                                              generator)).argmax(1)
                            for start in range(0, data.shape[0], batch_size)])
                 for _ in range(MERGE_VIEWS)]
    return torch.stack(views).cpu().numpy().astype(np.int64)


class FittedNetwork(NamedTuple):
    """What :func:`fit_network` returns: the trained ``network`` (on the CPU, one
    head, in evaluation mode), the images' ``graph``, the ``start``'s labels, the
    clustering phase's ``result`` (a ``TrainingResult``), the index of the
    ``kept`` head, whether the network was ``self_labelled``, and for
    ``n_clusters='auto'`` the outputs of the images' random views that the merge
    reads (:func:`views_of`; None otherwise), and the graph's ``neighbours``
    (n, n_neighbors), which :func:`refit_network` trains on again."""

    network: object
    graph: object
    start: object
    result: object
    kept: int
    self_labelled: bool
    moved: object = None
    neighbours: object = None


def _objective_of(network, data, graph, settings):
    """PRCut's objective on the graph of the partition the network gives the images."""
    with one_thread(data.device):
        _, proba = evaluate(network, data)
    labels = proba[network.head].argmax(1).cpu().numpy()
    return partition_objective(graph, labels, settings.n_clusters, settings.gamma)

"""Learning through clustering: train an embedding with the partial Fenchel-Young loss.

Stewart et al. (2023, sections 3.3 and 4.2): mini-batches mix labelled and
unlabelled samples; the similarity of a batch is minus the squared distances of
the embeddings, standardised per batch (so that epsilon does not depend on the
embedding's scale); the loss compares the perturbed forests with and without the
batch's constraints.
"""

import copy
import math

import numpy as np
import torch

from skdiffclust._utils._torch import (
    build_mlp,
    make_generator,
    state_to_numpy,
    tensor_from_numpy,
)
from skdiffclust._utils._torch_free import progress
from skdiffclust.forest._constraints import Constraints
from skdiffclust.forest._torch_ops import (
    PartialFenchelYoungFunction,
    PerturbedProblem,
    seed_from_generator,
    similarity_to_numpy,
)

UNLABELLED = -1
_EMPTY = np.empty(0, dtype=np.int64)


def make_embedding(embedding, n_features, n_components, hidden_layer_sizes, generator):
    """The module to train: 'linear', 'mlp', or a copy of the user's module."""
    if embedding == "linear":
        return build_mlp(n_features, (), n_components, generator)
    if embedding == "mlp":
        return build_mlp(n_features, tuple(hidden_layer_sizes), n_components, generator)
    return copy.deepcopy(embedding)


def standardized_similarity(embedded):
    """Minus the squared distances of a batch, standardised (as the reference does)."""
    sq_norms = (embedded * embedded).sum(1)
    S = -(sq_norms[:, None] + sq_norms[None, :] - 2.0 * embedded @ embedded.T).clamp_min(0.0)
    return (S - S.mean()) / S.std().clamp_min(torch.finfo(S.dtype).eps)


def batch_n_clusters(constraints, n_clusters):
    """n_clusters brought within what the batch's constraints allow.

    A batch may hold more labelled classes than n_clusters, or so few samples that
    must-links leave fewer trees: the loss then compares forests with as many
    trees as the batch allows, so that both terms count the same edges.
    """
    lo, hi = constraints.feasible_n_clusters()
    return int(min(max(n_clusters, lo), hi))


class BatchSampler:
    """Batches of half labelled, half unlabelled samples (the paper's scheme).

    Each half cycles through its own shuffled order; with only labelled (or only
    unlabelled) samples, batches are plain shuffled slices.
    """

    def __init__(self, y, batch_size, rng):
        self.rng = rng
        self.batch_size = batch_size
        labelled = np.flatnonzero(y != UNLABELLED)
        unlabelled = np.flatnonzero(y == UNLABELLED)
        if labelled.size and unlabelled.size:
            n_labelled = min(max(batch_size // 2, 1), labelled.size)
            n_unlabelled = min(batch_size - n_labelled, unlabelled.size)
            self.streams = [[labelled, n_labelled, _EMPTY, 0],
                            [unlabelled, n_unlabelled, _EMPTY, 0]]
        else:
            pool = labelled if labelled.size else unlabelled
            self.streams = [[pool, min(batch_size, pool.size), _EMPTY, 0]]

    def _take(self, stream):
        pool, size, order, position = stream
        if position + size > len(order):
            order = np.concatenate([order[position:], self.rng.permutation(pool)])
            position = 0
        stream[2], stream[3] = order, position + size
        return order[position : position + size]

    def __call__(self):
        return np.concatenate([self._take(stream) for stream in self.streams])


def train_embedding(module, X, y, *, n_clusters, epsilon, n_perturbations, batch_size,
                    max_iter, learning_rate, device, seed, verbose):
    """Adam on the partial Fenchel-Young loss; returns (state, loss_curve, n_iter)."""
    rng = np.random.default_rng(seed)
    noise_generator = make_generator(rng.integers(2**31 - 1))
    module = module.to(device)
    module.train()
    dtype = next(module.parameters()).dtype
    X_device = tensor_from_numpy(X, dtype, device)
    optimizer = torch.optim.Adam(module.parameters(), lr=learning_rate)
    sampler = BatchSampler(y, batch_size, rng)
    steps_per_epoch = max(math.ceil(X.shape[0] / batch_size), 1)
    loss_curve = []
    for _ in progress(range(max_iter), verbose, "SpanningForestClustering"):
        epoch_loss = 0.0
        for _ in range(steps_per_epoch):
            batch = sampler()
            constraints = Constraints.from_labels(y[batch], batch.size)
            if constraints.is_empty:
                continue  # no pair to learn from
            S = standardized_similarity(module(X_device[batch]))
            problem = PerturbedProblem(
                similarity_to_numpy(S), batch_n_clusters(constraints, n_clusters),
                epsilon, n_perturbations, constraints, seed_from_generator(noise_generator),
            )
            loss = PartialFenchelYoungFunction.apply(S, problem)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            epoch_loss += loss.item()
        loss_curve.append(epoch_loss / steps_per_epoch)
    module.eval()
    return state_to_numpy(module), loss_curve, max_iter

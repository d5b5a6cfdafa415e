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

from skdiffclust._training._torch import PooledBatches, train
from skdiffclust._utils._random import derive_seeds
from skdiffclust._utils._torch import (
    build_mlp,
    make_generator,
    state_to_numpy,
    tensor_from_numpy,
)
from skdiffclust.forest._constraints import Constraints
from skdiffclust.forest._torch_ops import (
    PartialFenchelYoungFunction,
    PerturbedProblem,
    seed_from_generator,
    similarity_to_numpy,
)

UNLABELLED = -1


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


def batch_sampler(y, batch_size, generator, device):
    """Batches of half labelled, half unlabelled samples (the paper's scheme).

    Each half cycles through its own permutations; with only labelled (or only
    unlabelled) samples, batches are plain shuffled slices. ``ceil(n / batch_size)``
    batches per epoch.
    """
    labelled = np.flatnonzero(y != UNLABELLED)
    unlabelled = np.flatnonzero(y == UNLABELLED)
    n_batches = max(math.ceil(y.shape[0] / batch_size), 1)
    if labelled.size and unlabelled.size:
        n_labelled = min(max(batch_size // 2, 1), labelled.size)
        n_unlabelled = min(batch_size - n_labelled, unlabelled.size)
        pools, sizes = [labelled, unlabelled], [n_labelled, n_unlabelled]
    else:
        pool = labelled if labelled.size else unlabelled
        pools, sizes = [pool], [min(batch_size, pool.size)]
    return PooledBatches(pools, sizes, n_batches, generator, device)


class PartialFenchelYoungTask:
    """The engine's task: the partial Fenchel-Young loss of a batch's embeddings.

    The perturbed forests are solved on the CPU (``_torch_ops``): each step copies
    the batch's similarity matrix to the host, so the step cannot be captured.
    """

    capturable = False

    def __init__(self, module, X, y, *, n_clusters, epsilon, n_perturbations,
                 noise_generator):
        self.module, self.X, self.y = module, X, y
        self.n_clusters, self.epsilon = n_clusters, epsilon
        self.n_perturbations = n_perturbations
        self.noise_generator = noise_generator

    def parameters(self):
        return self.module.parameters()

    def loss(self, batch):
        index = batch.to("cpu").numpy()
        constraints = Constraints.from_labels(self.y[index], index.size)
        if constraints.is_empty:  # no pair to learn from: no step
            return None, torch.zeros((), device=self.X.device)
        S = standardized_similarity(self.module(self.X[batch]))
        problem = PerturbedProblem(
            similarity_to_numpy(S), batch_n_clusters(constraints, self.n_clusters),
            self.epsilon, self.n_perturbations, constraints,
            seed_from_generator(self.noise_generator),
        )
        loss = PartialFenchelYoungFunction.apply(S, problem)
        return loss, loss.detach()


def train_embedding(module, X, y, *, n_clusters, epsilon, n_perturbations, batch_size,
                    max_iter, learning_rate, tol, n_iter_no_change, device, seed, verbose,
                    n_threads=1):
    """Adam on the partial Fenchel-Young loss; returns (state, TrainingResult)."""
    batch_seed, noise_seed = derive_seeds(seed, 2)
    module = module.to(device)
    module.train()
    dtype = next(module.parameters()).dtype
    task = PartialFenchelYoungTask(
        module, tensor_from_numpy(X, dtype, device), y, n_clusters=n_clusters,
        epsilon=epsilon, n_perturbations=n_perturbations,
        noise_generator=make_generator(noise_seed),
    )
    sampler = batch_sampler(y, batch_size, make_generator(batch_seed, device), device)
    result = train(task, sampler, learning_rate=learning_rate, max_iter=max_iter, tol=tol,
                   n_iter_no_change=n_iter_no_change, name="SpanningForestClustering",
                   device=device, verbose=verbose, n_threads=n_threads)
    module.eval()
    return state_to_numpy(module), result

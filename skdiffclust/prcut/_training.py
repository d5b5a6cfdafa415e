"""PRCut's training task (Ghriss & Monteleoni, 2025, algorithm 1), for the engine.

Each step draws a left and a right batch (on the training device), reads the block
of the graph between them as an edge list (``_device``), and moves the network
along the eq. 8 gradient of the ratio-cut bound (through its stop-gradient
surrogate) plus the gradient of gamma * KL(batch mean || uniform). The epoch
loop, Adam, the stopping rule and the device handling are the engine's
(:mod:`skdiffclust._training._torch`).
"""

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn

from skdiffclust._training._torch import PairedBatches, train
from skdiffclust._utils._torch import build_mlp, make_generator, tensor_from_numpy
from skdiffclust.prcut._device import PaddedGraph, device_graph
from skdiffclust.prcut._loss import (
    ProportionAverage,
    bound_and_gradient,
    kl_to_uniform,
    pbar_floor,
    surrogate,
)

# hardness at the first annealing step: small enough that the uniform assignment
# is stable, so that the partition grows out of the graph's smoothest directions
HARDNESS_START = 1e-2


class AssignmentNetwork(nn.Module):
    """Linear layers (GELU between them) ending in the assignment logits.

    Its input is a dense batch of features, or a batch of rows of a sparse matrix
    (``SparseRows``), which the first layer reads with ``embedding_bag``: a sparse
    row times the weight matrix, never densified.
    """

    def __init__(self, n_features, hidden_layer_sizes, n_clusters, generator):
        super().__init__()
        layers = build_mlp(n_features, tuple(hidden_layer_sizes), n_clusters, generator,
                           activation=nn.GELU)
        if not isinstance(layers, nn.Sequential):
            layers = nn.Sequential(layers)
        self.layers = layers

    def forward(self, x):
        first, rest = self.layers[0], self.layers[1:]
        if isinstance(x, SparseRows):
            h = nn.functional.embedding_bag(
                x.indices, first.weight.T, x.offsets, mode="sum",
                per_sample_weights=x.values,
            ) + first.bias
        else:
            h = first(x)
        return rest(h)

    def weights_as_numpy(self):
        """(coefs, intercepts): per layer, an (n_in, n_out) matrix and a bias."""
        linears = [layer for layer in self.layers if isinstance(layer, nn.Linear)]
        coefs = [layer.weight.detach().to("cpu", torch.float64).numpy().T.copy()
                 for layer in linears]
        intercepts = [layer.bias.detach().to("cpu", torch.float64).numpy().copy()
                      for layer in linears]
        return coefs, intercepts


class SparseRows:
    """A batch of CSR rows in embedding_bag's format."""

    def __init__(self, indices, offsets, values):
        self.indices, self.offsets, self.values = indices, offsets, values


class FeatureBatches:
    """Batches of the network's input, dense or sparse, on the training device."""

    def __init__(self, X, device, dtype):
        self.device, self.dtype = device, dtype
        self.sparse = sp.issparse(X)
        if self.sparse:
            X = sp.csr_matrix(X)
            self.indptr = X.indptr.astype(np.int64)
            self.indices = torch.as_tensor(X.indices.astype(np.int64), device=device)
            self.values = torch.as_tensor(X.data, dtype=dtype, device=device)
        else:
            self.X = tensor_from_numpy(X, dtype, device)

    def __call__(self, index):
        """Rows ``index`` (an index tensor on the device); sparse rows are gathered
        on the host."""
        if not self.sparse:
            return self.X[index]
        index = index.to("cpu").numpy()
        starts = self.indptr[index]
        lengths = self.indptr[index + 1] - starts
        offsets = np.cumsum(lengths) - lengths
        entries = np.repeat(starts - offsets, lengths) + np.arange(int(lengths.sum()))
        entries = torch.as_tensor(entries, device=self.device)
        return SparseRows(self.indices[entries],
                          torch.as_tensor(offsets, device=self.device),
                          self.values[entries])


def hardness_schedule(n_annealing_steps):
    """Hardness s of each step: geometric from HARDNESS_START to 1 over the first
    ``n_annealing_steps`` steps, then 1 (the paper's bound)."""
    def hardness(step):
        if step > n_annealing_steps:
            return 1.0
        return HARDNESS_START ** (1.0 - (step - 1) / n_annealing_steps)
    return hardness


class RatioCutTask:
    """The engine's task: one step of algorithm 1 on a batch pair.

    Capturable in a CUDA graph when nothing changes on the host from step to step:
    no annealing schedule, a padded device graph and dense features.
    """

    def __init__(self, network, features, graph, *, n_clusters, momentum, gamma,
                 n_annealing_steps, device, dtype):
        self.network, self.features, self.graph = network, features, graph
        self.gamma = gamma
        self.p_bar_average = ProportionAverage(n_clusters, momentum, device, dtype)
        self.floor = pbar_floor(n_clusters)
        self.hardness = hardness_schedule(n_annealing_steps)
        self.n_steps = 0
        self.capturable = (n_annealing_steps == 0 and isinstance(graph, PaddedGraph)
                           and not features.sparse)

    def parameters(self):
        return self.network.parameters()

    def loss(self, batch):
        self.n_steps += 1
        left, right = batch[0], batch[1]
        rows, cols, weights = self.graph(left, right)
        probabilities = torch.softmax(self.network(self.features(torch.cat([left, right]))), 1)
        n_left = left.shape[0]
        p_left, p_right = probabilities[:n_left], probabilities[n_left:]
        batch_mean = probabilities.mean(0)
        p_bar = self.p_bar_average.update(batch_mean)
        bound, grad_left, grad_right = bound_and_gradient(
            p_left.detach(), p_right.detach(), rows, cols, weights, p_bar,
            probabilities.shape[0], self.hardness(self.n_steps),
        )
        kl = kl_to_uniform(batch_mean, self.floor)
        loss = surrogate(p_left, p_right, grad_left, grad_right) + self.gamma * kl
        return loss, (bound + self.gamma * kl).detach()


def train_prcut(X, graph, *, n_clusters, hidden_layer_sizes, batch_size, max_iter,
                learning_rate, momentum, gamma, annealing, tol, n_iter_no_change,
                device, init_seed, batch_seed, verbose, n_threads=1, name="PRCut"):
    """Train the assignment network on the graph (algorithm 1).

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n_samples, n_inputs)
        The network's input (features, or rows of a precomputed affinity).
    graph : scipy.sparse.csr_matrix of shape (n_samples, n_samples)
        Canonical affinity graph.
    max_iter : int
        Maximum number of epochs (``n_samples // batch_size`` batch pairs each,
        at least one).
    annealing : float
        Fraction of ``max_iter`` over which the hardness of the bound is raised
        to 1 (see ``_loss``); the stopping rule applies after it.

    Returns
    -------
    coefs, intercepts : list of ndarray
        Trained weights, float64 NumPy arrays: layer l maps h to
        ``h @ coefs[l] + intercepts[l]``.
    result : TrainingResult
        Epochs run, the objective (bound + gamma * KL) of each, convergence.
    """
    dtype = torch.float32
    device = torch.device(device)
    network = AssignmentNetwork(X.shape[1], hidden_layer_sizes, n_clusters,
                                make_generator(init_seed)).to(device)
    sampler = PairedBatches(X.shape[0], batch_size, make_generator(batch_seed, device),
                            device)
    n_annealing_epochs = int(round(annealing * max_iter))
    task = RatioCutTask(
        network, FeatureBatches(X, device, dtype), device_graph(graph, device, dtype),
        n_clusters=n_clusters, momentum=momentum, gamma=gamma,
        n_annealing_steps=n_annealing_epochs * sampler.n_batches, device=device,
        dtype=dtype,
    )
    network.train()
    result = train(task, sampler, learning_rate=learning_rate, max_iter=max_iter, tol=tol,
                   n_iter_no_change=n_iter_no_change, name=name, device=device,
                   verbose=verbose, min_epochs=n_annealing_epochs, n_threads=n_threads)
    network.eval()
    coefs, intercepts = network.weights_as_numpy()
    return coefs, intercepts, result

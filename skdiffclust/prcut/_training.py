"""PRCut training loop (Ghriss & Monteleoni, 2025, algorithm 1), in torch.

Each step draws a left and a right batch, reads the block of the sparse graph
between them as an edge list, and moves the network along the eq. 8 gradient of
the ratio-cut bound (through its stop-gradient surrogate) plus the gradient of
gamma * KL(batch mean || uniform).
"""

import contextlib
import math

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn

from skdiffclust._utils._torch import (
    build_mlp,
    make_generator,
    tensor_from_numpy,
)
from skdiffclust._utils._torch_free import progress
from skdiffclust.prcut._graph import BatchPairExtractor
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
        if not self.sparse:
            return self.X[torch.as_tensor(index, device=self.device)]
        starts = self.indptr[index]
        lengths = self.indptr[index + 1] - starts
        offsets = np.cumsum(lengths) - lengths
        entries = np.repeat(starts - offsets, lengths) + np.arange(int(lengths.sum()))
        entries = torch.as_tensor(entries, device=self.device)
        return SparseRows(self.indices[entries],
                          torch.as_tensor(offsets, device=self.device),
                          self.values[entries])


class PairSampler:
    """Left and right batches, each cycling through its own shuffled order.

    Without replacement within a batch (the batch-pair extraction needs distinct
    right samples); every sample is visited once per pass of each stream.
    """

    def __init__(self, n_samples, batch_size, rng):
        self.n_samples, self.rng = n_samples, rng
        self.batch_size = min(batch_size, n_samples)
        self.streams = [[np.empty(0, dtype=np.int64), 0] for _ in range(2)]

    def _take(self, stream):
        order, position = stream
        if position + self.batch_size > order.size:
            # the batch never holds a sample twice: the fresh order omits the rest
            rest = order[position:]
            fresh = self.rng.permutation(self.n_samples)
            fresh = fresh[~np.isin(fresh, rest)] if rest.size else fresh
            order, position = np.concatenate([rest, fresh]), 0
        stream[0], stream[1] = order, position + self.batch_size
        return order[position : position + self.batch_size]

    def __call__(self):
        return self._take(self.streams[0]), self._take(self.streams[1])


class EarlyStopping:
    """Stop when the objective, averaged over windows of ``window`` steps, has not
    gone ``tol`` below the best window for two windows in a row.

    Single steps are too noisy to compare (a batch pair holds few edges); window
    means are not."""

    def __init__(self, window, tol):
        self.window, self.tol = window, tol
        self.best, self.total, self.count, self.strikes = math.inf, 0.0, 0, 0

    def __call__(self, objective):
        self.total += objective
        self.count += 1
        if self.count < self.window:
            return False
        mean, self.total, self.count = self.total / self.count, 0.0, 0
        if mean < self.best - self.tol:
            self.best, self.strikes = mean, 0
        else:
            self.strikes += 1
        return self.strikes >= 2


@contextlib.contextmanager
def torch_threads(n_threads):
    """Run with ``n_threads`` intra-op CPU threads, then restore the previous count.

    The batches are small: on a shared machine, more threads than free cores make
    every step wait for the slowest (measured: 20x slower on 2 busy cores).
    """
    previous = torch.get_num_threads()
    torch.set_num_threads(n_threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def hardness_schedule(n_annealing_steps):
    """Hardness s of each step: geometric from HARDNESS_START to 1 over the first
    ``n_annealing_steps`` steps, then 1 (the paper's bound)."""
    def hardness(step):
        if step > n_annealing_steps:
            return 1.0
        return HARDNESS_START ** (1.0 - (step - 1) / n_annealing_steps)
    return hardness


def train_prcut(X, graph, *, n_clusters, hidden_layer_sizes, batch_size, max_iter,
                learning_rate, momentum, gamma, annealing, tol, n_iter_no_change,
                device, init_seed, batch_seed, verbose, description="PRCut"):
    """Train the assignment network on the graph (algorithm 1).

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n_samples, n_inputs)
        The network's input (features, or rows of a precomputed affinity).
    graph : scipy.sparse.csr_matrix of shape (n_samples, n_samples)
        Canonical affinity graph.
    annealing : float
        Fraction of ``max_iter`` over which the hardness of the bound is raised
        to 1 (see ``_loss``); early stopping starts after it.

    Returns
    -------
    coefs, intercepts : list of ndarray
        Trained weights, float64 NumPy arrays: layer l maps h to
        ``h @ coefs[l] + intercepts[l]``.
    objective_curve : ndarray
        Mean objective (bound + gamma * KL) over each window of
        ``n_iter_no_change`` steps.
    n_iter : int
        Steps run.
    """
    dtype = torch.float32
    network = AssignmentNetwork(X.shape[1], hidden_layer_sizes, n_clusters,
                                make_generator(init_seed)).to(device)
    optimizer = torch.optim.Adam(network.parameters(), lr=learning_rate)
    features = FeatureBatches(X, device, dtype)
    sampler = PairSampler(X.shape[0], batch_size, np.random.default_rng(batch_seed))
    extract = BatchPairExtractor(graph)
    p_bar_average = ProportionAverage(n_clusters, momentum, device, dtype)
    floor = pbar_floor(n_clusters)
    stopping = EarlyStopping(n_iter_no_change, tol)
    n_annealing_steps = int(round(annealing * max_iter))
    hardness = hardness_schedule(n_annealing_steps)
    objectives, n_iter = [], 0
    network.train()
    for n_iter in progress(range(1, max_iter + 1), verbose, description):
        left, right = sampler()
        rows, cols, weights = (torch.as_tensor(a, device=device)
                               for a in extract(left, right))
        batch = features(np.concatenate([left, right]))
        probabilities = torch.softmax(network(batch), 1)
        p_left, p_right = probabilities[: left.size], probabilities[left.size :]
        batch_mean = probabilities.mean(0)
        p_bar = p_bar_average.update(batch_mean)
        bound, grad_left, grad_right = bound_and_gradient(
            p_left.detach(), p_right.detach(), rows, cols, weights, p_bar,
            probabilities.shape[0], hardness(n_iter),
        )
        kl = kl_to_uniform(batch_mean, floor)
        loss = surrogate(p_left, p_right, grad_left, grad_right) + gamma * kl
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        objectives.append(float(bound) + gamma * float(kl.detach()))
        if n_iter > n_annealing_steps and stopping(objectives[-1]):
            break
    network.eval()
    coefs, intercepts = network.weights_as_numpy()
    return coefs, intercepts, _window_means(objectives, n_iter_no_change), n_iter


def _window_means(values, window):
    values = np.asarray(values, dtype=np.float64)
    n_windows = -(-values.size // window)
    return np.array([values[i * window : (i + 1) * window].mean()
                     for i in range(n_windows)])

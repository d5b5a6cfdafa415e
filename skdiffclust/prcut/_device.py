"""PRCut's graph on the training device: batch-pair blocks, in torch.

The CSR graph of ``_graph`` is read on the host. On the training device the graph
is held as a padded neighbour list ("ELL" layout): row i lists the neighbours of
sample i and their weights, padded to the largest degree with a sentinel sample
of weight 0. The block of W between a left and a right batch is then a gather of
the left rows and a lookup of their neighbours' positions in the right batch:
fixed shapes, no host synchronisation, nothing densified. Graphs with a few
very-high-degree samples (a skewed precomputed affinity) would waste memory in
this layout; they keep the host CSR extractor instead (:func:`device_graph`).
A dense precomputed affinity is read block by block (:class:`DenseGraph`).

Each graph returns the block between a left and a right batch as an
``EdgeBlock`` or a ``DenseBlock`` of ``_loss``, normalised by its total weight.
"""

import warnings

import numpy as np
import scipy.sparse as sp
import torch

from skdiffclust.prcut._graph import BatchPairExtractor
from skdiffclust.prcut._loss import DenseBlock, EdgeBlock

# ELL padding may cost at most this many times the stored entries (plus one slot
# per row) before the host CSR path is preferred
MAX_PADDING_RATIO = 4


class PaddedGraph:
    """The graph as padded neighbour lists on a device; see the module docstring."""

    def __init__(self, W, device, dtype):
        n = W.shape[0]
        degrees = np.diff(W.indptr)
        width = max(int(degrees.max()) if n else 0, 1)
        neighbours = np.full((n, width), n, dtype=np.int64)  # sentinel: sample n
        weights = np.zeros((n, width), dtype=np.float64)
        slot = np.arange(W.indptr[-1]) - np.repeat(W.indptr[:-1], degrees)
        rows = np.repeat(np.arange(n), degrees)
        neighbours[rows, slot] = W.indices
        weights[rows, slot] = W.data
        self.neighbours = torch.as_tensor(neighbours, device=device)
        self.weights = torch.as_tensor(weights, dtype=dtype, device=device)
        # position in the right batch of each sample (-1: absent); entry n is
        # the sentinel's, always -1
        self.position = torch.full((n + 1,), -1, dtype=torch.int64, device=device)
        self.device, self.dtype = device, dtype

    def __call__(self, left, right):
        """The block between ``left`` and ``right`` (index tensors on the device)."""
        return EdgeBlock(*self.edges(left, right), left.shape[0], right.shape[0],
                         self.dtype)

    def edges(self, left, right):
        """Edges between ``left`` and ``right``.

        Returns ``rows``, ``cols`` (positions in the batches) and ``weights`` of
        shape (len(left) * width,); padding and neighbours outside the right
        batch have weight 0 (and column 0), so they contribute nothing.
        """
        positions = torch.arange(right.shape[0], device=self.device)
        self.position.index_copy_(0, right, positions)
        cols = self.position[self.neighbours[left]]  # (n_left, width)
        self.position.index_fill_(0, right, -1)
        inside = cols >= 0
        weights = torch.where(inside, self.weights[left], 0.0)
        rows = torch.arange(left.shape[0], device=self.device)[:, None].expand_as(cols)
        return rows.reshape(-1), cols.clamp_min(0).reshape(-1), weights.reshape(-1)


class HostGraph:
    """The CSR extractor of ``_graph`` behind the same interface (a host round trip
    per step on CUDA)."""

    def __init__(self, W, device, dtype):
        self.extract = BatchPairExtractor(W)
        self.device, self.dtype = device, dtype

    def __call__(self, left, right):
        rows, cols, weights = self.extract(left.to("cpu").numpy(), right.to("cpu").numpy())
        return EdgeBlock(torch.as_tensor(rows, device=self.device),
                         torch.as_tensor(cols, device=self.device),
                         torch.as_tensor(weights, dtype=self.dtype, device=self.device),
                         left.shape[0], right.shape[0], self.dtype)


class DenseGraph:
    """A dense affinity read block by block: ``W[left][:, right]``, diagonal masked.

    On the CPU the tensor shares the NumPy array's memory (no copy); on CUDA the
    matrix is copied to the device once, in the training precision.
    """

    def __init__(self, W, device, dtype):
        if device.type == "cpu":
            self.matrix = shared_tensor(W)
        else:
            self.matrix = shared_tensor(W).to(device).to(dtype)
        self.device, self.dtype = device, dtype

    def __call__(self, left, right):
        block = self.matrix[left[:, None], right[None, :]].to(self.dtype)
        block = torch.where(left[:, None] == right[None, :], 0.0, block)
        return DenseBlock(block, self.dtype)


def shared_tensor(array):
    """A CPU tensor sharing a NumPy array's memory, read-only arrays included.

    torch warns that writing into a read-only array (a memory map) is undefined;
    PRCut only reads it, and a copy could double the memory of a large affinity.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not writable.*")
        return torch.as_tensor(array)


def device_graph(W, device, dtype):
    """The graph's block reader on the training device.

    :class:`DenseGraph` for a dense affinity; for a CSR graph, :class:`PaddedGraph`
    unless its padding would waste memory, else :class:`HostGraph`.
    """
    if not sp.issparse(W):
        return DenseGraph(W, device, dtype)
    n = W.shape[0]
    width = int(np.diff(W.indptr).max()) if n else 0
    if n * width <= MAX_PADDING_RATIO * W.nnz + n:
        return PaddedGraph(W, device, dtype)
    return HostGraph(W, device, dtype)

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
:class:`PRCutBatchPairs` (public, in ``skdiffclust.torch``) draws the engine's batch
pairs and reads their blocks with the same classes, for a user's training loop.
"""

import numpy as np
import scipy.sparse as sp
import torch

from skdiffclust._training._torch import PairedBatches
from skdiffclust._utils._torch import shared_tensor
from skdiffclust._utils._torch_checks import (
    check_float_dtype,
    check_generator,
    check_positive_int,
    checked_device,
)
from skdiffclust._graphcut._graph import BatchPairExtractor, check_precomputed_affinity
from skdiffclust._graphcut._loss import DenseBlock, EdgeBlock

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
        return EdgeBlock(*self.edges(left, right), left.shape[0], right.shape[0],
                         self.dtype)

    def edges(self, left, right):
        """Edges between ``left`` and ``right`` (see :meth:`PaddedGraph.edges`),
        extracted on the host; only non-zero weights."""
        rows, cols, weights = self.extract(left.to("cpu").numpy(), right.to("cpu").numpy())
        return (torch.as_tensor(rows, device=self.device),
                torch.as_tensor(cols, device=self.device),
                torch.as_tensor(weights, dtype=self.dtype, device=self.device))


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


def device_graph(W, device, dtype):
    """The graph's block reader on the training device.

    :class:`DenseGraph` for a dense affinity. For a CSR graph on the CPU,
    :class:`HostGraph`: the block's own edges only (nothing waits for a device,
    and a padded block holds every neighbour of the left batch, about
    ``n / batch_size`` times more entries, each of which every product of the
    loss reads: 60% of a step at 60,000 samples and 150 neighbours). On CUDA,
    :class:`PaddedGraph` (fixed shapes, no host round trip) unless its padding
    would waste memory, else :class:`HostGraph`.
    """
    if not sp.issparse(W):
        return DenseGraph(W, device, dtype)
    if torch.device(device).type == "cpu":
        return HostGraph(W, device, dtype)
    n = W.shape[0]
    width = int(np.diff(W.indptr).max()) if n else 0
    if n * width <= MAX_PADDING_RATIO * W.nnz + n:
        return PaddedGraph(W, device, dtype)
    return HostGraph(W, device, dtype)


class PRCutBatchPairs:
    """Batch pairs of a graph's samples and the affinity blocks between them.

    What PRCut's training draws at each step (algorithm 1, lines 3-5), for a
    training loop of your own with :class:`PRCutLoss`: each epoch, a left and a
    right permutation of the samples are cut into batches of ``batch_size``, and
    each step gets the block of the graph between its left and right batch. The
    indices and the blocks are made on ``device``; nothing is densified. On CUDA
    the graph is held on the device as padded neighbour lists, as PRCut's
    training holds it (unless a few very high degrees would make that wasteful),
    so that no step waits for the host; on the CPU the blocks are read from the
    CSR graph, with their edges only.

    Parameters
    ----------
    graph : scipy.sparse matrix of shape (n_samples, n_samples)
        Symmetric, non-negative affinity graph (e.g. a symmetric kNN
        connectivity graph); its diagonal is ignored.
    batch_size : int
        Samples per batch, at most ``n_samples`` (a batch holds distinct samples). An epoch has
        ``max(n_samples // batch_size, 1)`` pairs; the remainder of each
        permutation is left out, a different one each epoch.
    device : torch.device or str, default=None
        Where the indices and blocks are made: ``generator``'s device when given,
        else the CPU.
    dtype : torch.dtype, default=torch.float32
        Of the blocks' weights; a graph whose weights overflow it is refused
        (float16 holds at most 65504).
    generator : torch.Generator, default=None
        Draws the permutations, on ``device``; torch's default generator when
        None.

    Yields
    ------
    left, right : torch.Tensor of int64, shape (batch_size,)
        Sample indices of the two batches (each without repeats).
    affinity : torch.Tensor, sparse COO, shape (batch_size, batch_size)
        ``graph[left][:, right]``, uncoalesced; on CUDA with padding entries of
        weight 0, which keep its shape the same at every step.

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> import torch
    >>> from skdiffclust.torch import PRCutBatchPairs
    >>> graph = sp.csr_matrix(np.ones((6, 6)) - np.eye(6))
    >>> pairs = PRCutBatchPairs(graph, 3, generator=torch.Generator().manual_seed(0))
    >>> len(pairs)
    2
    >>> left, right, affinity = next(iter(pairs))
    >>> affinity.to_dense().shape
    torch.Size([3, 3])
    """

    def __init__(self, graph, batch_size, *, device=None, dtype=torch.float32,
                 generator=None):
        W = _checked_graph(graph)
        check_positive_int(batch_size, "batch_size")
        if batch_size > W.shape[0]:
            raise ValueError(
                f"batch_size={batch_size} exceeds the graph's {W.shape[0]} samples: "
                "a batch holds distinct samples.")
        check_float_dtype(dtype)
        dtype = torch.float32 if dtype is None else dtype
        _check_weights_representable(W, dtype)
        check_generator(generator)
        if device is None:
            device = generator.device if generator is not None else "cpu"
        device = checked_device(device)
        if generator is not None and generator.device.type != device.type:
            raise ValueError(
                f"generator is on {generator.device} but the pairs are drawn on {device}.")
        # on the CPU nothing waits for a device: the exact edges, without padding
        # (a padded block of a kNN graph holds several times more entries, which
        # every product of the loss then reads)
        self.graph = HostGraph(W, device, dtype) if device.type == "cpu" else \
            device_graph(W, device, dtype)
        self.batches = PairedBatches(W.shape[0], batch_size, generator, device)
        self.batch_size = self.batches.left.batch_size
        self.device, self.dtype = device, dtype

    def __len__(self):
        return self.batches.n_batches

    def __iter__(self):
        """One epoch of ``(left, right, affinity)``."""
        shape = (self.batch_size, self.batch_size)
        for left, right in self.batches.epoch():
            rows, cols, weights = self.graph.edges(left, right)
            # valid by construction: checking would read the indices back
            yield left, right, torch.sparse_coo_tensor(
                torch.stack([rows, cols]), weights, shape, check_invariants=False)


def _check_weights_representable(W, dtype):
    """A ValueError where the graph's weights overflow ``dtype`` (float16's
    largest is 65504): the cast would turn them into infinities, which the loss
    would only refuse at its first batch."""
    largest = torch.finfo(dtype).max
    heaviest = float(W.data.max()) if W.data.size else 0.0
    if heaviest > largest:
        raise ValueError(
            f"graph's largest weight, {heaviest:.4g}, overflows {dtype} "
            f"(at most {largest:.4g}): rescale the graph (the loss divides each block "
            "by its total, so a common factor changes nothing) or use a wider dtype.")


def _checked_graph(graph):
    """A user's graph as a canonical CSR matrix, or a clear error."""
    if not sp.issparse(graph):
        raise TypeError(f"graph must be a SciPy sparse matrix, got {type(graph).__name__}.")
    if np.iscomplexobj(graph.data):
        raise TypeError(f"graph must hold real weights, got dtype {graph.dtype}.")
    if graph.ndim != 2 or graph.shape[0] != graph.shape[1] or graph.shape[0] < 2:
        raise ValueError(
            f"graph must be a square (n_samples, n_samples) matrix with at least 2 "
            f"samples, got shape {graph.shape}.")
    return check_precomputed_affinity(graph, name="graph")

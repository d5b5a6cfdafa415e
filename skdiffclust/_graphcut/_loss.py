"""The PRCut objective on a batch pair: ratio-cut bound, eq. 8 gradient, P-bar.

Ghriss & Monteleoni (2025), section 4. For a cluster l with assignment
probabilities p and mean probability p_bar, the expected ratio cut is bounded by
(eq. 7, constant factors dropped)

    L(p) = 1/p_bar * sum_ij W_ij (p_i + p_j - 2 p_i p_j).

On a batch pair, W is the block between the left batch (rows) and the right batch
(columns), held as an edge list, and L is divided by the block's total weight so
that the step size does not depend on the scale or density of W. The gradient
(eq. 8) treats p_bar as the mean of p over the ``n_rows`` samples of the pair:

    dL/dp_i = [sum_j W_ij (1 - 2 p_j)] / p_bar - cut / (n_rows * p_bar^2),

with cut = sum_ij W_ij (p_i + p_j - 2 p_i p_j): the second term is the same for
every sample. It is evaluated with a moving
average of p_bar, floored, and reaches the network through the surrogate
sum_i p_i * sg(dL/dp_i) (algorithm 1, line 9).

:class:`PRCutLoss` is that objective as a torch module, the public one and the
one PRCut's engine step calls.

Annealing. The edge term splits into a Laplacian part and a hardness part,

    p_i + p_j - 2 p_i p_j = (p_i - p_j)^2 + [p_i (1 - p_i) + p_j (1 - p_j)],

and the second (concave, zero only for hard assignments) is what freezes the
first partition gradient descent meets. With the hardness part scaled by
s in (0, 1], uniform assignments minimise the bound for small s; as s grows they
first become unstable along the smoothest generalised eigenvectors of the graph
(L v = lambda D v, the directions of spectral clustering), and s = 1 gives back
eq. 7 exactly. ``hardness`` is that s.
"""

import warnings

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn

from skdiffclust._utils._torch_checks import (
    ValueChecks,
    as_real,
    check_float_dtype,
    check_matrix,
    check_positive_int,
    check_tensor,
    checked_device,
    finite,
    non_negative,
)
from skdiffclust._utils._torch_checks import probabilities as on_simplex
from skdiffclust._graphcut._graph import pbar_floor


class EdgeBlock:
    """The block of W between a left and a right batch, as an edge list.

    ``rows``, ``cols``: positions of each edge in the left and right batches;
    ``weights``: W[left[rows], right[cols]] (padding edges have weight 0). The
    weights are divided by their total (see :func:`normalised`).
    """

    def __init__(self, rows, cols, weights, n_left, n_right, dtype):
        self.rows, self.cols = rows, cols
        self.weights, self.total = normalised(weights, dtype)
        self.n_left, self.n_right = n_left, n_right

    def _scatter(self, values, index, size):
        shape = (size, *values.shape[1:])
        return torch.zeros(shape, dtype=values.dtype,
                           device=values.device).index_add_(0, index, values)

    def row_sums(self):
        return self._scatter(self.weights, self.rows, self.n_left)

    def col_sums(self):
        return self._scatter(self.weights, self.cols, self.n_right)

    def times_right(self, p_right):
        """W @ p_right, shape (n_left, k)."""
        return self._scatter(self.weights[:, None] * p_right[self.cols], self.rows,
                             self.n_left)

    def times_left(self, p_left):
        """W.T @ p_left, shape (n_right, k)."""
        return self._scatter(self.weights[:, None] * p_left[self.rows], self.cols,
                             self.n_right)


class DenseBlock:
    """The block of W between a left and a right batch, as a dense matrix
    (a dense precomputed affinity), divided by its total."""

    def __init__(self, block, dtype):
        self.block, self.total = normalised(block, dtype)

    def row_sums(self):
        return self.block.sum(1)

    def col_sums(self):
        return self.block.sum(0)

    def times_right(self, p_right):
        return self.block @ p_right

    def times_left(self, p_left):
        return self.block.T @ p_left


class WholeGraphBlock:
    """The whole graph as the block between every sample and every sample (the
    batch pair of small data), divided by its total: a CSR (or dense) matrix
    product per step, where an edge list would scatter every edge (60 times
    slower on a CPU at 1,000 samples). W is symmetric, so both sides are alike.
    """

    def __init__(self, W, device, dtype):
        if sp.issparse(W):  # canonical: no diagonal
            W = sp.csr_matrix(W)
            total = float(W.data.sum())
            W = W * (1.0 / total) if total > 0 else W
            with warnings.catch_warnings():  # torch: "sparse CSR support is in beta"
                warnings.simplefilter("ignore", UserWarning)
                self.matrix = torch.sparse_csr_tensor(
                    torch.as_tensor(W.indptr.astype(np.int64)),
                    torch.as_tensor(W.indices.astype(np.int64)),
                    torch.as_tensor(W.data), size=W.shape, dtype=dtype).to(device)
            degrees = np.asarray(W.sum(1)).ravel()
        else:  # a dense precomputed affinity: small here, copied without its diagonal
            dense = np.array(W, dtype=np.float64)
            np.fill_diagonal(dense, 0.0)
            total = dense.sum()
            dense = dense / total if total > 0 else dense
            self.matrix = torch.as_tensor(dense, dtype=dtype, device=device)
            degrees = dense.sum(1)
        self.degrees = torch.as_tensor(np.asarray(degrees, dtype=np.float64), dtype=dtype,
                                       device=device)

    def row_sums(self):
        return self.degrees

    col_sums = row_sums

    def times_right(self, p_right):
        return self.matrix @ p_right

    times_left = times_right


def normalised(weights, dtype):
    """Weights over their total, in ``dtype``; all 0 for a block without edges.
    Returns them and the total.

    The total is summed in float32 at least: in half precision, a block of a few
    thousand weights of order 10 overflows it, and every weight became 0. Written
    without a branch on the total, so that nothing waits for the device.
    """
    total = weights.sum(dtype=torch.promote_types(weights.dtype, torch.float32))
    safe_total = torch.where(total > 0, total, torch.ones_like(total))
    return (weights / safe_total).to(dtype), total


def block_bound_and_gradient(p_left, p_right, block, p_bar, n_rows, hardness=1.0):
    """Ratio-cut bound of a batch pair and its eq. 8 gradient.

    With r and c the row and column sums of the block and s the hardness,
    ``sum_ij W_ij [(p_i - p_j)^2 + s (p_i (1 - p_i) + p_j (1 - p_j))]``
    is ``s (r.p + c.p') + (1 - s) (r.p^2 + c.p'^2) - 2 p.(W p')`` per cluster, and
    its derivative in p_i is ``s r_i + 2 (1 - s) r_i p_i - 2 (W p')_i``, which is
    eq. 8's ``sum_j W_ij (1 - 2 p_j)`` at s = 1.

    Parameters
    ----------
    p_left : Tensor of shape (n_left, n_clusters)
    p_right : Tensor of shape (n_right, n_clusters)
    block : EdgeBlock or DenseBlock
        The normalised block of W between the two batches.
    p_bar : Tensor of shape (n_clusters,)
        Mean probability of each cluster (positive).
    n_rows : int
        Number of samples the mean p_bar stands for (n_left + n_right when p_bar is
        the batch mean): the 1/n of eq. 8.
    hardness : float, default=1.0
        Weight s of the hardness part of the edge term (see the module
        docstring); 1 is the paper's bound.

    Returns
    -------
    bound : Tensor (scalar)
        sum_l cut_l / p_bar_l, the cut of each cluster in units of the block's
        total weight; 0 for a block without edges.
    grad_left, grad_right : Tensor
        dbound/dp_left and dbound/dp_right, shaped like p_left and p_right.
    """
    rows, cols = block.row_sums()[:, None], block.col_sums()[:, None]
    w_right = block.times_right(p_right)
    # the whole (symmetric) graph between a batch and itself: one product serves both
    symmetric = isinstance(block, WholeGraphBlock) and p_left is p_right
    w_left = w_right if symmetric else block.times_left(p_left)
    soft = 1.0 - hardness
    cut = (hardness * ((rows * p_left).sum(0) + (cols * p_right).sum(0))
           - 2.0 * (p_left * w_right).sum(0))
    if soft:
        cut = cut + soft * ((rows * p_left ** 2).sum(0) + (cols * p_right ** 2).sum(0))
    bound = (cut / p_bar).sum()
    # the p_bar term of eq. 8: the same for every sample of the pair
    shared = cut / (n_rows * p_bar * p_bar)
    grad_left = hardness * rows + 2.0 * soft * rows * p_left - 2.0 * w_right
    grad_right = hardness * cols + 2.0 * soft * cols * p_right - 2.0 * w_left
    return bound, grad_left / p_bar - shared, grad_right / p_bar - shared


def bound_and_gradient(p_left, p_right, rows, cols, weights, p_bar, n_rows,
                       hardness=1.0):
    """:func:`block_bound_and_gradient` of the edge list (rows, cols, weights)."""
    block = EdgeBlock(rows, cols, weights, p_left.shape[0], p_right.shape[0],
                      p_left.dtype)
    return block_bound_and_gradient(p_left, p_right, block, p_bar, n_rows, hardness)


def _edge_term(p_i, p_j, hardness):
    """(p_i - p_j)^2 + s [p_i (1 - p_i) + p_j (1 - p_j)]; eq. 7's term at s = 1."""
    if hardness == 1.0:
        return p_i + p_j - 2.0 * p_i * p_j
    return (p_i - p_j) ** 2 + hardness * (p_i * (1.0 - p_i) + p_j * (1.0 - p_j))


def bound_of_batch_mean(p_left, p_right, rows, cols, weights, hardness=1.0):
    """The bound with p_bar the mean of the pair, differentiable end to end,
    summed edge by edge: what eq. 8 differentiates, to check it against autograd."""
    w = normalised(weights, p_left.dtype)[0][:, None]
    p_i, p_j = p_left[rows], p_right[cols]
    cut = (w * _edge_term(p_i, p_j, hardness)).sum(0)
    p_bar = torch.cat([p_left, p_right]).mean(0)
    return (cut / p_bar).sum()


def surrogate(p_left, p_right, grad_left, grad_right):
    """sum p * sg(gradient): its gradient w.r.t. the network is the eq. 8 gradient."""
    return (p_left * grad_left.detach()).sum() + (p_right * grad_right.detach()).sum()


def kl_to_uniform(p_mean, floor):
    """KL(p_mean || uniform), the anti-collapse regulariser (section 4.3)."""
    k = p_mean.shape[-1]
    return (p_mean * torch.log(p_mean.clamp_min(floor) * k)).sum()


class PRCutLoss(nn.Module):
    """The PRCut batch objective (Ghriss & Monteleoni, 2025) as a torch loss.

    For the assignment probabilities ``P`` of a left and ``Q`` of a right batch
    and the affinity block ``W`` between them (divided by its total weight), the
    value is the paper's batch objective

    .. math::

        \\sum_l \\frac{1}{\\bar P_l} \\sum_{ij} W_{ij}
        (P_{il} + Q_{jl} - 2 P_{il} Q_{jl})
        + \\gamma \\, \\mathrm{KL}(\\bar p \\,\\|\\, \\mathrm{uniform}),

    the ratio-cut bound of eq. 7 with the moving average :math:`\\bar P` of the
    cluster proportions (floored at 1% of ``1 / n_clusters``), plus the
    anti-collapse term on the batch mean :math:`\\bar p` of both batches. Its
    gradient with respect to the probabilities is the paper's (algorithm 1):
    eq. 8, evaluated with :math:`\\bar P`,

    .. math::

        \\frac{\\partial L}{\\partial P_{il}} = \\frac{\\sum_j W_{ij}
        (1 - 2 Q_{jl})}{\\bar P_l} - \\frac{\\mathrm{cut}_l}{n \\bar P_l^2},

    (n the number of samples of the pair; likewise for ``Q``), plus the exact
    gradient of the KL term. It reaches the network through eq. 8's surrogate
    ``sum_i p_i sg(dL/dp_i)``: the returned tensor has the objective's value and
    the surrogate's gradient.

    Parameters
    ----------
    n_clusters : int
        Number of clusters k (columns of the probabilities).
    gamma : float, default=1.0
        Weight of KL(batch mean || uniform), which keeps clusters from emptying.
    momentum : float in (0, 1], default=0.8
        Rate of the moving average, ``P-bar <- (1 - momentum) P-bar + momentum *
        batch mean``; 1 uses the batch mean, where eq. 8 is the exact gradient of
        the value.
    device, dtype : default=None
        Of the buffer ``p_bar`` (torch's defaults when None); move the module with
        ``.to()`` like the probabilities.

    Attributes
    ----------
    p_bar : torch.Tensor of shape (n_clusters,)
        Buffer (saved in ``state_dict()``): the moving average of the cluster
        proportions, ``1 / n_clusters`` at first (assign another start with
        ``loss.p_bar.copy_(...)``).

    Notes
    -----
    In training mode (``loss.train()``, the default) each call folds the batch
    mean into ``p_bar``, in place and on the device (no host synchronisation, so
    that a training step can be captured in a CUDA graph), before using it. In
    evaluation mode (``loss.eval()``) ``p_bar`` is read, never updated: the value
    of held-out batches is measured with the proportions learnt in training, and
    evaluating does not change the next training step.

    The moving average uses a constant rate, as the authors' code does; the
    paper's decaying rate ``beta / t`` averages over the whole run and lags
    behind the network: a shrinking cluster then gets the 1/P-bar of a larger
    one, the eq. 8 term that would hold it back is too weak, and it dies out
    (measured on digits at gamma = 1: 7 to 9 of 10 clusters survive with
    ``beta / t``, all 10 with a constant rate).

    No gradient flows to the affinity.

    Examples
    --------
    >>> import torch
    >>> from skdiffclust.torch import PRCutLoss
    >>> criterion = PRCutLoss(2, gamma=1.0)
    >>> logits = torch.tensor([[3.0, -3.0], [2.0, -2.0], [-2.0, 2.0], [-3.0, 3.0]],
    ...                       requires_grad=True)
    >>> proba = torch.softmax(logits, dim=1)
    >>> W = torch.tensor([[1.0, 0.0], [0.0, 1.0]])  # sample 0 ~ 2, sample 1 ~ 3
    >>> loss = criterion(proba[:2], proba[2:], W)
    >>> loss.backward()
    >>> criterion.p_bar
    tensor([0.5000, 0.5000])
    >>> bool(logits.grad[0, 0] > 0)  # sample 0 is pulled toward its neighbour's cluster
    True
    """

    def __init__(self, n_clusters, *, gamma=1.0, momentum=0.8, device=None, dtype=None):
        super().__init__()
        check_positive_int(n_clusters, "n_clusters")
        gamma_value, momentum_value = as_real(gamma, "gamma"), as_real(momentum, "momentum")
        if gamma_value is None or not 0 <= gamma_value < float("inf"):
            raise ValueError(f"gamma must be a non-negative finite number, got {gamma!r}.")
        if momentum_value is None or not 0 < momentum_value <= 1:
            raise ValueError(f"momentum must be in (0, 1], got {momentum!r}.")
        self.n_clusters, self.gamma = int(n_clusters), gamma_value
        self.momentum = momentum_value
        self.floor = pbar_floor(n_clusters)
        check_float_dtype(dtype)
        device = checked_device(device)
        self._value_checks = ValueChecks("PRCutLoss", "proba_left, proba_right or affinity")
        self.register_buffer(
            "p_bar", torch.full((n_clusters,), 1.0 / n_clusters, device=device, dtype=dtype))

    def forward(self, proba_left, proba_right, affinity, *, hardness=1.0):
        """The batch objective (value), with eq. 8's gradient.

        Parameters
        ----------
        proba_left : torch.Tensor of shape (n_left, n_clusters)
            Assignment probabilities of the left batch (rows on the simplex).
        proba_right : torch.Tensor of shape (n_right, n_clusters)
            Those of the right batch; same dtype and device.
        affinity : torch.Tensor of shape (n_left, n_right)
            The block of the affinity graph between the two batches: a dense
            tensor, or a sparse COO or CSR tensor (duplicate entries add up), with
            non-negative weights, read in the probabilities' dtype (integer or
            boolean weights too); divided by its total inside (a block without
            edges gives no ratio-cut term). :class:`PRCutBatchPairs` draws them.
        hardness : float in (0, 1], default=1.0
            Weight s of the hardness part of the edge term, ``(p_i - q_j)^2 + s
            [p_i (1 - p_i) + q_j (1 - q_j)]``: 1 is eq. 7; PRCut's ``annealing``
            raises it from 0.01 to 1.

        Returns
        -------
        loss : torch.Tensor of shape ()

        Raises
        ------
        ValueError
            For empty or mis-shaped batches, probabilities that are not (NaN or
            infinity, negative entries, rows not summing to 1: logits), for
            weights that are negative, NaN or infinite, and for a ``p_bar`` set to
            NaN or negative proportions; on CUDA after the first
            call, a device-side assertion instead (see :func:`set_input_checks`).
        TypeError
            For inputs that are not tensors, complex weights, probabilities not in
            the loss's dtype, or inputs not on its device.
        """
        block, hardness = self._block(affinity, proba_left, proba_right, hardness)
        probabilities = torch.cat([proba_left, proba_right])
        if block is not affinity:  # a user's tensor, not the engine's block
            self._check_values(probabilities, proba_left, affinity, block.total)
        batch_mean = probabilities.mean(0)
        p_bar = self._proportions(batch_mean)
        bound, grad_left, grad_right = block_bound_and_gradient(
            proba_left.detach(), proba_right.detach(), block, p_bar,
            probabilities.shape[0], hardness)
        kl = kl_to_uniform(batch_mean, self.floor)
        differentiated = surrogate(proba_left, proba_right, grad_left, grad_right) \
            + self.gamma * kl
        objective = (bound + self.gamma * kl).detach()
        # the objective's value, the surrogate's gradient (s - s is exactly 0)
        return objective + (differentiated - differentiated.detach())

    def _proportions(self, batch_mean):
        """The floored P-bar, after folding in the batch mean in training mode
        (in place, so that a captured CUDA graph keeps updating the same buffer)."""
        if self.training:
            self.p_bar.mul_(1.0 - self.momentum).add_(batch_mean.detach(),
                                                      alpha=self.momentum)
        return self.p_bar.clamp_min(self.floor)

    def _block(self, affinity, proba_left, proba_right, hardness):
        """The normalised block (``EdgeBlock`` / ``DenseBlock``) and the hardness as
        a float, after the checks that need no value read back from the device."""
        for name, proba in (("proba_left", proba_left), ("proba_right", proba_right)):
            _check_proba(proba, name, self.n_clusters)
        if (proba_right.dtype, proba_right.device) != (proba_left.dtype, proba_left.device):
            raise TypeError(
                f"proba_left and proba_right must share a dtype and a device, got "
                f"{proba_left.dtype} on {proba_left.device} and {proba_right.dtype} on "
                f"{proba_right.device}.")
        if (self.p_bar.dtype, self.p_bar.device) != (proba_left.dtype, proba_left.device):
            raise TypeError(
                f"PRCutLoss's p_bar is {self.p_bar.dtype} on {self.p_bar.device} but the "
                f"probabilities are {proba_left.dtype} on {proba_left.device}: move the "
                "loss with .to(device, dtype).")
        value = as_real(hardness, "hardness")
        if value is None or not 0 < value <= 1:
            raise ValueError(f"hardness must be in (0, 1], got {hardness!r}.")
        if isinstance(affinity, (EdgeBlock, DenseBlock, WholeGraphBlock)):  # the engine's
            return affinity, value
        return affinity_block(affinity, proba_left.shape[0], proba_right.shape[0],
                              proba_left.dtype, proba_left.device), value

    def _check_values(self, both, proba_left, affinity, total):
        """Probabilities on the simplex (both batches in one pass) and weights
        finite and non-negative, their ``total`` finite too (see
        :func:`set_input_checks`)."""
        weights = _stored_weights(affinity, both.dtype)
        n_left = proba_left.shape[0]
        checks = [lambda: on_simplex(both, "proba_left and proba_right", parts=(
            ("proba_left", both[:n_left]), ("proba_right", both[n_left:])))]
        if weights.numel():
            checks.append(lambda: non_negative(weights, "affinity", "weights"))
            # weights too large to add up: normalised by an infinite total, all 0
            checks.append(lambda: finite(weights, "affinity", through=total))
        # p_bar is set by the user only between calls (a start, a loaded state)
        set_proportions = (lambda: non_negative(self.p_bar, "PRCutLoss's p_bar",
                                                "cluster proportions"),)
        self._value_checks(both.device, *checks, eager_only=set_proportions)


def _check_proba(proba, name, n_clusters):
    check_tensor(proba, name)
    check_matrix(proba, name, n_cols=n_clusters, labels=("batch_size", "n_clusters"))


def _stored_weights(affinity, dtype):
    """The weights a user's affinity stores (all of a dense one), floating point."""
    if affinity.layout == torch.sparse_csr:
        weights = affinity.values()
    elif affinity.layout == torch.sparse_coo:
        weights = affinity._values()
    else:
        weights = affinity
    return weights if weights.is_floating_point() else weights.to(dtype)


def affinity_block(affinity, n_left, n_right, dtype, device):
    """A user's dense, COO or CSR block as an ``EdgeBlock`` or ``DenseBlock``."""
    if not isinstance(affinity, torch.Tensor):
        raise TypeError(
            f"affinity must be a torch.Tensor (dense, sparse COO or CSR), got "
            f"{type(affinity).__name__}.")
    if affinity.is_complex():
        raise TypeError(f"affinity must hold real weights, got dtype {affinity.dtype}.")
    if tuple(affinity.shape) != (n_left, n_right):
        raise ValueError(
            f"affinity must have shape (n_left, n_right) = ({n_left}, {n_right}), got "
            f"{tuple(affinity.shape)}.")
    if affinity.device != device:
        raise TypeError(
            f"affinity is on {affinity.device} but the probabilities on {device}: move "
            "one.")
    if affinity.layout == torch.strided:
        return DenseBlock(affinity.detach(), dtype)
    if affinity.layout == torch.sparse_csr:
        counts = affinity.crow_indices().diff()
        values = affinity.values()
        # output_size known on the host: no synchronisation with the device
        rows = torch.repeat_interleave(torch.arange(n_left, device=device), counts,
                                       output_size=values.shape[0])
        return EdgeBlock(rows, affinity.col_indices(), values.detach(), n_left, n_right,
                         dtype)
    if affinity.layout == torch.sparse_coo:
        # the raw entries, coalesced or not (duplicates add up in the sums)
        rows, cols = affinity._indices()
        return EdgeBlock(rows, cols, affinity._values().detach(), n_left, n_right, dtype)
    raise TypeError(
        f"affinity must be dense, sparse COO or sparse CSR, got layout {affinity.layout}.")

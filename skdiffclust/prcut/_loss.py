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

Annealing. The edge term splits into a Laplacian part and a hardness part,

    p_i + p_j - 2 p_i p_j = (p_i - p_j)^2 + [p_i (1 - p_i) + p_j (1 - p_j)],

and the second (concave, zero only for hard assignments) is what freezes the
first partition gradient descent meets. With the hardness part scaled by
s in (0, 1], uniform assignments minimise the bound for small s; as s grows they
first become unstable along the smoothest generalised eigenvectors of the graph
(L v = lambda D v, the directions of spectral clustering), and s = 1 gives back
eq. 7 exactly. ``hardness`` is that s.
"""

import torch

from skdiffclust.prcut._graph import pbar_floor


class EdgeBlock:
    """The block of W between a left and a right batch, as an edge list.

    ``rows``, ``cols``: positions of each edge in the left and right batches;
    ``weights``: W[left[rows], right[cols]] (padding edges have weight 0). The
    weights are divided by their total (see :func:`normalised`).
    """

    def __init__(self, rows, cols, weights, n_left, n_right, dtype):
        self.rows, self.cols = rows, cols
        self.weights = normalised(weights).to(dtype)
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
        self.block = normalised(block).to(dtype)

    def row_sums(self):
        return self.block.sum(1)

    def col_sums(self):
        return self.block.sum(0)

    def times_right(self, p_right):
        return self.block @ p_right

    def times_left(self, p_left):
        return self.block.T @ p_left


def normalised(weights):
    """Weights over their total; all 0 for a block without edges.

    Written without a branch on the total, so that nothing waits for the device.
    """
    total = weights.sum()
    safe_total = torch.where(total > 0, total, torch.ones_like(total))
    return weights / safe_total


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
    w_right, w_left = block.times_right(p_right), block.times_left(p_left)
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
    w = normalised(weights).to(p_left.dtype)[:, None]
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


class ProportionAverage:
    """Moving average of the cluster proportions P-bar (algorithm 1, line 7).

    P-bar_t = (1 - beta) P-bar_{t-1} + beta * batch mean, from P-bar_0 = 1/k (or
    the proportions of the initial partition), at the constant rate beta of the
    authors' code. The paper's decaying rate
    beta / t averages over the whole run and lags behind the network: a
    shrinking cluster then gets the 1/P-bar of a larger one, the eq. 8 term that
    would hold it back is too weak, and it dies out (measured on digits at
    gamma = 1: 7 to 9 of 10 clusters survive with beta / t, all 10 with beta).
    """

    def __init__(self, n_clusters, momentum, device, dtype, initial=None):
        self.momentum = momentum
        if initial is None:
            self.value = torch.full((n_clusters,), 1.0 / n_clusters, device=device,
                                    dtype=dtype)
        else:  # the proportions of an initial partition
            self.value = torch.as_tensor(initial, device=device, dtype=dtype).clone()
        self.floor = pbar_floor(n_clusters)

    def update(self, batch_mean):
        """Fold in a batch's mean probabilities; return the floored P-bar.

        In place, so that a captured CUDA graph keeps updating the same tensor.
        """
        self.value.mul_(1.0 - self.momentum).add_(batch_mean.detach(), alpha=self.momentum)
        return self.value.clamp_min(self.floor)

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
"""

import torch

from skdiffclust.prcut._graph import pbar_floor


def bound_and_gradient(p_left, p_right, rows, cols, weights, p_bar, n_rows):
    """Ratio-cut bound of a batch pair and its eq. 8 gradient.

    Parameters
    ----------
    p_left : Tensor of shape (n_left, n_clusters)
        Assignment probabilities of the left batch.
    p_right : Tensor of shape (n_right, n_clusters)
        Assignment probabilities of the right batch.
    rows, cols : Tensor of int64, shape (n_edges,)
        Positions of each edge in the left and right batches.
    weights : Tensor of shape (n_edges,)
        W[left[rows], right[cols]], all positive.
    p_bar : Tensor of shape (n_clusters,)
        Mean probability of each cluster (positive).
    n_rows : int
        Number of samples the mean p_bar stands for (n_left + n_right when p_bar is
        the batch mean): the 1/n of eq. 8.

    Returns
    -------
    bound : Tensor (scalar)
        sum_l cut_l / p_bar_l, the cut of each cluster in units of the block's
        total weight; 0 for a block without edges.
    grad_left, grad_right : Tensor
        dbound/dp_left and dbound/dp_right, shaped like p_left and p_right.
    """
    total = weights.sum()
    if weights.numel() == 0 or not total > 0:
        # no edge between the batches: nothing to cut, no signal (and no 0/0)
        return (p_left.new_zeros(()), torch.zeros_like(p_left),
                torch.zeros_like(p_right))
    w = (weights / total).to(p_left.dtype)[:, None]
    p_i, p_j = p_left[rows], p_right[cols]
    cut = (w * (p_i + p_j - 2.0 * p_i * p_j)).sum(0)
    bound = (cut / p_bar).sum()
    # the p_bar term of eq. 8: the same for every sample of the pair
    shared = cut / (n_rows * p_bar * p_bar)
    grad_left = _scatter_rows(w * (1.0 - 2.0 * p_j), rows, p_left) / p_bar - shared
    grad_right = _scatter_rows(w * (1.0 - 2.0 * p_i), cols, p_right) / p_bar - shared
    return bound, grad_left, grad_right


def _scatter_rows(values, index, like):
    return torch.zeros_like(like).index_add_(0, index, values)


def bound_of_batch_mean(p_left, p_right, rows, cols, weights):
    """The bound with p_bar the mean of the pair, differentiable end to end.

    What eq. 8 differentiates; used to check it against autograd.
    """
    total = weights.sum()
    w = (weights / total).to(p_left.dtype)[:, None]
    p_i, p_j = p_left[rows], p_right[cols]
    cut = (w * (p_i + p_j - 2.0 * p_i * p_j)).sum(0)
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

    P-bar_t = (1 - beta_t) P-bar_{t-1} + beta_t * batch mean, from P-bar_0 = 1/k.
    The paper's schedule beta_t = beta / t averages over the whole run, which
    lags behind a network that keeps changing; the rate is therefore kept from
    falling below ``min_rate``, so that P-bar follows the last ~1/min_rate steps.
    """

    def __init__(self, n_clusters, momentum, min_rate, device, dtype):
        self.momentum = momentum
        self.min_rate = min_rate
        self.step = 0
        self.value = torch.full((n_clusters,), 1.0 / n_clusters, device=device,
                                dtype=dtype)
        self.floor = pbar_floor(n_clusters)

    def update(self, batch_mean):
        """Fold in a batch's mean probabilities; return the floored P-bar."""
        self.step += 1
        rate = max(self.momentum / self.step, self.min_rate)
        self.value = (1.0 - rate) * self.value + rate * batch_mean.detach()
        return self.value.clamp_min(self.floor)

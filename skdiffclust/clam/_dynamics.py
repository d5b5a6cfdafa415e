"""The associative-memory (AM) dynamics of ClAM (Saha et al., ICML 2023), in torch.

Conventions (the paper's equations 1, 4, 10-12, with ``alpha = dt / tau``):

* Euclidean energy (eq. 1, weighted form eq. 10)::

      E(v) = -1/beta * log sum_mu w_mu exp(-beta * ||rho_mu - v||^2)

  and one step of the recursion (eq. 4 / 11)::

      v <- v + alpha * sum_mu (rho_mu - v) softmax_mu(-beta ||rho_mu - v||^2 + log w_mu)
        =  (1 - alpha) v + alpha * p @ R

  ``beta`` multiplies the squared distance as written in the paper; the authors'
  code uses ``exp(-(beta/2) ||.||^2)``, so their beta is twice ours. Since
  ``grad E = 2 (v - p @ R)``, one step is gradient descent on E with step
  ``alpha / 2``, and the Hessian of E is ``2 I - 4 beta Cov_p(R) <= 2 I``: the
  energy never increases for any ``alpha <= 1``, whatever beta.

* Spherical energy (eq. 12), for unit-norm points and ``rho~ = rho / ||rho||``::

      E(v) = -1/beta * log sum_mu w_mu exp(beta <rho~_mu, v>)
      v <- normalize(v + alpha * sum_mu rho~_mu softmax_mu(beta <rho~_mu, v> + log w))

  The projection back to the sphere rescales every coordinate, so in training the
  visible coordinates of a masked point move too (by a common factor).

Leading dimensions broadcast: prototypes of shape ``(R, k, d)`` run ``R``
independent restarts at once on points of shape ``(B, d)`` or ``(R, B, d)``.
Distances are computed with matrix products and the softmax is taken on logits, so
that no ``(B, k, d)`` tensor is formed and nothing under- or overflows in high
dimension.

Internally the recursion works on points stored feature-major, ``(..., d, B)``,
with logits of shape ``(..., k, B)``: torch's CPU softmax over a short last axis
(k) is an order of magnitude slower than over a leading one.

The estimator trains with these (``draw_masks``, and ``_backprop``) on CUDA; on
the CPU, and for inference, it runs the same maths in the numba kernels of
``_kernels``, which the tests check against this module.
"""

import torch

from skdiffclust.clam._kernels import COSINE, EUCLIDEAN, LOGIT_FLOOR, hidden_count


def squared_norms(x):
    return (x * x).sum(-1)


def unit_rows(x):
    """Rows scaled to unit norm; zero rows stay zero (no NaN), and a gradient passes
    through them unscaled (dividing by the dtype's smallest number, as before, made
    it infinite)."""
    norms = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    return x / torch.where(norms > 0, norms, torch.ones_like(norms))


def squared_distances(x, prototypes):
    """``||x_i - rho_mu||^2`` from matrix products, clamped at zero."""
    cross = x @ prototypes.transpose(-1, -2)
    sq = squared_norms(x)[..., :, None] + squared_norms(prototypes)[..., None, :]
    return (sq - 2 * cross).clamp_min(0.0)


class Memories:
    """Prototypes (and optional log-weights) prepared once for T recursion steps.

    Parameters
    ----------
    prototypes : Tensor of shape (..., k, d)
    beta : float
        Inverse temperature, in the paper's convention (module docstring).
    metric : {'euclidean', 'cosine'}
    log_weights : Tensor of shape (..., k) or None
        ``log w_mu`` of the weighted energy (eq. 10-11).
    """

    def __init__(self, prototypes, beta, metric=EUCLIDEAN, log_weights=None):
        self.metric = metric
        self.beta = float(beta)
        self.log_weights = log_weights
        if metric == COSINE:
            self.prototypes = unit_rows(prototypes)
            offset = None
            self._scale = self.beta
        else:
            self.prototypes = prototypes
            # -beta ||rho||^2; the -beta ||v||^2 term is the same for every mu and
            # cancels in the softmax, so it is never computed (better float32 accuracy)
            offset = -self.beta * squared_norms(prototypes)
            self._scale = 2.0 * self.beta
        if log_weights is not None:
            offset = log_weights if offset is None else offset + log_weights
        self._offset = None if offset is None else offset[..., :, None]  # (..., k, 1)
        self._transposed = self.prototypes.transpose(-1, -2)  # (..., d, k)

    # -- feature-major kernels: points (..., d, B) -------------------------------
    def logits_fm(self, xt):
        """Attraction logits (..., k, B): those of eq. 4 / 11 / 12 up to a constant
        per point."""
        logits = self._scale * (self.prototypes @ xt)
        return logits if self._offset is None else logits + self._offset

    def attraction_fm(self, xt):
        """Softmax attraction weights (..., k, B), floored (see LOGIT_FLOOR)."""
        logits = self.logits_fm(xt)
        # the shift does not change the softmax; detached, it costs no backward pass
        shifted = logits - logits.detach().amax(-2, keepdim=True)
        return torch.softmax(shifted.clamp_min(LOGIT_FLOOR), dim=-2)

    def step_fm(self, xt, alpha, free=None):
        """One AM update of feature-major points; only coordinates where ``free``
        is 1 evolve."""
        attraction = self.attraction_fm(xt)
        target = self._transposed @ attraction  # (..., d, B)
        delta = target if self.metric == COSINE else target - xt
        delta = delta * alpha if free is None else delta * (alpha * free)
        xt = xt + delta
        if self.metric == COSINE:
            xt = xt / torch.linalg.vector_norm(xt, dim=-2, keepdim=True).clamp_min(
                torch.finfo(xt.dtype).tiny)
        return xt

    # -- sample-major API: points (..., B, d) -------------------------------------
    def attraction(self, x):
        """Softmax attraction weights ``p`` of shape (..., B, k)."""
        return self.attraction_fm(x.transpose(-1, -2)).transpose(-1, -2)

    def step(self, x, alpha, free=None):
        """One AM update of the points ``x`` (..., B, d)."""
        free_fm = None if free is None else free.transpose(-1, -2)
        return self.step_fm(x.transpose(-1, -2), alpha, free_fm).transpose(-1, -2)

    def energy(self, x):
        """The energy of eq. 1 / 10 / 12 at the points ``x``, shape (..., B)."""
        if self.metric == COSINE:
            logits = self.beta * (x @ self._transposed)
        else:
            logits = -self.beta * squared_distances(x, self.prototypes)
        if self.log_weights is not None:
            logits = logits + self.log_weights[..., None, :]
        return -torch.logsumexp(logits, dim=-1) / self.beta

    def distances(self, x):
        """Euclidean or cosine (``1 - <rho~, x~>``) distances, shape (..., B, k)."""
        if self.metric == COSINE:
            return 1.0 - unit_rows(x) @ self._transposed
        return squared_distances(x, self.prototypes).sqrt()

    def assignment_proba(self, x):
        """Eq. 13 of the paper at the points ``x`` (..., B, d): ``softmax_mu(-beta
        ||rho_mu - x||^2)``, or ``softmax_mu(beta <rho~_mu, x~>)`` for the cosine
        metric, shape (..., B, k). Without the log-weights, so that the most
        probable prototype is :meth:`nearest`."""
        if self.metric == COSINE:
            logits = self.beta * (unit_rows(x) @ self._transposed)
        else:
            logits = -self.beta * squared_distances(x, self.prototypes)
        return torch.softmax(logits, dim=-1)

    def nearest(self, x):
        """Index of the closest prototype (the paper's argmin, algorithm 1 line 23)."""
        if self.metric == COSINE:
            return (x @ self._transposed).argmax(-1)
        return squared_distances(x, self.prototypes).argmin(-1)


def _recursion_fm(memories, xt, n_steps, alpha, free=None, states=None):
    for _ in range(n_steps):
        xt = memories.step_fm(xt, alpha, free)
        if states is not None:
            states.append(xt.transpose(-1, -2))
    return xt


def recursion(memories, x0, n_steps, alpha, free=None, trajectory=False):
    """``n_steps`` AM updates of ``x0`` (..., B, d); every state if ``trajectory``.

    ``free`` (0/1, same shape as the points) marks the coordinates that evolve: the
    masked ones during training (algorithm 1, line 11), all of them when None.
    """
    states = [x0] if trajectory else None
    free_fm = None if free is None else free.transpose(-1, -2).contiguous()
    x0_fm = x0.transpose(-1, -2).contiguous()
    xt = _recursion_fm(memories, x0_fm, n_steps, alpha, free_fm, states)
    return states if trajectory else xt.transpose(-1, -2)


def draw_masks(shape, mask_prob, generator, device):
    """Boolean masks, True where a coordinate is hidden.

    Each example hides exactly :func:`hidden_count` features, drawn uniformly
    without replacement among all of them (so a batch's loss does not depend on
    how many features chance hid). When that count is 0 (``mask_prob == 0``, or
    too few features) nothing is hidden and None is returned: the loss is then
    the unmasked one of eq. 8.
    """
    n_hidden = hidden_count(mask_prob, shape[-1])
    if n_hidden == 0:
        return None
    keys = torch.rand(shape, generator=generator, device=device)
    hidden = keys.topk(n_hidden, dim=-1, largest=False, sorted=False).indices
    masks = torch.zeros(shape, dtype=torch.bool, device=device)
    return masks.scatter_(-1, hidden, True)


def completion_loss(memories, x, masks, fill, n_steps, alpha):
    """Per-point pattern-completion loss (eq. 9), or eq. 8 when ``masks`` is None.

    Hidden coordinates start at ``fill`` and are the only ones that evolve and are
    scored: ``sum_hidden (x - x^T)^2``. Returns a tensor of shape (..., B).
    """
    xt = x.transpose(-1, -2).contiguous()
    if masks is None:
        final = _recursion_fm(memories, xt, n_steps, alpha)
        return (xt - final).square().sum(-2)
    masks_fm = masks.transpose(-1, -2).contiguous()
    free = masks_fm.to(x.dtype)
    x0 = torch.where(masks_fm, fill[:, None], xt)
    final = _recursion_fm(memories, x0, n_steps, alpha, free)
    return ((xt - final) * free).square().sum(-2)

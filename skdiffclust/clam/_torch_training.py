"""ClAM's training on CUDA, in torch: mini-batch Adam over stacked restarts.

One Python step per batch, with the hand-written backward pass of ``_backprop``;
the CPU runs the same updates in the numba kernels (``_training.CPUTrainer``).
"""

import numpy as np
import torch

from skdiffclust._utils._torch import make_generator, tensor_from_numpy
from skdiffclust.clam import _kernels as kernels
from skdiffclust.clam._backprop import completion_loss_and_grads
from skdiffclust.clam._dynamics import draw_masks


class BatchedAdam:
    """Adam (Kingma & Ba) on stacked restarts, with one learning rate per restart.

    Elementwise, hence exactly R independent Adam optimisers.
    """

    def __init__(self, params, learning_rate, n_restarts,
                 betas=(kernels.ADAM_BETA1, kernels.ADAM_BETA2), eps=kernels.ADAM_EPS):
        self.params = params
        self.lr = np.full(n_restarts, float(learning_rate))
        self.betas = betas
        self.eps = eps
        self.t = 0
        self.moments = [(torch.zeros_like(p), torch.zeros_like(p)) for p in params]

    def step(self, grads):
        """Update the parameters in place from their gradients (same order)."""
        self.t += 1
        beta1, beta2 = self.betas
        correction1 = 1 - beta1**self.t
        correction2 = 1 - beta2**self.t
        for param, (m, v), grad in zip(self.params, self.moments, grads):
            m.mul_(beta1).add_(grad, alpha=1 - beta1)
            v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            lr = torch.as_tensor(self.lr / correction1, dtype=param.dtype,
                                 device=param.device).reshape((-1,) + (1,) * (param.dim() - 1))
            denom = (v / correction2).sqrt_().add_(self.eps)
            param.addcdiv_(m * lr, denom, value=-1.0)


class TorchTrainer:
    """Mini-batch Adam in torch, one Python step per batch (the path for CUDA).

    Draws the permutations and masks from a torch generator seeded with ``seed``.
    """

    def __init__(self, X, fill, init_prototypes, dynamics, *, weighted, mask_prob,
                 batch_size, learning_rate, seed, device):
        self.dtype = torch.float64 if X.dtype == np.float64 else torch.float32
        self.device = device
        self.generator = make_generator(seed, device)
        self.X = tensor_from_numpy(X, self.dtype, device)
        self.fill = torch.as_tensor(fill, dtype=self.dtype, device=device)
        n_restarts, k, _ = init_prototypes.shape
        self.prototypes = torch.tensor(init_prototypes, dtype=self.dtype, device=device)
        self.log_weights = torch.zeros((n_restarts, k), dtype=self.dtype, device=device)
        self.weighted = weighted
        params = [self.prototypes, self.log_weights] if weighted else [self.prototypes]
        self.optimizer = BatchedAdam(params, learning_rate, n_restarts)
        self.dynamics = dynamics
        self.mask_prob = mask_prob
        self.batch_size = min(batch_size, X.shape[0])

    def epoch(self, active=None):
        """One epoch; returns each restart's mean loss. A stopped restart (zero
        learning rate) is computed too, and left unchanged."""
        order = torch.randperm(self.X.shape[0], generator=self.generator,
                               device=self.device)
        return self._run(order, lambda shape, start: draw_masks(
            shape, self.mask_prob, self.generator, self.device))

    def epoch_with(self, order, hidden):
        """One epoch on a given permutation and hidden features (R, n, h), as drawn by
        :class:`CPUTrainer` (h = d, all of them, for the unmasked loss)."""
        n_restarts, n_samples, n_hidden = hidden.shape
        n_features = self.X.shape[1]
        masks = None
        if n_hidden < n_features:
            masks = np.zeros((n_restarts, n_samples, n_features), dtype=bool)
            np.put_along_axis(masks, hidden, True, axis=2)
            masks = torch.as_tensor(masks, device=self.device)
        order = torch.as_tensor(order, device=self.device)
        return self._run(order, lambda shape, start: None if masks is None else
                         masks[:, start : start + shape[1]])

    @torch.no_grad()
    def _run(self, order, masks_for):
        n_samples = self.X.shape[0]
        n_restarts = self.prototypes.shape[0]
        dynamics = self.dynamics
        epoch_loss = torch.zeros(n_restarts, dtype=self.dtype, device=self.device)
        for start in range(0, n_samples, self.batch_size):
            batch = self.X[order[start : start + self.batch_size]]
            masks = masks_for((n_restarts,) + batch.shape, start)
            # restarts are independent: the gradient of their summed losses is
            # each restart's own gradient
            per_point, *grads = completion_loss_and_grads(
                self.prototypes, self.log_weights if self.weighted else None, batch, masks,
                self.fill, beta=dynamics.beta, metric=dynamics.metric,
                n_steps=dynamics.n_steps, alpha=dynamics.alpha,
            )
            self.optimizer.step(grads)
            epoch_loss += per_point.sum(-1)
        return (epoch_loss / n_samples).cpu().numpy().astype(np.float64)

    def parameters(self):
        return self.prototypes.cpu().numpy(), self.log_weights.cpu().numpy()

"""ClAM's training on CUDA: the masked completion loss as a task for the torch engine.

The ``n_init`` restarts are one batched model (prototypes of shape (R, k, d));
their gradients come from the hand-written backward pass of ``_backprop``, and
``torch.optim.Adam`` (elementwise, hence R independent Adams) updates them. The
CPU trains with the same maths in the numba kernels (``_trainer.CPUTrainer``);
as there, the trained parameters are their average over the last epoch. Unlike
there, restarts are neither pruned nor re-seeded: all of them train to the end,
in one batched computation.

To keep the step capturable in a CUDA graph, nothing in it depends on the host:
the masks of a whole epoch are drawn before it (random keys of shape
(n_batches, R, batch_size, d)), and the step reads its own with a step counter
that lives on the device.
"""

import numpy as np
import torch

from skdiffclust._training._torch import TrainOptions, UniformBatches, make_generator, train
from skdiffclust._utils._torch import tensor_from_numpy
from skdiffclust.clam._backprop import completion_loss_and_grads
from skdiffclust.clam._data import dense_rows
from skdiffclust.clam._kernels import hidden_count
from skdiffclust.clam._settings import COOLDOWN_FACTOR, plateau_schedule, trained_restarts


def masks_from_keys(keys, n_hidden):
    """Boolean masks hiding the ``n_hidden`` features of smallest key in each row."""
    hidden = keys.topk(n_hidden, dim=-1, largest=False, sorted=False).indices
    masks = torch.zeros(keys.shape, dtype=torch.bool, device=keys.device)
    return masks.scatter_(-1, hidden, True)


class CompletionTask:
    """One Adam step of algorithm 1 for every restart, on a batch of points."""

    capturable = True

    def __init__(self, X, fill, init_prototypes, dynamics, *, weighted, mask_prob, device,
                 generator, epoch_shape=None, clip=None):
        self.dtype = torch.float64 if X.dtype == np.float64 else torch.float32
        self.device, self.generator = device, generator
        self.X = tensor_from_numpy(X, self.dtype, device)
        self.fill = torch.as_tensor(fill, dtype=self.dtype, device=device)
        n_restarts, k, _ = init_prototypes.shape
        self.prototypes = torch.tensor(init_prototypes, dtype=self.dtype, device=device)
        self.log_weights = torch.zeros((n_restarts, k), dtype=self.dtype, device=device)
        self.weighted = weighted
        self.dynamics = dynamics
        self.n_hidden = hidden_count(mask_prob, X.shape[1])
        self.clip = clip  # per-point gradient clipping (None: none)
        self.keys = None  # the epoch's mask keys, drawn by start_epoch
        self.step_index = torch.zeros((), dtype=torch.int64, device=device)
        # the sum of the parameters over the epoch's steps, for their average
        self.sums = (torch.zeros_like(self.prototypes), torch.zeros_like(self.log_weights))
        self.n_summed = torch.zeros((), dtype=self.dtype, device=device)
        # (batches, batch size) of the engine's epochs, whose masks start_epoch draws
        self.epoch_shape = epoch_shape

    def start_epoch(self, epoch):
        """The engine's hook before each epoch (see :meth:`prepare_epoch`)."""
        if self.epoch_shape is not None:
            self.prepare_epoch(*self.epoch_shape)

    def parameters(self):
        return [self.prototypes, self.log_weights] if self.weighted else [self.prototypes]

    def prepare_epoch(self, n_batches, batch_size):
        """Draw the mask keys of an epoch (in place after the first, so that a
        captured step keeps reading the same tensor), rewind the step counter and
        the sums of the parameters."""
        for total in self.sums + (self.n_summed,):
            total.zero_()
        if self.n_hidden == 0:
            return
        shape = (n_batches, self.prototypes.shape[0], batch_size, self.X.shape[1])
        if self.keys is None or self.keys.shape != shape:
            self.keys = torch.empty(shape, dtype=torch.float32, device=self.device)
        self.keys.uniform_(generator=self.generator)
        self.step_index.zero_()

    def loss(self, batch):
        masks = None
        if self.n_hidden:
            keys = self.keys.index_select(0, self.step_index).squeeze(0)
            masks = masks_from_keys(keys, self.n_hidden)
            # wraps around: the capture's warm-up steps may outnumber an epoch's batches
            self.step_index.add_(1).remainder_(self.keys.shape[0])
        return None, self.loss_with_masks(batch, masks)

    @torch.no_grad()
    def loss_with_masks(self, batch, masks):
        """Write the gradients of the restarts' mean losses into ``.grad`` and return
        each restart's mean loss on the batch (R,)."""
        dynamics = self.dynamics
        per_point, grad_P, grad_W = completion_loss_and_grads(
            self.prototypes, self.log_weights if self.weighted else None, self.X[batch],
            masks, self.fill, beta=dynamics.beta, metric=dynamics.metric,
            n_steps=dynamics.n_steps, alpha=dynamics.alpha, clip=self.clip,
        )
        # restarts are independent: the gradient of their summed losses is each
        # restart's own gradient
        self.prototypes.grad = grad_P
        if self.weighted:
            self.log_weights.grad = grad_W
        # the parameters before this step: after the previous one
        self.sums[0].add_(self.prototypes)
        self.sums[1].add_(self.log_weights)
        self.n_summed.add_(1.0)
        return per_point.mean(-1)

    def averaged_parameters(self):
        """The parameters averaged over the last epoch (NumPy), as the CPU trainer's."""
        if float(self.n_summed) == 0.0:  # no epoch
            return self.prototypes.cpu().numpy(), self.log_weights.cpu().numpy()
        return tuple((total / self.n_summed).cpu().numpy() for total in self.sums)


def train_on_device(X, fill, init_prototypes, dynamics, settings):
    """Algorithm 1 for every restart with the torch engine, on ``settings.device``;
    returns TrainedRestarts (``settings.reseed``, ``prune`` and ``n_threads`` are
    the CPU trainer's)."""
    if not isinstance(X, np.ndarray):  # a row source (sparse input): dense on the device
        X = dense_rows(X)
    device = torch.device(settings.device.torch_device)
    generator = make_generator(settings.seed, device)
    sampler = UniformBatches(X.shape[0], settings.batch_size, generator, device)
    task = CompletionTask(X, fill, init_prototypes, dynamics, weighted=settings.weighted,
                          mask_prob=settings.mask_prob, device=device, generator=generator,
                          epoch_shape=(sampler.n_batches, sampler.batch_size),
                          clip=settings.gradient_clip)

    def plateau(optimizer):
        schedule = plateau_schedule(settings.learning_rate, settings.plateau_patience)
        return torch.optim.lr_scheduler.ReduceLROnPlateau(
            optimizer, mode="min", threshold_mode="rel", **schedule)

    result = train(task, sampler, TrainOptions(
        name="ClAM", device=device, learning_rate=settings.learning_rate,
        max_iter=settings.max_iter, tol=settings.tol,
        n_iter_no_change=settings.n_iter_no_change, verbose=settings.verbose,
        loss_scale=settings.loss_scale,
        scheduler=plateau, cooldown=(settings.cooldown_epochs, COOLDOWN_FACTOR)))
    return trained_restarts(*task.averaged_parameters(), result)

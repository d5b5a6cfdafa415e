"""Training ClAM's prototypes (algorithm 1 of Saha et al., 2023), all restarts at
once, on the engine's epoch loop, and the choice of trainer. Needs no torch.

Three trainers run the same mini-batch Adam on the ``n_init`` restarts stacked
along a leading dimension: ``_trainer.CPUTrainer`` by the numba kernels of
``_kernels``; on CUDA, ``_cuda_fit.CUDATrainer``, the CPU trainer with its kernel
swapped for the fused numba.cuda one (``_cuda_kernels``), and ``_torch_fit`` in
torch where numba.cuda cannot launch kernels. All are given a
:class:`~._settings.Dynamics` and a :class:`~._settings.TrainingSettings` and
return a :class:`~._settings.TrainedRestarts`; the two numba trainers re-seed dead
prototypes, prune restarts and average the last epoch
(``_trainer.RestartGuard``). Inference (labels, distances, loss) lives in
``_inference``.
"""

from skdiffclust._training import run_epochs
from skdiffclust._training._optim import ReduceOnPlateau
from skdiffclust.clam._settings import plateau_schedule, trained_restarts
from skdiffclust.clam._trainer import CPUTrainer, LearningRates, RestartGuard


def train_restarts(X, fill, init_prototypes, dynamics, settings):
    """Algorithm 1 for ``R`` restarts at once, on the engine's epoch loop.

    The restarts train together and stop together, when the sum of their epoch
    losses has converged (the engine's stopping rule; a pruned restart counts
    with its last loss); the learning rate follows the paper's plateau schedule
    (x0.8 after more than ``settings.plateau_patience`` epochs without a relative
    gain of 1e-3, down to 1e-4 times its initial value), then a cool-down of
    ``settings.cooldown_epochs``.

    Parameters
    ----------
    X : ndarray of shape (n, d), float32 or float64, or a row source
        Training points (centred and scaled, or unit rows for the spherical
        variant); a row source (``_data.ScaledData``) gives the rows of sparse
        input a slice at a time.
    fill : ndarray of shape (d,)
        Value given to hidden coordinates.
    init_prototypes : ndarray of shape (R, k, d)
    dynamics : Dynamics
    settings : TrainingSettings
        Its ``device`` (a ``_settings.TrainingDevice``) says which trainer: the
        numba kernels on the CPU (``'numba'``: ``_trainer.CPUTrainer``, with
        re-seeding and pruning as asked), the fused kernel on CUDA
        (``'numba-cuda'``: ``_cuda_fit.CUDATrainer``, the same trainer with its
        kernel on the GPU), or torch on CUDA (``'torch'``: ``_torch_fit``, without
        re-seeding or pruning) where numba.cuda cannot launch kernels.

    Returns
    -------
    TrainedRestarts
    """
    trainer_class = CPUTrainer
    if settings.device.backend == "numba-cuda":
        # the same trainer and host logic, its kernel on CUDA
        from skdiffclust.clam._cuda_fit import CUDATrainer as trainer_class
    elif settings.device.backend == "torch":
        from skdiffclust.clam._torch_fit import train_on_device

        return train_on_device(X, fill, init_prototypes, dynamics, settings)
    trainer = trainer_class.start(X, fill, init_prototypes, dynamics,
                                  learning_rate=settings.learning_rate, seed=settings.seed,
                                  weighted=settings.weighted, mask_prob=settings.mask_prob,
                                  batch_size=settings.batch_size, n_threads=settings.n_threads,
                                  clip=settings.gradient_clip)
    schedule = ReduceOnPlateau(LearningRates(trainer.optimizer),
                               **plateau_schedule(settings.learning_rate,
                                                  settings.plateau_patience))
    guard = RestartGuard(trainer, reseed=settings.reseed, prune=settings.prune)
    result = run_epochs(guard.epoch, max_iter=settings.max_iter, tol=settings.tol,
                        n_iter_no_change=settings.n_iter_no_change, name="ClAM",
                        verbose=settings.verbose, loss_scale=settings.loss_scale,
                        hooks=[schedule, guard.cooldown(settings.cooldown_epochs)])
    prototypes, log_weights = trainer.parameters(averaged=True)
    return trained_restarts(prototypes, log_weights, result, selectable=guard.active.copy())

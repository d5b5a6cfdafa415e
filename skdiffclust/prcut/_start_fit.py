"""How PRCut's network learns its start: fitted by cross-entropy to the initial
partition (spectral clustering's, ``_spectral``) before the ratio-cut training
(``_fit``), on mini-batches by Adam with a decaying step size, or, on small data
(one batch of every sample), on all of them at once by L-BFGS.
"""


import numpy as np
import torch
from torch import nn

from skdiffclust._training import TrainingResult
from skdiffclust._training._torch import (
    CosineDecay,
    TrainOptions,
    UniformBatches,
    one_thread,
    refuse_inference_mode,
    train,
)
from skdiffclust._utils._torch import make_generator


# the initialisation fits the network to the initial partition until it
# reproduces all but this fraction of an epoch's samples, with this step size,
# within this many steps: PRCut's training refines the boundary, so fitting its
# last samples (1e-3 took 10 to 30 times as many steps on small data) is wasted
INIT_ERROR_TARGET = 3e-3
INIT_LEARNING_RATE = 3e-2
INIT_MAX_STEPS = 2000
# ... for the built-in network, whose first layer reads the standardised features:
# Adam moves every weight by about the step size whatever its gradient, so a step
# moves a unit's input by about the step size times sqrt(n_features). Past MNIST's
# 784 pixels the step size shrinks as 1 / sqrt(n_features): at 3e-2 the fit to the
# start of 1,440 images of 48 x 48 to 128 x 128 pixels stalled at 2.4% to 3.7% of
# them misassigned after its 2,000 steps, and training then lost clusters (8 of 20
# kept at 128 x 128); scaled, it met the target within 30 steps
INIT_REFERENCE_FEATURES = 784


class PartitionTask:
    """Fit the network to a partition by cross-entropy (the initialisation).

    The objective recorded is the fraction of the batch the network assigns
    elsewhere than the partition does.
    """

    def __init__(self, network, features, labels, capturable=False):
        self.network, self.features, self.labels = network, features, labels
        self.capturable = capturable  # the built-in network's steps: CUDA graphs

    def parameters(self):
        return self.network.parameters()

    def loss(self, batch):
        logits = self.network(self.features(batch))
        labels = self.labels[batch]
        error = (logits.argmax(1) != labels).to(logits.dtype).mean()
        return nn.functional.cross_entropy(logits, labels), error.detach()


def init_learning_rate(n_features):
    """Adam's step size fitting the built-in network to the start, for its number
    of input features (``INIT_REFERENCE_FEATURES``)."""
    return INIT_LEARNING_RATE * min(1.0, float(np.sqrt(INIT_REFERENCE_FEATURES
                                                       / max(n_features, 1))))


def fit_to_partition(network, features, labels, *, batch_size, device, batch_seed,
                     learning_rate=INIT_LEARNING_RATE,
                     max_steps=INIT_MAX_STEPS, target=INIT_ERROR_TARGET, capturable=False):
    """Train ``network`` to predict ``labels`` (cross-entropy), in place.

    Whole epochs until one misassigns at most ``target`` of its samples, for at
    most ``max_steps`` steps (at least one epoch); a plateau does not stop it
    (networks fitting a curved boundary first settle on a straight one). The
    network need not be confident yet: PRCut's training sharpens it, and the
    estimator keeps this network if training does not lower its objective.
    ``capturable``: the network's steps may be captured in a CUDA graph (the
    built-in network's are).
    """
    sampler = UniformBatches(labels.shape[0], batch_size,
                             make_generator(batch_seed, device), device)
    task = PartitionTask(network, features, torch.as_tensor(labels, device=device),
                         capturable)
    network.train()
    if sampler.batch_size == labels.shape[0]:
        with one_thread(device):
            return _fit_whole_batch(task, device, target)
    max_epochs = max(max_steps // sampler.n_batches, 1)
    return train(task, sampler, TrainOptions(
        name="PRCut initialisation", device=device, learning_rate=learning_rate,
        max_iter=max_epochs, tol=0.0, n_iter_no_change=max_epochs, warn=False, target=target,
        # down to 0 over the budget: at a fixed 3e-2 the fit to Fashion-MNIST's
        # start swung between 4% and 14% of misassigned images from epoch to
        # epoch and ended on a bad one (8 times the start's objective)
        scheduler=CosineDecay.over(max_epochs)))


# small data (one batch of every sample): L-BFGS rounds of this many iterations, at
# most this many, until the error target is met (three times fewer network
# evaluations than Adam's steps for the same fit)
LBFGS_ROUND, LBFGS_MAX_ROUNDS = 10, 2
# ... and up to this many while the start is not learnt (more than this fraction of
# the samples elsewhere, or a cluster left empty), which training does not make up
# for: at two rounds 40 groups of 10 points along a line were fitted at an error of
# 0.8, and the fit ended at ARI 0.19 with 29 clusters (now 0.96, with 40). Fitted on
# to the target, learnt starts trained less stably under the data's last digits
LBFGS_MAX_ROUNDS_UNLEARNT, UNLEARNT_ERROR = 30, 0.02


def _fit_whole_batch(task, device, target):
    """Fit the task's partition on every sample at once by L-BFGS (deterministic)."""
    refuse_inference_mode()
    every_sample = torch.arange(task.labels.shape[0], device=device)
    clusters = torch.unique(task.labels)
    optimizer = torch.optim.LBFGS(task.network.parameters(), lr=1.0, max_iter=LBFGS_ROUND,
                                  history_size=10, line_search_fn="strong_wolfe",
                                  tolerance_grad=1e-12, tolerance_change=1e-15)

    @torch.enable_grad()  # whatever the caller's mode (see _training._torch.train)
    def closure():
        optimizer.zero_grad()
        loss, _ = task.loss(every_sample)
        loss.backward()
        return loss

    curve = []
    for round_ in range(1, LBFGS_MAX_ROUNDS_UNLEARNT + 1):
        optimizer.step(closure)
        with torch.no_grad():  # the error, and whether a cluster is left empty
            assigned = task.network(task.features(every_sample)).argmax(1)
        curve.append(float((assigned != task.labels).double().mean()))
        learnt = curve[-1] <= UNLEARNT_ERROR and bool(torch.isin(clusters, assigned).all())
        if curve[-1] <= target or (learnt and round_ >= LBFGS_MAX_ROUNDS):
            break
    return TrainingResult(n_iter=len(curve), loss_curve=np.asarray(curve),
                          converged=curve[-1] <= target)

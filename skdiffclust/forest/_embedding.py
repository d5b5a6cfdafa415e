"""Learning through clustering: train an embedding with the partial Fenchel-Young loss.

Stewart et al. (2023, sections 3.3 and 4.2): mini-batches mix labelled and
unlabelled samples; the similarity of a batch is minus the squared distances of
the embeddings, standardised per batch (so that epsilon does not depend on the
embedding's scale); the loss compares the perturbed forests with and without the
batch's constraints.

The batches are drawn on the host, where the labels are, and sent to the training
device once per epoch: each batch's number of trees depends on its labels (it must
be feasible under its constraints), and knowing it on the host is what lets a CUDA
step run without waiting for the device. On CUDA the forests are solved on the
device (``_gpu``, from the batch's labels as a device tensor) from
``DEVICE_SOLVER_MIN_BATCH_SIZE`` up, otherwise (and on the CPU) by the numba
solver; both draw the same noise from the same CPU generator, so that the two
devices train alike.
"""

import copy
import math

import numpy as np
import torch

from skdiffclust._training._torch import CosineDecay, PooledBatches, TrainOptions, train
from skdiffclust._utils._random import derive_seeds
from skdiffclust._utils._threads import device_type
from skdiffclust._utils._torch import (
    PROBE_ROWS,
    apply_in_batches,
    build_mlp,
    check_module_parameters,
    make_generator,
    module_dtype,
    module_from_state,
    probe_module,
    seeded_global_rng,
    state_to_numpy,
    tensor_from_numpy,
)
from skdiffclust.forest._constraints import Constraints
from skdiffclust.forest._scores import batch_error
from skdiffclust.forest._seeds import seed_from_generator
from skdiffclust.forest._solver import thread_limit
from skdiffclust.forest._torch import (
    PartialFenchelYoungFunction,
    PerturbedProblem,
    check_scale,
    on_device_or_none,
    similarity_to_numpy,
)

# On CUDA, batches from this size up have their forests solved on the device,
# smaller ones by the numba solver on the host (one copy of S each way, on
# n_jobs threads: one by default, -1 every core). A small step's device solve costs host
# time, not GPU time: numba.cuda prepares about 76 array arguments a step (7
# launches). Measured on an H100 (16-core host), a step at batch 64 ('mlp' (256,
# 128), 100 perturbations): 7.4 ms with the device solver (10.5 before its views of
# torch's tensors were memoised), 4.7 ms with the host's (CPU 3.7); LeNet-5: 9.2 /
# 5.8 ms (CPU 6.2). Milliseconds an epoch on digits, device / host solver on one
# core (CPU): batch 64, 301 / 246 (206); 96, 212 / 209 (202); 128, 214 / 248 (170);
# 192, 95 / 287 (222); 256, 91 / 401 (309); the host solver on 16 cores is not yet
# measured from 96 up.
DEVICE_SOLVER_MIN_BATCH_SIZE = 128


def solves_on_device(settings, device):
    """Whether the forests of a step on ``device`` are solved by the device solver."""
    if settings.device_solver is not None:
        return settings.device_solver
    return device.type == "cuda" and settings.batch_size >= DEVICE_SOLVER_MIN_BATCH_SIZE


UNLABELLED = -1


def make_embedding(embedding, X, n_components, hidden_layer_sizes, seed, sample_shape=None):
    """The module to train: 'linear', 'mlp' (initialised from ``seed``), or a copy of
    the user's module, its lazy parameters materialised (torch's global generator
    seeded from ``seed``) and its output checked on the first rows of X."""
    if embedding in ("linear", "mlp"):
        layers = tuple(hidden_layer_sizes) if embedding == "mlp" else ()
        return build_mlp(X.shape[1], layers, n_components, make_generator(seed))
    check_module_parameters(embedding, "embedding", "SpanningForestClustering")
    module = copy.deepcopy(embedding).to("cpu")
    probe = as_samples(tensor_from_numpy(X[:PROBE_ROWS], module_dtype(module), "cpu"),
                       sample_shape)
    with seeded_global_rng(seed):
        probe_module(module, probe, name="embedding", output="embeddings")
    if not any(parameter.requires_grad for parameter in module.parameters()):
        raise ValueError(  # a bare StopIteration before (nn.Identity)
            f"embedding has no parameter that requires a gradient "
            f"({type(embedding).__name__}): there would be nothing to train.")
    return module


def standardized_similarity(embedded):
    """Minus the squared distances of a batch, standardised (as the reference does)."""
    sq_norms = (embedded * embedded).sum(1)
    S = -(sq_norms[:, None] + sq_norms[None, :] - 2.0 * embedded @ embedded.T).clamp_min(0.0)
    return (S - S.mean()) / S.std().clamp_min(torch.finfo(S.dtype).eps)


def batch_n_clusters(constraints, n_clusters):
    """n_clusters brought within what the batch's constraints allow.

    A batch may hold more labelled classes than n_clusters, or so few samples that
    must-links leave fewer trees: the loss then compares forests with as many
    trees as the batch allows, so that both terms count the same edges.
    """
    lo, hi = constraints.feasible_n_clusters()
    return int(min(max(n_clusters, lo), hi))


def batch_sampler(y, batch_size, generator, device, n_batches=None):
    """Batches of half labelled, half unlabelled samples (the paper's scheme).

    Each half cycles through its own permutations; with only labelled (or only
    unlabelled) samples, batches are plain shuffled slices. ``n_batches`` per
    epoch (``None``: ``ceil(n / batch_size)``).
    """
    labelled = np.flatnonzero(y != UNLABELLED)
    unlabelled = np.flatnonzero(y == UNLABELLED)
    if n_batches is None:
        n_batches = max(math.ceil(y.shape[0] / batch_size), 1)
    if labelled.size and unlabelled.size:
        n_labelled = min(max(batch_size // 2, 1), labelled.size)
        n_unlabelled = min(batch_size - n_labelled, unlabelled.size)
        pools, sizes = [labelled, unlabelled], [n_labelled, n_unlabelled]
    else:
        pool = labelled if labelled.size else unlabelled
        pools, sizes = [pool], [min(batch_size, pool.size)]
    return PooledBatches(pools, sizes, n_batches, generator, device)


class Batch:
    """One batch: its sample indices on the host and on the training device."""

    def __init__(self, host, device):
        self.host, self.device = host, device


class EpochBatches:
    """An epoch's batches as the engine indexes them: ``shape[0]`` batches, ``[i]``."""

    def __init__(self, host, device):
        self.host, self.device = host, device

    @property
    def shape(self):
        return self.host.shape

    def __getitem__(self, i):
        return Batch(self.host[i], self.device[i])


class LabelledBatches:
    """The paper's batches (:func:`batch_sampler`), drawn on the host and sent to the
    device in one copy per epoch (from pinned memory on CUDA: no wait)."""

    def __init__(self, y, batch_size, generator, device, n_batches=None):
        self.pooled = batch_sampler(y, batch_size, generator, "cpu", n_batches)
        self.n_batches = self.pooled.n_batches
        self.device = torch.device(device)

    def epoch(self):
        host = self.pooled.epoch()
        if self.device.type == "cuda":
            host = host.pin_memory()
        return EpochBatches(host.numpy(), host.to(self.device, non_blocking=True))


class PartialFenchelYoungTask:
    """The engine's task: the partial Fenchel-Young loss of a batch's embeddings.

    The batch's constraints and number of trees come from its labels on the host.
    With ``device_solver``, the forests are solved where the data is (``_gpu``:
    nothing waits for the device); otherwise the batch's similarity matrix is
    copied to the host for the numba solver. Either way the step has host-side
    state (the noise seed, the number of trees), so it is never captured.
    """

    capturable = False

    def __init__(self, module, X, y, *, n_clusters, epsilon, n_perturbations,
                 noise_generator, device_solver=False):
        self.module, self.X, self.y = module, X, y
        self.n_clusters, self.epsilon = n_clusters, epsilon
        self.n_perturbations = n_perturbations
        self.noise_generator = noise_generator
        self.device_labels = torch.as_tensor(y, device=X.device) if device_solver else None

    def parameters(self):
        return self.module.parameters()

    def loss(self, batch):
        constraints = Constraints.from_checked_labels(self.y[batch.host])
        if constraints.is_empty:  # no pair to learn from: no step
            return None, torch.zeros((), device=self.X.device)
        n_clusters = batch_n_clusters(constraints, self.n_clusters)
        S = standardized_similarity(self.module(self.X[batch.device]))
        loss = None
        if self.device_labels is not None:
            from skdiffclust.forest import _gpu

            loss = on_device_or_none(lambda: _gpu.partial_fenchel_young_loss(
                S, self.device_labels[batch.device], n_clusters, epsilon=self.epsilon,
                n_samples=self.n_perturbations, generator=self.noise_generator))
        if loss is None:
            problem = PerturbedProblem(
                similarity_to_numpy(S), n_clusters, self.epsilon, self.n_perturbations,
                constraints, seed_from_generator(self.noise_generator),
            )
            loss = PartialFenchelYoungFunction.apply(S, problem)
        return loss, loss.detach()


class BatchValidation:
    """Early stopping's held-out error: :func:`skdiffclust.metrics.batch_clustering_error`
    of the module's embeddings of labelled samples, in batches of the training size.

    Called after each epoch (the engine's ``validation``); keeps a copy of the
    module's state at its lowest error, which :meth:`restore_best` loads back.
    """

    def __init__(self, module, X, y, *, n_clusters, batch_size):
        self.module, self.X, self.y = module, X, y
        self.n_clusters, self.batch_size = n_clusters, batch_size
        self.best, self.best_state = math.inf, None

    @torch.no_grad()
    def __call__(self):
        self.module.eval()
        try:
            embedded = torch.cat([self.module(self.X[start : start + EMBED_ROWS])
                                  for start in range(0, self.X.shape[0], EMBED_ROWS)])
        finally:
            self.module.train()
        error = batch_error(np.asarray(self.y).ravel(), embedded.to("cpu", torch.float64).numpy(),
                            int(self.n_clusters), int(self.batch_size))
        if error < self.best:
            self.best = error
            self.best_state = {name: value.detach().clone()
                               for name, value in self.module.state_dict().items()}
        return error

    def restore_best(self):
        if self.best_state is not None:
            self.module.load_state_dict(self.best_state)


# rows embedded per forward pass of the validation (bounds its activations)
EMBED_ROWS = 4096


def as_samples(tensor, sample_shape):
    """Rows of X as the module takes them: (n, *sample_shape), or (n, n_features)."""
    return tensor if sample_shape is None else tensor.view(tensor.shape[0], *sample_shape)


def check_noise_scale(settings, n_samples, dtype):
    """Raise when ``epsilon`` makes the perturbed forests' weights of a batch overflow
    the precision they are solved in (``dtype``, the module's): a batch's standardised
    similarities are less than its size in magnitude."""
    size = min(settings.batch_size, n_samples)
    solved_in = np.float64 if dtype == torch.float64 else np.float32
    try:
        check_scale(float(size), size, solved_in, settings.epsilon,
                    settings.n_perturbations)
    except ValueError:
        raise ValueError(
            f"epsilon={settings.epsilon!r} is too large: the perturbed forests of a batch "
            f"(standardised similarities, less than {size} in magnitude) overflow "
            f"{np.dtype(solved_in)}. The similarities are standardised: epsilon of the "
            "order of 0.1 to 1 perturbs them.") from None


def train_embedding(module, X, y, settings, *, validation_data=None, sample_shape=None):
    """Adam on the partial Fenchel-Young loss; returns (state, TrainingResult).

    ``settings``: an :class:`~skdiffclust.forest._settings.EmbeddingSettings`.
    ``validation_data``: ``(X_val, y_val)`` of labelled samples held out for early
    stopping on their batch-wise clustering error (:class:`BatchValidation`); the
    returned state is the one of the lowest error. ``sample_shape``: the shape each
    row of X is viewed as before the module (images), ``None`` for rows.
    """
    device = torch.device(settings.device)
    device_solver = solves_on_device(settings, device)
    batch_seed, noise_seed = derive_seeds(settings.seed, 2)
    module = module.to(device)
    module.train()
    dtype = next(module.parameters()).dtype
    check_noise_scale(settings, X.shape[0], dtype)
    task = PartialFenchelYoungTask(
        module, as_samples(tensor_from_numpy(X, dtype, device), sample_shape), y,
        n_clusters=settings.n_clusters, epsilon=settings.epsilon,
        n_perturbations=settings.n_perturbations,
        noise_generator=make_generator(noise_seed), device_solver=device_solver,
    )
    sampler = LabelledBatches(y, settings.batch_size, make_generator(batch_seed), device,
                              settings.steps_per_epoch)
    validation = None
    if validation_data is not None:
        X_val, y_val = validation_data
        validation = BatchValidation(
            module, as_samples(tensor_from_numpy(X_val, dtype, device), sample_shape), y_val,
            n_clusters=settings.n_clusters, batch_size=settings.batch_size)
    # numba's solver on n_jobs threads (one by default, -1 every core), between torch's
    # steps on one: LeNet-5 on 3,000 MNIST images at batches of 64, 2 epochs, took
    # 1.5 to 2.3 s on both cores of the 2-core machine against 1.9 to 2.2 s on one
    # (2026-11-27), the same labels
    # a cosine decay is a budget of max_iter epochs, its end planned: no warning
    cosine = settings.learning_rate_schedule == "cosine"
    with thread_limit(settings.solver_threads):
        result = train(task, sampler, TrainOptions(
            name="SpanningForestClustering", device=device,
            learning_rate=settings.learning_rate, max_iter=settings.max_iter,
            tol=settings.tol, n_iter_no_change=settings.n_iter_no_change,
            verbose=settings.verbose, weight_decay=settings.weight_decay,
            validation=validation,
            scheduler=CosineDecay.over(settings.max_iter) if cosine else None,
            warn=not cosine))
    if validation is not None:
        validation.restore_best()
    module.eval()
    return state_to_numpy(module), result


def fit_embedding(module, X, y, settings, *, validation_data=None, sample_shape=None,
                  keep_template=False):
    """Train ``module`` (:func:`train_embedding`) unless ``y`` has fewer than two
    labelled samples (nothing to learn from: it keeps its initial weights); returns
    the estimator's fitted attributes, with a CPU copy of the trained module as
    ``_embedding_template`` if ``keep_template``."""
    if np.count_nonzero(y != UNLABELLED) < 2:
        state, loss_curve, n_iter = state_to_numpy(module), np.empty(0), 0
        validation_curve = None
    else:
        state, result = train_embedding(module, X, y, settings,
                                        validation_data=validation_data,
                                        sample_shape=sample_shape)
        loss_curve, n_iter = result.loss_curve, result.n_iter
        validation_curve = result.validation_curve
    scores = None if validation_curve is None else 1.0 - validation_curve
    return {"embedding_state_": state, "loss_curve_": loss_curve, "n_iter_": n_iter,
            "device_": device_type(settings.device),
            "_embedding_template": module_from_state(module, state) if keep_template
            else None, "validation_scores_": scores,
            "best_validation_score_": (None if scores is None or not scores.size
                                       else float(scores.max()))}


def apply_module(template, state, X, sample_shape=None):
    """X (rows) embedded on the CPU by a user module: ``template`` with the trained
    ``state``, fed samples of ``sample_shape`` if not None; in X's dtype."""
    module = module_from_state(template, state)
    samples = X if sample_shape is None else X.reshape(X.shape[0], *sample_shape)
    embedded = apply_in_batches(module, samples, "cpu")
    if embedded.ndim != 2 or embedded.shape[0] != X.shape[0]:
        raise ValueError(f"embedding returned an array of shape {embedded.shape} for "
                         f"{X.shape[0]} samples: it must return one row per sample.")
    return embedded.astype(X.dtype, copy=False)

"""The torch backend of the training engine: batches, Adam and the epoch, on one device.

A method describes one training step as a *task* (:class:`TorchTask`): its
parameters and, for a batch of sample indices, the loss to back-propagate and the
objective to record. :func:`train` does the rest, identically on the CPU and on
CUDA:

* the data, the task's own tensors and the batch indices live on the training
  device; the samplers here draw batches there, from a local ``torch.Generator``
  seeded from the estimator's ``random_state`` (a method whose steps need host-side
  facts about each batch, such as the forest's labels, may draw them on the host
  and copy them once per epoch instead: a sampler's ``epoch()`` returns anything
  with ``shape[0]`` batches and ``[i]`` indexing);
* Adam updates the parameters: ``torch.optim.Adam``, or on the CPU its fused
  kernel called without torch.optim (:class:`FusedAdam`, the same bits, without
  importing ``torch._dynamo``);
* the objective is summed on the device and read back once per epoch, so that
  nothing synchronises the host with the device inside an epoch;
* on CUDA, a task whose step has static shapes and no host-side state
  (``task.capturable``) is captured once in a CUDA graph and replayed for every
  batch, which removes the per-kernel launch overhead that otherwise dominates
  small batches; the CPU always runs the plain step;
* on the CPU, torch steps on one thread (:func:`one_thread`), whatever the
  machine's default or ``n_jobs``: some of its sums are split across threads in an
  order that depends on their count, and so would the results be.

The epoch loop, the stopping rule, ``ConvergenceWarning`` and the progress bar are
:func:`skdiffclust._training._loop.run_epochs`, shared with the NumPy backend.
"""

import contextlib
import functools
import math
from dataclasses import dataclass
from typing import Protocol

import torch

from skdiffclust._training._loop import (
    Cooldown,
    EarlyStopping,
    EveryEpoch,
    SettledWhen,
    TrainingSession,
    run_epochs,
)
from skdiffclust._utils._torch import (  # noqa: F401
    make_generator,
    one_thread,
    resolve_device,
    torch_threads,
)
from skdiffclust._utils._warn import warn_user


class TorchTask(Protocol):
    """What a method hands the engine (any object with these members).

    Attributes
    ----------
    capturable : bool
        True when :meth:`loss` only uses static shapes and device tensors (no
        Python-side state that changes from step to step), so that the step may
        be captured in a CUDA graph. Optional (False when absent).
    """

    capturable: bool

    def parameters(self):
        """The tensors Adam trains."""

    def loss(self, batch):
        """``(loss, objective)`` for one batch.

        ``loss`` is back-propagated (or ``None`` when the task wrote the gradients
        into ``.grad`` itself); ``objective`` is a detached tensor, a scalar or one
        value per restart, averaged over the epoch into ``loss_curve_``.
        """

    def settled(self):
        """Optional: whether the result has stopped changing (see
        :func:`skdiffclust._training._loop.run_epochs`); read once per epoch at
        most, when the stopping rule holds."""

    def start_epoch(self, epoch):
        """Optional: called before each epoch (numbered from 0), for schedules.

        On CUDA it is called a second time for the first epoch, after the step's
        capture, whose three warm-up steps are real steps: it must reset whatever
        per-epoch state the steps advance.
        """


class UniformBatches:
    """Batches of ``batch_size`` distinct samples, a new permutation each epoch.

    ``max(n_samples // batch_size, 1)`` batches per epoch: the remainder of the
    permutation is left out (a different remainder each epoch), so that every
    batch has the same size, which keeps the step's shapes static.
    """

    def __init__(self, n_samples, batch_size, generator, device):
        self.n_samples = int(n_samples)
        self.batch_size = int(min(batch_size, n_samples))
        self.n_batches = max(self.n_samples // self.batch_size, 1)
        self.generator, self.device = generator, device

    def epoch(self):
        """Sample indices of shape (n_batches, batch_size), on the device."""
        order = torch.randperm(self.n_samples, generator=self.generator, device=self.device)
        return order[: self.n_batches * self.batch_size].view(self.n_batches, self.batch_size)


class PooledBatches:
    """Batches made of a fixed number of samples from each of several pools.

    Each pool cycles through its own permutations (a pool smaller than its share
    of an epoch is repeated), so that, for example, every batch is half labelled
    and half unlabelled. ``n_batches`` batches per epoch.
    """

    def __init__(self, pools, sizes, n_batches, generator, device):
        self.pools = [torch.as_tensor(pool, device=device) for pool in pools]
        self.sizes = [int(size) for size in sizes]
        self.n_batches = int(n_batches)
        self.generator, self.device = generator, device

    def _draw(self, pool, size):
        needed = self.n_batches * size
        n_perms = math.ceil(needed / pool.numel())
        orders = [pool[torch.randperm(pool.numel(), generator=self.generator,
                                      device=self.device)] for _ in range(n_perms)]
        return torch.cat(orders)[:needed].view(self.n_batches, size)

    def epoch(self):
        parts = [self._draw(pool, size) for pool, size in zip(self.pools, self.sizes)]
        return torch.cat(parts, dim=1)


class PairedBatches:
    """A left and a right batch per step, each from its own :class:`UniformBatches`.

    ``epoch()`` returns indices of shape (n_batches, 2, batch_size).
    """

    def __init__(self, n_samples, batch_size, generator, device):
        self.left = UniformBatches(n_samples, batch_size, generator, device)
        self.right = UniformBatches(n_samples, batch_size, generator, device)
        self.n_batches = self.left.n_batches

    def epoch(self):
        return torch.stack([self.left.epoch(), self.right.epoch()], dim=1)


def refuse_inference_mode():
    """A clear error for a fit inside ``torch.inference_mode()``: its tensors, the
    data included, cannot be trained on (``torch.no_grad()`` is fine: training
    turns gradients back on)."""
    if torch.is_inference_mode_enabled():
        raise RuntimeError("fit cannot train inside torch.inference_mode(), whose "
                           "tensors autograd cannot use: call it outside.")


@contextlib.contextmanager
def flushed_denormals():
    """Flush denormal floats to zero on the CPU, then back to torch's default (off).

    A confident softmax gives probabilities and gradients below 1e-38, whose
    arithmetic x86 CPUs run 10 to 100 times slower: PRCut's backward pass took
    17 ms a step on 70,000 blobs, 2.6 ms with them flushed (values that small
    change nothing above them).
    """
    flushed = torch.set_flush_denormal(True)
    try:
        yield
    finally:
        if flushed:
            torch.set_flush_denormal(False)


class _Stepper:
    """One optimisation step of a task, plain or replayed from a CUDA graph."""

    def __init__(self, task, optimizer):
        self.task, self.optimizer = task, optimizer
        self.graph = None

    def plain(self, batch):
        self.optimizer.zero_grad(set_to_none=True)
        loss, objective = self.task.loss(batch)
        if loss is not None:
            loss.backward()
        self.optimizer.step()
        return objective

    def capture(self, batch):
        """Record :meth:`plain` in a CUDA graph (PyTorch's whole-network recipe).

        Three warm-up steps on a side stream first (they are real training steps
        on the first batch); returns False, with a warning, if capture fails, and
        the plain step is used from then on.
        """
        try:
            self.static_batch = batch.clone()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    self.plain(self.static_batch)
            torch.cuda.current_stream().wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            self.optimizer.zero_grad(set_to_none=True)
            with torch.cuda.graph(self.graph):
                self.static_objective = self.plain(self.static_batch)
            return True
        except Exception as error:  # any failure: fall back to the plain step
            self.graph = None
            warn_user(
                f"CUDA graph capture of the training step failed ({error}); training "
                "continues without it.", RuntimeWarning,
            )
            return False

    def __call__(self, batch):
        if self.graph is None:
            return self.plain(batch)
        self.static_batch.copy_(batch)
        self.graph.replay()
        return self.static_objective.clone()


@dataclass(frozen=True)
class TrainOptions:
    """How :func:`train` trains a task: one record, so that a method's options
    reach the trainer whole and a new option is a field, not a keyword of every
    caller (``replace(options, max_iter=1)`` for a variant).

    Attributes
    ----------
    name : str
        The estimator's name (the bar, the ``ConvergenceWarning``).
    device : torch.device or str
    learning_rate : float
        Adam's step size.
    max_iter, tol, n_iter_no_change : int, float, int
        See :func:`skdiffclust._training._loop.run_epochs`.
    verbose : bool, default=False
    min_epochs : int, default=0
    target : float, default=None
        See :func:`skdiffclust._training._loop.run_epochs`.
    capture : bool or None, default=None
        Capture the step in a CUDA graph; ``None`` means when the device is CUDA
        and the task is capturable.
    scheduler : callable, default=None
        ``scheduler(optimizer) -> object with step(objective)``, stepped once per
        epoch with the epoch's objective (e.g. torch's ReduceLROnPlateau).
    warn : bool, default=True
        Issue the ``ConvergenceWarning`` when ``max_iter`` runs out (False for an
        auxiliary training, such as an initialisation, whose budget is internal).
    cooldown : tuple (n_epochs, factor), default=None
        Epochs once converged, Adam's step size multiplied by ``factor`` before
        each (see :class:`skdiffclust._training.Cooldown`).
    optimizer : torch.optim.Optimizer, default=None
        An optimiser of the task's parameters to continue (``partial_fit``: one
        epoch over a chunk, Adam's state carried from call to call, see
        :mod:`skdiffclust._training._stream`); its own step size is used and
        ``learning_rate`` ignored. ``None``: a new Adam (:func:`adam`).
    weight_decay : float, default=0.0
        The new Adam's L2 penalty (torch's ``weight_decay``: added to the gradient).
    loss_scale : float, default=1.0
        The progress bar's objective in the units of the fitted attributes (see
        :class:`skdiffclust._training._loop.TrainingSession`).
    validation : callable, default=None
        ``validation() -> float``, an error on held-out data (lower is better),
        computed after each epoch: the stopping rule watches it instead of the
        training objective (early stopping: an ``EarlyStopping`` hook of the loop).
    session : TrainingSession, default=None
        The fit this training is part of (one bar, at most one warning, for
        several trainings: ``verbose`` and ``warn`` are then that fit's);
        ``None``: the training reports alone.
    """

    name: str
    device: object
    learning_rate: float
    max_iter: int
    tol: float
    n_iter_no_change: int
    verbose: bool = False
    min_epochs: int = 0
    target: object = None
    capture: object = None
    scheduler: object = None
    warn: bool = True
    cooldown: object = None
    optimizer: object = None
    weight_decay: float = 0.0
    loss_scale: float = 1.0
    validation: object = None
    session: object = None


def train(task, sampler, options):
    """Train a task with Adam, epoch by epoch, until it converges.

    Parameters
    ----------
    task : TorchTask
    sampler : UniformBatches, PooledBatches, PairedBatches or similar
        ``sampler.epoch()`` returns an epoch's batches: an object with
        ``shape[0]`` batches whose ``[i]`` is what ``task.loss`` takes (the
        samplers of this module: index tensors drawn on ``device``).
    options : TrainOptions
        How: the stopping rule, Adam, the schedule, the device.

    Returns
    -------
    TrainingResult
    """
    refuse_inference_mode()
    device = torch.device(options.device)
    capture, optimizer, scheduler = options.capture, options.optimizer, options.scheduler
    on_cuda = device.type == "cuda"
    if capture is None:
        capture = on_cuda and getattr(task, "capturable", False)
    if optimizer is None:
        # torch's schedulers (ClAM's ReduceLROnPlateau) take torch.optim's optimisers only
        optimizer = adam(list(task.parameters()), options.learning_rate,
                         capturable=bool(capture), on_cuda=on_cuda,
                         weight_decay=options.weight_decay,
                         state_dict=not _reads_param_groups_only(scheduler))
    else:
        capture = False  # a given optimiser was not made capturable
    stepper = _Stepper(task, optimizer)
    lr_schedule = None if scheduler is None else scheduler(optimizer)
    state = {"epoch": 0, "captured": not capture}

    start_epoch = getattr(task, "start_epoch", None)

    def epoch():
        if start_epoch is not None:
            start_epoch(state["epoch"])
        state["epoch"] += 1
        batches = sampler.epoch()
        if not state["captured"]:
            state["captured"] = True
            stepper.capture(batches[0])
            if start_epoch is not None:
                # the capture's warm-up steps advanced the epoch's state (ClAM's
                # step counter): start the epoch afresh
                start_epoch(state["epoch"] - 1)
        total = None
        for i in range(batches.shape[0]):
            objective = stepper(batches[i])
            total = objective if total is None else total + objective
        # the only host-device synchronisation of the epoch
        return (total / batches.shape[0]).to("cpu", torch.float64).numpy()

    hooks = [hook for hook in (
        None if lr_schedule is None else EveryEpoch(lr_schedule.step),
        None if options.cooldown is None else optimizer_cooldown(optimizer, *options.cooldown),
        None if getattr(task, "settled", None) is None else SettledWhen(task.settled),
        None if options.validation is None else EarlyStopping(options.validation),
    ) if hook is not None]
    context = one_thread(device)
    # gradients on, whatever the caller's mode (a fit inside torch.no_grad() failed
    # with torch's "element 0 of tensors does not require grad")
    with context, contextlib.nullcontext() if on_cuda else flushed_denormals(), \
            torch.enable_grad(), \
            own_session(options) as session:
        return run_epochs(
            epoch, max_iter=options.max_iter, tol=options.tol,
            n_iter_no_change=options.n_iter_no_change, name=options.name,
            min_epochs=options.min_epochs, target=options.target, hooks=hooks, session=session)


def own_session(options):
    """The training's :class:`TrainingSession`: ``options.session`` where a fit of
    several trainings reports them as one, else a TrainingSession of its own."""
    if options.session is not None:
        return contextlib.nullcontext(options.session)
    return TrainingSession(options.name, verbose=options.verbose, total=options.max_iter,
                           warn=options.warn, loss_scale=options.loss_scale)


def adam(parameters, learning_rate, *, capturable, on_cuda, weight_decay=0.0,
         state_dict=True):
    """torch.optim.Adam; on the CPU its fused kernel where this torch has one (one
    call instead of a dozen small operations per step: a quarter of the time of a
    small network's step). Without ``state_dict`` (a training whose Adam state is
    not carried on), that kernel is called without torch.optim (:class:`FusedAdam`:
    the same bits, without importing ``torch._dynamo``)."""
    parameters = list(parameters)
    if not on_cuda:
        if not state_dict:
            optimizer = FusedAdam.of(parameters, learning_rate, weight_decay)
            if optimizer is not None:
                return optimizer
        try:
            return torch.optim.Adam(parameters, lr=learning_rate, fused=True,
                                    weight_decay=weight_decay)
        except (RuntimeError, TypeError, ValueError):  # torch < 2.4: no fused CPU Adam
            pass
    return torch.optim.Adam(parameters, lr=learning_rate, capturable=capturable,
                            weight_decay=weight_decay)


# torch.optim.Adam's defaults
ADAM_BETAS, ADAM_EPS = (0.9, 0.999), 1e-8


class FusedAdam:
    """``torch.optim.Adam(fused=True)`` on the CPU without torch.optim: the same
    kernel (``torch._fused_adam_``) on the same tensors, so the same bits.

    torch.optim's first step imports ``torch._dynamo``: about 1.7 s of CPU on the
    2-core CPU machine, a fifth of DeepImageClustering's first fit on 200 images.
    :func:`train` makes this one for its own trainings on the CPU (steps,
    ``zero_grad`` and the step sizes of ``param_groups``, which
    :class:`CosineDecay` and the cool-down set); it has no ``state_dict``, so
    ``partial_fit``, which carries Adam's state from call to call, makes
    torch's (:func:`adam` with ``state_dict=True``).
    """

    def __init__(self, parameters, learning_rate, weight_decay=0.0):
        self.parameters = list(parameters)
        self.param_groups = [{"params": self.parameters, "lr": float(learning_rate)}]
        self.weight_decay = float(weight_decay)
        self.state = {}

    @classmethod
    def of(cls, parameters, learning_rate, weight_decay=0.0):
        """The optimiser, or None where ``torch.optim.Adam(fused=True)`` would not
        run this kernel: a torch without the fused CPU Adam (before 2.4), or a
        parameter that is not a floating-point tensor on the CPU."""
        parameters = list(parameters)
        if not all(parameter.device.type == "cpu" and torch.is_floating_point(parameter)
                   for parameter in parameters) or not _fused_cpu_adam_runs():
            return None
        return cls(parameters, learning_rate, weight_decay)

    def zero_grad(self, set_to_none=True):
        """Forget the gradients (``set_to_none``, torch's default, is the only way)."""
        for parameter in self.parameters:
            parameter.grad = None

    @torch.no_grad()
    def step(self):
        """One Adam step of the parameters that have a gradient, as torch.optim's:
        the moments and the step count (a float32 scalar) made at the first,
        the count raised by one, then the kernel, once per dtype."""
        groups = {}
        for parameter in self.parameters:
            if parameter.grad is None:
                continue
            if parameter not in self.state:
                self.state[parameter] = (
                    torch.zeros_like(parameter, memory_format=torch.preserve_format),
                    torch.zeros_like(parameter, memory_format=torch.preserve_format),
                    torch.zeros((), dtype=torch.float32))
            group = groups.setdefault(parameter.dtype, ([], [], [], [], []))
            for items, item in zip(group, (parameter, parameter.grad)
                                   + self.state[parameter]):
                items.append(item)
        for params, grads, exp_avgs, exp_avg_sqs, steps in groups.values():
            torch._foreach_add_(steps, 1)
            _fused_adam(params, grads, exp_avgs, exp_avg_sqs, steps,
                        lr=self.param_groups[0]["lr"], weight_decay=self.weight_decay)


def _fused_adam(params, grads, exp_avgs, exp_avg_sqs, steps, *, lr, weight_decay):
    torch._fused_adam_(params, grads, exp_avgs, exp_avg_sqs, [], steps, amsgrad=False,
                       lr=lr, beta1=ADAM_BETAS[0], beta2=ADAM_BETAS[1],
                       weight_decay=weight_decay, eps=ADAM_EPS, maximize=False,
                       grad_scale=None, found_inf=None)


@functools.cache
def _fused_cpu_adam_runs():
    """Whether this torch has the fused Adam kernel for the CPU (2.4 and later)."""
    try:
        tensors = [[torch.zeros(1)] for _ in range(4)]
        _fused_adam(*tensors, [torch.zeros(())], lr=1e-3, weight_decay=0.0)
    except (AttributeError, NotImplementedError, RuntimeError, TypeError):
        return False
    return True


def _reads_param_groups_only(scheduler):
    """Whether ``train``'s ``scheduler`` works with any optimiser that has
    ``param_groups`` (none, or :class:`CosineDecay`), so that :class:`FusedAdam`
    will do; torch's schedulers check for torch.optim's optimisers."""
    return scheduler is None or (isinstance(scheduler, functools.partial)
                                 and scheduler.func is CosineDecay)


class CosineDecay:
    """Adam's step size along a half cosine, from its value down to 0 over ``n_epochs``.

    A scheduler for :func:`train`'s ``scheduler`` (``CosineDecay.over(n_epochs)``):
    stepped after each epoch, it sets every parameter group's step size for the next
    epoch to ``lr * (1 + cos(pi * e / n_epochs)) / 2``, ``e`` the epochs done (SGDR's
    schedule without restarts, Loshchilov and Hutter, 2017). A constant step leaves
    stochastic training where the last mini-batches put it, about a step size from
    the minimum; shrinking it brings the parameters to rest, while the early epochs
    still take the large steps.
    """

    def __init__(self, optimizer, n_epochs):
        self.optimizer, self.n_epochs, self.epochs = optimizer, max(int(n_epochs), 1), 0
        self.rates = [float(group["lr"]) for group in optimizer.param_groups]

    @classmethod
    def over(cls, n_epochs):
        """The ``scheduler`` argument of :func:`train`: ``optimizer -> CosineDecay``."""
        return functools.partial(cls, n_epochs=n_epochs)

    def multiplier(self):
        return 0.5 * (1.0 + math.cos(math.pi * min(self.epochs, self.n_epochs) / self.n_epochs))

    def step(self, objective=None):
        self.epochs += 1
        for group, rate in zip(self.optimizer.param_groups, self.rates):
            if isinstance(group["lr"], torch.Tensor):  # capturable Adam reads it in place
                group["lr"].fill_(rate * self.multiplier())
            else:
                group["lr"] = rate * self.multiplier()


def optimizer_cooldown(optimizer, n_epochs, factor):
    """A :class:`Cooldown` scaling the step size of every parameter group, from the
    rates they have when it starts (in place: a captured step reads them)."""
    rates = []

    def set_scale(multiplier):
        if not rates:
            rates.extend(float(group["lr"]) for group in optimizer.param_groups)
        for group, rate in zip(optimizer.param_groups, rates):
            if isinstance(group["lr"], torch.Tensor):
                group["lr"].fill_(rate * multiplier)
            else:
                group["lr"] = rate * multiplier

    return Cooldown(n_epochs, factor, set_scale)

"""What ClAM's training is given, and what it returns: the AM dynamics, the
training settings (built once by ``ClAM.fit``), the learning-rate schedule and
stopping constants, and the record of the trained restarts.

Every ``'auto'`` of ClAM's parameters is decided here: ``beta`` and
``learning_rate`` from the scales of the initial prototypes (:func:`scaled_beta`,
:func:`scaled_learning_rate`), ``n_iter_no_change`` from the data's size
(:meth:`TrainingSettings.resolved`), ``device`` from the machine and the fit's
shape (:func:`training_device`, :func:`kernel_fallback`).

Both trainers read these: the numba one on the CPU (``_fit``) and the torch one
for CUDA (``_torch_fit``); neither imports the other's module, so this one sits
below both.
"""

from dataclasses import dataclass, fields
from typing import NamedTuple

import numpy as np

from skdiffclust._utils._threads import device_type
from skdiffclust.clam._selection import relabel_by_first_appearance

# learning-rate schedule of the paper (appendix B.1, table 5): x0.8 after more than 5
# epochs without a relative gain of 1e-3, down to 1e-5 (1e-4 times its 0.1)
PLATEAU_SCHEDULE = dict(factor=0.8, patience=5, threshold=1e-3, min_lr=1e-5)
MIN_LR_RATIO = 1e-4
# the sharpest float beta (scaled units): far past k-means' hard assignments; float32
# training trained at 1e20 and overflowed at 1e25 (blobs of 2 to 784 features)
MAX_BETA = 1e15
# 'auto' patiences span about this many Adam steps (in epochs, within bounds): an
# epoch of 100,000 points is 6,250 steps, one of 300 points 19
STOPPING_STEPS, STOPPING_BOUNDS = 2000, (2, 10)
PLATEAU_STEPS, PLATEAU_BOUNDS = 1000, (1, 5)
# from this epoch on, restarts stop training when their epoch loss is this much
# (relative) above the best one, or when their prototypes (averaged over the
# epoch) are those of a better restart (_selection.same_prototypes)
PRUNE_MARGIN, PRUNE_FROM_EPOCH = 0.1, 3
DUPLICATES_FROM_EPOCH = 1
# once converged, epochs of about this many Adam steps (within bounds) at a
# learning rate halved before each (down to 1/16 of where it was), without
# re-seeding: the averaged prototypes then rest near a minimum of the full
# objective instead of in the noise of the last steps
COOLDOWN_STEPS, COOLDOWN_BOUNDS, COOLDOWN_FACTOR = 1000, (1, 4), 0.5
# beta='auto' is AUTO_SHARPNESS over the scale at which the initial prototypes
# compete (scales_of: the spread, mean squared distance of the points to their
# nearest initial prototype, or the gap to the second nearest when smaller): a
# typical point's logits for its two nearest prototypes differ by about 8, so that
# the basins of attraction are the Voronoi cells of the prototypes but for the
# points next to their boundaries (the paper's criterion for beta, section 3.3).
# learning_rate='auto' is AUTO_LEARNING_RATE times the spread per feature,
# sqrt(spread / d), over a function of the sharpness (scaled_learning_rate): both
# follow the scale of the clusters
AUTO_SHARPNESS = 8.0
AUTO_LEARNING_RATE = 0.015
# device='auto' trains with torch on CUDA from this batch size up. A torch step is a
# few hundred small operations on (n_init, n_clusters, batch_size, n_features)
# arrays: on an H100 (16-core host, 200,000 x 32, k=20) CUDA took 58.2 s against the
# CPU kernels' 13.2 s at batch_size=16, and 11.9 s against 54.1 s at batch_size=1024.
CUDA_MIN_BATCH_SIZE = 1024


def steps_patience(n_samples, batch_size, steps, bounds):
    """A patience in epochs spanning about ``steps`` Adam steps, within ``bounds``."""
    n_batches = -(-n_samples // max(min(batch_size, n_samples), 1))
    return int(np.clip(-(-steps // n_batches), *bounds))


def scaled_beta(beta, competition, cosine):
    """beta in the units of the centred and scaled data: a float as given, 'auto'
    :data:`AUTO_SHARPNESS` over the scale at which the prototypes compete
    (``scales_of``)."""
    if beta != "auto":
        return float(beta)
    # cosine logits are beta <rho~, v> = -beta/2 ||rho~ - v||^2 + const
    return (2.0 if cosine else 1.0) * AUTO_SHARPNESS / competition


def scaled_learning_rate(learning_rate, spread, competition, n_features, beta, cosine):
    """'auto': a fraction of the clusters' spread per feature, divided by the
    sharpness ``s = beta * competition`` as ``max(s, 1/2) * sqrt(max(s, 1))``:
    the loss steepens with beta, and steps of the same length make mini-batch
    training chaotic (its result then hangs on the data's last bits)."""
    if learning_rate != "auto":
        return float(learning_rate)
    sharpness = beta * competition / (2.0 if cosine else 1.0)
    return (AUTO_LEARNING_RATE * float(np.sqrt(spread / n_features))
            / (max(sharpness, 0.5) * np.sqrt(max(sharpness, 1.0))))


class TrainingDevice(NamedTuple):
    """Where a fit trains, resolved once (:func:`training_device`): ``backend``
    ``'numba'`` (the CPU kernels, no torch needed), ``'numba-cuda'`` (the fused
    CUDA kernel, ``_cuda_fit``) or ``'torch'`` (torch on CUDA, ``_torch_fit``, on the
    device named ``torch_device``, such as ``'cuda:0'``)."""

    backend: str
    torch_device: str = None

    @property
    def type(self):
        """``'cpu'`` or ``'cuda'``: the fitted ``device_``."""
        if self.backend == "torch":
            return str(self.torch_device).split(":")[0]
        return "cuda" if self.backend == "numba-cuda" else "cpu"


CPU = TrainingDevice("numba")
NUMBA_CUDA = TrainingDevice("numba-cuda")


def training_device(device, batch_size, machine):
    """Where a fit trains, a :class:`TrainingDevice`: the numba kernels on the CPU,
    the fused kernel or torch on CUDA; ``machine`` (a ``_device.Machine``) answers
    what this machine offers the fit.

    ``device='cuda'``: the fused kernel where numba.cuda can launch it, else torch.
    ``'auto'``: the CPU where no NVIDIA driver is; below
    :data:`CUDA_MIN_BATCH_SIZE`, the fused kernel where it was measured to win on
    a fit of this shape, else the CPU; from it, torch on CUDA where torch is
    installed.
    """
    if device == "cpu" or (device == "auto" and not machine.nvidia_driver_present()):
        return CPU
    if device == "auto" and batch_size < CUDA_MIN_BATCH_SIZE:
        return NUMBA_CUDA if machine.fused_wins(batch_size) else CPU
    if device == "cuda" and machine.numba_cuda_available():
        return NUMBA_CUDA
    if device == "auto" and not machine.torch_installed():
        return CPU
    return torch_training_device(machine.torch_device(device))


def torch_training_device(device):
    """The :class:`TrainingDevice` of a torch device: torch on CUDA, or the numba
    kernels where torch resolved ``'auto'`` to its CPU."""
    return CPU if device.type == "cpu" else TrainingDevice("torch", str(device))


def kernel_fallback(device):
    """Where a fit whose fused kernel fails on this machine trains instead
    (``_device.train_where_resolved``): the CPU for ``device='auto'`` (the CPU's
    fit), None for ``device='cuda'``: torch on CUDA, where torch is installed."""
    return CPU if device == "auto" else None


def plateau_schedule(learning_rate, patience):
    """The paper's plateau schedule for an initial ``learning_rate``."""
    return dict(PLATEAU_SCHEDULE, patience=int(patience),
                min_lr=float(learning_rate) * MIN_LR_RATIO)


@dataclass(frozen=True)
class Dynamics:
    """The fixed hyperparameters of the AM recursion."""

    beta: float
    n_steps: int
    alpha: float
    metric: str


@dataclass(frozen=True)
class TrainingSettings:
    """How the restarts train: everything but the data, the initial prototypes and
    the dynamics. ``ClAM`` builds it once per fit (the 'auto' values resolved);
    see :func:`skdiffclust.clam._fit.train_restarts`."""

    weighted: bool  # learn per-prototype log-weights (eq. 10-11)
    mask_prob: float
    batch_size: int
    max_iter: int
    learning_rate: float
    tol: float
    n_iter_no_change: int
    device: TrainingDevice = CPU
    seed: int = 0
    verbose: bool = False
    plateau_patience: int = PLATEAU_SCHEDULE["patience"]
    cooldown_epochs: int = COOLDOWN_BOUNDS[1]
    n_threads: int = 1
    gradient_clip: float = None  # per-point gradients clipped to this times the median
    reseed: bool = True  # re-seed dead prototypes (CPU only)
    prune: bool = True  # prune clearly worse restarts (CPU only)
    # the progress bar's loss in the data's units, as loss_curve_ (the points are
    # trained centred and scaled: the loss scales with the square of the scale)
    loss_scale: float = 1.0

    @classmethod
    def resolved(cls, n_samples, *, n_iter_no_change, batch_size, **settings):
        """The settings of a fit on ``n_samples`` points, ``n_iter_no_change='auto'``
        resolved and the plateau and cool-down patiences derived (in epochs of
        about so many Adam steps)."""
        def patience(steps, bounds):
            return steps_patience(n_samples, batch_size, steps, bounds)

        if n_iter_no_change == "auto":
            n_iter_no_change = patience(STOPPING_STEPS, STOPPING_BOUNDS)
        return cls(n_iter_no_change=int(n_iter_no_change), batch_size=batch_size,
                   plateau_patience=patience(PLATEAU_STEPS, PLATEAU_BOUNDS),
                   cooldown_epochs=patience(COOLDOWN_STEPS, COOLDOWN_BOUNDS), **settings)


@dataclass
class TrainedRestarts:
    prototypes: np.ndarray  # (R, k, d)
    log_weights: np.ndarray  # (R, k)
    n_iter: np.ndarray  # (R,) epochs run by each restart
    loss_curves: list  # R arrays of epoch losses
    selectable: np.ndarray = None  # (R,) bool: not pruned (default: all)

    def __post_init__(self):
        if self.selectable is None:
            self.selectable = np.ones(self.prototypes.shape[0], dtype=bool)


def trained_restarts(prototypes, log_weights, result, selectable=None):
    """The restarts' parameters with the engine's record of their training."""
    n_restarts = prototypes.shape[0]
    curves = result.loss_curve.reshape(result.n_iter, n_restarts)
    return TrainedRestarts(prototypes=prototypes, log_weights=log_weights,
                           n_iter=np.full(n_restarts, result.n_iter),
                           loss_curves=[curves[:, r].copy() for r in range(n_restarts)],
                           selectable=selectable)


@dataclass(frozen=True)
class FittedState:
    """What a fit leaves in the estimator, by attribute name: the public fitted
    attributes (in the input's units) and the private state inference needs (in
    ClAM's centred and scaled units). ``ClAM`` builds one per candidate fit and
    adopts the one it keeps."""

    cluster_centers_: np.ndarray
    cluster_weights_: np.ndarray
    labels_: np.ndarray
    n_clusters_: int
    beta_: float
    n_iter_: int
    loss_: float
    loss_curve_: np.ndarray
    device_: str
    _prototypes: np.ndarray  # (k, d) float64, ClAM's units
    _shift: np.ndarray
    _scale: float
    _mask_fill: np.ndarray
    _score_seed: int
    # what inference reads (not the parameters, which set_params may have changed)
    _fit_dynamics: Dynamics  # in ClAM's units
    _weighted: bool
    _mask_prob: float

    @classmethod
    def of(cls, kept, data, dynamics, fill, score_seed, dtype, *, weighted, mask_prob,
           relabel=True, device="cpu"):
        """The state of a fit whose kept restart is ``kept`` (``_selection.keep_best``,
        or ``partial_fit``'s): clusters numbered by first appearance in the labels
        (occupied first) unless not ``relabel``; ``device``: where it trained."""
        cosine = dynamics.metric == "cosine"
        n_clusters = kept["prototypes"].shape[0]
        order, labels = np.arange(n_clusters), kept["labels"]
        if relabel:
            order, labels = relabel_by_first_appearance(labels, n_clusters)
        squared_scale = data.scale**2
        prototypes = kept["prototypes"][order]
        centers = prototypes if cosine else prototypes * data.scale + data.shift
        return cls(
            cluster_centers_=centers.astype(dtype), cluster_weights_=kept["weights"][order],
            labels_=labels, n_clusters_=int(np.unique(labels).size),
            beta_=dynamics.beta / squared_scale, n_iter_=kept["n_iter"],
            loss_=kept["loss"] * squared_scale, loss_curve_=kept["loss_curve"] * squared_scale,
            device_=device_type(device), _prototypes=prototypes, _shift=data.shift,
            _scale=data.scale, _mask_fill=fill,
            _score_seed=score_seed, _fit_dynamics=dynamics, _weighted=bool(weighted),
            _mask_prob=float(mask_prob))

    def items(self):
        """(attribute name, value) pairs, in field order."""
        return [(field.name, getattr(self, field.name)) for field in fields(self)]

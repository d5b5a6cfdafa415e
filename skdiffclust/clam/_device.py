"""Where ClAM trains: the numba kernels on the CPU, the fused numba.cuda kernel on
CUDA, or torch on CUDA where numba.cuda cannot launch kernels."""

import dataclasses
import importlib.util
import os
import sys
from typing import NamedTuple

from skdiffclust._utils._cuda import is_numba_error
from skdiffclust._utils._optional import import_optional
from skdiffclust._utils._warn import warn_user
from skdiffclust.clam._settings import NUMBA_CUDA, kernel_fallback, torch_training_device

# Below _settings.CUDA_MIN_BATCH_SIZE, device='auto' trains with the fused kernel (one thread block
# per restart, its batches one after another) where it was measured to win: at
# 200,000 x 32, k=20, batch_size=16 (16-core hosts), 6.44 s against the CPU's 10.35 s
# on an H200 (2026-11-27), 9.46 against 12.22 s and 8 against 14.8 s on H100s. Per
# batch on an H100 (CUDA / one CPU thread, microseconds), k=20: 166 / 207; k=4: 85 /
# 51; batch_size 4: 66 / 65; batch_size 8: 112 / 148. So few prototypes and tiny
# batches stay on the CPU, and so do small data sets, whose fits (a second or two on
# the CPU) would not repay the CUDA context and the kernel's loading. All were
# measured with the kernel's working memory in shared memory (48 KB; 43 at 32
# features): wider data, whose working memory goes to global memory, stays there too.
FUSED_MIN_SAMPLES = 100_000
FUSED_MIN_CLUSTERS = 8
FUSED_MIN_BATCH_SIZE = 8


class FitShape(NamedTuple):
    """What ``device='auto'`` asks of a fit to choose the fused kernel."""

    n_samples: int
    n_clusters: int
    n_features: int
    mask_prob: float
    n_steps: int


class Machine:
    """What this machine offers a fit of shape ``fit`` (a :class:`FitShape`; None:
    an unknown fit), as ``_settings.training_device`` asks it."""

    def __init__(self, fit=None):
        self.fit = fit

    def nvidia_driver_present(self):
        return nvidia_driver_present()

    def fused_wins(self, batch_size):
        return fused_wins(self.fit, batch_size)

    def numba_cuda_available(self):
        return numba_cuda_available()

    def torch_installed(self):
        return torch_installed()

    def torch_device(self, device):
        return torch_device(device)


def fused_wins(fit, batch_size):
    """Whether the fused kernel was measured to beat the CPU on a fit of this shape
    (``fit``, a :class:`FitShape`; None: an unknown fit) and can launch here."""
    if fit is None or fit.n_samples < FUSED_MIN_SAMPLES or batch_size < FUSED_MIN_BATCH_SIZE \
            or fit.n_clusters < FUSED_MIN_CLUSTERS or not numba_cuda_available():
        return False
    from skdiffclust.clam._cuda_fit import fits_in_shared_memory
    from skdiffclust.clam._kernels import hidden_count

    return fits_in_shared_memory(fit.n_clusters, fit.n_features,
                                 hidden_count(fit.mask_prob, fit.n_features), fit.n_steps,
                                 batch_size)


def train_where_resolved(train, settings, requested_device):
    """``train(settings)`` and the device it trained on; where the fused kernel was
    chosen and numba.cuda fails on this machine (no libNVVM, which torch's CUDA
    wheels do not bring; a driver too old for its PTX), a warning, then the
    training again: on the CPU for ``device='auto'`` (the CPU's fit), in torch on
    CUDA for ``device='cuda'`` (``_settings.kernel_fallback``)."""
    if settings.device != NUMBA_CUDA:
        return train(settings), settings.device
    try:
        return train(settings), settings.device
    except Exception as error:
        if not is_numba_error(error):
            raise
        fallback = kernel_fallback(requested_device) or torch_cuda_or_raise(error)
        warn_user(
            f"ClAM(device={requested_device!r}) could not train with its CUDA kernel "
            f"({type(error).__name__}: {error}); it trained "
            f"{'on the CPU' if fallback.type == 'cpu' else 'in torch on CUDA'} instead. "
            "Installing numba-cuda for this CUDA version enables the kernel.",
            RuntimeWarning)
        return train(dataclasses.replace(settings, device=fallback)), fallback


def torch_cuda_or_raise(error):
    """torch on CUDA (a ``TrainingDevice``), or ``error`` raised again where torch
    is not installed."""
    if not torch_installed():
        raise error
    from skdiffclust._utils._torch import resolve_device

    return torch_training_device(resolve_device("cuda"))


def torch_installed():
    """Whether torch can be imported (without importing it)."""
    return importlib.util.find_spec("torch") is not None


def torch_device(device):
    """torch's device for ``device`` ('cuda'; 'auto': CUDA where available), or an
    ImportError naming the feature where torch is missing."""
    import_optional("torch", needed_for='ClAM(device="cuda")')
    from skdiffclust._utils._torch import resolve_device

    return resolve_device(device)


def numba_cuda_available():
    """Whether numba.cuda can launch the fused kernel (imports numba.cuda: only asked
    where a driver may be, or for device='cuda')."""
    try:
        from skdiffclust.clam._cuda_fit import cuda_available

        return cuda_available()
    except Exception:  # a numba without a usable CUDA target: torch's turn
        return False


def nvidia_driver_present():
    """False where no CUDA device can be: Linux without NVIDIA's device files. Then
    ``device='auto'`` needs no torch import (a second or more) to pick the CPU."""
    if not sys.platform.startswith("linux"):
        return True
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/dxg")  # WSL: dxg

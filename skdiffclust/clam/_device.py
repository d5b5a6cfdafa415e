"""Where ClAM trains: the numba kernels on the CPU, the fused numba.cuda kernel on
CUDA, or torch on CUDA where numba.cuda cannot launch kernels."""

import importlib.util
import os
import sys

from skdiffclust._utils._optional import import_optional
from skdiffclust._utils._threads import host_threads

# settings.device of the fused kernel (``_cuda_fit``): numba.cuda, no torch needed
NUMBA_CUDA = "numba-cuda"

# device='auto' trains on CUDA (torch) from this batch size up. A torch step is a few
# hundred small operations on (n_init, n_clusters, batch_size, n_features) arrays: on
# an H100 (16-core host, 200,000 x 32, k=20) CUDA took 58.2 s against the CPU
# kernels' 13.2 s at batch_size=16, and 11.9 s against 54.1 s at batch_size=1024.
# The fused kernel (device='cuda': one thread block per restart, its batches one
# after another) took 15.8 s against the CPU kernels' 9.4 s at batch_size=16 on an
# H200 (16-core host, 2026-11-26; 19.2 s before its rework); after its 32-bit
# offsets and warp barriers, 9.46 s against 12.22 s on an H100 (16-core host; 17.23 s
# before them, same machine), 1.3x, and slower than the CPU at k=4 (85 against 51
# microseconds a batch): small batches stay on the CPU, which compiles nothing for
# the GPU (numba.cuda's first compilation takes seconds). On another H100 (a fourth
# session, 2026-11-26): 7.7 to 8.1 s against 14.8 s, 1.9x, of which an estimated 5.5
# s were the fit's host part on one core (fit_threads); not yet measured on all.
CUDA_MIN_BATCH_SIZE = 1024


def resolve_training_device(device, batch_size):
    """'cpu' (the numba kernels, no torch needed), :data:`NUMBA_CUDA` (the fused
    kernel, for device='cuda') or the torch device for CUDA."""
    if device == "cpu" or (device == "auto" and (batch_size < CUDA_MIN_BATCH_SIZE
                                                 or not _nvidia_driver_present())):
        return "cpu"
    if device == "cuda" and _numba_cuda_available():
        return NUMBA_CUDA
    if device == "auto" and importlib.util.find_spec("torch") is None:
        return "cpu"
    import_optional("torch", needed_for='ClAM(device="cuda")')
    from skdiffclust._utils._torch import resolve_device

    return resolve_device(device)


def fit_threads(n_jobs, device, batch_size):
    """Threads of the CPU kernels in ``fit``
    (:func:`~skdiffclust._utils._threads.host_threads`): every core for
    ``n_jobs=None`` when the training runs on CUDA, since the start, the choice of
    the restart and the labels still run on the host (37% of the CPU fit of 200,000
    x 32 at the defaults on the 2-core development machine: an estimated 5.5 of the
    8 seconds of the CUDA fit on an H100's host)."""
    on_cuda = n_jobs is None and resolve_training_device(device, batch_size) != "cpu"
    return host_threads(n_jobs, on_cuda)


def _numba_cuda_available():
    """Whether numba.cuda can launch the fused kernel (imports numba.cuda: only asked
    where a driver may be, or for device='cuda')."""
    try:
        from skdiffclust.clam._cuda_fit import cuda_available

        return cuda_available()
    except Exception:  # a numba without a usable CUDA target: torch's turn
        return False


def _nvidia_driver_present():
    """False where no CUDA device can be: Linux without NVIDIA's device files. Then
    ``device='auto'`` needs no torch import (a second or more) to pick the CPU."""
    if not sys.platform.startswith("linux"):
        return True
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/dxg")  # WSL: dxg

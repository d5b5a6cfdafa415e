"""Where ClAM trains: the numba kernels on the CPU, or torch on CUDA."""

import importlib.util
import os
import sys

from skdiffclust._utils._optional import import_optional

# device='auto' trains on CUDA from this batch size up. A step is a few hundred
# small operations on (n_init, n_clusters, batch_size, n_features) arrays: on an H100
# (16-core host, 200,000 x 32, k=20) CUDA took 33.6 s against the CPU kernels' 6.1 s
# at batch_size=16, and 6.1 s against 11.4 s at batch_size=1024
CUDA_MIN_BATCH_SIZE = 1024


def resolve_training_device(device, batch_size):
    """'cpu' (the numba kernels, no torch needed) or the torch device for CUDA."""
    if device == "cpu" or (device == "auto" and (batch_size < CUDA_MIN_BATCH_SIZE
                                                 or not _nvidia_driver_present())):
        return "cpu"
    if device == "auto" and importlib.util.find_spec("torch") is None:
        return "cpu"
    import_optional("torch", needed_for='ClAM(device="cuda")')
    from skdiffclust._utils._torch import resolve_device

    return resolve_device(device)


def _nvidia_driver_present():
    """False where no CUDA device can be: Linux without NVIDIA's device files. Then
    ``device='auto'`` needs no torch import (a second or more) to pick the CPU."""
    if not sys.platform.startswith("linux"):
        return True
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/dxg")  # WSL: dxg

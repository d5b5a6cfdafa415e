"""numba.cuda glue shared by the packages' CUDA kernels (spanning forests, ClAM).

Imported only by modules that run kernels on a GPU (or on numba's CUDA simulator):
``import skdiffclust`` imports neither this module nor numba.cuda.
"""

import contextlib

import numpy as np
from numba import config as numba_config


def is_numba_error(error):
    """Whether ``error`` is numba's (its CUDA driver glue, NVVM, typing, lowering): what
    a machine whose numba.cuda cannot run our kernels raises (no libNVVM, a driver
    too old for the PTX), as opposed to a mistake in the input."""
    return type(error).__module__.split(".")[0] in ("numba", "numba_cuda")


def simulated():
    """Whether numba.cuda is the CPU simulator (``NUMBA_ENABLE_CUDASIM=1``)."""
    return bool(numba_config.ENABLE_CUDASIM)


def import_kernels(module_name):
    """Import a module of numba.cuda kernels, ready to compile and launch them on a
    GPU under any NumPy (see :func:`numpy_row_stack_placeholder`)."""
    import importlib

    with numpy_row_stack_placeholder():
        module = importlib.import_module(module_name)
        if not simulated():
            load_cuda_lowering_registries()
    return module


def _numpy_row_stack(tup, *, dtype=None, casting="same_kind"):
    """Stand-in for ``np.row_stack`` while numba.cuda registers its overloads."""
    return np.vstack(tup, dtype=dtype, casting=casting)


@contextlib.contextmanager
def numpy_row_stack_placeholder():
    """Let numba.cuda load its lowering registries under NumPy >= 2.5.

    numba-cuda (0.30.4 and earlier) registers an overload of ``np.row_stack``
    unconditionally, when its target first compiles or loads a kernel; NumPy 2.5
    removed that alias, so every kernel launch failed with ``AttributeError: module
    'numpy' has no attribute 'row_stack'`` (seen on an H100 with NumPy 2.5.2). A
    stand-in exists only while the registries load, then is removed again.
    """
    if hasattr(np, "row_stack"):
        yield
        return
    np.row_stack = _numpy_row_stack
    try:
        yield
    finally:
        del np.row_stack


def load_cuda_lowering_registries():
    """Import the module of numba.cuda that registers NumPy's overloads (once)."""
    try:
        import numba.cuda.cudaimpl  # noqa: F401
    except ImportError:  # a numba.cuda with another layout: nothing to prepare
        pass

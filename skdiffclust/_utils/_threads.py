"""How many CPU threads a fit's kernels take, and where it ran (no numba or torch
import)."""

import itertools

from joblib import effective_n_jobs

# the BLAS and OpenMP libraries' thread controls, found once (scanning the loaded
# libraries takes about 0.2 ms, threadpool_limits 3 to 7 ms; limiting a found one, 5 us)
_BLAS = []
_OPENMP = []


def host_threads(n_jobs):
    """The CPU threads of ``n_jobs``, the same in every estimator and search
    (scikit-learn's glossary, joblib's rule): ``None`` means 1, unless inside a
    ``joblib.parallel_config(n_jobs=...)`` context, which then sets it; ``-1``
    every core, ``-2`` all but one, and so on. The callers' kernels give the same
    result on any number of threads."""
    return max(int(effective_n_jobs(n_jobs)), 1)


def device_type(device):
    """``'cpu'`` or ``'cuda'``: the kind of device a fit ran on, given as a string
    (``'cpu'``, ``'cuda'``) or an object with a ``type`` (a ``torch.device``, ClAM's
    ``TrainingDevice``); the value of every trained estimator's fitted attribute
    ``device_``."""
    name = str(getattr(device, "type", device))
    return "cuda" if name.startswith("cuda") else "cpu"


def one_blas_thread():
    """A context running BLAS on one thread. OpenBLAS's products round otherwise on
    another number of threads, even those that only partition their output (a
    1,797 x 64 by 64 x 10 product differs in its last bits on one and on two), and
    a long training amplified those bits (SparseGEMINI's path of 12,000 MNIST
    images ended elsewhere on two threads)."""
    if not _BLAS:
        from threadpoolctl import ThreadpoolController

        _BLAS.append(ThreadpoolController().select(user_api="blas"))
    return _BLAS[0].limit(limits=1)


def openmp_threads(n_threads):
    """A context running the OpenMP loops of the libraries loaded at the first call
    (scikit-learn's) on ``n_threads`` threads."""
    if not _OPENMP:
        from threadpoolctl import ThreadpoolController

        _OPENMP.append(ThreadpoolController().select(user_api="openmp"))
    return _OPENMP[0].limit(limits=max(int(n_threads), 1))


_NO_ITEM = object()


def in_order(function, items, n_threads=1, max_threads=None):
    """``function(item)`` of each item, yielded in the items' order, computed on up
    to ``n_threads`` threads (at most ``max_threads``; NumPy releases the GIL in
    its products and copies).

    For work split into pieces fixed by the data alone (rows in blocks of a set
    size, never a share per thread), each piece computed on one BLAS thread (the
    caller holds :func:`one_blas_thread`) and the pieces combined in their order:
    the result is then the same on any number of threads. At most twice
    ``n_threads`` pieces are in flight or waiting to be taken, so that a caller
    combining each piece as it comes (a running sum) holds few at a time.
    """
    items = list(items)
    n_threads = min(int(n_threads), len(items), max_threads or len(items))
    if n_threads <= 1:
        yield from map(function, items)
        return
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    pending = iter(items)
    with ThreadPoolExecutor(n_threads) as pool:
        futures = deque(pool.submit(function, item)
                        for item in itertools.islice(pending, 2 * n_threads))
        while futures:
            result = futures.popleft().result()
            following = next(pending, _NO_ITEM)
            if following is not _NO_ITEM:
                futures.append(pool.submit(function, following))
            yield result

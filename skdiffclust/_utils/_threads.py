"""How many CPU threads a fit's kernels take (no numba or torch import)."""

from joblib import effective_n_jobs


def host_threads(n_jobs, on_cuda):
    """``n_jobs``'s threads; for ``None``, one, or every core when the training runs
    on CUDA: its steps leave the host idle, so the work a fit still does there (the
    forests of small batches, ClAM's start and labels) takes all of it. The callers'
    kernels give the same result on any number of threads."""
    if n_jobs is None and on_cuda:
        return effective_n_jobs(-1)
    return max(int(effective_n_jobs(n_jobs)), 1)

"""Warnings and errors specific to skdiffclust."""

__all__ = ["CachingDisabledWarning", "InfeasibleConstraintsWarning"]


class InfeasibleConstraintsWarning(UserWarning):
    """The constraints do not allow the requested number of clusters.

    Raised when cannot-links keep more groups apart than ``n_clusters``, or when
    must-links leave fewer clusters than ``n_clusters``. The estimator then returns
    the number of clusters it reached, in ``n_clusters_``.
    """


class CachingDisabledWarning(UserWarning):
    """numba cannot cache skdiffclust's compiled kernels in this environment.

    Issued once per process when no cache location is writable (a read-only
    install without a writable home directory). The kernels are then compiled in
    memory in every new process, which makes first fits slower; set the
    environment variable ``NUMBA_CACHE_DIR`` to a writable directory to cache them
    there.
    """

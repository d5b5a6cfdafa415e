"""Warnings and errors specific to skdiffclust."""

__all__ = ["CachingDisabledWarning", "ClusterCountWarning", "InfeasibleConstraintsWarning"]


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


class ClusterCountWarning(UserWarning):
    """``n_clusters='auto'`` found no number of clusters that stands out.

    The estimator fits the candidate its criterion scored highest, but that score
    says the data support no number clearly (for example, k-means partitions of
    the images' graph that disagree from start to start at every candidate), so
    the number found may be far from the number of classes. The criterion of
    every candidate is in ``n_clusters_scores_``; pass ``n_clusters`` when the
    number is known.
    """

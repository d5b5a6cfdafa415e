"""Warnings and errors specific to skdiffclust."""

__all__ = ["InfeasibleConstraintsWarning"]


class InfeasibleConstraintsWarning(UserWarning):
    """The constraints do not allow the requested number of clusters.

    Raised when cannot-links keep more groups apart than ``n_clusters``, or when
    must-links leave fewer clusters than ``n_clusters``. The estimator then returns
    the number of clusters it reached, in ``n_clusters_``.
    """

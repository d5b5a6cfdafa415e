"""Validation helpers shared by the estimators and the functional API."""

import numbers

import numpy as np

from skdiffclust._utils._symmetry import max_asymmetry


def symmetry_tolerance(S):
    """Tolerance on |S - S.T|: sqrt(machine epsilon) of S's dtype times its scale.

    Relative to the whole matrix, so that float32 similarities computed from
    distances (torch.cdist, matrix products) pass while real asymmetry does not.
    """
    if S.size == 0:
        return 0.0
    scale = max(abs(float(S.max())), abs(float(S.min())))
    return float(np.sqrt(np.finfo(S.dtype).eps)) * scale


def is_symmetric(S):
    return max_asymmetry(S, 0.0, symmetry_tolerance(S)) == 0


def check_similarity_matrix(S, name="X"):
    """Raise a ValueError unless ``S`` is a square, symmetric similarity matrix."""
    if S.ndim != 2 or S.shape[0] != S.shape[1]:
        raise ValueError(
            f"{name} must be a square (n_samples, n_samples) similarity matrix, "
            f"got shape {S.shape}."
        )
    asymmetry = max_asymmetry(S, 0.0, symmetry_tolerance(S))
    if asymmetry > 0:
        raise ValueError(
            f"{name} must be a symmetric similarity matrix; "
            f"|{name} - {name}.T| exceeds the tolerance by up to {asymmetry:.3g}."
        )


def check_n_clusters(n_clusters, n_samples):
    """Raise unless ``n_clusters`` is an integer between 1 and ``n_samples``."""
    if not isinstance(n_clusters, numbers.Integral) or isinstance(n_clusters, bool):
        raise TypeError(f"n_clusters must be an integer, got {n_clusters!r}.")
    if n_clusters < 1:
        raise ValueError(f"n_clusters must be >= 1, got {n_clusters}.")
    if n_clusters > n_samples:
        raise ValueError(
            f"n_clusters={n_clusters} must be <= n_samples={n_samples}: a forest "
            "cannot have more trees than nodes."
        )

"""Validation helpers shared by the estimators and the functional API."""

import numbers

from skdiffclust._utils._symmetry import max_asymmetry

SYMMETRY_RTOL = 1e-5
SYMMETRY_ATOL = 1e-8


def check_similarity_matrix(S, name="X"):
    """Raise a ValueError unless ``S`` is a square, symmetric similarity matrix."""
    if S.ndim != 2 or S.shape[0] != S.shape[1]:
        raise ValueError(
            f"{name} must be a square (n_samples, n_samples) similarity matrix, "
            f"got shape {S.shape}."
        )
    asymmetry = max_asymmetry(S, SYMMETRY_RTOL, SYMMETRY_ATOL)
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

"""ClAM: clustering with associative memories (Saha et al., ICML 2023)."""

from skdiffclust.clam._estimator import ClAM

__all__ = ["ClAM"]

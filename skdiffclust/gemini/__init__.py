"""Sparse GEMINI: discriminative clustering with feature selection (Ohl et al., 2024)."""

from skdiffclust.gemini._estimator import SparseGEMINI
from skdiffclust.gemini._objectives import OBJECTIVES, gemini_value_and_grad
from skdiffclust.gemini._path import GeminiPath

__all__ = ["OBJECTIVES", "GeminiPath", "SparseGEMINI", "gemini_value_and_grad"]

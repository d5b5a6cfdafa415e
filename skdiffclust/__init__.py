"""skdiffclust: differentiable clustering estimators with scikit-learn's API.

Importing the package is light: it neither imports torch nor compiles numba
kernels (they compile on first use and are cached on disk).
"""

from skdiffclust.clam import ClAM
from skdiffclust.deep import DeepImageClustering
from skdiffclust.forest import (
    SpanningForestClustering,
    constraints_from_labels,
    spanning_forest,
)
from skdiffclust.gemini import SparseGEMINI, gemini_value_and_grad
from skdiffclust.prcut import PRCut

__version__ = "0.1.0.dev0"

__all__ = [
    "ClAM",
    "DeepImageClustering",
    "PRCut",
    "SparseGEMINI",
    "SpanningForestClustering",
    "constraints_from_labels",
    "gemini_value_and_grad",
    "spanning_forest",
    "__version__",
]

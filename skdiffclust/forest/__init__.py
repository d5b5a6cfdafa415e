"""Maximum-weight k-spanning forests (Stewart et al., NeurIPS 2023)."""

from skdiffclust.forest._api import spanning_forest
from skdiffclust.forest._constraints import constraints_from_labels
from skdiffclust.forest._estimator import SpanningForestClustering

__all__ = ["SpanningForestClustering", "constraints_from_labels", "spanning_forest"]

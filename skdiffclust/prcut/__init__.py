"""Deep clustering by probabilistic ratio-cut optimisation.

Ghriss & Monteleoni, AISTATS 2025.
"""

from skdiffclust.prcut._estimator import PRCut
from skdiffclust._graphcut._graph import ratio_cut

__all__ = ["PRCut", "ratio_cut"]

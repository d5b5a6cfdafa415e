"""The differentiable clustering objectives as PyTorch building blocks.

This module imports torch; the rest of skdiffclust does not. It gathers what the
method folders define, for use in your own models and training loops (see the
user guide, "The objectives in your own torch model"):

* :func:`perturbed_spanning_forest`, :func:`partial_fenchel_young_loss` and
  :func:`constraints_from_labels` (``forest/_torch.py``): perturbed spanning
  forests and the partial Fenchel-Young loss (Stewart et al., NeurIPS 2023), on
  the CPU or on S's CUDA device;
* :class:`PRCutLoss` and :class:`PRCutBatchPairs` (``_graphcut/_loss.py``,
  ``prcut/_device.py``): PRCut's batch objective and its batch pairs of a graph;
* :func:`gemini_loss` (``gemini/_torch.py``): the GEMINI objectives;
* :class:`ClAMLayer` and :func:`clam_loss` (``clam/_layer.py``): ClAM's
  associative-memory recursion and its pattern-completion loss;
* :func:`set_input_checks` (``_utils/_torch_checks.py``): how the blocks check the
  values of their inputs (on CUDA without waiting for the device).
"""

from skdiffclust._utils._optional import import_optional

# the blocks below import torch: without it, one line says what to install
import_optional("torch", needed_for="skdiffclust.torch")

from skdiffclust._utils._torch_checks import set_input_checks  # noqa: E402
from skdiffclust.clam._layer import ClAMLayer, clam_loss  # noqa: E402
from skdiffclust.forest._torch import (  # noqa: E402
    constraints_from_labels,
    partial_fenchel_young_loss,
    perturbed_spanning_forest,
)
from skdiffclust.gemini._torch import gemini_loss  # noqa: E402
from skdiffclust.prcut._device import PRCutBatchPairs  # noqa: E402
from skdiffclust._graphcut._loss import PRCutLoss  # noqa: E402

__all__ = [
    "ClAMLayer",
    "PRCutBatchPairs",
    "PRCutLoss",
    "clam_loss",
    "constraints_from_labels",
    "gemini_loss",
    "partial_fenchel_young_loss",
    "perturbed_spanning_forest",
    "set_input_checks",
]

"""PRCut on the user's network (``PRCut(module=...)``): its copy and its checks.

The module maps a float tensor of samples of X, shape (batch, *X.shape[1:]) (rows
of features, or images), in the dtype of its parameters, to ``n_clusters`` logits.
PRCut trains a deep copy of it, so the user's module is never changed.
Uninitialised (lazy) parameters, such as those of ``nn.LazyLinear``, are
materialised by a forward pass on a few rows
of X, on the CPU, under torch's global generator seeded from ``random_state``
and restored afterwards (``seeded_global_rng``): the same ``random_state`` gives
the same weights, and the caller's random streams are left as they were. The same
probe checks the output's shape and values before any training.
"""

import copy

import numpy as np
import scipy.sparse as sp
from torch import nn

from skdiffclust._utils._torch import (
    PROBE_ROWS,
    check_module_parameters,
    module_dtype,
    probe_module,
    tensor_from_numpy,
)


def check_is_module(module):
    """``module`` must be an ``nn.Module`` (the estimator's parameter)."""
    if not isinstance(module, nn.Module):
        raise TypeError(
            "module must be a torch.nn.Module mapping a batch of rows of X to "
            f"n_clusters logits, or None for the built-in network; got "
            f"{type(module).__name__}."
        )


def copy_module(module, X, n_clusters):
    """A CPU copy of ``module``, its lazy parameters materialised, its output checked.

    The probe runs in evaluation mode without gradients (so that batch
    normalisation does not update its running statistics), on the first rows of
    X, dense; lazy parameters draw from torch's global generator, so call this
    under :func:`skdiffclust._utils._torch.seeded_global_rng`.
    """
    check_is_module(module)
    check_module_parameters(module, "module", "PRCut")
    network = copy.deepcopy(module).to("cpu")
    rows = X[:PROBE_ROWS]
    rows = rows.toarray() if sp.issparse(rows) else np.asarray(rows)
    probe = tensor_from_numpy(rows, module_dtype(network), "cpu")
    probe_module(network, probe, name="module", output="logits", width=n_clusters)
    if not any(parameter.requires_grad for parameter in network.parameters()):
        raise ValueError("module has no parameter that requires a gradient: PRCut would "
                         "have nothing to train.")
    return network

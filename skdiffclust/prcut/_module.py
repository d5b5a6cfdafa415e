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
import torch
from torch import nn

from skdiffclust._utils._torch import module_dtype, tensor_from_numpy

# rows of X in the forward pass that materialises lazy parameters and checks the
# module's output (two: a batch, not a single sample)
N_PROBE_ROWS = 2


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
    _check_parameters(module)
    network = copy.deepcopy(module).to("cpu")
    rows = X[:N_PROBE_ROWS]
    rows = rows.toarray() if sp.issparse(rows) else np.asarray(rows)
    probe = tensor_from_numpy(rows, module_dtype(network), "cpu")
    expected = f"(batch, n_clusters={n_clusters})"
    training = network.training
    network.eval()
    try:
        with torch.no_grad():
            logits = network(probe)
    except (RuntimeError, TypeError, ValueError, IndexError) as error:
        raise ValueError(
            f"module failed on a batch of rows of X of shape {tuple(probe.shape)} "
            f"({type(error).__name__}: {error}). It must map a float tensor of shape "
            f"(batch, {', '.join(map(str, X.shape[1:]))}), samples as in X, to logits of "
            f"shape {expected}."
        ) from error
    finally:
        network.train(training)
    if (not isinstance(logits, torch.Tensor)
            or tuple(logits.shape) != (len(probe), n_clusters)):
        found = (f"shape {tuple(logits.shape)}" if isinstance(logits, torch.Tensor)
                 else f"a {type(logits).__name__}")
        raise ValueError(
            f"module must return logits of shape {expected}; on a batch of shape "
            f"{tuple(probe.shape)} it returned {found}."
        )
    if logits.dtype != probe.dtype:  # PRCut's loss is in the parameters' dtype
        raise TypeError(
            f"module returned {logits.dtype} logits from {probe.dtype} parameters: "
            "return logits in the dtype of its parameters.")
    if not bool(torch.isfinite(logits).all()):
        raise ValueError("module returned non-finite logits (NaN or infinity) on the "
                         "first rows of X.")
    if not any(parameter.requires_grad for parameter in network.parameters()):
        raise ValueError("module has no parameter that requires a gradient: PRCut would "
                         "have nothing to train.")
    return network


def _check_parameters(module):
    """float32 or float64 parameters that hold values: half precision failed inside
    L-BFGS (float16) or NumPy (bfloat16), a meta module inside the copy."""
    for parameter in module.parameters():
        if parameter.is_meta:
            raise ValueError("module's parameters are on the meta device, without "
                             "values: materialise them first (module.to_empty(device="
                             "'cpu') and an initialisation).")
        if parameter.dtype not in (torch.float32, torch.float64):
            raise TypeError(f"module's parameters are {parameter.dtype}: PRCut trains "
                            "float32 or float64 modules (module.float()).")

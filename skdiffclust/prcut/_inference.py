"""The trained network's forward pass: the built-in network's in NumPy (predict needs
no torch, no GPU), a user's module in torch on the CPU."""

import numpy as np
from scipy.special import erf, softmax


def gelu(x):
    # the exact (erf) GELU, as torch.nn.GELU() computes it
    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


def predict_logits(X, coefs, intercepts):
    """Logits of the network for dense or sparse X, in float64."""
    hidden = X
    for depth, (coef, intercept) in enumerate(zip(coefs, intercepts)):
        hidden = np.asarray(hidden @ coef) + intercept
        if depth < len(coefs) - 1:
            hidden = gelu(hidden)
    return hidden


def predict_probabilities(X, coefs, intercepts):
    """Assignment probabilities: the softmax of the logits."""
    return softmax(predict_logits(X, coefs, intercepts), axis=1)


def module_logits(module, X):
    """A module's logits of X (float64, on the CPU), all finite."""
    from skdiffclust._utils._torch import apply_in_batches

    logits = apply_in_batches(module, X, "cpu")
    if not np.all(np.isfinite(logits)):
        raise ValueError(
            "The trained module gives non-finite logits (NaN or infinity) for some "
            "rows of X; if its training diverged, lower learning_rate.")
    return logits

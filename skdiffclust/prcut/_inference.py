"""The trained network's forward pass in NumPy: predict needs no torch, no GPU."""

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

"""The Sparse GEMINI models, forward and backward by hand in NumPy.

``f(x) = g(x) + W' x`` (Ohl et al., 2024, eq. 8): an MLP ``g`` (ReLU) plus a linear
skip connection ``W`` (n_features x n_clusters) that carries the group-lasso
penalty. Without hidden layers the model is the sparse logistic regression
``f(x) = W' x + b`` (the paper's M = 0 case). Parameters live in a dict of arrays,
so that optimisers, proximal operators and pickling all see plain NumPy.
"""

import numpy as np

SKIP = "skip"


def init_params(n_features, hidden_layer_sizes, n_clusters, rng, dtype=np.float64):
    """Parameters drawn like torch's nn.Linear (uniform in +-1/sqrt(fan_in))."""
    params = {SKIP: _uniform(rng, n_features, (n_features, n_clusters), dtype)}
    sizes = [n_features, *hidden_layer_sizes, n_clusters]
    if not hidden_layer_sizes:
        params["bias"] = _uniform(rng, n_features, (n_clusters,), dtype)
        return params
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        params[f"W{i}"] = _uniform(rng, fan_in, (fan_in, fan_out), dtype)
        params[f"b{i}"] = _uniform(rng, fan_in, (fan_out,), dtype)
    return params


def _uniform(rng, fan_in, shape, dtype):
    bound = 1.0 / np.sqrt(max(fan_in, 1))
    return rng.uniform(-bound, bound, size=shape).astype(dtype)


def n_hidden_layers(params):
    return sum(1 for name in params if name.startswith("W"))


def forward(params, X):
    """Logits and the activations the backward pass needs."""
    logits = X @ params[SKIP]
    n_layers = n_hidden_layers(params)
    if n_layers == 0:
        return logits + params["bias"], []
    activations = [X]
    h = X
    for i in range(n_layers):
        h = h @ params[f"W{i}"] + params[f"b{i}"]
        if i < n_layers - 1:
            h = np.maximum(h, 0.0)
            activations.append(h)
    return logits + h, activations


def softmax(logits):
    shifted = logits - logits.max(axis=1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=1, keepdims=True)


def softmax_backward(proba, grad_proba):
    """d/dlogits from d/dproba, through the row-wise softmax."""
    return proba * (grad_proba - (proba * grad_proba).sum(axis=1, keepdims=True))


def backward(params, X, activations, grad_logits):
    """Gradients of every parameter from the gradient of the logits."""
    grads = {SKIP: X.T @ grad_logits}
    n_layers = n_hidden_layers(params)
    if n_layers == 0:
        grads["bias"] = grad_logits.sum(axis=0)
        return grads
    upstream = grad_logits
    for i in range(n_layers - 1, -1, -1):
        inputs = activations[i]
        grads[f"W{i}"] = inputs.T @ upstream
        grads[f"b{i}"] = upstream.sum(axis=0)
        if i > 0:
            upstream = (upstream @ params[f"W{i}"].T) * (inputs > 0)
    return grads


def predict_proba(params, X):
    return softmax(forward(params, X)[0])


def copy_params(params):
    return {name: value.copy() for name, value in params.items()}

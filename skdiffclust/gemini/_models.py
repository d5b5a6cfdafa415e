"""The Sparse GEMINI models, forward and backward by hand in NumPy, R restarts at once.

``f(x) = g(x) + W' x`` (Ohl et al., 2024, eq. 8): an MLP ``g`` (ReLU) plus a linear
skip connection ``W`` (n_features x n_clusters) that carries the group-lasso
penalty. Without hidden layers the model is the sparse logistic regression
``f(x) = W' x + b`` (the paper's M = 0 case). Parameters live in a dict of arrays
with a leading restart axis (``params['skip']`` has shape (R, n_features,
n_clusters)), so that R restarts train as one batched model and optimisers,
proximal operators and pickling all see plain NumPy. Inputs are ``_data.Inputs``
(standardised features, dense or CSR); the skip connection and the first layer
share one product with them.
"""

import warnings

import numpy as np
from sklearn.cluster import KMeans, kmeans_plusplus
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

from skdiffclust._utils._threads import in_order
from skdiffclust.gemini._data import per_restart, side_by_side

SKIP = "skip"


def init_random(n_features, hidden_layer_sizes, n_clusters, n_restarts, rng):
    """Parameters drawn like torch's nn.Linear (uniform in +-1/sqrt(fan_in))."""
    R = n_restarts
    params = {SKIP: _uniform(rng, n_features, (R, n_features, n_clusters))}
    if not hidden_layer_sizes:
        params["bias"] = _uniform(rng, n_features, (R, n_clusters))
        return params
    sizes = [n_features, *hidden_layer_sizes, n_clusters]
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        params[f"W{i}"] = _uniform(rng, fan_in, (R, fan_in, fan_out))
        params[f"b{i}"] = _uniform(rng, fan_in, (R, fan_out))
    return params


def _uniform(rng, fan_in, shape):
    bound = 1.0 / np.sqrt(max(fan_in, 1))
    return rng.uniform(-bound, bound, size=shape)


def initial_params(init, inputs, kernel_weights, hidden_layer_sizes, n_clusters,
                   n_restarts, rng):
    """The restarts' initial parameters (``init``: 'k-means++' or 'random'), in
    the precision of the inputs (float32 input: float32 products)."""
    if init == "k-means++":
        params = init_kmeans_plusplus(inputs, kernel_weights, hidden_layer_sizes,
                                      n_clusters, n_restarts, rng)
    else:
        params = init_random(inputs.shape[1], hidden_layer_sizes, n_clusters, n_restarts,
                             rng)
    return {name: value.astype(inputs.dtype) for name, value in params.items()}


def init_kmeans_plusplus(inputs, kernel_weights, hidden_layer_sizes, n_clusters,
                         n_restarts, rng):
    """Output layers whose initial partition is a k-means partition.

    For each restart, k-means++ seeds are drawn in the GEMINI's geometry (the
    kernel coordinates ``phi = z * kernel_weights``) and refined into centres
    ``c_k`` by Lloyd's iterations (:func:`lloyd_centres`); the skip connection and
    the output bias give the logits ``beta (2 c_k' phi - |c_k|^2)``, i.e.
    ``-beta |phi - c_k|^2`` up to a per-sample constant, whose argmax is the
    nearest seed. ``beta`` is the inverse of the seeding's mean squared distance
    to the nearest seed, so that the initial assignment is confident where
    the seeds are well apart and soft in between. The MLP's hidden layers are
    drawn at random and its last layer starts at zero, so that it adds nothing
    to this partition before training.
    """
    params = init_random(inputs.shape[1], hidden_layer_sizes, n_clusters, n_restarts, rng)
    w = kernel_weights
    if inputs.offset is None:  # dense: centred already
        coordinates, origin = inputs.data * w, np.zeros_like(w)
    else:  # CSR: uncentred (k-means++ does not see a shift), origin subtracted below
        coordinates, origin = inputs.data.multiply(w.reshape(1, -1)).tocsr(), inputs.offset * w
    squares = inputs.weighted_row_squares(w)
    spread = float(squares.mean())
    last = len(hidden_layer_sizes)
    bias_name = "bias" if not hidden_layer_sizes else f"b{last}"
    for r in range(n_restarts):
        seeds, _ = kmeans_plusplus(coordinates, n_clusters,
                                   random_state=int(rng.integers(2**31 - 1)))
        seeds = lloyd_centres(coordinates, seeds)
        seeds = np.asarray(seeds, dtype=np.float64) - origin  # centred coordinates
        seed_squares = (seeds**2).sum(axis=1)
        nearest = np.maximum(
            squares[:, None] - 2.0 * inputs.dot(w[:, None] * seeds.T) + seed_squares, 0.0
        ).min(axis=1)
        beta = 1.0 / max(float(nearest.mean()), 1e-3 * spread, 1e-300)
        params[SKIP][r] = 2.0 * beta * w[:, None] * seeds.T
        params[bias_name][r] = -beta * seed_squares
        if hidden_layer_sizes:
            params[f"W{last}"][r] = 0.0
    return params


# Lloyd's iterations refining each restart's k-means++ seeds (at most)
LLOYD_ITERATIONS = 30


def lloyd_centres(coordinates, seeds):
    """The seeds moved by Lloyd's iterations (deterministic k-means from them).

    k-means++'s draws hang on the data's last bits where squared distances nearly
    tie (duplicated or rounded samples), and a GEMINI trained from a different
    seeding may end in another optimum; Lloyd's iterations take neighbouring
    seedings to the same centres. On one OpenMP thread: scikit-learn's sums
    depend on the number of threads, and so did the fit's last bits (on the
    machine's cores, ``OMP_NUM_THREADS``, a user's ``torch.set_num_threads``).
    """
    kmeans = KMeans(n_clusters=seeds.shape[0], init=seeds, n_init=1,
                    max_iter=LLOYD_ITERATIONS, random_state=0)
    with warnings.catch_warnings(), threadpool_limits(1, user_api="openmp"):
        warnings.simplefilter("ignore", ConvergenceWarning)  # fewer distinct points
        return kmeans.fit(coordinates).cluster_centers_


def output_parameters(params):
    """Names of the arrays with one column per cluster: skip, [last layer], bias."""
    n_layers = n_weight_layers(params)
    if n_layers == 0:
        return [SKIP, "bias"]
    return [SKIP, f"W{n_layers - 1}", f"b{n_layers - 1}"]


def n_weight_layers(params):
    return sum(1 for name in params if name.startswith("W"))


# rows per block of the products with the data: the blocks are fixed by the
# number of rows alone, so that a product, summed block after block, has the same
# bits on any number of threads (``n_threads`` computes blocks side by side)
ROW_BLOCK = 256
# products below this many multiply-adds per block run on the calling thread: a
# thread pool's start costs more than they take
PARALLEL_MIN_WORK = 2_000_000


def forward(params, inputs, dropout=0.0, rng=None, n_threads=1):
    """Logits (R, n, K) and what the backward pass needs of the hidden activations.

    With ``dropout`` (training), each hidden unit's activation is zeroed with that
    probability (masks drawn from ``rng``) and the others scaled by
    ``1 / (1 - dropout)`` (inverted dropout: evaluation uses no mask). The rows
    are computed in blocks of ``ROW_BLOCK`` (:func:`row_blocks`), on up to
    ``n_threads`` threads: the same logits on any number of threads.
    """
    masks = _dropout_masks(params, inputs.n_samples, dropout, rng)
    blocks = row_blocks(inputs.n_samples)

    def block(rows):
        return _forward_rows(params, inputs.rows(rows), [mask[:, rows] for mask in masks],
                             dropout)

    parts = list(in_order(block, blocks, _threads_for(params, n_threads)))
    logits = np.concatenate([logits for logits, _ in parts], axis=1)
    return logits, list(zip(blocks, (activations for _, activations in parts)))


def logits_of(params, inputs, n_threads=1):
    """The logits (R, n, K) of :func:`forward` without dropout, keeping no hidden
    activations: inference holds one block's at a time, not those of every row."""
    def block(rows):
        return _forward_rows(params, inputs.rows(rows), [], 0.0)[0]

    blocks = row_blocks(inputs.n_samples)
    return np.concatenate(list(in_order(block, blocks, _threads_for(params, n_threads))),
                          axis=1)


def backward(params, inputs, activations, grad_logits, dropout=0.0, n_threads=1):
    """Gradients of every parameter from the gradient of the logits (R, n, K)
    (``activations``: :func:`forward`'s; ``dropout``: the rate it used), summed over
    its row blocks in their order, on up to ``n_threads`` threads."""
    def block(item):
        rows, hidden = item
        return _backward_rows(params, inputs.rows(rows), hidden, grad_logits[:, rows],
                              dropout)

    total = None
    for grads in in_order(block, activations, _threads_for(params, n_threads)):
        if total is None:
            total = grads
        else:
            for name, value in grads.items():
                total[name] += value
    return total


def row_blocks(n_samples):
    """The row blocks of :func:`forward`: ``ROW_BLOCK`` rows each (one, empty, for no
    rows)."""
    return [slice(start, min(start + ROW_BLOCK, n_samples))
            for start in range(0, max(n_samples, 1), ROW_BLOCK)]


def _threads_for(params, n_threads):
    """``n_threads``, or one where a block's products are too small to share."""
    R, d, K = params[SKIP].shape
    sizes = [d] + [params[f"W{i}"].shape[2] for i in range(n_weight_layers(params))]
    work = ROW_BLOCK * R * (d * K + sum(a * b for a, b in zip(sizes[:-1], sizes[1:])))
    return n_threads if work >= PARALLEL_MIN_WORK else 1


def _dropout_masks(params, n_samples, dropout, rng):
    """The kept units of each hidden layer after the first's ReLU, (R, n, width)
    booleans, drawn in the layers' order (none without dropout)."""
    if not dropout > 0 or rng is None:
        return []
    R = params[SKIP].shape[0]
    return [rng.random((R, n_samples, params[f"W{i}"].shape[1]), dtype=np.float32) >= dropout
            for i in range(1, n_weight_layers(params))]


def _forward_rows(params, inputs, masks, dropout):
    """:func:`forward` of one block of rows, with its dropout masks."""
    skip = params[SKIP]
    R, d, K = skip.shape
    n_layers = n_weight_layers(params)
    first = skip if n_layers == 0 else np.concatenate([skip, params["W0"]], axis=2)
    out = per_restart(inputs.dot(side_by_side(first)), R)
    logits = out[:, :, :K]
    if n_layers == 0:
        return logits + params["bias"][:, None, :], []
    h = out[:, :, K:] + params["b0"][:, None, :]
    activations = []
    for i in range(1, n_layers):
        h = np.maximum(h, 0.0)
        if masks:
            h *= masks[i - 1] * h.dtype.type(1.0 / (1.0 - dropout))
        activations.append(h)
        h = h @ params[f"W{i}"] + params[f"b{i}"][:, None, :]
    return logits + h, activations


def _backward_rows(params, inputs, activations, grad_logits, dropout):
    """:func:`backward` of one block of rows: its share of every gradient."""
    R, _, K = grad_logits.shape
    n_layers = n_weight_layers(params)
    grads = {}
    if n_layers == 0:
        grads["bias"] = grad_logits.sum(axis=1)
        grads[SKIP] = per_restart(inputs.tdot(side_by_side(grad_logits)), R)
        return grads
    upstream = grad_logits
    for i in range(n_layers - 1, 0, -1):
        a = activations[i - 1]
        grads[f"W{i}"] = a.transpose(0, 2, 1) @ upstream
        grads[f"b{i}"] = upstream.sum(axis=1)
        # a kept unit passed its ReLU's gradient, scaled as its activation was
        upstream = (upstream @ params[f"W{i}"].transpose(0, 2, 1)) * (
            (a > 0) * a.dtype.type(1.0 / (1.0 - dropout)))
    grads["b0"] = upstream.sum(axis=1)
    upstreams = side_by_side(np.concatenate([grad_logits, upstream], axis=2))
    both = per_restart(inputs.tdot(upstreams), R)
    grads[SKIP] = np.ascontiguousarray(both[:, :, :K])
    grads["W0"] = np.ascontiguousarray(both[:, :, K:])
    return grads


def softmax(logits):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=-1, keepdims=True)


def softmax_backward(proba, grad_proba):
    """d/dlogits from d/dproba, through the row-wise softmax."""
    return proba * (grad_proba - (proba * grad_proba).sum(axis=-1, keepdims=True))


def predict_proba(params, inputs, n_threads=1):
    return softmax(logits_of(params, inputs, n_threads))


def copy_params(params):
    return {name: value.copy() for name, value in params.items()}


def restart(params, r):
    """The parameters of restart ``r`` (a batch of one)."""
    return {name: value[r : r + 1].copy() for name, value in params.items()}


def fold_standardisation(params, mean, scale):
    """Weights acting on raw features, from those of a model on ``(x - mean) / scale``.

    ``params`` hold one model (leading restart axis of length 1); the result has no
    restart axis: ``forward(result, X)`` on raw ``X`` gives the same logits.
    """
    one = {name: value[0] for name, value in params.items()}
    raw = dict(one)
    shift = mean / scale
    raw[SKIP] = one[SKIP] / scale[:, None]
    shift_of_skip = shift @ one[SKIP]
    n_layers = n_weight_layers(params)
    if n_layers == 0:
        raw["bias"] = one["bias"] - shift_of_skip
        return raw
    raw["W0"] = one["W0"] / scale[:, None]
    raw["b0"] = one["b0"] - shift @ one["W0"]
    last = f"b{n_layers - 1}"
    raw[last] = one[last] - shift_of_skip
    return raw

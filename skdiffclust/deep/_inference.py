"""The trained network's forward pass in NumPy (no torch): ``predict``,
``predict_proba`` and ``transform`` of a fitted DeepImageClustering, and its
``labels_``, so that a fitted model predicts and unpickles where torch is not
installed, as the package's other estimators do.

The network's state is its torch ``state_dict`` as NumPy arrays
(``network_state_``): two convolutions (5 x 5, padding 2, no bias), each followed
by 2 x 2 max pooling (``ceil_mode``), batch normalisation and ReLU; an adaptive
average pooling to 4 x 4; a linear layer to the embedding (no bias), batch
normalisation and ReLU; the kept head (a linear layer). Images larger than the
network reads are first averaged down to ``input_side`` (torch's adaptive average
pooling, the network's first layer). In float32, on one BLAS thread (whose
results do not depend on the machine's thread count); the same probabilities as
torch's to about 1e-6.
"""

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from scipy.special import softmax

from skdiffclust._utils._threads import in_order, one_blas_thread

BATCH_NORM_EPS = 1e-5  # torch's BatchNorm default
KERNEL = 5
POOLED_SIDE = 4
# images per chunk: the second convolution's windows are (chunk, 14, 14, 400)
# float32 at 28 x 28, 160 MB at 512 (210 MB at 32 x 32)
CHUNK = 512
# chunks in flight at most, whatever n_jobs: their windows' memory adds up (64
# threads would hold 13 GB), and inference is not a fit's bottleneck
MAX_THREADS = 4


def body_layers(state):
    """The state's names of the body's layers with weights, in their order:
    (first convolution, first norm, second convolution, second norm, linear, norm),
    whichever indices the body gives them (a reduced network's pooling comes first)."""
    names = {key.rsplit(".", 1)[0] for key in state
             if key.startswith("body.") and key.endswith(".weight")}
    return tuple(sorted(names, key=lambda name: int(name.split(".")[1])))


def forward(state, images, input_side, n_threads=1):
    """Embeddings (n, 128) and the kept head's probabilities (n, n_clusters) of
    (n, C, H, W) float32 images, NumPy float64.

    Chunks of ``CHUNK`` images run on ``n_threads`` threads (at most
    ``MAX_THREADS``; NumPy releases the GIL in its products and copies), each on
    one BLAS thread: a chunk's result does not depend on the thread that computes
    it, nor on their number.
    """
    starts = range(0, images.shape[0], CHUNK)

    def chunk(start):
        return _forward_chunk(state, images[start:start + CHUNK], input_side)

    with one_blas_thread():
        parts = list(in_order(chunk, starts, n_threads, MAX_THREADS))
    if not parts:
        return (np.empty((0, state["heads.0.weight"].shape[1])),
                np.empty((0, state["heads.0.bias"].shape[0])))
    embeddings, probabilities = zip(*parts)
    return (np.concatenate(embeddings).astype(np.float64),
            np.concatenate(probabilities).astype(np.float64))


def _forward_chunk(state, x, input_side):
    conv1, norm1, conv2, norm2, linear, norm3 = body_layers(state)
    x = np.asarray(x, dtype=np.float32)
    if tuple(x.shape[2:]) != tuple(input_side):
        x = adaptive_average(x, input_side)
    x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))  # channels last, as on the CPU
    for conv, norm in ((conv1, norm1), (conv2, norm2)):
        x = _convolve(x, state[f"{conv}.weight"])
        x = _max_pool(x)
        x = np.maximum(_batch_norm(x, state, norm), 0.0)
    # torch flattens the pooled maps channel by channel
    x = adaptive_average(x.transpose(0, 3, 1, 2), (POOLED_SIDE, POOLED_SIDE))
    x = x.reshape(x.shape[0], -1) @ state[f"{linear}.weight"].T
    embedding = np.maximum(_batch_norm(x, state, norm3), 0.0)
    return embedding, _head(state, embedding)


def head_probabilities(state, embedding):
    """The kept head's probabilities (n, n_clusters) of ``forward``'s embeddings
    (n, 128), bit for bit those ``forward`` gives with ``state``: the same float32
    products, chunk by chunk. A fit whose head changed after its forward pass
    reads them without running the body again."""
    embedding = np.asarray(embedding).astype(np.float32)  # forward's, exactly
    with one_blas_thread():
        parts = [_head(state, embedding[start:start + CHUNK])
                 for start in range(0, embedding.shape[0], CHUNK)]
    if not parts:
        return np.empty((0, state["heads.0.bias"].shape[0]))
    return np.concatenate(parts).astype(np.float64)


def _head(state, embedding):
    logits = embedding @ state["heads.0.weight"].T + state["heads.0.bias"]
    return softmax(logits, axis=1)


def _pooling_matrix(size, out):
    """(out, size) weights of torch's adaptive average pooling along one axis:
    output i averages inputs floor(i size / out) to ceil((i + 1) size / out)."""
    matrix = np.zeros((out, size), dtype=np.float32)
    for i in range(out):
        start, stop = (i * size) // out, -((-(i + 1) * size) // out)
        matrix[i, start:stop] = 1.0 / (stop - start)
    return matrix


def adaptive_average(x, side):
    """torch's ``AdaptiveAvgPool2d(side)`` of (n, C, H, W) maps."""
    rows = _pooling_matrix(x.shape[2], side[0])
    columns = _pooling_matrix(x.shape[3], side[1])
    return np.einsum("ih,nchw,jw->ncij", rows, x, columns, optimize=True).astype(np.float32)


def _convolve(x, weight):
    """A 5 x 5 convolution with padding 2 and no bias (torch's ``Conv2d``) of
    channels-last (n, H, W, C) maps, channels-last out."""
    pad = KERNEL // 2
    padded = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    windows = sliding_window_view(padded, (KERNEL, KERNEL), axis=(1, 2))  # n,H,W,C,5,5
    return np.tensordot(windows, weight, axes=([3, 4, 5], [1, 2, 3]))


def _max_pool(x):
    """2 x 2 max pooling of channels-last maps, a last odd row or column pooled
    alone (``ceil_mode``)."""
    n, height, width, channels = x.shape
    if height % 2 or width % 2:
        x = np.pad(x, ((0, 0), (0, height % 2), (0, width % 2), (0, 0)),
                   constant_values=-np.inf)
    return np.maximum(np.maximum(x[:, 0::2, 0::2], x[:, 0::2, 1::2]),
                      np.maximum(x[:, 1::2, 0::2], x[:, 1::2, 1::2]))


def _batch_norm(x, state, name):
    """Batch normalisation of the last axis in evaluation mode (the running
    statistics)."""
    scale = state[f"{name}.weight"] / np.sqrt(state[f"{name}.running_var"] + BATCH_NORM_EPS)
    shift = state[f"{name}.bias"] - state[f"{name}.running_mean"] * scale
    return x * scale.astype(np.float32) + shift.astype(np.float32)

"""The features the first graph is built from: histograms of gradient orientations.

The clustering phase needs, before any network is trained, a graph whose edges
mostly join images of the same kind. The kNN graph of the pixels' principal
components is the classic choice; the kNN graph of *local histograms of gradient
orientations* (Dalal and Triggs, 2005, without their block normalisation) is a
better one, because a histogram over a cell does not change when a stroke moves
within the cell. Measured on the first 20,000 training images (the fraction of
each image's 10 nearest neighbours of its own class, 50 principal components):

==========================================  =========  ===============
features                                    MNIST      Fashion-MNIST
==========================================  =========  ===============
pixels                                      0.936      0.788
pixels, each image of unit norm             0.946      0.803
gradient histograms, cells of 7 x 7         0.949      0.803
gradient histograms, cells of 4 x 4         0.964      0.828
the same, square roots of the counts,       0.971      0.836
overlapping cells (stride 2), unit norm
==========================================  =========  ===============

The last is used: 8 unsigned orientation bins (votes split linearly between the
two nearest), each pixel voting with its gradient's magnitude; cells of about a
seventh of the image's side (4 x 4 pixels at 28 x 28, 1 x 1 at 8 x 8), every
half cell; square roots of the counts (they tame the strongest edges); each
image's histogram scaled to unit length; its principal components. Colour
images vote with the channel of the steepest gradient at each pixel.

On CUDA (a fit with ``device='cuda'``) the histograms and their principal
components are computed on the device, the components from the eigenvectors of
the histograms' covariance in float64 (on the host they were most of a CUDA
fit's graph and start: several seconds of MNIST's 60,000 images). These are the
exact principal components; the host's are scikit-learn's randomized solver's,
close to them.
"""

import math

import numpy as np
import torch
from sklearn.decomposition import PCA
from torch.nn import functional as F

from skdiffclust._utils._threads import one_blas_thread

N_ORIENTATIONS = 8
CELLS_PER_SIDE = 7
N_COMPONENTS = 50
# images per chunk: the votes are (chunk, N_ORIENTATIONS, H, W) floats (on CUDA:
# 400 MB at 28 x 28)
CHUNK = 2048
CUDA_CHUNK = 16384


def cell_size(height, width):
    """The side of a histogram cell and the stride between cells."""
    side = max(1, int(round(min(height, width) / CELLS_PER_SIDE)))
    return side, max(1, side // 2)


def gradient_histograms(images):
    """Histograms of gradient orientations of (n, C, H, W) float32 images.

    Returns an (n, n_features) float64 array, each row of unit length (or 0 for
    a flat image).
    """
    rows = [chunk.numpy() for chunk in _histogram_chunks(images, CHUNK)]
    histograms = np.concatenate(rows).astype(np.float64)
    norms = np.linalg.norm(histograms, axis=1, keepdims=True)
    return histograms / np.where(norms > 0, norms, 1.0)


def _device_histograms(images, device):
    """:func:`gradient_histograms` computed on ``device``: a float64 tensor there."""
    histograms = torch.cat(list(_histogram_chunks(images, CUDA_CHUNK, device))).double()
    norms = torch.linalg.vector_norm(histograms, dim=1, keepdim=True)
    return histograms / torch.where(norms > 0, norms, 1.0)


def _histogram_chunks(images, chunk, device=None):
    """The unnormalised histograms of the images, ``chunk`` images at a time,
    computed on ``device`` (None: the CPU), as float32 tensors there."""
    n, _, height, width = images.shape
    side, stride = cell_size(height, width)
    for start in range(0, n, chunk):
        batch = torch.as_tensor(np.asarray(images[start:start + chunk], dtype=np.float32))
        yield _histograms(batch if device is None else batch.to(device), side, stride)


def _histograms(images, side, stride):
    gx = images[..., :, 2:] - images[..., :, :-2]
    gy = images[..., 2:, :] - images[..., :-2, :]
    gx = F.pad(gx, (1, 1, 0, 0))  # central differences, zero at the border
    gy = F.pad(gy, (0, 0, 1, 1))
    magnitude = torch.sqrt(gx * gx + gy * gy)
    # the channel of the steepest gradient at each pixel (grey images: the only one)
    steepest = magnitude.argmax(1, keepdim=True)
    magnitude = magnitude.gather(1, steepest)
    angle = torch.atan2(gy.gather(1, steepest), gx.gather(1, steepest)) % math.pi
    position = angle * (N_ORIENTATIONS / math.pi)
    low = position.floor()
    upper_share = position - low
    low = low.long() % N_ORIENTATIONS
    high = (low + 1) % N_ORIENTATIONS
    votes = torch.zeros((images.shape[0], N_ORIENTATIONS, *images.shape[2:]),
                        dtype=images.dtype,  # not torch's default, which a user may set
                        device=images.device)
    votes.scatter_add_(1, low, magnitude * (1 - upper_share))
    votes.scatter_add_(1, high, magnitude * upper_share)
    cells = F.avg_pool2d(votes, side, stride=stride)
    return cells.clamp_min(0).sqrt().reshape(images.shape[0], -1)


def graph_features(images, seed, device=None):
    """The principal components of the gradient histograms (at most
    ``N_COMPONENTS``), float64: what the first kNN graph is built from. The
    products run on one BLAS thread: on two, their last bits differed (the same
    components on any number of threads, so the same neighbours). On a CUDA
    ``device`` both are computed there (:func:`_device_features`)."""
    if device is not None and torch.device(device).type == "cuda":
        return _device_features(images, torch.device(device))
    histograms = gradient_histograms(images)
    n_components = min(N_COMPONENTS, histograms.shape[1], histograms.shape[0] - 1)
    if n_components < 1 or np.ptp(histograms, axis=0).max() == 0:  # nothing to rotate
        return histograms.astype(np.float64)
    with one_blas_thread():
        return PCA(n_components, random_state=seed).fit_transform(histograms)


def _device_features(images, device):
    """:func:`graph_features` on ``device``: the histograms' principal components
    from the eigenvectors of their covariance (float64), the largest first, as
    a float64 NumPy array."""
    histograms = _device_histograms(images, device)
    n_samples, n_features = histograms.shape
    n_components = min(N_COMPONENTS, n_features, n_samples - 1)
    spread = histograms.amax(0) - histograms.amin(0)
    if n_components < 1 or not bool(spread.max() > 0):  # nothing to rotate
        return histograms.cpu().numpy()
    centred = histograms - histograms.mean(0)
    _, vectors = torch.linalg.eigh(centred.T @ centred)  # ascending eigenvalues
    return (centred @ vectors[:, -n_components:].flip(1)).cpu().numpy()

"""Datasets of the papers' experiments, generated on the fly (nothing is downloaded)."""

import numpy as np
from sklearn.utils import check_random_state

__all__ = ["make_denoising"]

# the four means sampled in Stewart et al. (2023), appendix 11
DENOISING_MEANS = np.array([
    [0.97627008, 4.30378733],
    [2.05526752, 0.89766366],
    [-1.52690401, 2.91788226],
    [-1.24825577, 7.83546002],
])


def make_denoising(n_per_cluster=15, *, cluster_std=0.2, noise_high=10.0, random_state=None):
    """The linear denoising problem of Stewart et al. (2023, appendix 11).

    Four isotropic Gaussian clusters in 2-D (the paper's means) followed by two
    noise dimensions uniform on ``[0, noise_high)``, which hide the clusters from
    single linkage on the raw 4-D points. A linear map that drops the noise
    columns recovers them.

    Parameters
    ----------
    n_per_cluster : int, default=15
        Samples per cluster (the paper: 15, so 60 samples).
    cluster_std : float, default=0.2
        Standard deviation of the clusters.
    noise_high : float, default=10.0
        Upper bound of the uniform noise dimensions (the paper uses 1.0; 10 makes
        raw single linkage fail clearly, ARI about 0.3).
    random_state : int, RandomState instance or None, default=None

    Returns
    -------
    X : ndarray of shape (4 * n_per_cluster, 4)
        Signal in the first two columns, noise in the last two.
    y : ndarray of shape (4 * n_per_cluster,)
        Cluster of each sample.

    Examples
    --------
    >>> from skdiffclust.datasets import make_denoising
    >>> X, y = make_denoising(random_state=0)
    >>> X.shape, y[:3]
    ((60, 4), array([0, 0, 0]))
    """
    rng = check_random_state(random_state)
    y = np.repeat(np.arange(len(DENOISING_MEANS)), n_per_cluster)
    signal = DENOISING_MEANS[y] + cluster_std * rng.standard_normal((y.size, 2))
    noise = rng.uniform(0.0, noise_high, size=(y.size, 2))
    return np.hstack([signal, noise]), y

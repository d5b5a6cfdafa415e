"""Datasets of the papers' experiments, generated on the fly (nothing is downloaded),
and a reader of the IDX files MNIST and Fashion-MNIST come in."""

import gzip
import math
import zlib
from numbers import Integral, Real
from pathlib import Path

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import validate_params

from skdiffclust._utils._validation import NumberInterval

__all__ = ["make_celeux_one", "make_celeux_two", "make_denoising", "make_graph_case",
           "read_idx"]

# the four means sampled in Stewart et al. (2023), appendix 11
DENOISING_MEANS = np.array([
    [0.97627008, 4.30378733],
    [2.05526752, 0.89766366],
    [-1.52690401, 2.91788226],
    [-1.24825577, 7.83546002],
])


@validate_params({"n_per_cluster": [NumberInterval(Integral, 1, None, closed="left")],
                  "cluster_std": [NumberInterval(Real, 0, None, closed="left")],
                  "noise_high": [NumberInterval(Real, 0, None, closed="neither")],
                  "random_state": ["random_state"]}, prefer_skip_nested_validation=True)
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


# Celeux et al. (2014) scenarios of the first synthetic dataset, as used by Ohl et al.
# (2024, section 5.3): (n_samples, mean proximity alpha, non-informative variables)
CELEUX_SCENARIOS = {
    1: (30, 0.6, 20),
    2: (30, 1.7, 20),
    3: (300, 0.6, 20),
    4: (300, 1.7, 20),
    5: (300, 1.7, 95),
}


def make_celeux_one(scenario=5, *, random_state=None):
    """First synthetic dataset of Celeux et al. (2014), scenarios 1 to 5.

    Five informative variables from an equiprobable mixture of three Gaussians
    with identity covariances and means ``-alpha 1``, ``alpha 1`` and ``0``,
    followed by independent standard normal noise variables.

    ========  =========  =====  ==================
    scenario  n_samples  alpha  noise variables
    ========  =========  =====  ==================
    1         30         0.6    20
    2         30         1.7    20
    3         300        0.6    20
    4         300        1.7    20
    5         300        1.7    95
    ========  =========  =====  ==================

    Parameters
    ----------
    scenario : {1, 2, 3, 4, 5}, default=5
    random_state : int, RandomState instance or None, default=None

    Returns
    -------
    X : ndarray of shape (n_samples, 5 + n_noise)
    y : ndarray of shape (n_samples,)
        Mixture component of each sample.
    informative : ndarray of shape (5 + n_noise,), bool
        True for the five informative variables.

    Examples
    --------
    >>> from skdiffclust.datasets import make_celeux_one
    >>> X, y, informative = make_celeux_one(5, random_state=0)
    >>> X.shape, int(informative.sum())
    ((300, 100), 5)
    """
    if isinstance(scenario, (bool, np.bool_)) or scenario not in CELEUX_SCENARIOS:
        raise ValueError(f"scenario must be one of 1..5, got {scenario!r}.")
    n_samples, alpha, n_noise = CELEUX_SCENARIOS[scenario]
    rng = check_random_state(random_state)
    y = rng.randint(0, 3, size=n_samples)
    means = np.array([-alpha, alpha, 0.0])[y][:, None] * np.ones(5)
    signal = means + rng.standard_normal((n_samples, 5))
    noise = rng.standard_normal((n_samples, n_noise))
    informative = np.zeros(5 + n_noise, dtype=bool)
    informative[:5] = True
    return np.hstack([signal, noise]), y, informative


def _rotation(angle):
    return np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])


@validate_params({"n_samples": [NumberInterval(Integral, 1, None, closed="left")],
                  "random_state": ["random_state"]}, prefer_skip_nested_validation=True)
def make_celeux_two(n_samples=2000, *, random_state=None):
    """Second synthetic dataset of Celeux et al. (2014) (Ohl et al., 2024, eq. 16-17).

    Two informative variables from an equiprobable mixture of four Gaussians (means
    (0, 0), (4, 0), (0, 2), (4, 2), identity covariances); nine variables that
    depend linearly on them, plus correlated noise; three independent noise
    variables with means (3.2, 3.6, 4).

    Parameters
    ----------
    n_samples : int, default=2000
    random_state : int, RandomState instance or None, default=None

    Returns
    -------
    X : ndarray of shape (n_samples, 14)
    y : ndarray of shape (n_samples,)
    informative : ndarray of shape (14,), bool
        True for the two informative variables.
    """
    rng = check_random_state(random_state)
    y = rng.randint(0, 4, size=n_samples)
    centres = np.array([[0.0, 0.0], [4.0, 0.0], [0.0, 2.0], [4.0, 2.0]])
    informative_part = centres[y] + rng.standard_normal((n_samples, 2))
    intercept = np.array([0.0, 0.0, 0.4, 0.8, 1.2, 1.6, 2.0, 2.4, 2.8])
    beta = np.array([
        [0.5, 2.0, 0.0, -1.0, 2.0, 0.5, 4.0, 3.0, 2.0],
        [1.0, 0.0, 3.0, 2.0, -4.0, 0.0, 0.5, 0.0, 1.0],
    ])
    covariance = np.zeros((9, 9))
    covariance[:3, :3] = np.eye(3)
    covariance[3:5, 3:5] = 0.5 * np.eye(2)
    for start, diagonal, angle in ((5, [1.0, 3.0], np.pi / 3), (7, [2.0, 6.0], np.pi / 6)):
        R = _rotation(angle)
        covariance[start : start + 2, start : start + 2] = R.T @ np.diag(diagonal) @ R
    noise = rng.multivariate_normal(np.zeros(9), covariance, size=n_samples)
    redundant = intercept + informative_part @ beta + noise
    independent = rng.standard_normal((n_samples, 3)) + np.array([3.2, 3.6, 4.0])
    informative = np.zeros(14, dtype=bool)
    informative[:2] = True
    return np.hstack([informative_part, redundant, independent]), y, informative


# centres and sizes of the groups of make_graph_case; the bridges join two groups by
# a line of points one group's standard deviation wide at most
_GRAPH_CASES = {
    "unequal": dict(centers=[[0, 0], [8, 0], [4, 7]], sizes=[1000, 300, 100], bridges=[]),
    "bridge": dict(centers=[[0, 0], [8, 0], [4, 7]], sizes=[1000, 300, 100],
                   bridges=[(0, 1)]),
    "fewer_components": dict(centers=[[0, 0], [5, 0], [12, 0], [17, 0], [8.5, 8]],
                             sizes=[400, 200, 300, 150, 250], bridges=[(0, 1), (2, 3)]),
}
BRIDGE_POINTS = 40


def make_graph_case(case="unequal", *, random_state=None):
    """Clusters whose nearest-neighbour graph has (nearly) one component each.

    The cases where a graph cut has a ratio cut of zero, or close to it, on
    offer, on which spectral clustering finds the clusters exactly: PRCut must
    take those cuts too, whatever the clusters' sizes (issue 19 of the project,
    and ``doc/benchmarks.rst``).

    * ``'unequal'``: three well-separated Gaussian groups (standard deviation 1)
      of 1,000, 300 and 100 points (10:3:1), in 2-D;
    * ``'bridge'``: the same, with a thin bridge of 38 points between the two
      largest groups (each bridge point belongs to the nearer group);
    * ``'rings'``: three concentric rings of radii 1, 3 and 5 (300, 600 and 900
      points, noise 0.1);
    * ``'fewer_components'``: five groups (400, 200, 300, 150 and 250 points,
      standard deviation 0.6) in three components: two pairs of groups joined by
      a bridge, and a group alone.

    Parameters
    ----------
    case : {'unequal', 'bridge', 'rings', 'fewer_components'}, default='unequal'
    random_state : int, RandomState instance or None, default=None

    Returns
    -------
    X : ndarray of shape (n_samples, 2)
    y : ndarray of shape (n_samples,)
        The group of each point.
    n_clusters : int
        The number of groups.

    Examples
    --------
    >>> from skdiffclust.datasets import make_graph_case
    >>> X, y, k = make_graph_case("unequal", random_state=0)
    >>> X.shape, k
    ((1400, 2), 3)
    """
    rng = check_random_state(random_state)
    if case == "rings":
        return _rings(rng)
    if case not in _GRAPH_CASES:
        raise ValueError(
            f"case must be one of {sorted([*_GRAPH_CASES, 'rings'])}, got {case!r}.")
    spec = _GRAPH_CASES[case]
    centers = np.asarray(spec["centers"], dtype=float)
    std = 1.0 if case != "fewer_components" else 0.6
    parts = [centers[g] + std * rng.standard_normal((size, 2))
             for g, size in enumerate(spec["sizes"])]
    labels = [np.full(size, g) for g, size in enumerate(spec["sizes"])]
    for a, b in spec["bridges"]:
        t = np.linspace(0.0, 1.0, BRIDGE_POINTS)[1:-1]
        start, stop = centers[a] + 2 * std * _unit(centers[b] - centers[a]), \
            centers[b] - 2 * std * _unit(centers[b] - centers[a])
        parts.append(start + t[:, None] * (stop - start)
                     + 0.05 * std * rng.standard_normal((t.size, 2)))
        labels.append(np.where(t < 0.5, a, b))
    return np.vstack(parts), np.concatenate(labels), len(spec["sizes"])


def _unit(v):
    return v / np.linalg.norm(v)


def _rings(rng):
    parts, labels = [], []
    for g, (radius, size) in enumerate([(1.0, 300), (3.0, 600), (5.0, 900)]):
        angle = rng.uniform(0.0, 2 * np.pi, size)
        parts.append(radius * np.c_[np.cos(angle), np.sin(angle)]
                     + 0.1 * rng.standard_normal((size, 2)))
        labels.append(np.full(size, g))
    return np.vstack(parts), np.concatenate(labels), 3


# IDX's type byte: the element type, big-endian (LeCun et al.'s MNIST page)
_IDX_TYPES = {0x08: np.dtype("u1"), 0x09: np.dtype("i1"), 0x0B: np.dtype(">i2"),
              0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}


# more dimensions than NumPy's arrays have: a damaged header
MAX_IDX_DIMENSIONS = 32


def read_idx(path):
    """Read an IDX file, the format of MNIST and Fashion-MNIST, gzipped or not.

    Parameters
    ----------
    path : str or path-like
        The file; a name ending in ``.gz`` is read through gzip.

    Returns
    -------
    array : ndarray
        The file's array, of the shape and element type its header gives (uint8
        for MNIST's images, of shape (n, 28, 28), and labels, of shape (n,)),
        in the machine's byte order; writable.

    Raises
    ------
    ValueError
        If the file is not an IDX file, holds fewer or more bytes than its
        header announces, or is a truncated or corrupt gzip file.

    Examples
    --------
    >>> import gzip, tempfile
    >>> from pathlib import Path
    >>> from skdiffclust.datasets import read_idx
    >>> path = Path(tempfile.mkdtemp()) / "labels-idx1-ubyte.gz"
    >>> with gzip.open(path, "wb") as f:
    ...     _ = f.write(bytes([0, 0, 8, 1, 0, 0, 0, 3, 7, 2, 1]))
    >>> read_idx(path)
    array([7, 2, 1], dtype=uint8)
    """
    path = Path(path)
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            data = f.read()
    except (EOFError, gzip.BadGzipFile, zlib.error) as error:  # an interrupted download
        raise ValueError(f"{path} is not a whole gzip file ({error}): it is truncated "
                         "or corrupt.") from error
    if (len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _IDX_TYPES
            or data[3] > MAX_IDX_DIMENSIONS):
        raise ValueError(f"{path} is not an IDX file: it does not start with two zero "
                         "bytes and one of the IDX element types.")
    dtype, ndim = _IDX_TYPES[data[2]], data[3]
    header = 4 + 4 * ndim
    shape = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
    expected = header + dtype.itemsize * math.prod(shape)  # Python ints: no overflow
    if len(data) < header or len(data) != expected:
        raise ValueError(f"{path} holds {len(data)} bytes where its IDX header "
                         f"(shape {shape}, {dtype.name}) announces {expected}: the file "
                         "is truncated or not an IDX file.")
    # a writable array in the machine's byte order, whatever the element type
    # (frombuffer's view of the bytes is read-only: MNIST's uint8 could not be shuffled)
    return np.frombuffer(data, dtype, offset=header).reshape(shape).astype(
        dtype.newbyteorder("="))

"""Datasets of the papers' experiments, generated on the fly, a reader of the IDX
files MNIST and Fashion-MNIST come in, and a loader of those two from a folder on
disk. Nothing is downloaded."""

import gzip
import math
import os
import zlib
from numbers import Integral, Real
from pathlib import Path

import numpy as np
from sklearn.utils import Bunch, check_random_state
from sklearn.utils._param_validation import StrOptions, validate_params

from skdiffclust._utils._validation import NumberInterval

__all__ = ["load_mnist", "make_celeux_one", "make_celeux_two", "make_denoising",
           "make_graph_case", "read_idx"]

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
    take those cuts too, whatever the clusters' sizes (``doc/benchmarks.rst``).

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


# where load_mnist looks: the data_home argument, else this environment variable,
# else this folder; each data set in a subfolder named as the kind
DATA_HOME_VARIABLE = "SKDIFFCLUST_DATA_HOME"
DEFAULT_DATA_HOME = "~/skdiffclust_data"

# each subset's (images, labels) files, under the names both data sets are published with
_SUBSET_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}

_IDX_DATA_SETS = {
    "mnist": dict(
        title="MNIST",
        urls=("https://ossci-datasets.s3.amazonaws.com/mnist/",
              "http://yann.lecun.com/exdb/mnist/"),
        openml="mnist_784",
        target_names=tuple(range(10)),
        description=(
            "MNIST, the database of handwritten digits (Y. LeCun, C. Cortes and "
            "C. J. C. Burges): 60,000 training and 10,000 test images of 28 x 28 "
            "grey pixels (0 to 255), labels 0 to 9. Licence CC BY-SA 3.0; cite LeCun "
            "et al., \"Gradient-based learning applied to document recognition\", "
            "Proc. IEEE 86(11), 1998."),
    ),
    "fashion-mnist": dict(
        title="Fashion-MNIST",
        urls=("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
              "https://github.com/zalandoresearch/fashion-mnist"),
        openml="Fashion-MNIST",
        target_names=("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal",
                      "Shirt", "Sneaker", "Bag", "Ankle boot"),
        description=(
            "Fashion-MNIST (Zalando SE, MIT licence): 60,000 training and 10,000 test "
            "images of clothing, 28 x 28 grey pixels (0 to 255), 10 classes. Cite H. "
            "Xiao, K. Rasul and R. Vollgraf, \"Fashion-MNIST: a novel image dataset for "
            "benchmarking machine learning algorithms\", arXiv:1708.07747, 2017."),
    ),
}


def _data_home(data_home):
    """The folder of the data sets, and a phrase saying where it came from."""
    if data_home is not None:
        return Path(data_home).expanduser().absolute(), "the data_home argument"
    variable = os.environ.get(DATA_HOME_VARIABLE, "")
    if variable:
        return (Path(variable).expanduser().absolute(),
                f"the {DATA_HOME_VARIABLE} environment variable")
    return (Path(DEFAULT_DATA_HOME).expanduser().absolute(),
            f"the default, {DEFAULT_DATA_HOME}: neither data_home nor the "
            f"{DATA_HOME_VARIABLE} environment variable is set")


def _idx_files(kind, subset, data_home=None):
    """The (images, labels) files of each part of ``subset``, plain or gzipped.

    Raises FileNotFoundError, saying where it looked and how to get the files,
    when one is missing; NotADirectoryError when the data folder, or its
    ``kind`` folder, is a file.
    """
    home, source = _data_home(data_home)
    folder = home / kind
    # a file in the folder's place: "does not exist" would send one looking for it
    for path in (home, folder):
        if path.exists() and not path.is_dir():
            raise NotADirectoryError(
                f"{path} is {'a file, ' if path.is_file() else ''}not a folder: "
                f"load_mnist reads {_IDX_DATA_SETS[kind]['title']}'s IDX files from the "
                f"folder {kind}/ in the data folder {home}, which is {source}.")
    parts = ("train", "test") if subset == "all" else (subset,)
    found, missing = [], []
    for part in parts:
        pair = []
        for name in _SUBSET_FILES[part]:
            # the plain file first: torchvision's raw/ folders hold both
            path = next((folder / (name + suffix) for suffix in ("", ".gz")
                         if (folder / (name + suffix)).is_file()), None)
            if path is None:
                missing.append(name)
            pair.append(path)
        found.append(tuple(pair))
    if missing:
        raise FileNotFoundError(_missing_message(kind, home, folder, source, missing))
    return found


def _missing_message(kind, home, folder, source, missing):
    spec = _IDX_DATA_SETS[kind]
    what = ("does not exist" if not folder.is_dir() else
            "lacks " + ", ".join(f"{name}[.gz]" for name in missing))
    hint = ""
    if any((home / (name + suffix)).is_file() for name in missing for suffix in ("", ".gz")):
        hint = (f" {home} holds such files itself: the data folder is the one that "
                f"holds {kind}/, not {kind}/ itself.")
    names = [f"{name}.gz" for pair in _SUBSET_FILES.values() for name in pair]
    return (
        f"{spec['title']}'s IDX files were not found: load_mnist looked in {folder}, "
        f"which {what} (the data folder {home} is {source}).{hint}\n"
        f"To get them, download {', '.join(names[:-1])} and {names[-1]} from "
        f"{spec['urls'][0]} (or {spec['urls'][1]}) into {folder}, gzipped or not; "
        f"or set the {DATA_HOME_VARIABLE} environment variable, or data_home, to a "
        f"folder that holds {kind}/ with these files. Nothing is downloaded here.\n"
        f"With a network, scikit-learn gives the same 70,000 images (the training and "
        f"the test set together) as one table of 784 pixels a row: "
        f"sklearn.datasets.fetch_openml({spec['openml']!r}, return_X_y=True).")


# what MNIST's and Fashion-MNIST's files hold, and load_mnist promises: images of
# 28 x 28 uint8 pixels, uint8 labels 0 to 9
IMAGE_SHAPE = (28, 28)
N_CLASSES = 10


def _check_images(path, images):
    """Refuse an IDX file that is not a non-empty stack of 28 x 28 uint8 images."""
    if images.dtype != np.uint8 or images.ndim != 3 or images.shape[1:] != IMAGE_SHAPE:
        raise ValueError(
            f"{path} is not a file of MNIST images: it holds {images.dtype.name} values "
            f"of shape {images.shape}, where uint8 pixels of shape (n, 28, 28) are "
            "expected.")
    if len(images) == 0:  # NumPy's reshape error otherwise, or half of subset='all'
        raise ValueError(f"{path} holds no images: its IDX header announces "
                         f"the shape {images.shape}.")


def _check_labels(path, labels):
    """Refuse an IDX file that is not a non-empty vector of uint8 labels 0 to 9."""
    # a negative label written as a signed byte reads as int8, refused here; written
    # as an unsigned one it reads as 256 minus it (-3: 253), refused below
    if labels.dtype != np.uint8 or labels.ndim != 1:
        raise ValueError(
            f"{path} is not a file of MNIST labels: it holds {labels.dtype.name} values "
            f"of shape {labels.shape}, where uint8 labels of shape (n,) are expected.")
    if len(labels) == 0:
        raise ValueError(f"{path} holds no labels: its IDX header announces "
                         f"the shape {labels.shape}.")
    outside = labels >= N_CLASSES
    if outside.any():
        values = np.unique(labels[outside])
        more = f" and {values.size - 10} more" if values.size > 10 else ""
        raise ValueError(
            f"{path} holds {int(outside.sum())} labels outside 0 to {N_CLASSES - 1}, "
            f"of the values {values[:10].tolist()}{more}: the classes are 0 to "
            f"{N_CLASSES - 1}.")


def _read_pair(images_path, labels_path):
    images, labels = read_idx(images_path), read_idx(labels_path)
    _check_images(images_path, images)
    _check_labels(labels_path, labels)
    if len(images) != len(labels):
        raise ValueError(
            f"{images_path} holds {len(images)} images but {labels_path} "
            f"{len(labels)} labels: they are not a set of images and their labels, "
            f"whose arrays have the shapes {images.shape} and {labels.shape}.")
    return images, labels


@validate_params({"kind": [StrOptions({"mnist", "fashion-mnist"})],
                  "subset": [StrOptions({"train", "test", "all"})],
                  "data_home": [str, os.PathLike, None],
                  "return_X_y": ["boolean"]}, prefer_skip_nested_validation=True)
def load_mnist(*, kind="mnist", subset="train", data_home=None, return_X_y=False):
    """Load MNIST or Fashion-MNIST from their original IDX files on disk.

    Nothing is downloaded: the four files are read from the folder named
    ``kind`` (``mnist/`` or ``fashion-mnist/``) in the data folder, which is
    ``data_home`` when given, else the folder the environment variable
    ``SKDIFFCLUST_DATA_HOME`` names, else ``~/skdiffclust_data``. The files keep
    the names they are published under, gzipped or not::

        <data folder>/mnist/train-images-idx3-ubyte.gz
        <data folder>/mnist/train-labels-idx1-ubyte.gz
        <data folder>/mnist/t10k-images-idx3-ubyte.gz
        <data folder>/mnist/t10k-labels-idx1-ubyte.gz
        <data folder>/fashion-mnist/...  (the same four names)

    MNIST's are at https://ossci-datasets.s3.amazonaws.com/mnist/ (copies of
    http://yann.lecun.com/exdb/mnist/), Fashion-MNIST's at
    http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/. Where there is a
    network, scikit-learn's ``fetch_openml("mnist_784")`` and
    ``fetch_openml("Fashion-MNIST")`` give the same images as flat tables, without
    these files. The gallery's MNIST examples read MNIST with this function: set
    ``SKDIFFCLUST_DATA_HOME`` before running them.

    Parameters
    ----------
    kind : {'mnist', 'fashion-mnist'}, default='mnist'
        The data set: handwritten digits, or images of clothing.
    subset : {'train', 'test', 'all'}, default='train'
        The 60,000 training images, the 10,000 test images, or all 70,000
        (the training images first).
    data_home : str or path-like, default=None
        The folder holding ``mnist/`` and ``fashion-mnist/``. None: the
        environment variable ``SKDIFFCLUST_DATA_HOME``, else
        ``~/skdiffclust_data``.
    return_X_y : bool, default=False
        Return ``(data, target)`` instead of a Bunch.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        Dictionary-like object, with the following attributes.

        data : ndarray of shape (n_samples, 784), uint8
            The images, one row of 28 x 28 pixels each, 0 (the background)
            to 255; divide by 255 for pixels in [0, 1].
        images : ndarray of shape (n_samples, 28, 28), uint8
            The same images as arrays (a view of ``data``).
        target : ndarray of shape (n_samples,), int64
            The class of each image, 0 to 9.
        target_names : ndarray of shape (10,)
            The name of each class: the digits 0 to 9, or the garments of
            Fashion-MNIST ('T-shirt/top', 'Trouser', ...).
        DESCR : str
            The data set, its licence and the reference to cite.

    (data, target) : tuple if ``return_X_y`` is True
        ``data`` of shape (n_samples, 784) and ``target`` of shape (n_samples,).

    Raises
    ------
    FileNotFoundError
        If a file of ``subset`` is not in the folder: the message names the
        folder looked in, where its name came from, and how to get the files.
    NotADirectoryError
        If the data folder, or its ``kind`` folder, is a file.
    ValueError
        If a file is not a whole IDX file (it holds more or fewer bytes than its
        header announces), its images are not uint8 of shape (n, 28, 28) or its
        labels not uint8 of shape (n,), values 0 to 9, it holds no images, or the
        images and labels are not as many.

    Examples
    --------
    >>> from skdiffclust.datasets import load_mnist
    >>> mnist = load_mnist(subset="test")  # doctest: +SKIP
    >>> mnist.images.shape, mnist.target[:5]  # doctest: +SKIP
    ((10000, 28, 28), array([7, 2, 1, 0, 4]))
    >>> X, y = load_mnist(kind="fashion-mnist", return_X_y=True)  # doctest: +SKIP
    >>> X.shape  # doctest: +SKIP
    (60000, 784)
    """
    spec = _IDX_DATA_SETS[kind]
    pairs = [_read_pair(*paths) for paths in _idx_files(kind, subset, data_home)]
    images = np.concatenate([images for images, _ in pairs]) if len(pairs) > 1 \
        else pairs[0][0]
    target = np.concatenate([labels for _, labels in pairs]).astype(np.int64)
    data = images.reshape(len(images), -1)
    if return_X_y:
        return data, target
    return Bunch(data=data, images=data.reshape(images.shape), target=target,
                 target_names=np.array(spec["target_names"]), DESCR=spec["description"])

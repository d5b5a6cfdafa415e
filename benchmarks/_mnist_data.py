"""MNIST for ``bench_mnist.py``: the :class:`Mnist` data (images in [0, 1] and their
labels), read from the original IDX files (:func:`load_mnist`) or from
scikit-learn's digits (:func:`load_digits_images`), and the unbalanced copies of
``--imbalance`` (:func:`unbalanced` and its checks)."""

import argparse
import sys
from dataclasses import dataclass, field
from numbers import Real
from pathlib import Path

import numpy as np

from _data import data_home

from skdiffclust.datasets import read_idx

DEFAULT_DATA_DIR = data_home() / "mnist"
FILES = {
    "train_images": "train-images-idx3-ubyte.gz",
    "train_labels": "train-labels-idx1-ubyte.gz",
    "test_images": "t10k-images-idx3-ubyte.gz",
    "test_labels": "t10k-labels-idx1-ubyte.gz",
}


@dataclass
class Mnist:
    """MNIST as float32 images in [0, 1] of shape (n, 28, 28) and int64 labels."""

    train_images: np.ndarray
    train_labels: np.ndarray
    test_images: np.ndarray
    test_labels: np.ndarray
    device: str = "cpu"  # where cases that train with torch train (--device)
    _cache: dict = field(default_factory=dict, repr=False)

    @property
    def X_train(self):
        """The training images flattened, (60000, 784)."""
        return self.train_images.reshape(self.train_images.shape[0], -1)

    @property
    def X_test(self):
        return self.test_images.reshape(self.test_images.shape[0], -1)

    def cached(self, key, make):
        """A derived array (PCA features, a subset) computed once per run."""
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]


def _idx_file(data_dir, name):
    """The file ``name`` in ``data_dir``, or its gunzipped copy; None if neither."""
    for candidate in (data_dir / name, data_dir / name.removesuffix(".gz")):
        if candidate.exists():
            return candidate
    return None


def load_mnist(data_dir):
    data_dir = Path(data_dir)
    paths = {key: _idx_file(data_dir, name) for key, name in FILES.items()}
    missing = [FILES[key] for key, path in paths.items() if path is None]
    if missing:
        sys.exit(f"MNIST not found in {data_dir} (missing {', '.join(missing)}): pass "
                 "--data-dir with the folder of the four original IDX files "
                 f"({', '.join(FILES.values())}, gzipped or not).")
    arrays = {key: read_idx(path) for key, path in paths.items()}
    return Mnist(
        train_images=arrays["train_images"].astype(np.float32) / 255.0,
        train_labels=arrays["train_labels"].astype(np.int64),
        test_images=arrays["test_images"].astype(np.float32) / 255.0,
        test_labels=arrays["test_labels"].astype(np.int64),
    )


def load_digits_images():
    """scikit-learn's 1,797 digits as 8 x 8 images in [0, 1]. There are no test
    images: the cases' ``predict`` runs on the same images, and no test ACC is
    written to the result file."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)
    labels = digits.target.astype(np.int64)
    return Mnist(train_images=images, train_labels=labels, test_images=images,
                 test_labels=labels)


def unbalanced_sizes(counts, ratio):
    """The images :func:`unbalanced` keeps of classes of ``counts`` images (in label
    order): ``round(m * ratio ** (-c / (K - 1)))`` for class c, m the smallest count."""
    counts = np.asarray(counts)
    shares = ratio ** (-np.arange(counts.size) / max(counts.size - 1, 1))
    return np.round(counts.min() * shares).astype(np.int64)


def check_imbalance(ratio, *label_sets):
    """Refuse an ``--imbalance`` that is not a finite number at least 1, or that
    leaves a class of any of ``label_sets`` (the training and test labels) without
    an image; the message names the option and the largest ratio allowed."""
    if not isinstance(ratio, Real) or not np.isfinite(ratio) or ratio < 1:
        raise ValueError(f"--imbalance must be a finite number at least 1, got {ratio}")
    for labels in label_sets:
        _, counts = np.unique(labels, return_counts=True)
        if counts.size and unbalanced_sizes(counts, ratio).min() < 1:
            # the last class keeps round(m / ratio): one image or more while m / ratio > 1/2
            raise ValueError(
                f"--imbalance {ratio:g} leaves the last class without an image: it keeps "
                f"round(m / R) of them, m = {counts.min()} the smallest class's count "
                f"(of {labels.size} images); --imbalance must be below 2 m = "
                f"{2 * counts.min()}")


def unbalanced(data, ratio, seed=0):
    """A copy of ``data`` whose classes shrink geometrically, by ``ratio`` in all,
    from the first class (in label order) to the last: class c keeps
    ``m * ratio ** (-c / (K - 1))`` of its images (:func:`unbalanced_sizes`), m the
    smallest class's count (in the training and the test images alike), drawn at
    random (``seed``). A ratio that empties a class is refused
    (:func:`check_imbalance`)."""
    check_imbalance(ratio, data.train_labels, data.test_labels)
    rng = np.random.default_rng(seed)

    def keep(labels):
        classes, counts = np.unique(labels, return_counts=True)
        sizes = unbalanced_sizes(counts, ratio)
        chosen = [rng.choice(np.flatnonzero(labels == c), int(size), replace=False)
                  for c, size in zip(classes, sizes)]
        return np.sort(np.concatenate(chosen))

    train, test = keep(data.train_labels), keep(data.test_labels)
    return Mnist(data.train_images[train], data.train_labels[train],
                 data.test_images[test], data.test_labels[test], device=data.device)


def imbalance_ratio(text):
    """``--imbalance``'s type: a finite number at least 1 (NaN and inf refused)."""
    try:
        ratio = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    try:
        check_imbalance(ratio)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error).removeprefix("--imbalance ")) from None
    return ratio

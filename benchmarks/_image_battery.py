"""The image battery of ``bench_n_clusters.py``: labelled image sets built from
scikit-learn's digits, MNIST and Fashion-MNIST, split into a half the criteria
of ``n_clusters='auto'`` on images were chosen on (``tune``) and a half used only
to check them (``check``).

Each set is drawn with its own seed from the IDX files of ``load_mnist`` (the
data folder of ``SKDIFFCLUST_DATA_HOME``) or from the digits, and shuffled; its
classes are renumbered 0, 1, ... Kinds of sets, in both halves:

* **class subsets** of 2 to 10 classes;
* **unions** of MNIST and Fashion-MNIST classes (10 to 20 classes; a Fashion-MNIST
  class is another class than the MNIST class of the same number);
* **imbalanced** subsets, one class ten times smaller than the others;
* **pairs**: two images side by side (28 x 56 pixels), the class being the pair of
  their classes, 30 to 40 pairs drawn among the 100, so that a set has 30 or more
  classes; 15 to 2,000 images per class;
* sizes from 500 to 60,000 images.

Most sets are drawn from the 10,000 test images of MNIST and Fashion-MNIST; the
two largest pairs sets from the training images. MNIST's and Fashion-MNIST's
60,000 training images themselves, and a 20-class union of 1,000 training images
of each class (``mix-20``), are benchmarked apart (``EXTRA``).
"""

import zlib
from functools import lru_cache

import numpy as np


@lru_cache(None)
def source(name):
    """The images (n, height, width) in [0, 1], float32, and labels of
    ``'digits'``, or ``'<mnist|fashion>-<train|test>'``."""
    if name == "digits":
        from sklearn.datasets import load_digits

        X, y = load_digits(return_X_y=True)
        return (X / 16.0).reshape(-1, 8, 8).astype(np.float32), y.astype(np.int64)
    from skdiffclust.datasets import load_mnist

    kind, subset = name.split("-")
    X, y = load_mnist(kind="fashion-mnist" if kind == "fashion" else "mnist",
                      subset=subset, return_X_y=True)
    return (X.reshape(-1, 28, 28) / 255.0).astype(np.float32), y.astype(np.int64)


def _draw(name, classes, per_class, rng, small=None):
    """``per_class`` images of each class (all where None; ``small``: fewer for
    some classes), as lists of image arrays and label arrays."""
    X, y = source(name)
    images, labels = [], []
    for c in classes:
        index = np.flatnonzero(y == c)
        count = (small or {}).get(c, per_class)
        if count is not None and count < index.size:
            index = np.sort(rng.choice(index, count, replace=False))
        images.append(X[index])
        labels.append(np.full(index.size, c))
    return images, labels


def subset(name, classes, per_class=None, small=None, seed=0):
    """Images of some classes of one source."""
    images, labels = _draw(name, classes, per_class, np.random.default_rng(seed), small)
    return np.concatenate(images), np.concatenate(labels)


def union(parts, per_class, seed=0):
    """Classes of several sources together (``parts``: (source, classes) pairs),
    ``per_class`` images of each; a source's classes are numbered apart."""
    rng = np.random.default_rng(seed)
    images, labels = [], []
    for offset, (name, classes) in enumerate(parts):
        drawn, classes_drawn = _draw(name, classes, per_class, rng)
        images += drawn
        labels += [c + 10 * offset for c in classes_drawn]
    return np.concatenate(images), np.concatenate(labels)


def pairs(left, right, n_classes, per_class, seed=0):
    """Two images side by side, a left one of ``left`` and a right one of
    ``right``; ``n_classes`` pairs of classes drawn among the 100, ``per_class``
    images of each (the halves drawn with replacement)."""
    rng = np.random.default_rng(seed)
    left_images, left_labels = source(left)
    right_images, right_labels = source(right)
    chosen = np.sort(rng.choice(100, n_classes, replace=False))
    images, labels = [], []
    for label, code in enumerate(chosen):
        a, b = divmod(int(code), 10)
        on_left = rng.choice(np.flatnonzero(left_labels == a), per_class)
        on_right = rng.choice(np.flatnonzero(right_labels == b), per_class)
        images.append(np.concatenate([left_images[on_left], right_images[on_right]], axis=2))
        labels.append(np.full(per_class, label))
    return np.concatenate(images), np.concatenate(labels)


# name: (half, how it is drawn)
BATTERY = {
    "digits": ("tune", lambda: source("digits")),
    "fashion-t-17": ("tune", lambda: subset("fashion-test", [1, 7])),
    "mnist-t-016": ("tune", lambda: subset("mnist-test", [0, 1, 6])),
    "fashion-t-01258": ("tune", lambda: subset("fashion-test", [0, 1, 2, 5, 8])),
    "mnist-t-7cls": ("tune", lambda: subset("mnist-test", [0, 2, 3, 4, 6, 7, 9], 300,
                                            seed=1)),
    "union-10": ("tune", lambda: union([("mnist-test", range(5)),
                                        ("fashion-test", range(5, 10))], 400, seed=2)),
    "union-14": ("tune", lambda: union([("mnist-test", range(7)),
                                        ("fashion-test", range(7))], 300, seed=3)),
    "mnist-t-imb6": ("tune", lambda: subset("mnist-test", [1, 3, 5, 7, 8, 9], 500,
                                            small={9: 50}, seed=4)),
    "mnist-t-500": ("tune", lambda: subset("mnist-test", range(10), 50, seed=5)),
    "pairs-30-60k": ("tune", lambda: pairs("mnist-train", "mnist-train", 30, 2000, seed=6)),
    "pairs-40-small": ("tune", lambda: pairs("mnist-test", "mnist-test", 40, 25, seed=7)),
    "pairs-fm-32": ("tune", lambda: pairs("fashion-test", "mnist-test", 32, 100, seed=8)),
    "pairs-40-10": ("tune", lambda: pairs("fashion-train", "mnist-train", 40, 10, seed=21)),
    "union-20-20": ("tune", lambda: union([("mnist-train", range(10)),
                                           ("fashion-train", range(10))], 20, seed=22)),
    "digits-30-per": ("tune", lambda: subset("digits", range(10), 30, seed=23)),
    "digits-500": ("check", lambda: subset("digits", range(10), 50, seed=10)),
    "digits-56789": ("check", lambda: subset("digits", range(5, 10), seed=18)),
    "mnist-t-49": ("check", lambda: subset("mnist-test", [4, 9])),
    "mnist-t-2358": ("check", lambda: subset("mnist-test", [2, 3, 5, 8])),
    "fashion-t-6cls": ("check", lambda: subset("fashion-test", [0, 1, 3, 5, 7, 8], seed=11)),
    "mnist-test": ("check", lambda: source("mnist-test")),
    "union-20": ("check", lambda: union([("mnist-test", range(10)),
                                         ("fashion-test", range(10))], 500, seed=12)),
    "union-12": ("check", lambda: union([("mnist-test", range(4, 10)),
                                         ("fashion-test", range(4, 10))], 300, seed=13)),
    "fashion-t-imb5": ("check", lambda: subset("fashion-test", [1, 5, 7, 8, 9], 600,
                                               small={1: 60}, seed=14)),
    "pairs-36": ("check", lambda: pairs("mnist-train", "mnist-train", 36, 150, seed=15)),
    "pairs-40-tiny": ("check", lambda: pairs("mnist-test", "mnist-test", 40, 15, seed=16)),
    "pairs-ff-30-30k": ("check", lambda: pairs("fashion-train", "fashion-train", 30, 1000,
                                               seed=17)),
}

# benchmarked apart from the two halves: the acceptance sets of the count
EXTRA = {
    "mnist": lambda: source("mnist-train"),
    "fashion": lambda: source("fashion-train"),
    "mix-20": lambda: union([("mnist-train", range(10)), ("fashion-train", range(10))],
                            1000, seed=20),
}


def names(half):
    """The sets of a half ('tune' or 'check'), in order."""
    return [name for name, (which, _) in BATTERY.items() if which == half]


def load(name):
    """A set's images (n, height, width), float32 in [0, 1], and labels 0, 1, ...,
    shuffled (a seed of the set's own)."""
    build = BATTERY[name][1] if name in BATTERY else EXTRA[name]
    X, y = build()
    _, y = np.unique(y, return_inverse=True)
    order = np.random.default_rng(zlib.crc32(name.encode())).permutation(y.size)
    return X[order], y[order].astype(np.int64)

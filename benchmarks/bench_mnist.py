"""The papers' own benchmark: MNIST, each method beside its peers, in one process.

Reads the original IDX files from ``../shared/data/mnist`` (``--data-dir`` points
elsewhere; the script stops with a clear message when they are absent: nothing is
downloaded). Pixels are scaled to [0, 1]. For each case it prints ACC
(``skdiffclust.metrics.clustering_accuracy``, one-to-one Hungarian matching), NMI and
ARI against the digits on the images it was fitted on, the fit's wall-clock seconds,
its peak resident memory above the level before it (sampled every 10 ms), and the ACC
of ``predict`` on the 10,000 test images where the method predicts.

Usage::

    python benchmarks/bench_mnist.py                  # every case
    python benchmarks/bench_mnist.py --only kmeans    # some cases, comma-separated
    python benchmarks/bench_mnist.py --list           # the cases and what they run
    python benchmarks/bench_mnist.py --device cuda    # torch training on a GPU

A case is a function registered with :func:`case`; it gets the data (:class:`Mnist`)
and returns a :class:`Fit` (the labels of the images it fitted, and optionally the
test images' predicted labels and extra columns to print).
"""

import argparse
import gzip
import os
import resource
import sys
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

from skdiffclust.metrics import clustering_accuracy

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "mnist"
FILES = {
    "train_images": "train-images-idx3-ubyte.gz",
    "train_labels": "train-labels-idx1-ubyte.gz",
    "test_images": "t10k-images-idx3-ubyte.gz",
    "test_labels": "t10k-labels-idx1-ubyte.gz",
}


def read_idx(path):
    """An IDX file (gzipped or not) as a NumPy array of its shape."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(shape)


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


def load_mnist(data_dir):
    data_dir = Path(data_dir)
    missing = [name for name in FILES.values() if not (data_dir / name).exists()]
    if missing:
        sys.exit(f"MNIST not found in {data_dir} (missing {', '.join(missing)}): pass "
                 "--data-dir with the folder of the four original IDX files "
                 f"({', '.join(FILES.values())}, gzipped or not).")
    arrays = {key: read_idx(data_dir / name) for key, name in FILES.items()}
    return Mnist(
        train_images=arrays["train_images"].astype(np.float32) / 255.0,
        train_labels=arrays["train_labels"].astype(np.int64),
        test_images=arrays["test_images"].astype(np.float32) / 255.0,
        test_labels=arrays["test_labels"].astype(np.int64),
    )


@dataclass
class Fit:
    """What a case returns: the labels of its training images (and which they are),
    optionally the test images' labels from ``predict``, and extra columns."""

    labels: np.ndarray
    truth: np.ndarray
    test_labels: np.ndarray = None
    test_truth: np.ndarray = None
    extra: dict = field(default_factory=dict)


CASES = {}


def case(name, description):
    """Register ``function(data) -> Fit`` as the case ``name``."""
    def register(function):
        CASES[name] = (description, function)
        return function
    return register


# ---------------------------------------------------------------- peers
@case("kmeans", "KMeans(10, n_init=3) on the 60,000 training images' raw pixels")
def kmeans_pixels(data):
    from sklearn.cluster import KMeans

    model = KMeans(10, n_init=3, random_state=0).fit(data.X_train)
    return Fit(model.labels_, data.train_labels, model.predict(data.X_test),
               data.test_labels)


# ---------------------------------------------------------------- PRCut
# The paper's protocol (Table 2): the 60,000 training images' raw pixels, a k=150
# nearest-neighbour graph on them, ten clusters, the paper's balance weight
# gamma=100 (its Table 5). Our start: spectral clustering of the graph's edges
# reweighted by their shared neighbours (init='spectral_snn'; the graph's own
# spectral partition, at k=150, has ACC 0.585 and NMI 0.650); Adam at 0.01, 50
# epochs (the partition settles after about 30).
PRCUT_MNIST = dict(n_neighbors=150, gamma=100.0, init="spectral_snn", learning_rate=0.01,
                   max_iter=50, random_state=0)


class PhaseTimer:
    """Wall-clock seconds of the graph and of the spectral start inside one fit
    (the training is the rest), by wrapping the two functions that do them; their
    results (the graph, the starting partition) are kept in ``results``."""

    def __init__(self):
        self.seconds = {"graph": 0.0, "start": 0.0}
        self.results = {}

    def _timed(self, phase, function):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                self.results[phase] = function(*args, **kwargs)
                return self.results[phase]
            finally:
                self.seconds[phase] += time.perf_counter() - start
        return timed

    def __enter__(self):
        from skdiffclust.prcut import _estimator, _training

        self._restore = [(_estimator.PRCut, "_build_graph", _estimator.PRCut._build_graph),
                         (_estimator, "shared_neighbor_graph",
                          _estimator.shared_neighbor_graph),
                         (_training, "initial_partition", _training.initial_partition)]
        _estimator.PRCut._build_graph = self._timed("graph", _estimator.PRCut._build_graph)
        _estimator.shared_neighbor_graph = self._timed("start",
                                                       _estimator.shared_neighbor_graph)
        _training.initial_partition = self._timed("start", _training.initial_partition)
        self.begin = time.perf_counter()
        return self

    def __exit__(self, *exc):
        total = time.perf_counter() - self.begin
        for owner, name, original in self._restore:
            setattr(owner, name, original)
        self.seconds["training"] = total - self.seconds["graph"] - self.seconds["start"]
        self.shares = {phase: s / total for phase, s in self.seconds.items()}

    def columns(self):
        return {f"{phase} %": 100 * share for phase, share in self.shares.items()}


@case("prcut", "PRCut(10, n_neighbors=150, gamma=100, init='spectral_snn', "
               "learning_rate=0.01, max_iter=50) on the 60,000 training images' raw "
               "pixels (the paper's Table 2)")
def prcut_pixels(data):
    from skdiffclust.prcut import PRCut

    model = PRCut(10, device=data.device, **PRCUT_MNIST)
    with PhaseTimer() as phases:
        model.fit(data.X_train)
    start = phases.results["start"]  # spectral clustering's partition of the graph
    extra = {"start ACC": clustering_accuracy(data.train_labels, start),
             "start NMI": normalized_mutual_info_score(data.train_labels, start)}
    return Fit(model.labels_, data.train_labels, model.predict(data.X_test),
               data.test_labels, extra=dict(phases.columns(), **extra,
                                            epochs=model.n_iter_))


# The user's network on images (the paper's use of PRCut with a pretrained
# representation, here PCA): the network reads the pixels, the 10-NN graph comes
# from the 50 principal components (``graph_input``); 15 epochs, a time budget.
# The PCA is computed once per run, in the time of the first case that needs it.
PRCUT_PCA_GRAPH = dict(n_neighbors=10, max_iter=15, random_state=0)


def pca_features(data):
    from sklearn.decomposition import PCA

    return data.cached("pca50", lambda: PCA(50, random_state=0).fit_transform(data.X_train))


def small_cnn(n_clusters=10, seed=0):
    """Two strided convolutions and a linear layer on (n, 1, 28, 28) images,
    drawn from a local generator (Glorot-uniform weights, zero biases)."""
    import torch
    from torch import nn

    cnn = nn.Sequential(
        nn.Conv2d(1, 8, 3, stride=2, padding=1), nn.GELU(),
        nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.GELU(),
        nn.Flatten(), nn.Linear(16 * 7 * 7, n_clusters),
    )
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for layer in cnn:
            if isinstance(layer, (nn.Conv2d, nn.Linear)):
                bound = (6.0 / (layer.weight[0].numel() + layer.weight.shape[0])) ** 0.5
                layer.weight.uniform_(-bound, bound, generator=generator)
                layer.bias.zero_()
    return cnn


@case("prcut_cnn", "PRCut(10, module=small CNN, n_neighbors=10, max_iter=15) on the "
                   "(n, 1, 28, 28) images, the graph from their PCA-50 features")
def prcut_cnn_pca_graph(data):
    from skdiffclust.prcut import PRCut

    model = PRCut(10, module=small_cnn(), device=data.device, **PRCUT_PCA_GRAPH)
    model.fit(data.train_images[:, None], graph_input=pca_features(data))
    return Fit(model.labels_, data.train_labels, model.predict(data.test_images[:, None]),
               data.test_labels, extra={"epochs": model.n_iter_})


@case("prcut_mlp_pca_graph", "PRCut(10, n_neighbors=10, max_iter=15), built-in MLP on "
                             "the pixels, the same PCA-50 graph as prcut_cnn")
def prcut_mlp_pca_graph(data):
    from skdiffclust.prcut import PRCut

    model = PRCut(10, device=data.device, **PRCUT_PCA_GRAPH)
    model.fit(data.X_train, graph_input=pca_features(data))
    return Fit(model.labels_, data.train_labels, model.predict(data.X_test),
               data.test_labels, extra={"epochs": model.n_iter_})


# ---------------------------------------------------------------- measuring
def _rss_bytes():
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:  # not Linux: the process's peak so far
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class PeakMemory:
    """Peak resident memory above the level at entry, sampled every 10 ms."""

    def __enter__(self):
        self.before = self.peak = _rss_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, _rss_bytes())

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss_bytes())

    @property
    def above(self):
        return self.peak - self.before


def run_case(name, data):
    description, function = CASES[name]
    with PeakMemory() as memory, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        fit = function(data)
        seconds = time.perf_counter() - start
    row = {
        "case": name,
        "n": len(fit.truth),
        "ACC": clustering_accuracy(fit.truth, fit.labels),
        "NMI": normalized_mutual_info_score(fit.truth, fit.labels),
        "ARI": adjusted_rand_score(fit.truth, fit.labels),
        "fit s": seconds,
        "peak MiB": memory.above / 2**20,
        "test ACC": (clustering_accuracy(fit.test_truth, fit.test_labels)
                     if fit.test_labels is not None else None),
    }
    row.update(fit.extra)
    names = sorted({w.category.__name__ for w in caught})
    row["warnings"] = ", ".join(names) if names else ""
    return row


def _cell(value):
    if value is None:
        return "--"
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) >= 10 else f"{value:.3f}"
    return str(value)


def print_rows(rows):
    columns = []
    for row in rows:
        columns += [key for key in row if key not in columns]
    cells = [[_cell(row.get(key)) for key in columns] for row in rows]
    widths = [max(len(key), *(len(r[i]) for r in cells)) for i, key in enumerate(columns)]
    print("  ".join(key.ljust(w) for key, w in zip(columns, widths)))
    print("  ".join("-" * w for w in widths))
    for r in cells:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR),
                        help="folder of the four MNIST IDX files (default: ../shared/data/mnist)")
    parser.add_argument("--only", default=None,
                        help="comma-separated cases (default: all); see --list")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda", "auto"),
                        help="device of the cases that train with torch (default: cpu)")
    args = parser.parse_args()
    if args.list:
        for name, (description, _) in CASES.items():
            print(f"{name:<20} {description}")
        return
    names = list(CASES) if args.only is None else args.only.split(",")
    unknown = [name for name in names if name not in CASES]
    if unknown:
        sys.exit(f"unknown case(s) {', '.join(unknown)}; the cases are {', '.join(CASES)}")
    data = load_mnist(args.data_dir)
    data.device = args.device
    print(f"MNIST: {data.train_images.shape[0]} training and {data.test_images.shape[0]} "
          f"test images; {os.cpu_count()} CPUs; torch training on {args.device}")
    rows = []
    for name in names:
        print(f"-- {name}: {CASES[name][0]}", flush=True)
        rows.append(run_case(name, data))
        print_rows(rows[-1:])
    print()
    print_rows(rows)


if __name__ == "__main__":
    main()

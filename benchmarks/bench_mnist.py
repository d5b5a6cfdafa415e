"""The papers' own benchmark: MNIST, each method beside its peers, in one process.

Reads the original IDX files from ``mnist/`` in the data folder
(``$SKDIFFCLUST_DATA_HOME``, else ``~/skdiffclust_data``: that of
``skdiffclust.datasets.load_mnist``; ``--data-dir`` points elsewhere; the script
stops with a clear message when they are absent: nothing is downloaded).
``--digits`` runs the cases on scikit-learn's 1,797 digits instead (8 x 8 images,
no test images). Pixels are scaled to [0, 1]. For each case it prints ACC
(``skdiffclust.metrics.clustering_accuracy``, one-to-one Hungarian matching), NMI and
ARI against the digits on the images it was fitted on, the fit's wall-clock seconds,
its peak resident memory above the level before it (sampled every 10 ms), and the ACC
of ``predict`` on the 10,000 test images where the method predicts.

Usage::

    python benchmarks/bench_mnist.py                  # every case
    python benchmarks/bench_mnist.py --only kmeans    # some cases, comma-separated
    python benchmarks/bench_mnist.py --list           # the cases and what they run
    python benchmarks/bench_mnist.py --device cuda    # torch training on a GPU
    python benchmarks/bench_mnist.py --only forest,forest-semi,gemini-path,clam,gemini
    python benchmarks/bench_mnist.py --only clam,clam-raw \
        --data-dir ~/skdiffclust_data/fashion-mnist
    python benchmarks/bench_mnist.py --only deep,prcut-defaults,kmeans,spectral --digits
    python benchmarks/bench_mnist.py --only kmeans,spectral,deep --imbalance 10
    python benchmarks/bench_mnist.py --only kmeans,deep --csv benchmarks/results/mnist.csv

The fifth is the papers' own MNIST experiments (doc/user_guide/mnist.rst): learning
through spanning forests with LeNet-5 (Stewart et al.), its semi-supervised table,
Sparse GEMINI's pixel path (Ohl et al.), ClAM and SparseGEMINI against k-means on
PCA-50 (``clam-layer``: ClAMLayer + clam_loss with an autoencoder). The last runs
ClAM against k-means on Fashion-MNIST (the same IDX layout), on PCA-50 and on the
raw pixels, the data of the ClAM paper's Table 1.

``--imbalance R`` runs the cases on unbalanced copies of the data (:func:`unbalanced`):
the classes' sizes fall geometrically by a factor ``R`` from the first class to the
last, in the training and in the test images alike. ``R`` is a finite number at
least 1 that leaves every class an image (below twice the smallest class's count:
1784 on MNIST's test images); any other stops the script with a usage error.

``--csv PATH`` writes each case's row (data set, case, device, ACC, NMI, ARI, fit
seconds, test ACC, peak memory, the machine and the date) to a CSV file, read by
``plot_benchmarks.py``; a later run replaces the rows of the cases it ran.

A case is a function registered with :func:`case`; it gets the data (:class:`Mnist`)
and returns a :class:`Fit` (the labels of the images it fitted, and optionally the
test images' predicted labels and extra columns to print). The data and the
unbalanced copies are in ``_mnist_data.py``; the registry and the clustering cases
in ``_mnist_cases.py``; the papers' own experiments in ``_mnist_paper_cases.py``;
this script runs, prints and writes them.
"""

import argparse
import importlib
import os
import re
import sys
import time
import warnings
from numbers import Real
from pathlib import Path

import numpy as np
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

import _mnist_cases
from _memory import PeakMemory
from _mnist_cases import CASES
from _mnist_data import (
    DEFAULT_DATA_DIR,
    Mnist,
    check_imbalance,
    imbalance_ratio,
    load_digits_images,
    load_mnist,
    unbalanced,
)
from _results import load_average, load_span, machine, write_results

from skdiffclust.metrics import clustering_accuracy

# imported for its cases, which register into CASES after those of _mnist_cases (in
# the order --list prints)
importlib.import_module("_mnist_paper_cases")

# what the other scripts (bench_gpu.py) and the tests take from this one
__all__ = ["Mnist", "PeakMemory", "check_imbalance", "load_digits_images", "load_mnist",
           "main", "run_case", "unbalanced"]


def run_case(name, data):
    description, function = CASES[name]
    with PeakMemory() as memory, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        fit = function(data)
        seconds = time.perf_counter() - start
    if fit is None:  # a peer whose package is missing: the case said why
        return {"case": name, "warnings": "skipped"}
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
    for message in dict.fromkeys(f"{w.category.__name__}: {w.message}" for w in caught):
        print(f"   warned: {message.splitlines()[0][:300]}")
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


# the columns run_case writes under names of its own
MAIN_COLUMNS = {"case", "n", "ACC", "NMI", "ARI", "fit s", "peak MiB", "test ACC", "warnings"}


def extra_columns(row):
    """A case's own numeric columns (the forest's test precision, the path's pixels),
    named for the result file: ``'precision 4992'`` -> ``'precision_4992'``."""
    return {re.sub(r"[^a-z0-9]+", "_", key.lower()).strip("_"): value
            for key, value in row.items()
            if key not in MAIN_COLUMNS and isinstance(value, Real) and not isinstance(value, bool)}


def result_rows(rows, data_name, device):
    """The rows of the result file: one per case run (skipped peers left out), with
    each case's numeric extra columns, which the pages quote too."""
    results = []
    for row in rows:
        if "ACC" not in row:
            continue
        results.append({
            "dataset": data_name, "estimator": row["case"],
            "device": device, "ari": row.get("ARI"), "acc": row["ACC"], "nmi": row.get("NMI"),
            "seconds": row.get("fit s"), "note": CASES[row["case"]][0],
            "n": row.get("n"), "test_acc": row.get("test ACC"),
            "peak_mib": row.get("peak MiB"), "warnings": row.get("warnings"),
            **extra_columns(row)})
    return results


def time_deep_phases():
    """Wrap DeepImageClustering's start and trainings so that each prints its
    seconds (after the device's queued work, so that CUDA's are complete)."""
    from skdiffclust.deep import _fit

    def synchronised():
        import torch

        if torch.cuda.is_available():
            torch.cuda.synchronize()
        return time.perf_counter()

    def timed(name, function):
        def wrapper(*args, **kwargs):
            start = synchronised()
            result = function(*args, **kwargs)
            label = name if name != "train" else type(args[0]).__name__
            print(f"   phase {label}: {synchronised() - start:.2f} s", flush=True)
            return result
        return wrapper

    _fit.start_of = timed("graph and start", _fit.start_of)
    _fit.train = timed("train", _fit.train)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR),
                        help="folder of the four MNIST IDX files (default: mnist/ in "
                             "$SKDIFFCLUST_DATA_HOME, else in ~/skdiffclust_data)")
    parser.add_argument("--digits", action="store_true",
                        help="scikit-learn's 1,797 digits (8 x 8 images) instead of the "
                             "IDX files; no test images")
    parser.add_argument("--only", default=None,
                        help="comma-separated cases (default: all); see --list")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda", "auto"),
                        help="device of the cases that train with torch (default: cpu)")
    parser.add_argument("--seeds", default=None,
                        help="comma-separated random_state of the cases run over seeds "
                             "(deep and its peers; default: 0,1,2)")
    parser.add_argument("--imbalance", type=imbalance_ratio, default=None, metavar="R",
                        help="unbalanced classes: their sizes fall geometrically by R "
                             "from the first to the last (training and test images)")
    parser.add_argument("--csv", metavar="PATH",
                        help="write each case's row to this CSV file (e.g. "
                             "benchmarks/results/mnist.csv, read by plot_benchmarks.py)")
    parser.add_argument("--phases", action="store_true",
                        help="print the seconds of each phase of DeepImageClustering's fits "
                             "(the graph and the start, then each training)")
    args = parser.parse_args()
    if args.phases:
        time_deep_phases()
    if args.seeds is not None:
        # the seeded cases read the module's DEEP_SEEDS when they run
        _mnist_cases.DEEP_SEEDS = tuple(int(seed) for seed in args.seeds.split(","))
    if args.list:
        for name, (description, _) in CASES.items():
            print(f"{name:<20} {description}")
        return
    names = list(CASES) if args.only is None else args.only.split(",")
    unknown = [name for name in names if name not in CASES]
    if unknown:
        sys.exit(f"unknown case(s) {', '.join(unknown)}; the cases are {', '.join(CASES)}")
    load_start = load_average()
    data = load_digits_images() if args.digits else load_mnist(args.data_dir)
    data.device = args.device
    if args.imbalance is not None:
        try:
            check_imbalance(args.imbalance, data.train_labels, data.test_labels)
        except ValueError as error:
            parser.error(str(error))
        data = unbalanced(data, args.imbalance)
        print(f"unbalanced (--imbalance {args.imbalance:g}): training images per class "
              f"{np.bincount(data.train_labels).tolist()}")
    source = "digits" if args.digits else Path(args.data_dir).resolve()
    print(f"{Path(str(source)).name} ({source}): "
          f"{data.train_images.shape[0]} training and {data.test_images.shape[0]} "
          f"test images; {os.cpu_count()} CPUs; torch training on {args.device}")
    rows = []
    for name in names:
        print(f"-- {name}: {CASES[name][0]}", flush=True)
        rows.append(run_case(name, data))
        print_rows(rows[-1:])
    print()
    print_rows(rows)
    if args.csv:
        data_name = "digits" if args.digits else Path(args.data_dir).resolve().name
        if args.imbalance is not None:
            data_name += f" (unbalanced {args.imbalance:g})"
        gpu = None
        if args.device != "cpu" and "torch" in sys.modules:
            torch = sys.modules["torch"]
            gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
        results = result_rows(rows, data_name, args.device)
        if args.digits:  # predict ran on the fitted images themselves
            for result in results:
                result["test_acc"] = None
                result["note"] = f"{result['estimator']} on scikit-learn's 1,797 digits (8 x 8)"
        write_results(args.csv, results, "bench_mnist",
                      machine(gpu), load=load_span(load_start, load_average()))
        print(f"results written to {args.csv}")


if __name__ == "__main__":
    main()

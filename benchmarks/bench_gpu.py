"""Fit time of the trained estimators on the CPU and on CUDA, in one process.

For each trained estimator, the same fit (same data, same random_state) runs with
``device='cpu'`` and with ``device='cuda'``; the script prints both times, their
ratio and the quality of each fit (ARI against the generating labels):

* ClAM, 200,000 x 32 blobs (standardised), k=20, at the default ``batch_size=16``
  and at ``batch_size=1024`` (``clam-batch-1024``); on CUDA, the fused numba.cuda
  kernel trains where numba.cuda can launch kernels (the line after the GPU's name
  says which path), torch otherwise;
* PRCut, 1,000,000 x 32 blobs, k=10, the kNN graph included;
* SpanningForestClustering(embedding='mlp', batch_size=256) on digits with 25% of
  the labels (ARI of ``predict`` on the held-out half);
* DeepImageClustering(10) on digits as 8 x 8 images (``deep``);
* ``forest-batch``: the same learning through clustering (75% of digits to train)
  with ``batch_size=1024`` and with the paper's 64: seconds per epoch on each
  device, and the held-out ARI of each fit.

Each fit runs once after a warm-up fit on a small sample (numba compilation,
CUDA context and kernel caches are not timed). Without CUDA the CUDA column says
so. ``--quick`` divides the sizes by 20, to check the script on a laptop.

With ``--mnist-dir DIR``, ``bench_mnist.py``'s cases ``--mnist-cases`` (default
``prcut,prcut-defaults``: the paper's protocol and the defaults on the 60,000 raw
images, the graph included; ``forest`` adds LeNet-5's 30k steps) run on both
devices too, with their fit seconds and ACC.

``--csv PATH`` writes every fit's row (case, estimator, device, seconds, ARI or
ACC, the machine and the date) to a CSV file, e.g. ``benchmarks/results/gpu.csv``,
which ``plot_benchmarks.py`` draws as speed-ups.

Usage: ``python benchmarks/bench_gpu.py [--quick] [--only CASE,...] [--mnist-dir DIR]
[--csv PATH]``, the cases being ``clam,clam-batch-1024,prcut,forest,deep,forest-batch``
(all by default).
"""

import argparse
import platform
import time
import warnings

import numpy as np
from sklearn.datasets import load_digits, make_blobs
from sklearn.metrics import adjusted_rand_score
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from _results import machine as machine_name
from _results import write_results


def blobs(n_samples, n_centers, seed=0):
    X, y = make_blobs(n_samples=n_samples, n_features=32, centers=n_centers,
                      random_state=seed)
    return StandardScaler().fit_transform(X).astype(np.float32), y


def timed(fit):
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = fit()
    return time.perf_counter() - start, result


def clam_case(scale, batch_size=16):
    from skdiffclust import ClAM

    X, y = blobs(200_000 // scale, 20)

    def run(device, data=X):
        model = ClAM(n_clusters=20, batch_size=batch_size, device=device,
                     random_state=0).fit(data)
        return adjusted_rand_score(y[: data.shape[0]], model.labels_), model.n_iter_
    return f"ClAM 200k x 32, k=20, batch {batch_size}", run, X[:2000]


def clam_large_batch_case(scale):
    return clam_case(scale, batch_size=1024)


def prcut_case(scale):
    from skdiffclust import PRCut

    X, y = blobs(1_000_000 // scale, 10)

    def run(device, data=X):
        model = PRCut(n_clusters=10, device=device, random_state=0).fit(data)
        return adjusted_rand_score(y[: data.shape[0]], model.labels_), model.n_iter_
    return "PRCut 1M x 32, k=10 (graph included)", run, X[:5000]


def forest_case(scale):
    from skdiffclust import SpanningForestClustering

    X, y = load_digits(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.5,
                                                        random_state=0, stratify=y)
    partial = np.where(np.random.default_rng(0).random(y_train.size) < 0.25, y_train, -1)
    max_iter = 100 if scale == 1 else 5

    def run(device, data=X_train):
        model = SpanningForestClustering(
            n_clusters=10, embedding="mlp", n_components=16, batch_size=256,
            max_iter=max_iter, device=device, random_state=0,
        ).fit(data, partial_labels=partial[: data.shape[0]])
        # predict: the held-out samples join the training forest's trees (single
        # linkage of the held-out half alone chains into one cluster, ARI 0.00)
        return adjusted_rand_score(y_test, model.predict(X_test)), model.n_iter_
    return "SpanningForestClustering mlp, digits, batch 256", run, X_train[:300]


def deep_case(scale):
    from skdiffclust.deep import DeepImageClustering

    X, y = load_digits(return_X_y=True)
    images = (X / 16.0).reshape(-1, 8, 8).astype(np.float32)

    def run(device, data=images):
        model = DeepImageClustering(10, device=device, random_state=0).fit(data)
        return adjusted_rand_score(y[: data.shape[0]], model.labels_), model.n_iter_
    return "DeepImageClustering, digits (8 x 8 images)", run, images[:200]


ESTIMATORS = {"clam": "ClAM", "clam-batch-1024": "ClAM", "prcut": "PRCut",
              "forest": "SpanningForestClustering", "deep": "DeepImageClustering",
              "forest-batch": "SpanningForestClustering"}
CASES = {"clam": clam_case, "clam-batch-1024": clam_large_batch_case, "prcut": prcut_case,
         "forest": forest_case, "deep": deep_case}


def mnist_table(data_dir, names, devices):
    """``bench_mnist.py``'s cases ``names`` on each device: fit seconds, the ratio,
    and the ACC of each fit; returns the rows of the result file."""
    import bench_mnist

    data = bench_mnist.load_mnist(data_dir)
    print(f"\nbench_mnist.py's cases on {data_dir}: fit seconds (the graph included) and ACC")
    header = f"{'case':<16} " + " ".join(f"{d + ' s':>8} {d + ' ACC':>9}" for d in devices)
    print(header + (f" {'cpu/cuda':>9}" if len(devices) == 2 else ""))
    print("-" * len(header))
    results = []
    for name in names:
        rows = {}
        for device in devices:
            data.device = device
            rows[device] = bench_mnist.run_case(name, data)
            results.append({"dataset": f"mnist/{name}", "estimator": name, "device": device,
                            "acc": rows[device].get("ACC"), "nmi": rows[device].get("NMI"),
                            "seconds": rows[device].get("fit s")})
        cells = " ".join(f"{rows[d]['fit s']:8.1f} {rows[d]['ACC']:9.3f}" for d in devices)
        ratio = (f" {rows['cpu']['fit s'] / rows['cuda']['fit s']:8.1f}x"
                 if len(devices) == 2 else "")
        print(f"{name:<16} {cells}{ratio}", flush=True)
    return results


def forest_batch_table(scale, devices):
    """Seconds per epoch and held-out ARI at batch sizes 1024 and 64, per device;
    returns the rows of the result file."""
    from skdiffclust import SpanningForestClustering

    X, y = load_digits(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25,
                                                        random_state=0, stratify=y)
    partial = np.where(np.random.default_rng(0).random(y_train.size) < 0.25, y_train, -1)
    max_iter = 100 if scale == 1 else 3

    def run(device, batch_size, data=X_train):
        model = SpanningForestClustering(
            n_clusters=10, embedding="mlp", n_components=16, batch_size=batch_size,
            max_iter=max_iter, device=device, random_state=0,
        ).fit(data, partial_labels=partial[: data.shape[0]])
        return model.n_iter_, adjusted_rand_score(y_test, model.predict(X_test))

    print(f"\nlearning through clustering on digits ({X_train.shape[0]} training samples, "
          "mlp, 100 perturbations): seconds per epoch, and ARI of predict on the "
          f"{X_test.shape[0]} held-out samples")
    header = f"{'batch':>6} {'device':>7} {'epochs':>7} {'s/epoch':>9} {'ARI':>7}"
    print(header)
    print("-" * len(header))
    per_epoch, results = {}, []
    for batch_size in (1024, 64):
        for device in devices:
            timed(lambda: run(device, batch_size, X_train[:300]))  # compile, not timed
            seconds, (n_iter, ari) = timed(lambda: run(device, batch_size))
            per_epoch[batch_size, device] = seconds / max(n_iter, 1)
            results.append({"dataset": f"digits, batch {batch_size}",
                            "estimator": "SpanningForestClustering", "device": device,
                            "ari": ari, "seconds": seconds, "epochs": n_iter,
                            "seconds_per_epoch": per_epoch[batch_size, device]})
            print(f"{batch_size:>6} {device:>7} {n_iter:>7} {per_epoch[batch_size, device]:9.3f} "
                  f"{ari:7.3f}", flush=True)
    if "cuda" in devices and "cpu" in devices:
        ratio = per_epoch[1024, "cpu"] / per_epoch[1024, "cuda"]
        print(f"batch 1024, s/epoch cpu / cuda: {ratio:.1f}x")
    elif "cuda" not in devices:
        print("CUDA unavailable: the GPU figures are not measured.")
    return results


def profiled(fit, n_functions, title):
    """``timed(fit)`` under cProfile, printing the ``n_functions`` of the most
    cumulative time (the time includes the profiler's overhead)."""
    import cProfile
    import pstats

    profile = cProfile.Profile()
    result = profile.runcall(timed, fit)
    print(f"-- profile: {title} ({result[0]:.2f} s under the profiler)")
    pstats.Stats(profile).sort_stats("cumulative").print_stats(n_functions)
    return result


def cuda_device_name():
    try:
        import torch
    except ImportError:
        return None
    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="sizes divided by 20")
    parser.add_argument("--only", default="clam,clam-batch-1024,prcut,forest,deep,forest-batch")
    parser.add_argument("--mnist-dir", default=None,
                        help="also run bench_mnist.py's --mnist-cases on the IDX files there")
    parser.add_argument("--mnist-cases", default="prcut,prcut-defaults",
                        help="bench_mnist.py's cases for --mnist-dir (e.g. prcut,forest)")
    parser.add_argument("--cuda-only", action="store_true",
                        help="skip the CPU fits (their column says n/a)")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="profile each timed fit (cProfile) and print its N functions "
                             "of the most cumulative time")
    parser.add_argument("--csv", metavar="PATH",
                        help="write every fit's row to this CSV file (e.g. "
                             "benchmarks/results/gpu.csv, read by plot_benchmarks.py)")
    args = parser.parse_args()
    scale = 20 if args.quick else 1
    gpu = cuda_device_name()
    machine = platform.processor() or platform.machine()
    print(f"CPU: {machine}; GPU: {gpu or 'none (CUDA unavailable)'}"
          + ("; --quick: sizes divided by 20" if args.quick else ""))
    if gpu:
        from skdiffclust.clam._device import Machine
        from skdiffclust.clam._settings import training_device

        print(f"ClAM(device='cuda') trains with: {training_device('cuda', 16, Machine()).backend}"
              " ('numba-cuda': the fused kernel; 'torch': the torch path)")
    header = (f"{'case':<48} {'cpu s':>8} {'cuda s':>8} {'cpu/cuda':>9} {'ARI cpu':>8} "
              f"{'ARI cuda':>9} {'epochs':>9}")
    print(header)
    print("-" * len(header))
    keys = args.only.split(",")
    devices = ([] if args.cuda_only and gpu else ["cpu"]) + (["cuda"] if gpu else [])
    results = []
    for key in keys:
        if key not in CASES:
            continue
        name, run, warm_data = CASES[key](scale)
        times, scores, epochs = {}, {}, {}
        for device in devices:
            timed(lambda: run(device, warm_data))  # compile / initialise, not timed
            times[device], (scores[device], epochs[device]) = (
                profiled(lambda: run(device), args.profile, f"{name}, {device}")
                if args.profile else timed(lambda: run(device)))
        ratio = (f"{times['cpu'] / times['cuda']:8.1f}x" if len(times) == 2 else f"{'n/a':>9}")
        print(f"{name:<48} {_cell(times, 'cpu', '8.2f')} {_cell(times, 'cuda', '8.2f')} "
              f"{ratio} {_cell(scores, 'cpu', '8.3f')} {_cell(scores, 'cuda', '9.3f')} "
              f"{'/'.join(str(epochs[d]) for d in devices):>9}", flush=True)
        results += [{"dataset": key, "estimator": ESTIMATORS[key], "device": device,
                     "ari": scores[device], "seconds": times[device], "epochs": epochs[device],
                     "note": name + (" (cProfile)" if args.profile else "")}
                    for device in devices]
    if "forest-batch" in keys:
        results += forest_batch_table(scale, devices)
    if args.mnist_dir is not None:
        results += mnist_table(args.mnist_dir, args.mnist_cases.split(","), devices)
    if args.csv:
        if args.quick:
            results = [{**row, "note": (row.get("note", "") + " --quick").strip()}
                       for row in results]
        write_results(args.csv, results, "bench_gpu", machine_name(gpu))
        print(f"results written to {args.csv}")


def _cell(values, device, spec):
    width = int(spec.split(".")[0])
    return format(values[device], spec) if device in values else f"{'n/a':>{width}}"


if __name__ == "__main__":
    main()

"""Perturbed spanning forests: time of one forward + backward pass, CPU and GPU, in one process.

For n points (a batch) and n_samples Monte-Carlo samples, times
* the partial Fenchel-Young loss (both forests from one noise draw, exact gradient);
* the perturbed adjacency A_eps with its score-function backward pass;
with the similarity matrix on the CPU (numba kernels, all cores) and, when CUDA is
available, on the GPU (``forest/_gpu.py``: every sample solved on the device), with
the GPU's peak memory. Combinations the CPU would take too long on are skipped and
said so (``--cpu-budget``).

The authors' JAX code (jaxclust) was measured on a 2-core machine at 98 s for one
forward pass at n=256, n_samples=100 (n=512 did not finish in 15 minutes): its
Kruskal costs O(n^2) per added edge, O(n^4) per solve.

Usage::

    pip install ".[torch]"
    python benchmarks/bench_perturbed.py            # n in 256..16384, 100 and 1000 samples
    python benchmarks/bench_perturbed.py --sizes 256 1024 --samples 100
    python benchmarks/bench_perturbed.py --sizes 4096 --csv benchmarks/results/perturbed.csv

``--small`` times the small problems of learning through clustering instead, on one
thread (the estimator's default): the loss at n = 64, 128 and 256 with 100 samples
(median of 15), and an epoch of ``SpanningForestClustering(embedding='mlp')`` on
scikit-learn's digits, half of them labelled (median of 5 over ten epochs)::

    python benchmarks/bench_perturbed.py --small --csv benchmarks/results/perturbed.csv

``--csv PATH`` writes each timing (n and samples, operator, device, seconds, GPU
peak, the machine, the date and the load) to a CSV file, read by
``plot_benchmarks.py`` and quoted by the pages.
"""

import argparse
import time
import warnings

import numba
import numpy as np
import torch
from _results import load_average, load_span, machine, write_results
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning

from skdiffclust import SpanningForestClustering
from skdiffclust.torch import partial_fenchel_young_loss, perturbed_spanning_forest

JAXCLUST_SECONDS = {(256, 100): 98.0}  # forward only, 2-core machine
# the CPU solver's cost grows as n^2 * n_samples; n=4096 with 100 samples took
# 10-15 s on a 2-core machine
CPU_REFERENCE = (4096**2 * 100, 12.0)


def batch(n, device, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 16, generator=g)
    labels = torch.randint(0, 10, (n,), generator=g)
    labels[torch.rand(n, generator=g) < 0.5] = -1
    return X.to(device).requires_grad_(True), labels.to(device)


def standardized(X):
    S = -torch.cdist(X, X) ** 2
    return (S - S.mean()) / S.std()


def loss_step(X, labels, n_samples, generator):
    loss = partial_fenchel_young_loss(standardized(X), labels, 10, n_samples=n_samples,
                                      generator=generator)
    loss.backward()


def adjacency_step(X, labels, n_samples, generator):
    A, _, _ = perturbed_spanning_forest(standardized(X), 10, n_samples=n_samples,
                                        generator=generator)
    A.sum().backward()


def best_of(fn, repeats, device):
    """Best wall time of ``repeats`` calls; on a GPU, waits for the device each time."""
    best = np.inf
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return best


def estimated_cpu_seconds(n, n_samples):
    work, seconds = CPU_REFERENCE
    return seconds * n * n * n_samples / work


def measure(device, n, n_samples, repeats):
    """(loss seconds, A_eps seconds, peak GPU bytes or None) for one configuration."""
    X, labels = batch(n, device)
    generator = torch.Generator().manual_seed(0)
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    loss_time = best_of(lambda: loss_step(X, labels, n_samples, generator), repeats, device)
    adj_time = best_of(lambda: adjacency_step(X, labels, n_samples, generator), repeats,
                       device)
    peak = torch.cuda.max_memory_allocated() if device == "cuda" else None
    return loss_time, adj_time, peak


def warm_up(device):
    """Compile (or load from cache) the kernels of both operators."""
    X, labels = batch(64, device)
    generator = torch.Generator().manual_seed(0)
    loss_step(X, labels, 2, generator)
    adjacency_step(X, labels, 2, generator)


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def median_of(fn, repeats):
    return float(np.median([timed(fn) for _ in range(repeats)]))


def epoch_seconds(X, partial_labels, repeats=5, epochs=10):
    """An epoch of ``SpanningForestClustering(embedding='mlp')`` on ``X`` and its
    ``partial_labels``: the median over ``repeats`` of the difference between fits of
    ``epochs + 1`` epochs and of one, over ``epochs`` (so that the set-up each fit
    pays is left out)."""
    def fit(max_iter):
        SpanningForestClustering(n_clusters=10, embedding="mlp", max_iter=max_iter, tol=0.0,
                                 n_iter_no_change=max_iter + 1, device="cpu",
                                 random_state=0).fit(X, partial_labels=partial_labels)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit(1)  # compiles or loads the kernels
        return float(np.median([timed(lambda: fit(epochs + 1)) - timed(lambda: fit(1))
                                for _ in range(repeats)])) / epochs


def small_rows(sizes=(64, 128, 256), n_samples=100, repeats=15):
    """The small problems of learning through clustering on one thread: the loss's
    forward and backward pass at each of ``sizes``, and an epoch on digits."""
    threads = torch.get_num_threads(), numba.get_num_threads()
    torch.set_num_threads(1)
    numba.set_num_threads(1)
    try:
        warm_up("cpu")
        rows = []
        for n in sizes:
            X, labels = batch(n, "cpu")
            generator = torch.Generator().manual_seed(0)
            seconds = median_of(lambda: loss_step(X, labels, n_samples, generator), repeats)
            print(f"n = {n:4d}, {n_samples} samples, one thread: loss {milliseconds(seconds)}")
            rows.append({"dataset": f"n = {n:,}, {n_samples:,} samples, one thread",
                         "estimator": "partial Fenchel-Young loss", "device": "cpu",
                         "seconds": seconds,
                         "note": f"forward and backward, median of {repeats}"})
        digits = load_digits()
        partial_labels = digits.target.copy()
        partial_labels[np.random.default_rng(0).random(partial_labels.size) < 0.5] = -1
        seconds = epoch_seconds(digits.data / 16.0, partial_labels)
        print(f"an epoch of SpanningForestClustering(embedding='mlp') on digits, one "
              f"thread: {milliseconds(seconds)}")
        rows.append({"dataset": "digits, an epoch, one thread",
                     "estimator": "SpanningForestClustering(embedding='mlp')",
                     "device": "cpu", "seconds": seconds,
                     "note": "batch_size=64, half the images labelled: a pass over the "
                             "1,797 images; median of 5 differences between fits of 11 "
                             "epochs and of 1, over 10"})
        return rows
    finally:
        torch.set_num_threads(threads[0])
        numba.set_num_threads(threads[1])


def milliseconds(seconds):
    return f"{seconds * 1e3:10.1f} ms" if seconds is not None else f"{'skipped':>13}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 1024, 4096, 16384])
    parser.add_argument("--samples", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--cpu-budget", type=float, default=60.0,
                        help="skip CPU runs estimated to take longer than this (seconds)")
    parser.add_argument("--small", action="store_true",
                        help="the small problems of learning through clustering, one thread")
    parser.add_argument("--csv", metavar="PATH",
                        help="write each timing to this CSV file (e.g. "
                             "benchmarks/results/perturbed.csv)")
    args = parser.parse_args()
    load_start = load_average()
    if args.small:
        rows = small_rows()
        if args.csv:
            write_results(args.csv, rows, "bench_perturbed",
                          load=load_span(load_start, load_average()))
            print(f"results written to {args.csv}")
        return
    has_cuda = torch.cuda.is_available()
    devices = ["cpu"] + (["cuda"] if has_cuda else [])
    for device in devices:
        warm_up(device)
    if has_cuda:
        print(f"GPU: {torch.cuda.get_device_name()}")
    else:
        print("GPU column: needs CUDA (none here); CPU column only.")
    print(f"CPU: {torch.get_num_threads()} threads; runs estimated above "
          f"{args.cpu_budget:.0f} s (per call, x{2 * args.repeats}) are skipped.")
    header = f"{'n':>6} {'samples':>8} {'CPU loss':>13} {'CPU A_eps':>13}"
    if has_cuda:
        header += f" {'GPU loss':>13} {'GPU A_eps':>13} {'GPU peak':>10} {'loss speed-up':>14}"
    print(header + "  jaxclust")
    rows = []
    for n in args.sizes:
        for n_samples in args.samples:
            cpu = (None, None, None)
            if estimated_cpu_seconds(n, n_samples) <= args.cpu_budget:
                cpu = measure("cpu", n, n_samples, args.repeats)
            line = f"{n:6d} {n_samples:8d} {milliseconds(cpu[0])} {milliseconds(cpu[1])}"
            if has_cuda:
                gpu = measure("cuda", n, n_samples, args.repeats)
                speedup = f"{cpu[0] / gpu[0]:13.1f}x" if cpu[0] is not None else f"{'':>14}"
                line += (f" {milliseconds(gpu[0])} {milliseconds(gpu[1])} "
                         f"{gpu[2] / 2**30:7.2f} GB {speedup}")
            reference = JAXCLUST_SECONDS.get((n, n_samples))
            if reference and cpu[1] is not None:
                line += f"  {reference:.0f} s forward: {reference / cpu[1]:,.0f}x slower"
            print(line, flush=True)
            rows += result_rows(n, n_samples, "cpu", cpu)
            if has_cuda:
                rows += result_rows(n, n_samples, "cuda", gpu)
    if args.csv:
        write_results(args.csv, rows, "bench_perturbed",
                      machine(torch.cuda.get_device_name() if has_cuda else None),
                      load=load_span(load_start, load_average()))
        print(f"results written to {args.csv}")


def result_rows(n, n_samples, device, timings):
    """The rows of the result file of one configuration on one device (none if skipped)."""
    loss, adjacency, peak = timings
    if loss is None:
        return []
    common = {"dataset": f"n = {n:,}, {n_samples:,} samples", "device": device,
              "note": "forward and backward, best of the repeats",
              "peak_gb": None if peak is None else peak / 2**30}
    return [{**common, "estimator": "partial Fenchel-Young loss", "seconds": loss},
            {**common, "estimator": "A_eps", "seconds": adjacency}]


if __name__ == "__main__":
    main()

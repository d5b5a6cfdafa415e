"""The public torch objectives (``skdiffclust.torch``): time per training step.

Section ``steps``: one training step (forward and backward, warm: after warm-up
steps; median of ``--repeats``) of each objective at the sizes below, on the
CPU and, in the same process, on CUDA when torch sees a device (else the CUDA
column reads "not yet measured"):

* ``PRCutLoss``: a batch pair of 2 x 4,096 samples, k = 100, its affinity block a
  sparse COO tensor drawn by ``PRCutBatchPairs`` from the symmetric 10-NN graph of
  20,000 points (8-d blobs: on CUDA, degrees regular enough for the padded layout
  that keeps the graph on the device; 32-d blobs have hubs of degree 137, whose
  blocks would be extracted on the host; on the CPU the blocks are always read
  from the CSR graph, edges only); the step is the softmax of the pair's logits,
  the loss and the backward pass. Drawing a pair and its block is timed on its
  own row.
* ``gemini_loss``: MMD one-vs-one of a batch of 1,024, k = 10, with the batch's RBF
  kernel matrix (computed once, outside the step); the Wasserstein one-vs-all at a
  batch of 256 for comparison (exact transports on the host).
* ``ClAMLayer``: ``clam_loss`` (``mask_prob=0.15``) of a batch of 1,024 points,
  d = 64, k = 50 prototypes, T = 10 steps, and its backward pass.

All in float32, the probabilities' logits (and the layer's input) leaves that
require a gradient. On the CPU torch runs ``--threads`` threads (default 1: on a
shared 2-core machine more threads than free cores slow small steps down).

Section ``digits``: the gallery example ``examples/plot_digits_deep_clustering.py``
(deep clustering of scikit-learn's digits as 8 x 8 images with one small CNN,
trained by ``PRCut(module=cnn)``, by ``gemini_loss`` in a torch loop and, in the
embedding PRCut learned, by a ``ClAMLayer``; KMeans and SpectralClustering on the
pixels), run as it is (``runpy``: the example is the single source of the
comparison), its table of ACC, NMI, ARI and fit time printed, with one more row:
PRCut's built-in MLP on the same pixels, hence the same 10-NN graph, the
reference that ``PRCut(module=cnn)`` must reach in accuracy.

Section ``checks``: what the input checks of the blocks cost. Each
step above (and ClAMLayer's inference, ``predict_proba`` of 4,096 points) is timed
with the value checks off and on (``set_input_checks('off')`` / ``'auto'``), the
two taking turns by blocks of steps (about 20 ms each) so that both see the same
machine load, the best of ``--repeats`` blocks each (on a shared machine the
median moved by more than the checks cost), and the overhead printed in %; on
CUDA the steps are timed after a
first call (whose eager check reads a flag back once), so the checked column is
the assertions on the device, and one more column times ``'eager'`` (a read back
per step). The "in checks" column is the host time spent inside the checks per
step, measured around them (on the CPU their whole cost, without the noise of
two step times; on CUDA the time to launch them). On CUDA each step also runs
once under
``torch.cuda.set_sync_debug_mode('error')``, checks off and on: the "host syncs"
column says whether either synchronised the host with the device (the
Wasserstein GEMINIs solve their transports on the host, so they always do).

Each section is a function printing its own table, selected with ``--only``.
``--csv PATH`` writes their rows to a result file (``benchmarks/results/torch_api.csv``,
which the pages quote): each step's time per device, each block's times with the
checks off and on and the share of a step spent inside them, and the digits
example's scores and fit times.

Usage: ``python benchmarks/bench_torch_api.py [--repeats 20] [--threads 1]
[--only steps,digits,checks] [--csv PATH]``; the checks alone: ``--only checks
--repeats 50``.
"""

import argparse
import contextlib
import pathlib
import platform
import runpy
import statistics
import time

import numpy as np
import torch
from sklearn.datasets import make_blobs
from _results import load_average, machine, save_run
from sklearn.neighbors import kneighbors_graph

from skdiffclust.torch import (
    ClAMLayer,
    PRCutBatchPairs,
    PRCutLoss,
    clam_loss,
    gemini_loss,
    set_input_checks,
)

NOT_MEASURED = "not yet measured"


def _synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_seconds(step, device, repeats, warm_up=3):
    """Median wall time of ``step()`` after ``warm_up`` untimed calls."""
    for _ in range(warm_up):
        step()
    times = []
    for _ in range(repeats):
        _synchronize(device)
        start = time.perf_counter()
        step()
        _synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _leaf(shape, generator, device, scale=1.0):
    values = scale * torch.randn(shape, generator=generator)
    return values.to(device).requires_grad_(True)


def prcut_graph(n_samples=20_000, n_neighbors=10):
    X, _ = make_blobs(n_samples, n_features=8, centers=100, random_state=0)
    knn = kneighbors_graph(X, n_neighbors, include_self=False)
    return knn.maximum(knn.T).tocsr()


def prcut_cases(graph, batch_size=4096, n_clusters=100):
    """(name, make_step(device)) of PRCutLoss's step and of a pair's draw."""
    def pairs_on(device):
        return PRCutBatchPairs(graph, batch_size, device=device,
                               generator=torch.Generator(device).manual_seed(0))

    def loss_step(device):
        left, right, affinity = next(iter(pairs_on(device)))
        logits = _leaf((2 * batch_size, n_clusters), torch.Generator().manual_seed(1),
                       device)
        criterion = PRCutLoss(n_clusters).to(device)

        def step():
            logits.grad = None
            proba = torch.softmax(logits, dim=1)
            criterion(proba[:batch_size], proba[batch_size:], affinity).backward()
        return step

    def draw_step(device):
        pairs = pairs_on(device)
        iterator = iter(pairs)

        def step():
            nonlocal iterator
            try:
                next(iterator)
            except StopIteration:  # a new epoch: new permutations
                iterator = iter(pairs)
                next(iterator)
        return step

    return [(f"PRCutLoss, pair 2 x {batch_size}, k={n_clusters}, sparse block", loss_step),
            (f"PRCutBatchPairs, one pair and its block ({graph.shape[0]:,} samples)",
             draw_step)]


def gemini_case(gemini, batch_size, n_clusters=10, n_features=32):
    def make_step(device):
        generator = torch.Generator().manual_seed(2)
        x = torch.randn(batch_size, n_features, generator=generator).to(device)
        distances = torch.cdist(x, x)
        similarity = (torch.exp(-distances**2 / (2 * n_features))
                      if gemini.startswith("mmd") else distances)
        logits = _leaf((batch_size, n_clusters), generator, device)

        def step():
            logits.grad = None
            gemini_loss(torch.softmax(logits, dim=1), similarity, gemini).backward()
        return step
    kind = "RBF kernel" if gemini.startswith("mmd") else "distances"
    return f"gemini_loss {gemini}, batch {batch_size}, k={n_clusters}, {kind}", make_step


def clam_case(batch_size=1024, n_features=64, n_clusters=50, n_steps=10):
    def make_step(device):
        generator = torch.Generator().manual_seed(3)
        layer = ClAMLayer(n_clusters, n_features, beta=1.0 / n_features, n_steps=n_steps,
                          generator=generator).to(device)
        x = _leaf((batch_size, n_features), generator, device)
        masks = torch.Generator(device).manual_seed(4)

        def step():
            layer.zero_grad(set_to_none=True)
            x.grad = None
            clam_loss(layer, x, mask_prob=0.15, generator=masks).backward()
        return step
    return (f"ClAMLayer + clam_loss, batch {batch_size}, d={n_features}, k={n_clusters}, "
            f"T={n_steps}", make_step)


def _milliseconds(seconds):
    return f"{1e3 * seconds:.3g} ms"


def _key(name):
    """A case's short name, its result rows' estimator: ``'PRCutLoss'``,
    ``'gemini_loss mmd_ovo'``."""
    return name.split(",")[0]


def steps(args):
    """Median time of one training step of each objective, CPU and CUDA."""
    devices = [torch.device("cpu")]
    if torch.cuda.is_available():
        devices.append(torch.device("cuda"))
    cases = [*prcut_cases(prcut_graph()), gemini_case("mmd_ovo", 1024),
             gemini_case("wasserstein_ova", 256), clam_case()]
    print(f"\nTraining steps (forward + backward), median of {args.repeats}, float32; "
          f"CPU: {platform.processor() or platform.machine()}, {args.threads} thread(s)"
          + (f"; CUDA: {torch.cuda.get_device_name()}" if len(devices) > 1 else ""))
    print(f"{'step':<72} {'CPU':>12} {'CUDA':>18}")
    rows = []
    for name, make_step in cases:
        timings = [median_seconds(make_step(device), device, args.repeats)
                   for device in devices]
        cuda = _milliseconds(timings[1]) if len(timings) > 1 else NOT_MEASURED
        print(f"{name:<72} {_milliseconds(timings[0]):>12} {cuda:>18}", flush=True)
        rows += [{"dataset": "step", "estimator": _key(name), "device": device.type,
                  "seconds": seconds, "note": f"{name}; median of {args.repeats}, "
                                              f"{args.threads} CPU thread(s)"}
                 for device, seconds in zip(devices, timings)]
    return rows


def clam_inference_case(batch_size=4096, n_features=64, n_clusters=50, n_steps=10):
    def make_step(device):
        generator = torch.Generator().manual_seed(5)
        layer = ClAMLayer(n_clusters, n_features, beta=1.0 / n_features, n_steps=n_steps,
                          generator=generator).to(device)
        x = torch.randn(batch_size, n_features, generator=generator).to(device)

        @torch.no_grad()
        def step():
            layer.predict_proba(x)
        return step
    return (f"ClAMLayer.predict_proba, {batch_size} points, d={n_features}, "
            f"k={n_clusters}, T={n_steps}", make_step)


@contextlib.contextmanager
def input_checks(mode):
    previous = set_input_checks(mode)
    try:
        yield
    finally:
        set_input_checks(previous)


def interleaved_times(step, device, modes, repeats, warm_up=3, block_seconds=0.02):
    """Time per ``step()`` under each input-check mode: the modes take turns,
    ``repeats`` blocks each of enough steps to last ``block_seconds``; the best
    block of each (timeit's rule: other processes only ever add time, and on a
    shared machine the median moved by more than the checks cost)."""
    for mode in modes:
        with input_checks(mode):
            for _ in range(warm_up):
                step()
    _synchronize(device)
    start = time.perf_counter()
    step()
    _synchronize(device)
    n_steps = max(1, int(block_seconds / max(time.perf_counter() - start, 1e-9)))
    best = dict.fromkeys(modes, float("inf"))
    for repeat in range(repeats):
        for mode in modes[::-1] if repeat % 2 else modes:  # neither always first
            with input_checks(mode):
                _synchronize(device)
                start = time.perf_counter()
                for _ in range(n_steps):
                    step()
                _synchronize(device)
                best[mode] = min(best[mode], (time.perf_counter() - start) / n_steps)
    return best


def synchronises(step, mode):
    """Whether one (warm) CUDA step synchronises the host with the device."""
    with input_checks(mode):
        step()
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            step()
        except RuntimeError as error:
            if "synchroniz" not in str(error):
                raise
            return True
        finally:
            torch.cuda.set_sync_debug_mode("default")
            torch.cuda.synchronize()
    return False


def time_in_checks(step, device, n_steps=20):
    """Host time per step spent inside the blocks' value checks (``'auto'``): on
    the CPU their whole cost, free of the step-to-step noise of the step times;
    on CUDA the time to launch them."""
    from skdiffclust._utils._torch_checks import ValueChecks

    spent, call = [0.0], ValueChecks.__call__

    def timed(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return call(self, *args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - start

    with input_checks("auto"):
        step()
        ValueChecks.__call__ = timed
        try:
            for _ in range(n_steps):
                step()
        finally:
            ValueChecks.__call__ = call
        _synchronize(device)
    return spent[0] / n_steps


def checks(args):
    """Each block's step with its input checks off and on, CPU and CUDA."""
    devices = [torch.device("cpu")]
    if torch.cuda.is_available():
        devices.append(torch.device("cuda"))
    cases = [prcut_cases(prcut_graph())[0], gemini_case("mmd_ovo", 1024),
             gemini_case("wasserstein_ova", 256), clam_case(), clam_inference_case()]
    print(f"\nInput checks: a step with them off and on, best of {args.repeats} "
          f"interleaved blocks of steps; CPU: {platform.processor() or platform.machine()}, "
          f"{args.threads} thread(s)"
          + (f"; CUDA: {torch.cuda.get_device_name()}" if len(devices) > 1 else
             "; CUDA: not available here"))
    print(f"{'step':<72} {'device':>6} {'off':>10} {'checked':>10} {'overhead':>9} "
          f"{'in checks':>17} {'eager':>10} {'host syncs (off/checked)':>25}")
    rows = []
    for name, make_step in cases:
        for device in devices:
            step = make_step(device)
            cuda = device.type == "cuda"
            modes = ("off", "auto", "eager") if cuda else ("off", "auto")
            times = interleaved_times(step, device, modes, args.repeats)
            overhead = 100.0 * (times["auto"] / times["off"] - 1.0)
            inside = time_in_checks(step, device)
            rows.append({"dataset": "checks", "estimator": _key(name), "device": device.type,
                         "seconds": times["off"], "checked_seconds": times["auto"],
                         "in_checks_share": inside / times["off"],
                         "note": f"{name}; best of {args.repeats} interleaved blocks, "
                                 "checks off (seconds) and on (checked_seconds); "
                                 "in_checks_share: the host time inside the checks "
                                 "over a step's"})
            inside = f"{_milliseconds(inside)} ({100.0 * inside / times['off']:.1f}%)"
            eager = _milliseconds(times["eager"]) if cuda else "-"
            syncs = (f"{'yes' if synchronises(step, 'off') else 'no'}/"
                     f"{'yes' if synchronises(step, 'auto') else 'no'}" if cuda else "-")
            print(f"{name:<72} {device.type:>6} {_milliseconds(times['off']):>10} "
                  f"{_milliseconds(times['auto']):>10} {overhead:>8.1f}% {inside:>17} "
                  f"{eager:>10} "
                  f"{syncs:>25}", flush=True)
    return rows


EXAMPLE = (pathlib.Path(__file__).resolve().parents[1] / "examples"
           / "plot_digits_deep_clustering.py")


def digits(args):
    """The digits example's table, and PRCut's built-in MLP on the same graph."""
    import matplotlib

    matplotlib.use("Agg")  # the example draws figures: no window
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

    from skdiffclust.metrics import clustering_accuracy
    from skdiffclust.prcut import PRCut

    print(f"\nDigits as 8 x 8 images ({EXAMPLE.name}), CPU, one torch thread")
    example = runpy.run_path(str(EXAMPLE), run_name="__bench__")
    X, y = example["X"], example["y"]
    start = time.perf_counter()
    mlp = PRCut(n_clusters=10, random_state=example["SEED"]).fit(X)
    seconds = time.perf_counter() - start
    assert (mlp.affinity_matrix_ != example["prcut"].affinity_matrix_).nnz == 0
    results = dict(example["results"])
    results["PRCut, built-in MLP (same graph)"] = (
        clustering_accuracy(y, mlp.labels_), normalized_mutual_info_score(y, mlp.labels_),
        adjusted_rand_score(y, mlp.labels_), seconds)
    print(f"{'method':<36} {'ACC':>6} {'NMI':>6} {'ARI':>6} {'fit time':>9}")
    for name, (acc, nmi, ari, fit_time) in results.items():
        print(f"{name:<36} {acc:6.3f} {nmi:6.3f} {ari:6.3f} {fit_time:8.2f}s")
    cnn, builtin = results["PRCut(module=cnn)"][0], results[
        "PRCut, built-in MLP (same graph)"][0]
    print(f"PRCut(module=cnn) accuracy {cnn:.3f} >= built-in MLP {builtin:.3f}: "
          f"{'yes' if cnn >= builtin else 'NO'}")
    return [{"dataset": "digits", "estimator": name, "device": "cpu", "acc": acc, "nmi": nmi,
             "ari": ari, "seconds": fit_time,
             "note": f"{EXAMPLE.name}, one torch thread"}
            for name, (acc, nmi, ari, fit_time) in results.items()]


SECTIONS = {"steps": steps, "digits": digits, "checks": checks}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--only", default=",".join(SECTIONS),
                        help=f"comma-separated sections among {', '.join(SECTIONS)}")
    parser.add_argument("--csv", help="the result file to write the rows to "
                        "(benchmarks/results/torch_api.csv, which the pages quote); a "
                        "rerun replaces the rows it measured")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, numpy {np.__version__}")
    load_start = load_average()
    rows = [row for name in args.only.split(",") for row in SECTIONS[name](args)]
    if args.csv:
        gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else None
        save_run(args.csv, [{**row, "machine": machine(gpu)} for row in rows],
                 "bench_torch_api", load_start)


if __name__ == "__main__":
    main()

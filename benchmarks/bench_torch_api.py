"""The public torch objectives (``skdiffclust.torch``): time per training step.

Section ``steps``: one training step (forward and backward, warm: after warm-up
steps; median of ``--repeats``) of each objective at the sizes of issue 20, on the
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

The script is organised in sections (``SECTIONS``), each a function printing its
own table and selected with ``--only``; the digits CNN comparison of issue 20
(item 3: ``PRCut(module=cnn)``, ``gemini_loss`` in a torch loop and ``ClAMLayer``
next to KMeans and SpectralClustering) belongs in a section of its own,
``digits``, registered in ``SECTIONS`` next to ``steps``.

Usage: ``python benchmarks/bench_torch_api.py [--repeats 20] [--threads 1]
[--only steps]``.
"""

import argparse
import platform
import statistics
import time

import numpy as np
import torch
from sklearn.datasets import make_blobs
from sklearn.neighbors import kneighbors_graph

from skdiffclust.torch import ClAMLayer, PRCutBatchPairs, PRCutLoss, clam_loss, gemini_loss

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
    for name, make_step in cases:
        timings = [median_seconds(make_step(device), device, args.repeats)
                   for device in devices]
        cuda = _milliseconds(timings[1]) if len(timings) > 1 else NOT_MEASURED
        print(f"{name:<72} {_milliseconds(timings[0]):>12} {cuda:>18}", flush=True)


SECTIONS = {"steps": steps}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--only", default=",".join(SECTIONS),
                        help=f"comma-separated sections among {', '.join(SECTIONS)}")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, numpy {np.__version__}")
    for name in args.only.split(","):
        SECTIONS[name](args)


if __name__ == "__main__":
    main()

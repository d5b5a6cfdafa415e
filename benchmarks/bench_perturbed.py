"""Perturbed spanning forests: time of one forward + backward pass, in one process.

For n points (a batch) and n_samples Monte-Carlo samples, times
* the partial Fenchel-Young loss (both forests from one noise draw, exact gradient);
* the perturbed adjacency A_eps with its score-function backward pass;
and compares with the authors' JAX code (jaxclust), measured on this 2-core machine
at 98 s for one forward pass at n=256, n_samples=100 (n=512 did not finish in 15
minutes): its Kruskal costs O(n^2) per added edge, O(n^4) per solve.

Usage::

    pip install ".[torch]"
    python benchmarks/bench_perturbed.py
"""

import argparse
import time

import numpy as np
import torch

from skdiffclust.torch import (
    constraints_from_labels,
    partial_fenchel_young_loss,
    perturbed_spanning_forest,
)

JAXCLUST_SECONDS = {(256, 100): 98.0}  # forward only, same machine class


def batch(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 16, generator=g, requires_grad=True)
    labels = torch.randint(0, 10, (n,), generator=g)
    labels[torch.rand(n, generator=g) < 0.5] = -1
    return X, constraints_from_labels(labels)


def standardized(X):
    S = -torch.cdist(X, X) ** 2
    return (S - S.mean()) / S.std()


def best_of(fn, repeats):
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    generator = torch.Generator().manual_seed(0)

    def loss_step(X, C, n_samples):
        loss = partial_fenchel_young_loss(standardized(X), C, 10, n_samples=n_samples,
                                          generator=generator)
        loss.backward()

    def adjacency_step(X, n_samples):
        A, _, _ = perturbed_spanning_forest(standardized(X), 10, n_samples=n_samples,
                                            generator=generator)
        A.sum().backward()

    X, C = batch(32)
    loss_step(X, C, 2)  # compile (or load) the numba kernels
    adjacency_step(X, 2)

    print(f"{'n':>5} {'samples':>8} {'loss fwd+bwd':>14} {'A_eps fwd+bwd':>14}  jaxclust")
    for n in (64, 256, 1024):
        for n_samples in (100, 1000):
            X, C = batch(n)
            loss_time = best_of(lambda: loss_step(X, C, n_samples), args.repeats)
            adj_time = best_of(lambda: adjacency_step(X, n_samples), args.repeats)
            reference = JAXCLUST_SECONDS.get((n, n_samples))
            note = (f"{reference:.0f} s forward: {reference / adj_time:,.0f}x slower"
                    if reference else "")
            print(f"{n:5d} {n_samples:8d} {loss_time * 1e3:11.1f} ms "
                  f"{adj_time * 1e3:11.1f} ms  {note}")


if __name__ == "__main__":
    main()

"""
===============================
PRCut on growing synthetic data
===============================

PRCut never holds more than the sparse graph (O(n * n_neighbors) memory) and one
pair of mini-batches: a training step costs the same whatever the number of
samples, and the epochs needed depend on the problem more than on n. Its start,
spectral clustering's partition of the graph, is computed by subspace iteration
(sparse products with the graph only, no n x n matrix). We time it against
:class:`~sklearn.cluster.SpectralClustering` on the same 10-nearest-neighbour
graph, for 10 overlapping Gaussian blobs in 16 dimensions. The graph's
construction (a neighbour search) is part of PRCut's fit and is timed apart too;
spectral clustering gets it ready-made.

The sizes are kept small so that the example runs in seconds; at these sizes
both take about a second. ``benchmarks/bench_prcut.py`` goes further, on 10
blobs in 32 dimensions: at 70,000 samples PRCut fits in seconds, most of it the
neighbour search, where spectral clustering needs minutes and gigabytes
(:doc:`/benchmarks`).
"""

# %%
# Time the graph, PRCut's training, and spectral clustering
# ---------------------------------------------------------
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.cluster import SpectralClustering
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score
from sklearn.neighbors import kneighbors_graph

from skdiffclust.prcut import PRCut, ratio_cut

sizes = [1_000, 3_000, 10_000]
# torch initialises itself lazily on its first call: keep that out of the timings
PRCut(n_clusters=2, max_iter=5).fit(np.random.default_rng(0).normal(size=(50, 2)))
timings = {"PRCut (graph + training)": [], "graph alone": [],
           "SpectralClustering (graph given)": []}
for n in sizes:
    X, y = make_blobs(n, 16, centers=10, cluster_std=4.0, random_state=0)
    start = time.perf_counter()
    model = PRCut(n_clusters=10, n_neighbors=10, random_state=0).fit(X)
    timings["PRCut (graph + training)"].append(time.perf_counter() - start)

    start = time.perf_counter()
    directed = kneighbors_graph(X, 10, include_self=False)
    graph = directed.maximum(directed.T)  # PRCut's graph: i near j or j near i
    timings["graph alone"].append(time.perf_counter() - start)

    start = time.perf_counter()
    spectral = SpectralClustering(10, affinity="precomputed", random_state=0).fit(graph)
    timings["SpectralClustering (graph given)"].append(time.perf_counter() - start)
    print(f"n={n:>6}: {graph.nnz:>7} graph entries | seconds: PRCut "
          f"{timings['PRCut (graph + training)'][-1]:.1f} (graph "
          f"{timings['graph alone'][-1]:.1f}), spectral "
          f"{timings['SpectralClustering (graph given)'][-1]:.1f}")
    print(f"          PRCut ARI="
          f"{adjusted_rand_score(y, model.labels_):.3f}, ratio cut "
          f"{ratio_cut(graph, model.labels_):.3f}, {model.n_iter_} epochs | "
          f"spectral ARI={adjusted_rand_score(y, spectral.labels_):.3f}, ratio cut "
          f"{ratio_cut(graph, spectral.labels_):.3f}")

# %%
# Seconds against the number of samples
# -------------------------------------
fig, ax = plt.subplots(figsize=(6, 4))
for name, seconds in timings.items():
    ax.plot(sizes, np.maximum(seconds, 1e-3), marker="o", label=name)
ax.set(xscale="log", yscale="log", xlabel="samples", ylabel="seconds",
       title="10 blobs in 16 dimensions")
ax.legend()
fig.tight_layout()
plt.show()

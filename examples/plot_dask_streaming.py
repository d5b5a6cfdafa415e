"""
===========================================================
Streaming a dask array through ``partial_fit`` with dask-ml
===========================================================

A clustering that needs all the data in one ``fit`` call is bounded by that
call's budget: the time and the memory of
:class:`~skdiffclust.SparseGEMINI`'s ``fit`` grow with the number of points
(``benchmarks/bench_scale.py``). Its ``partial_fit`` makes one pass over a chunk
per call instead, carrying the model and the optimiser from call to call, so
that the work is proportional to the data and the memory to one chunk.

:class:`dask_ml.wrappers.Incremental` feeds the blocks of a dask array to
``partial_fit`` one after the other; here the dask array is 600,000 points drawn
block by block when a task needs them, never held in memory at once. We follow
the clustering of a held-out block as the blocks go by, for
:class:`~skdiffclust.SparseGEMINI` and for scikit-learn's
:class:`~sklearn.cluster.MiniBatchKMeans` (whose ``partial_fit`` is one
mini-batch step per call) through the same wrapper, then predict every block in
parallel. ``Incremental(estimator).fit(X)`` runs the whole loop in one call (in
a shuffled order of the blocks); with a ``dask.distributed`` client
(``Client(LocalCluster())``) the same code runs on a cluster.

Needs ``pip install "skdiffclust[dask]"``. The example runs in well under a
minute on two CPU cores.
"""

# %%
# 600,000 points, drawn block by block
# ------------------------------------
# Ten Gaussian clusters in 32 dimensions (standard deviation 6, centres uniform
# in [-10, 10]: the data of ``benchmarks/bench_scale.py``). Each block is drawn
# from its own seed by a task: the dask array is a recipe, 12 blocks of 50,000
# points.
import time

import dask
import dask.array as da
import matplotlib.pyplot as plt
import numpy as np
from dask_ml.wrappers import Incremental
from sklearn.cluster import MiniBatchKMeans
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

from skdiffclust.gemini import SparseGEMINI

N_CLUSTERS, N_FEATURES, BLOCK, N_BLOCKS = 10, 32, 50_000, 12
centers = np.random.default_rng(0).uniform(-10, 10, (N_CLUSTERS, N_FEATURES))


def draw_block(seed):
    """One block of the mixture: points (float32) and their true clusters."""
    X, y = make_blobs(BLOCK, centers=centers, cluster_std=6.0, random_state=seed)
    return X.astype(np.float32), y


blocks = [dask.delayed(draw_block, nout=2)(seed) for seed in range(N_BLOCKS)]
X = da.concatenate([da.from_delayed(points, (BLOCK, N_FEATURES), np.float32)
                    for points, _ in blocks])
y = da.concatenate([da.from_delayed(labels, (BLOCK,), np.int64) for _, labels in blocks])
X_test, y_test = draw_block(seed=N_BLOCKS)  # a held-out block, in memory
print(f"X: {X.shape[0]:,} x {X.shape[1]} float32 ({X.nbytes / 1e6:.0f} MB), "
      f"{X.numblocks[0]} blocks of {X.chunks[0][0]:,} rows "
      f"({X.nbytes / X.numblocks[0] / 1e6:.1f} MB each)")

# %%
# One ``partial_fit`` per block
# -----------------------------
# ``Incremental.partial_fit`` on one block continues the estimator fitted so far
# (``estimator_``). SparseGEMINI's first call initialises it from its block (the
# standardisation and the kernel's geometry are that block's from then on, so the
# first block must be representative: blocks drawn alike, or shuffled data), and
# each call makes one pass of Adam over the block in batches of 1,024 points.
models = {"SparseGEMINI": Incremental(SparseGEMINI(N_CLUSTERS, random_state=0))}
for seed in range(3):
    models[f"MiniBatchKMeans, seed {seed}"] = Incremental(
        MiniBatchKMeans(N_CLUSTERS, random_state=seed))
curves = {name: [] for name in models}
seconds = {}
for name, model in models.items():
    start = time.perf_counter()
    for i in range(N_BLOCKS):
        model.partial_fit(X.blocks[i])
        curves[name].append(adjusted_rand_score(y_test, model.predict(X_test)))
    seconds[name] = time.perf_counter() - start
gemini = models["SparseGEMINI"].estimator_
print(f"SparseGEMINI: {gemini.n_samples_seen_:,} points seen in {gemini.n_iter_} "
      f"calls, {gemini.n_steps_:,} Adam steps")

# %%
# Predict every block
# -------------------
# ``predict`` on the dask array returns a dask array of labels, one task per
# block (the wrappers' :class:`~dask_ml.wrappers.ParallelPostFit` half); each
# block is drawn again from its seed, so all of the data is never in memory.
for name, model in models.items():
    labels = model.predict(X)
    truth, predicted = dask.compute(y, labels)
    print(f"{name:>26}: ARI {adjusted_rand_score(truth, predicted):.3f} on all "
          f"{truth.size:,} points, streaming {seconds[name]:.1f} s "
          "(held-out ARI included)")

# %%
# The held-out block's ARI as the blocks go by
# --------------------------------------------
# MiniBatchKMeans seeds its centres once, by k-means++ on the first block, then
# moves them by one mini-batch step per block: a seeding that puts two centres in
# one cluster is rarely undone, and which seeds do so depends on the draw (the
# ARIs printed above say how many of the three did here). SparseGEMINI's first
# call keeps the best of ``n_init=5`` k-means restarts on the first block, then
# trains one model on every block. On these Gaussian clusters k-means's model is
# the right one: a well-seeded MiniBatchKMeans reaches the same ARI (its curve
# lies under SparseGEMINI's) in a fraction of the time.
fig, ax = plt.subplots(figsize=(6.5, 4))
seen = BLOCK * np.arange(1, N_BLOCKS + 1)
for name, curve in curves.items():
    kmeans = name.startswith("MiniBatchKMeans")
    ax.plot(seen, curve, marker="." if kmeans else "o", lw=1 if kmeans else 2,
            color="tab:gray" if kmeans else "tab:blue", alpha=0.7 if kmeans else 1,
            label="MiniBatchKMeans (3 seeds)" if name.endswith("seed 0") else
            None if kmeans else name)
ax.set_xlabel("points seen")
ax.set_ylabel("ARI on a held-out block")
ax.set_title("partial_fit over the blocks of a dask array")
ax.legend(loc="lower right")
fig.tight_layout()
plt.show()

"""
=============================================================
Comparing the estimators with scikit-learn's on toy datasets
=============================================================

The four skdiffclust estimators next to three of scikit-learn's clusterers, on the
toy datasets of scikit-learn's "comparing different clustering algorithms"
example. Each panel gives the adjusted Rand index with the generating labels and
the fit time. The datasets are small (300 points) so that the whole grid runs in
seconds, all on the CPU: ClAM trains with its numba kernels (no torch), PRCut
with torch.

As always with such toys, the point is the shape of each method's clusters, not a
ranking: single linkage (the spanning forest) follows any gap, centroid methods
(k-means, ClAM) cut along distances to prototypes, graph methods (spectral, PRCut)
follow the nearest-neighbour graph, and Sparse GEMINI draws a learned
discriminative boundary.
"""

# %%
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn import cluster, datasets
from sklearn.metrics import adjusted_rand_score
from sklearn.preprocessing import StandardScaler

from skdiffclust import ClAM, PRCut, SparseGEMINI, SpanningForestClustering

n = 300
rng = np.random.RandomState(170)
blobs_aniso, y_aniso = datasets.make_blobs(n_samples=n, random_state=170)
blobs_aniso = blobs_aniso @ np.array([[0.6, -0.6], [-0.4, 0.8]])
toy = {
    "circles": datasets.make_circles(n_samples=n, factor=0.5, noise=0.05, random_state=0),
    "moons": datasets.make_moons(n_samples=n, noise=0.05, random_state=0),
    "varied": datasets.make_blobs(n_samples=n, cluster_std=[1.0, 2.5, 0.5], random_state=170),
    "anisotropic": (blobs_aniso, y_aniso),
    "blobs": datasets.make_blobs(n_samples=n, random_state=8),
}


def estimators(k):
    return {
        "SpanningForest": SpanningForestClustering(n_clusters=k),
        "ClAM": ClAM(n_clusters=k, random_state=0),
        "PRCut": PRCut(n_clusters=k, hidden_layer_sizes=(64, 64), random_state=0),
        "SparseGEMINI": SparseGEMINI(n_clusters=k, random_state=0),
        "KMeans": cluster.KMeans(n_clusters=k, n_init=10, random_state=0),
        "Spectral": cluster.SpectralClustering(n_clusters=k, affinity="nearest_neighbors",
                                               random_state=0),
        "Ward": cluster.AgglomerativeClustering(n_clusters=k, linkage="ward"),
    }


# %%
names = list(estimators(2))
fig, axes = plt.subplots(len(toy), len(names), figsize=(2.1 * len(names), 2.1 * len(toy)))
for row, (data_name, (X, y)) in enumerate(toy.items()):
    X = StandardScaler().fit_transform(X)
    k = len(np.unique(y))
    for col, (name, model) in enumerate(estimators(k).items()):
        start = time.perf_counter()
        labels = model.fit_predict(X)
        seconds = time.perf_counter() - start
        ax = axes[row, col]
        ax.scatter(X[:, 0], X[:, 1], c=labels, cmap="tab10", s=4)
        ax.text(0.99, 0.01, f"ARI {adjusted_rand_score(y, labels):.2f}\n{seconds:.2f} s",
                transform=ax.transAxes, ha="right", va="bottom", fontsize=7)
        ax.set_xticks([])
        ax.set_yticks([])
        if row == 0:
            ax.set_title(name, fontsize=9)
        if col == 0:
            ax.set_ylabel(data_name, fontsize=9)
fig.tight_layout()
plt.show()

"""
======================================
Spanning forests find arbitrary shapes
======================================

:class:`~skdiffclust.SpanningForestClustering` clusters by the maximum-weight
k-spanning forest of the similarity graph: the trees of the forest are the
clusters. This is single linkage, so it follows elongated and nested shapes that
centroid methods such as k-means cut through. The fitted forest is available as
``forest_edges_``, which :class:`~skdiffclust.inspection.SpanningForestDisplay`
draws below.
"""

# %%
# Three shapes, two clusterers
# ----------------------------
import matplotlib.pyplot as plt
import numpy as np
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs, make_circles, make_moons
from sklearn.metrics import adjusted_rand_score

from skdiffclust import SpanningForestClustering
from skdiffclust.inspection import SpanningForestDisplay

datasets = {
    "moons": make_moons(n_samples=400, noise=0.05, random_state=0),
    "circles": make_circles(n_samples=400, noise=0.04, factor=0.5, random_state=0),
    "blobs": make_blobs(n_samples=400, centers=3, cluster_std=0.6, random_state=0),
}

fig, axes = plt.subplots(2, 3, figsize=(11, 7))
for column, (name, (X, y)) in enumerate(datasets.items()):
    k = len(np.unique(y))
    forest = SpanningForestClustering(n_clusters=k).fit(X)
    kmeans = KMeans(n_clusters=k, n_init=10, random_state=0).fit(X)

    # the forest's edges in grey, the samples coloured by tree
    SpanningForestDisplay.from_estimator(forest, X, ax=axes[0, column])
    axes[0, column].set_title(
        f"{name}: spanning forest, ARI={adjusted_rand_score(y, forest.labels_):.2f}")

    ax = axes[1, column]
    ax.scatter(X[:, 0], X[:, 1], c=kmeans.labels_, s=8, cmap="tab10", vmin=0, vmax=9)
    ax.set_title(f"{name}: k-means, ARI={adjusted_rand_score(y, kmeans.labels_):.2f}")

for ax in axes.ravel():
    ax.set_xticks([])
    ax.set_yticks([])
fig.tight_layout()
plt.show()

# %%
# The forest is the spanning tree minus its weakest edges
# --------------------------------------------------------
# With one cluster, the forest is the maximum spanning tree. Asking for k clusters
# removes its k - 1 weakest edges (here, the longest ones), which is why the
# partition for every k comes at almost no extra cost.
X, _ = datasets["moons"]
tree = SpanningForestClustering(n_clusters=1).fit(X)
weakest = np.sort(tree.forest_weights_)[:5]
print("similarities of the five weakest tree edges:", np.round(weakest, 3))
for k in (2, 3, 4):
    labels = SpanningForestClustering(n_clusters=k).fit(X).labels_
    print(f"k={k}: cluster sizes {np.bincount(labels).tolist()}")

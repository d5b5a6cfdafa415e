"""
============================================
Constrained spanning forests: partial labels
============================================

A few known labels turn into constraints: samples with the same label must share a
tree (must-link), samples with different labels must not (cannot-link). The forest
then separates groups that single linkage merges through a thin bridge, and on
high-dimensional data a handful of labels goes a long way.

The same operator is available in the paper's notation through
:func:`~skdiffclust.spanning_forest`, which returns the forest adjacency ``A`` and
the cluster connectivity ``M`` from a similarity matrix and a constraint matrix.
"""

# %%
# Two blobs joined by a bridge
# ----------------------------
import matplotlib.pyplot as plt
import numpy as np
from sklearn.metrics import adjusted_rand_score

from skdiffclust import SpanningForestClustering, constraints_from_labels, spanning_forest
from skdiffclust.inspection import SpanningForestDisplay

rng = np.random.default_rng(0)
left = rng.normal([-3, 0], 0.6, size=(150, 2))
right = rng.normal([3, 0], 0.6, size=(150, 2))
bridge = np.column_stack([np.linspace(-2, 2, 25), rng.normal(0, 0.05, 25)])
outlier = np.array([[0.0, 4.0]])
X = np.concatenate([left, right, bridge, outlier])
y = np.concatenate([np.zeros(150), np.ones(150)]).astype(int)  # the blobs' truth
blobs = np.arange(300)  # the bridge and the outlier belong to neither blob

partial = np.full(X.shape[0], -1)
partial[[0, 1, 150, 151]] = y[[0, 1, 150, 151]]  # four labelled samples

plain = SpanningForestClustering(n_clusters=2).fit(X)
constrained = SpanningForestClustering(n_clusters=2).fit(X, partial_labels=partial)

fig, axes = plt.subplots(1, 2, figsize=(10, 4))
for ax, model, title in [(axes[0], plain, "no labels"), (axes[1], constrained, "4 labels")]:
    # forest edges in grey, samples coloured by tree, the labelled samples as stars
    SpanningForestDisplay.from_estimator(model, X, partial, ax=ax,
                                         scatter_kwargs={"cmap": "coolwarm", "s": 10})
    ari = adjusted_rand_score(y, model.labels_[blobs])
    ax.set_title(f"{title}: ARI on the blobs={ari:.2f}")
fig.tight_layout()
plt.show()

# %%
# Without labels, the two clusters are "everything" and the far outlier. Four
# labels (stars) force the two blobs apart, and the forest cuts the bridge at its
# weakest link instead.
#
# Constraints as pairs
# --------------------
# Must-link and cannot-link pairs can be given directly, as index pairs; must-links
# are transitive and cannot-links extend to everything must-linked.
model = SpanningForestClustering(n_clusters=2).fit(X, cannot_link=[[0, 150]])
print("cannot-link (0, 150): ARI on the blobs",
      round(adjusted_rand_score(y, model.labels_[blobs]), 2))

# %%
# The operator in the paper's notation
# ------------------------------------
# ``spanning_forest`` takes a similarity matrix (negative squared distances here)
# and the constraint matrix of partial labels (+1 must-link, -1 cannot-link, 0
# unknown), and returns the forest adjacency A and the connectivity M.
idx = np.concatenate([np.arange(0, 150, 10), np.arange(150, 300, 10)])
S = -((X[idx, None, :] - X[None, idx, :]) ** 2).sum(-1)
C = constraints_from_labels(np.where(np.isin(idx, [0, 150]), partial[idx], -1))
A, M = spanning_forest(S, n_clusters=2, constraints=C)

fig, axes = plt.subplots(1, 3, figsize=(11, 3.5))
for ax, matrix, title in [(axes[0], C, "constraints C"), (axes[1], A, "forest A"),
                          (axes[2], M, "connectivity M")]:
    ax.imshow(matrix, cmap="coolwarm" if matrix is C else "Greys", interpolation="none")
    ax.set_title(title)
    ax.set_xticks([])
    ax.set_yticks([])
fig.tight_layout()
plt.show()
print("forest value <A, S> / 2 =", round(float((A * S).sum()) / 2, 2))

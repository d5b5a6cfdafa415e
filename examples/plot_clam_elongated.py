"""
==============================================================
ClAM on elongated clusters: prototypes that are not centroids
==============================================================

Figure 1 of Saha et al. (2023) shows elongated clusters that k-means cuts across
and that ClAM, clustering with associative memories, recovers. Here three long
parallel clusters are clustered by k-means and by :class:`~skdiffclust.ClAM`,
whose inverse temperature ``beta`` (and loss: plain or masked) is chosen from a
small grid by the silhouette coefficient, as in the paper. The learned prototypes
(black crosses) are the memories of the associative memory: each point runs
``n_steps`` steps of the attractor dynamics and joins the prototype it ends next
to. A point only travels part of the way in those steps, so the prototypes sit
beyond the cluster means.

On 2-D data ClAM trains on the unmasked loss by default (hiding one of two
coordinates leaves too little to complete); ``mask_prob=0.5`` hides one of the two
coordinates of each point, the paper's pattern-completion loss.

What to expect: both losses measure squared distances to prototypes, and cutting
across long clusters costs less distance than following them, so ClAM, like
k-means, tends to cut across them here. We could not reproduce the paper's
figure 1 with such data (its data are not published); the printed scores show what
each method finds on this draw.
"""

# %%
# Three elongated clusters
# ------------------------
import matplotlib.pyplot as plt
import numpy as np
from sklearn.cluster import KMeans
from sklearn.metrics import adjusted_rand_score, silhouette_score

from skdiffclust.clam import ClAM

rng = np.random.default_rng(0)
covariance = np.array([[6.0, 0.0], [0.0, 0.15]])
X = np.vstack([rng.multivariate_normal([0.0, 2.0 * i], covariance, 200) for i in range(3)])
y = np.repeat([0, 1, 2], 200)

kmeans = KMeans(3, n_init=10, random_state=0).fit(X)
print(f"k-means: ARI = {adjusted_rand_score(y, kmeans.labels_):.2f}, "
      f"silhouette = {silhouette_score(X, kmeans.labels_):.3f}")

# %%
# ClAM, beta chosen by silhouette
# -------------------------------
fits = {}
for mask_prob in (0.0, 0.5):
    for beta in (0.03, 0.1, 0.3):
        clam = ClAM(3, beta=beta, mask_prob=mask_prob, random_state=0).fit(X)
        fits[mask_prob, beta] = clam
        print(f"ClAM mask_prob={mask_prob}, beta={beta}: "
              f"ARI = {adjusted_rand_score(y, clam.labels_):.2f}, "
              f"silhouette = {silhouette_score(X, clam.labels_):.3f}")
best_key = max(fits, key=lambda key: silhouette_score(X, fits[key].labels_))
best = fits[best_key]
print(f"selected by silhouette: mask_prob={best_key[0]}, beta={best_key[1]}")

# %%
# The partitions, with the prototypes
# -----------------------------------
fig, axes = plt.subplots(1, 3, figsize=(14, 4), sharex=True, sharey=True)
panels = [
    ("ground truth", y, None),
    (f"k-means, ARI={adjusted_rand_score(y, kmeans.labels_):.2f}", kmeans.labels_,
     kmeans.cluster_centers_),
    (f"ClAM (beta={best_key[1]}), ARI={adjusted_rand_score(y, best.labels_):.2f}",
     best.labels_, best.cluster_centers_),
]
for ax, (title, labels, centers) in zip(axes, panels):
    ax.scatter(X[:, 0], X[:, 1], c=labels, cmap="tab10", s=6)
    if centers is not None:
        ax.scatter(centers[:, 0], centers[:, 1], c="black", marker="x", s=120, linewidths=3)
    ax.set_title(title)
fig.tight_layout()
plt.show()

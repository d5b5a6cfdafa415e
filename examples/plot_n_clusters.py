"""
=====================================================
How many clusters? PRCut's ``n_clusters='auto'``
=====================================================

With ``n_clusters='auto'``, :class:`~skdiffclust.PRCut` finds the number of
clusters from its graph, without labels. A graph of k separated groups has k
eigenvalues of its normalised Laplacian near zero and a jump after them; PRCut
takes the number after which the spectrum jumps most in ratio, among 2 to
``max_clusters`` (and, when the graph falls into two or more large connected
components, their number). The score of each candidate is kept in
``n_clusters_scores_``, which we plot here.

We compare it with two ways scikit-learn offers: HDBSCAN, which finds clusters
by density (and leaves some points as noise), and a Gaussian mixture chosen by
its BIC over the same candidates. See :ref:`n_clusters_auto` for the criterion
and its results on 73 benchmark datasets.
"""

# %%
# Three datasets
# --------------
# Touching blobs (one connected graph), two moons (two components) and
# stretched blobs of different sizes.
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.cluster import HDBSCAN
from sklearn.datasets import make_blobs, make_moons
from sklearn.metrics import adjusted_rand_score
from sklearn.mixture import GaussianMixture

from skdiffclust import PRCut

X_touching, y_touching = make_blobs(
    800, centers=[[0, 0], [5, 0], [0, 5], [5, 5], [2.5, 9]], cluster_std=1.0, random_state=1)
X_moons, y_moons = make_moons(500, noise=0.05, random_state=0)
X_stretched, y_stretched = make_blobs(
    [400, 200, 100], centers=[[0, 0], [6, 2], [2, 7]], random_state=170)
X_stretched = X_stretched @ np.array([[0.6, -0.6], [-0.4, 0.8]])
datasets = {"five touching blobs": (X_touching, y_touching),
            "two moons": (X_moons, y_moons),
            "three stretched blobs": (X_stretched, y_stretched)}


MAX_CLUSTERS = 10


def gaussian_mixture_by_bic(X, max_clusters=MAX_CLUSTERS):
    models = [GaussianMixture(k, random_state=0).fit(X) for k in range(2, max_clusters + 1)]
    return min(models, key=lambda model: model.bic(X)).predict(X)


results = {}
for name, (X, y) in datasets.items():
    prcut = PRCut(n_clusters="auto", max_clusters=MAX_CLUSTERS, random_state=0).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        hdbscan = HDBSCAN().fit_predict(X)
    results[name] = {"PRCut 'auto'": prcut.labels_, "HDBSCAN": hdbscan,
                     "GaussianMixture by BIC": gaussian_mixture_by_bic(X)}
    results[name]["_model"] = prcut
    print(f"{name}: {len(np.unique(y))} true clusters")
    for method, labels in results[name].items():
        if method != "_model":
            found = len(np.unique(labels[labels >= 0]))
            print(f"  {method:24s} found {found:2d}, ARI {adjusted_rand_score(y, labels):.3f}")

# %%
# The criterion against the number of clusters
# --------------------------------------------
# ``n_clusters_scores_[i]`` is the score of ``n_clusters_candidates_[i]``: the log
# ratio of the Laplacian's eigenvalues k + 1 and k. Where the graph falls into
# large components (the moons), their number decides.
#
# On the stretched blobs, of very different sizes, PRCut finds one cluster too
# many: the largest blob's graph is long and thin, and its spectrum has a jump of
# its own. The Gaussian mixture, whose model is exactly such blobs, is the better
# tool there; HDBSCAN splits them by density.
fig, axes = plt.subplots(2, 3, figsize=(12, 7))
for column, (name, (X, y)) in enumerate(datasets.items()):
    model = results[name]["_model"]
    axes[0, column].scatter(X[:, 0], X[:, 1], c=model.labels_, s=6, cmap="tab10")
    axes[0, column].set_title(f"{name}: PRCut found {model.n_clusters_}")
    axes[0, column].set_xticks([])
    axes[0, column].set_yticks([])
    axes[1, column].bar(model.n_clusters_candidates_, model.n_clusters_scores_, color="0.6")
    axes[1, column].bar([model.n_clusters_],
                        model.n_clusters_scores_[model.n_clusters_candidates_
                                                 == model.n_clusters_], color="C3")
    axes[1, column].set_xlabel("number of clusters")
    axes[1, column].set_xticks(model.n_clusters_candidates_)
axes[1, 0].set_ylabel("score: log(eigenvalue k+1 / eigenvalue k)")
fig.tight_layout()
plt.show()

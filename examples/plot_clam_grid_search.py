"""
===================================================
Choosing beta and n_steps of ClAM by the silhouette
===================================================

ClAM's inverse temperature ``beta`` and recursion depth ``n_steps`` (T) shape the
basins of attraction, and no single value suits every dataset: Saha et al. (2023)
select them per dataset by the silhouette coefficient. ``ClAM`` is a scikit-learn
estimator, so :class:`~sklearn.model_selection.GridSearchCV` does this search. The
silhouette is computed on the points the search fits on (one split holding all
the data), as in the paper, with a scorer that gives -1 to a clustering of a
single cluster.
"""

# %%
# Standardised wine data, a grid over beta and n_steps
# ----------------------------------------------------
import matplotlib.pyplot as plt
import numpy as np
from sklearn.cluster import KMeans
from sklearn.datasets import load_wine
from sklearn.metrics import adjusted_rand_score, silhouette_score
from sklearn.model_selection import GridSearchCV
from sklearn.preprocessing import StandardScaler

from skdiffclust.clam import ClAM

X, y = load_wine(return_X_y=True)
X = StandardScaler().fit_transform(X)


def silhouette(estimator, X, y=None):
    labels = estimator.predict(X)
    return silhouette_score(X, labels) if len(np.unique(labels)) > 1 else -1.0


everything = np.arange(len(X))
search = GridSearchCV(
    ClAM(n_clusters=3, max_iter=30, random_state=0),
    param_grid={"beta": [0.03, 0.1, 0.3, 1.0, 3.0], "n_steps": [5, 10]},
    scoring=silhouette,
    cv=[(everything, everything)],
).fit(X)
print("best parameters:", search.best_params_)
print(f"best silhouette: {search.best_score_:.3f}")

kmeans = KMeans(3, n_init=10, random_state=0).fit(X)
print(f"k-means silhouette: {silhouette_score(X, kmeans.labels_):.3f}")
print(f"ARI with the cultivars: ClAM {adjusted_rand_score(y, search.predict(X)):.2f}, "
      f"k-means {adjusted_rand_score(y, kmeans.labels_):.2f}")

# %%
# Silhouette over the grid
# ------------------------
scores = search.cv_results_["mean_test_score"].reshape(5, 2)
fig, ax = plt.subplots(figsize=(5, 3.5))
for column, n_steps in enumerate([5, 10]):
    ax.plot([0.03, 0.1, 0.3, 1.0, 3.0], scores[:, column], marker="o", label=f"T = {n_steps}")
ax.axhline(silhouette_score(X, kmeans.labels_), color="gray", linestyle="--", label="k-means")
ax.set(xscale="log", xlabel="beta", ylabel="silhouette", title="ClAM on wine")
ax.legend()
fig.tight_layout()
plt.show()

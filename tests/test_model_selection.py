"""Pipelines, GridSearchCV with unsupervised scorers, and the same search on dask."""

import distributed
import joblib
import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skdiffclust import SparseGEMINI, SpanningForestClustering
from skdiffclust.metrics import calinski_harabasz_scorer, silhouette_scorer

# expected: SparseGEMINI searched with max_iter=20, a quick grid
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

SEARCHES = {
    "spanning_forest": (SpanningForestClustering(), {"n_clusters": [2, 3, 4]}),
    "sparse_gemini": (SparseGEMINI(max_iter=20, random_state=0),
                      {"n_clusters": [2, 3], "gemini": ["mmd_ovo", "mmd_ova"]}),
}


def _data():
    X, _ = make_blobs(n_samples=120, centers=3, cluster_std=0.6, random_state=0)
    return X * [1.0, 10.0]


def _search(name, scoring=silhouette_scorer, n_jobs=None):
    estimator, grid = SEARCHES[name]
    pipe = make_pipeline(StandardScaler(), estimator)
    step = pipe.steps[-1][0]
    grid = {f"{step}__{key}": values for key, values in grid.items()}
    return GridSearchCV(pipe, grid, scoring=scoring, cv=2, n_jobs=n_jobs)


@pytest.mark.parametrize("name", sorted(SEARCHES))
@pytest.mark.parametrize("scoring", [silhouette_scorer, calinski_harabasz_scorer])
def test_grid_search_in_a_pipeline(name, scoring):
    search = _search(name, scoring).fit(_data())
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))
    assert search.best_estimator_.predict(_data()).shape == (120,)


def test_the_same_search_runs_on_a_dask_cluster():
    X = _data()
    local = {name: _search(name).fit(X) for name in SEARCHES}
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        with distributed.Client(cluster), joblib.parallel_backend("dask"):
            remote = {name: _search(name, n_jobs=-1).fit(X) for name in SEARCHES}
    for name in SEARCHES:
        np.testing.assert_allclose(remote[name].cv_results_["mean_test_score"],
                                   local[name].cv_results_["mean_test_score"])
        assert remote[name].best_params_ == local[name].best_params_

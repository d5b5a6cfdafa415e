"""Sparse input with 64-bit indices, as SciPy makes for large matrices, is accepted
wherever sparse input is, and gives the partition of the same matrix with 32-bit
indices (issue 21)."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_blobs
from sklearn.neighbors import kneighbors_graph

from skdiffclust import PRCut
from skdiffclust._registry import ESTIMATORS as REGISTERED
from skdiffclust._utils._validation import consistent_sparse_indices
from tests._estimators import each


def _with_int64(X, which=("indices", "indptr")):
    X = sp.csr_matrix(X)
    for name in which:
        setattr(X, name, getattr(X, name).astype(np.int64))
    return X


# both arrays int64 (SciPy's large matrices), or only the indices (a user's cast)
INDEX_KINDS = {"int64": ("indices", "indptr"), "int64-indices-only": ("indices",)}


@pytest.fixture(scope="module")
def features():
    X, _ = make_blobs(240, 6, centers=3, cluster_std=0.6, random_state=0)
    X -= X.min()
    X[X < np.quantile(X, 0.3)] = 0.0  # some zeros: a genuinely sparse matrix
    return sp.csr_matrix(X)


def _prcut(**params):
    pytest.importorskip("torch")
    return PRCut(n_clusters=3, max_iter=5, device="cpu", random_state=0, **params)


def _takes_sparse(entry):
    return entry.estimator().__sklearn_tags__().input_tags.sparse


# every registered estimator that takes sparse input (PRCut with its default kNN
# graph), and PRCut's other graph
OWN = {"SparseGEMINI": dict(max_iter=20)}


def _make(entry):
    if entry.needs_torch():
        pytest.importorskip("torch")
    return entry.make(n_clusters=3, **{"max_iter": 5, **OWN.get(entry.name, {})})


ESTIMATORS = {
    **{entry.name: (lambda entry=entry: _make(entry))
       for entry in REGISTERED if _takes_sparse(entry)},
    "PRCut-rbf": lambda: _prcut(affinity="rbf"),
}


def _fit(estimator, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning of the short fits
        return estimator.fit(X)


@pytest.mark.parametrize("kind", INDEX_KINDS)
@pytest.mark.parametrize("name", ESTIMATORS)
def test_int64_sparse_indices_give_the_int32_partition(features, name, kind):
    int64 = _with_int64(features, INDEX_KINDS[kind])
    reference = _fit(ESTIMATORS[name](), features)
    model = _fit(ESTIMATORS[name](), int64)
    np.testing.assert_array_equal(model.labels_, reference.labels_)
    np.testing.assert_array_equal(model.predict(int64), reference.predict(features))
    assert model.score(int64) == pytest.approx(reference.score(features))


def test_prcut_nearest_neighbors_fits_a_csr_matrix_with_int64_indices(features):
    # the acceptance test: this raised "Buffer dtype mismatch"
    X = _with_int64(features)
    assert X.indices.dtype == X.indptr.dtype == np.int64
    model = _fit(_prcut(affinity="nearest_neighbors"), X)
    reference = _fit(_prcut(affinity="nearest_neighbors"), features)  # 32-bit indices
    # a graph to compare: each sample joined to at least its 10 nearest neighbours
    assert np.all(reference.affinity_matrix_.getnnz(axis=1) >= 10)
    np.testing.assert_array_equal(model.affinity_matrix_.toarray(),
                                  reference.affinity_matrix_.toarray())
    np.testing.assert_array_equal(model.labels_, reference.labels_)


@pytest.mark.parametrize("kind", INDEX_KINDS)
def test_a_precomputed_affinity_with_int64_indices_gives_the_int32_partition(
        features, kind):
    W = kneighbors_graph(features, 8, include_self=False)
    W = sp.csr_matrix(W.maximum(W.T))
    reference = _fit(_prcut(affinity="precomputed"), W)
    model = _fit(_prcut(affinity="precomputed"), _with_int64(W, INDEX_KINDS[kind]))
    np.testing.assert_array_equal(model.labels_, reference.labels_)


@pytest.mark.parametrize("entry", each(lambda entry: not _takes_sparse(entry)))
def test_the_estimators_without_sparse_input_say_so(entry):
    # dense features only: nothing else to check there
    with pytest.raises(TypeError, match="dense data is required"):
        entry.make(n_clusters=2).fit(entry.as_input(_with_int64(sp.eye(5))))


def test_consistent_indices_share_the_data_and_pick_int32_where_they_fit():
    X = _with_int64(sp.random(30, 7, density=0.3, random_state=0, format="csr"),
                    ("indices",))
    Y = consistent_sparse_indices(X)
    assert Y.indices.dtype == Y.indptr.dtype == np.int32
    assert np.shares_memory(Y.data, X.data)
    np.testing.assert_array_equal(Y.toarray(), X.toarray())
    assert consistent_sparse_indices(Y) is Y

"""PRCut on unusual inputs a careful user may give it: data far from the origin, a
kNN graph that joins every sample to every other, duplicated samples, a distance
matrix passed as an affinity, a malformed sparse matrix. Each gets the right
answer, a warning that says what to do, or a clear error."""

import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score, pairwise_distances
from sklearn.metrics.pairwise import cosine_similarity, rbf_kernel
from sklearn.neighbors import kneighbors_graph

from skdiffclust import PRCut
from skdiffclust._utils._validation import (
    center_and_scale,
    check_sparse_structure,
    constant_features,
    looks_like_distances,
)
from skdiffclust._graphcut._duplicates import find_copies, row_hashes
from skdiffclust._graphcut._graph import knn_affinity, scaled_knn_graph
from skdiffclust.prcut._scaling import FeatureScaling

TORCH = pytest.mark.torch


@pytest.fixture(scope="module")
def blobs():
    return make_blobs(300, n_features=2, random_state=0)


def _messages(fit):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fit()
    return result, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def _graph(X, n_neighbors=10, affinity="nearest_neighbors", warn=False):
    return scaled_knn_graph(FeatureScaling(X), n_neighbors=n_neighbors, affinity=affinity,
                            rbf_gamma=None, algorithm="exact", device=None, n_jobs=1,
                            random_state=0, warn=warn)


# -- data far from the origin: the constant-feature test is relative to each value --

def test_constant_features_are_the_rounding_of_a_constant_only():
    X = np.column_stack([np.full(5, 0.1), [0.3 - 0.2, 0.1, 0.1, 0.1, 0.1],  # 2 ulps apart
                         np.arange(5.0), np.arange(5.0) + 1e14, np.zeros(5)])
    np.testing.assert_array_equal(constant_features(X), [True, True, False, False, True])
    np.testing.assert_array_equal(constant_features(sp.csr_matrix(X)),
                                  [True, True, False, False, True])


def test_an_offset_of_1e14_keeps_the_samples_apart_in_the_graph(blobs):
    # the bound n |mean| eps zeroed both features: "All samples are identical"
    X, _ = blobs
    scaling = FeatureScaling(X + 1e14)
    assert not scaling.identical
    unshifted = center_and_scale(X)[0]
    # distances as float64 holds them at 1e14: to 1/64 in X's units
    np.testing.assert_allclose(pairwise_distances(scaling.metric),
                               pairwise_distances(unshifted), atol=0.02)


@TORCH
def test_prcut_finds_the_blobs_of_samples_shifted_by_1e14(blobs):
    X, y = blobs
    model, messages = _messages(lambda: PRCut(3, random_state=0).fit(X + 1e14))
    assert not any("identical" in message for message in messages)
    assert model.n_clusters_ == 3
    assert adjusted_rand_score(y, model.labels_) > 0.7  # 0.80 unshifted; 0 before
    np.testing.assert_array_equal(model.predict(X + 1e14), model.labels_)


def test_truly_identical_samples_far_from_the_origin_are_still_identical():
    assert FeatureScaling(np.full((20, 3), 1e14)).identical
    assert FeatureScaling(np.full((20, 3), 0.1)).identical


# -- a complete kNN graph ---------------------------------------------------------

def _two_blobs(n=11, random_state=0):
    return make_blobs(n, n_features=2, centers=[[0, 0], [10, 10]], cluster_std=0.5,
                      random_state=random_state)


@pytest.mark.parametrize("n_neighbors", [10, 5])
def test_a_complete_or_nearly_complete_knn_graph_warns(n_neighbors):
    X, _ = _two_blobs()
    with pytest.warns(UserWarning, match="complete or nearly so.*fewer neighbours.*"
                                         "affinity='rbf'"):
        _graph(X, n_neighbors, warn=True)


def test_a_sparse_knn_graph_or_an_rbf_graph_does_not_warn():
    X, _ = _two_blobs()
    for n_neighbors, affinity in [(4, "nearest_neighbors"), (10, "rbf")]:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            _graph(X, n_neighbors, affinity, warn=True)


@TORCH
def test_prcut_warns_of_a_complete_graph_and_an_rbf_graph_separates_the_blobs():
    X, y = _two_blobs()
    # every sample joined to every other: ARI -0.08, without a word before
    _, messages = _messages(lambda: PRCut(2, n_neighbors=10, random_state=0).fit(X))
    assert any("complete or nearly so" in message for message in messages)
    rbf = PRCut(2, n_neighbors=10, affinity="rbf", random_state=0).fit(X)
    assert adjusted_rand_score(y, rbf.labels_) == 1.0


# -- duplicated samples -------------------------------------------------------------

def test_copies_are_found_exactly_dense_or_sparse():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(40, 6))
    A[A < -1.0] = 0.0  # sparse rows, none of them all zero
    A[7] = 0.0
    X = np.vstack([A, A[[3, 5, 5]], -0.0 * A[7:8]])  # -0.0 equals 0.0
    np.testing.assert_array_equal(row_hashes(X), row_hashes(sp.csr_matrix(X)))
    for data in (X, sp.csr_matrix(X)):
        copies = find_copies(data)
        assert copies.n_distinct == 40 and copies.n_duplicates == 4
        np.testing.assert_array_equal(copies.point[40:], [3, 5, 5, 7])
        np.testing.assert_array_equal(copies.first, np.arange(40))
        np.testing.assert_array_equal(copies.counts[[3, 5, 7]], [2, 3, 2])
    assert find_copies(A) is None  # all distinct
    assert find_copies(np.ones((5, 2))) is None  # all identical: nothing to search


def test_distinct_samples_give_the_same_graph_as_before(blobs):
    X, _ = blobs
    expected = knn_affinity(center_and_scale(X)[0], 10)
    W = _graph(X)
    assert (W != expected).nnz == 0


def test_copies_keep_their_own_edges_and_are_joined(blobs):
    X, _ = blobs
    X5 = np.repeat(X, 5, axis=0)
    W = _graph(X5)
    distinct = _graph(X)
    # the copies of a point share its edges to the other points, one copy each
    point = np.repeat(np.arange(300), 5)
    between = W.tocoo()
    other = point[between.row] != point[between.col]
    folded = sp.csr_matrix((between.data[other], (point[between.row[other]],
                                                  point[between.col[other]])),
                           shape=(300, 300))
    np.testing.assert_allclose(folded.toarray(), 5 * distinct.toarray())
    # each sample has at most 2 * 10 edges to other points and 2 to its copies
    assert np.diff(W.indptr).max() <= 2 * 10 + 2
    # one component per component of the distinct points' graph: copies cut nothing
    assert connected_components(W)[0] == connected_components(distinct)[0]
    np.testing.assert_array_equal(W.toarray(), W.toarray().T)


@TORCH
def test_prcut_on_repeated_samples_finds_the_blobs_as_on_the_samples_themselves(blobs):
    X, y = blobs
    unique = PRCut(3, random_state=0).fit(X)
    # copies filled each other's neighbour lists: components of copies, ARI 0.18
    repeated, messages = _messages(lambda: PRCut(3, random_state=0).fit(
        np.repeat(X, 5, axis=0)))
    assert not any("connected components" in message for message in messages)
    labels = repeated.labels_.reshape(300, 5)
    assert np.all(labels == labels[:, :1])  # copies together
    ari = adjusted_rand_score(y, labels[:, 0])
    assert ari >= adjusted_rand_score(y, unique.labels_) - 0.05  # 0.77 against 0.80


@TORCH
def test_data_on_a_grid_of_few_distinct_points_keep_the_clusters_asked():
    # 600 blobs rounded to 28 distinct points: the t-th copies of every point made
    # one layer of the graph, joined to the others only by the copies' rings, and
    # the cuts between layers won: one cluster of the 4 asked, ARI 0 (k-means 0.75)
    X, y = make_blobs(600, centers=4, n_features=2, random_state=0)
    grid = np.round(0.5 * X)
    assert np.unique(grid, axis=0).shape[0] == 28
    model, _ = _messages(lambda: PRCut(4, random_state=0).fit(grid))
    assert model.n_clusters_ == 4
    assert adjusted_rand_score(y, model.labels_) > 0.4


def test_the_copies_of_mutual_neighbours_are_joined_once_either_way_round():
    # each copy's shift towards a neighbour is the neighbour's shift back, negated
    X = np.repeat(make_blobs(40, n_features=2, random_state=1)[0], 3, axis=0)
    W = _graph(X, 5).tocoo()
    point = np.repeat(np.arange(40), 3)
    other = point[W.row] != point[W.col]
    pairs = set(zip(W.row[other], W.col[other]))
    assert all((j, i) in pairs for i, j in pairs)
    # a mutual pair of points: each copy joined to one copy of the other, weight 1
    assert set(W.data[other]) <= {0.5, 1.0}


def test_too_many_neighbours_for_the_distinct_samples_are_clipped_with_a_warning():
    X = np.repeat(np.random.default_rng(0).normal(size=(6, 2)), 4, axis=0)
    W, messages = _messages(lambda: _graph(X, 10, warn=True))
    assert messages[0].startswith("n_neighbors=10 >= n_samples=24 (6 distinct); using "
                                  "n_neighbors=5")
    assert "joins each of the 24 samples (6 distinct) to every other" in messages[1]
    assert connected_components(W)[0] == 1


# -- a distance matrix given as an affinity -----------------------------------------

def _affinities(X):
    rbf = rbf_kernel(X, gamma=0.5)
    zero_diagonal = rbf.copy()
    np.fill_diagonal(zero_diagonal, 0.0)
    connectivity = kneighbors_graph(X, 10, include_self=False).toarray()
    connectivity = (connectivity + connectivity.T) / 2
    with_self = kneighbors_graph(X, 10, include_self=True).toarray()
    with_self = (with_self + with_self.T) / 2
    cosine = cosine_similarity(np.abs(X) + 0.1)
    return {"rbf": rbf, "rbf, zero diagonal": zero_diagonal, "kNN": connectivity,
            "kNN with self-loops": with_self, "cosine": cosine,
            "constant": np.ones_like(rbf)}


def test_distances_with_or_without_a_zero_diagonal_look_like_distances(blobs):
    X, _ = blobs
    D = pairwise_distances(X)
    for name, matrix in {"D": D, "D + 1": D + 1.0, "D**2": D ** 2, "D**2 + 3": D ** 2 + 3,
                         "cityblock + 0.5": pairwise_distances(X, metric="cityblock") + 0.5
                         }.items():
        assert looks_like_distances(matrix), name


def test_affinities_do_not_look_like_distances(blobs):
    X, _ = blobs
    for name, matrix in _affinities(X).items():
        assert not looks_like_distances(matrix), name


@TORCH
def test_prcut_warns_of_distances_plus_a_constant(blobs):
    X, _ = blobs
    fast = dict(max_iter=5, random_state=0)
    _, messages = _messages(lambda: PRCut(3, affinity="precomputed", **fast).fit(
        pairwise_distances(X) + 1.0))
    assert any("X looks like a distance matrix" in message for message in messages)
    _, messages = _messages(lambda: PRCut(3, affinity="precomputed", **fast).fit(
        rbf_kernel(X, gamma=0.5)))
    assert not any("distance matrix" in message for message in messages)


# -- a malformed sparse matrix ------------------------------------------------------

def _malformed(n=30):
    A = sp.random(n, n, density=0.3, random_state=0)
    A = sp.csr_matrix(A + A.T)
    A.indices[5] = 10_000_000  # SciPy's subtraction wrote out of bounds with it
    return A


def test_malformed_sparse_matrices_are_refused_clearly():
    A = _malformed()
    with pytest.raises(ValueError, match=r"X is a malformed CSR sparse matrix.*outside"):
        check_sparse_structure(A)
    B = sp.csr_matrix(np.eye(4))
    B.indptr[2] = 4  # no longer increasing
    with pytest.raises(ValueError, match="indptr does not start at 0 and increase"):
        check_sparse_structure(B, "graph_input")
    C = sp.coo_matrix(np.eye(4))
    C.row[0] = -1
    with pytest.raises(ValueError, match="malformed COO"):
        check_sparse_structure(C)
    check_sparse_structure(sp.csr_matrix(np.eye(4)))  # well formed: no error


@TORCH
def test_prcut_and_its_graph_readers_refuse_a_malformed_affinity_without_crashing():
    # in a child process: before, the interpreter died of a segmentation fault
    code = textwrap.dedent("""
        import scipy.sparse as sp
        from skdiffclust import PRCut
        from skdiffclust.prcut import ratio_cut
        from skdiffclust.torch import PRCutBatchPairs
        A = sp.random(30, 30, density=0.3, random_state=0)
        A = sp.csr_matrix(A + A.T)
        A.indices[5] = 10_000_000
        for name, call in [
                ("fit", lambda: PRCut(2, affinity="precomputed").fit(A)),
                ("ratio_cut", lambda: ratio_cut(A, [0, 1] * 15)),
                ("PRCutBatchPairs", lambda: PRCutBatchPairs(A, 10))]:
            try:
                call()
            except ValueError as error:
                print(name, "refused:", error)
        """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    for name, matrix in [("fit", "X"), ("ratio_cut", "affinity"),
                         ("PRCutBatchPairs", "graph")]:
        assert f"{name} refused: {matrix} is a malformed CSR sparse matrix" in result.stdout


# -- after the fit: the queries as fit read its input ---------------------------------

@TORCH
def test_negative_query_affinities_are_refused_as_fit_refuses_them(blobs):
    # predict gave other labels for -A (a sign mistake), score 0.0, without a word
    X, _ = blobs
    A = rbf_kernel(X, gamma=0.1)
    model = PRCut(n_clusters=3, affinity="precomputed", random_state=0).fit(A)
    queries = rbf_kernel(X[:5], X, gamma=0.1)
    for call in (model.predict, model.predict_proba, model.transform, model.score):
        with pytest.raises(ValueError, match="must be non-negative as fit's were"):
            call(-queries)
    with pytest.raises(ValueError, match="must be non-negative"):
        model.predict(sp.csr_matrix(-queries))
    model.predict(queries)  # the affinities themselves: no error


@TORCH
def test_score_reads_the_graph_input_of_fit_or_none(blobs):
    # any graph_input was scored before: of another width, or without one at fit
    X, _ = blobs
    with_input = PRCut(n_clusters=3, random_state=0).fit(X, graph_input=X[:, :1])
    with pytest.raises(ValueError, match="graph_input has 2 features, but the graph_input "
                                         "of fit had 1"):
        with_input.score(X[:10], graph_input=X[:10])
    assert np.isfinite(with_input.score(X[:10], graph_input=X[:10, :1]))
    without = PRCut(n_clusters=3, random_state=0).fit(X)
    with pytest.raises(ValueError, match="fitted without a graph_input"):
        without.score(X[:10], graph_input=X[:10, :1])


@pytest.mark.parametrize("as_given", [np.asarray, sp.csr_matrix])
def test_an_affinity_of_subnormal_weights_says_to_rescale(blobs, as_given):
    """Weights of about 1e-308 (subnormal numbers) reached the spectral start's SVD as
    infinities, torch's LinAlgError; a common factor changes nothing of the cut."""
    from skdiffclust._graphcut._graph import check_precomputed_affinity

    W = rbf_kernel(blobs[0][:60])
    np.fill_diagonal(W, 0)
    with pytest.raises(ValueError, match=r"largest entry is 1e-308.*X / X.max\(\)"):
        check_precomputed_affinity(as_given(W / W.max() * 1e-308))
    assert check_precomputed_affinity(as_given(W * 1e-300)).shape == W.shape  # runs


@TORCH
def test_prcut_refuses_an_affinity_of_subnormal_weights(blobs):
    W = rbf_kernel(blobs[0][:60])
    np.fill_diagonal(W, 0)
    with pytest.raises(ValueError, match="Rescale it"):
        PRCut(n_clusters=3, affinity="precomputed").fit(W / W.max() * 1e-308)

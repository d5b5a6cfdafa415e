"""PRCut: the eq. 8 gradient, training, and the estimator's behaviour."""

import pickle
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from scipy.optimize import linear_sum_assignment
from sklearn.cluster import SpectralClustering
from sklearn.datasets import load_digits, make_blobs
from sklearn.metrics import (
    adjusted_rand_score,
    confusion_matrix,
    normalized_mutual_info_score,
    pairwise_distances,
)
from sklearn.metrics.pairwise import rbf_kernel

from skdiffclust._utils._torch import make_generator
from skdiffclust._utils._validation import center_and_scale
from skdiffclust.prcut import PRCut, ratio_cut
from skdiffclust._graphcut._graph import knn_affinity, pbar_floor, shared_neighbor_graph
from skdiffclust.prcut._inference import predict_probabilities
from skdiffclust._graphcut._loss import (
    PRCutLoss,
    bound_and_gradient,
    bound_of_batch_mean,
    kl_to_uniform,
    surrogate,
)
from skdiffclust.prcut._fit import AssignmentNetwork, cooldown_schedule, hardness_schedule

# expected: fits of a few epochs, to test other things quickly (the training
# contract's tests hold the warning itself)
pytestmark = [
    pytest.mark.torch,
    pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning"),
]

# the network's training (solver='network'), short
FAST = dict(solver="network", max_iter=150, batch_size=64, learning_rate=0.05, n_iter_no_change=30,
            device="cpu")


def hungarian_accuracy(y_true, y_pred):
    """Accuracy of the best one-to-one matching of clusters to classes."""
    counts = confusion_matrix(y_true, y_pred)
    rows, cols = linear_sum_assignment(-counts)
    return counts[rows, cols].sum() / len(y_true)


def _random_pair(seed, n_left=7, n_right=5, k=3, n_edges=20):
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(n_left + n_right, k, generator=generator, dtype=torch.float64)
    probabilities = torch.softmax(logits, 1)
    p_left, p_right = probabilities[:n_left].clone(), probabilities[n_left:].clone()
    # repeated edges and samples on both sides are allowed
    rows = torch.randint(0, n_left, (n_edges,), generator=generator)
    cols = torch.randint(0, n_right, (n_edges,), generator=generator)
    weights = torch.rand(n_edges, generator=generator, dtype=torch.float64) + 0.1
    return p_left, p_right, rows, cols, weights


@pytest.mark.parametrize("hardness", [1.0, 0.3, 0.01])
@pytest.mark.parametrize("seed", range(5))
def test_eq8_gradient_equals_autograd_of_the_bound_with_the_batch_mean(seed, hardness):
    p_left, p_right, rows, cols, weights = _random_pair(seed)
    p_left.requires_grad_(True)
    p_right.requires_grad_(True)
    bound_of_batch_mean(p_left, p_right, rows, cols, weights, hardness).backward()
    p_bar = torch.cat([p_left, p_right]).mean(0).detach()
    bound, grad_left, grad_right = bound_and_gradient(
        p_left.detach(), p_right.detach(), rows, cols, weights, p_bar,
        p_left.shape[0] + p_right.shape[0], hardness,
    )
    torch.testing.assert_close(bound, bound_of_batch_mean(
        p_left, p_right, rows, cols, weights, hardness).detach())
    torch.testing.assert_close(grad_left, p_left.grad, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(grad_right, p_right.grad, rtol=1e-12, atol=1e-12)


def test_surrogate_backpropagates_the_bound_gradient_into_the_network():
    network = AssignmentNetwork(4, (6,), 3, make_generator(0)).double()
    X = torch.randn(12, 4, generator=torch.Generator().manual_seed(1),
                    dtype=torch.float64)
    _, _, rows, cols, weights = _random_pair(2, n_left=6, n_right=6)
    P = torch.softmax(network(X), 1)
    bound_of_batch_mean(P[:6], P[6:], rows, cols, weights).backward()
    expected = [p.grad.clone() for p in network.parameters()]
    network.zero_grad()
    P = torch.softmax(network(X), 1)
    _, grad_left, grad_right = bound_and_gradient(
        P[:6].detach(), P[6:].detach(), rows, cols, weights, P.mean(0).detach(), 12)
    surrogate(P[:6], P[6:], grad_left, grad_right).backward()
    for parameter, grad in zip(network.parameters(), expected):
        torch.testing.assert_close(parameter.grad, grad, rtol=1e-10, atol=1e-12)


def test_an_emptying_cluster_gives_finite_gradients():
    p_left, p_right, rows, cols, weights = _random_pair(3)
    p_left[:, 2], p_right[:, 2] = 0.0, 0.0  # cluster 2 is empty
    criterion = PRCutLoss(3, momentum=0.8, dtype=torch.float64)
    for _ in range(50):
        p_bar = criterion._proportions(torch.cat([p_left, p_right]).mean(0))
    assert p_bar[2] == pbar_floor(3)
    bound, grad_left, grad_right = bound_and_gradient(
        p_left, p_right, rows, cols, weights, p_bar, 12)
    assert torch.isfinite(bound) and torch.isfinite(grad_left).all()
    assert torch.isfinite(grad_right).all()
    mean = torch.tensor([0.5, 0.5, 0.0], dtype=torch.float64, requires_grad=True)
    kl_to_uniform(mean, pbar_floor(3)).backward()
    assert torch.isfinite(mean.grad).all()


def test_a_batch_pair_without_edges_gives_no_ratio_cut_signal():
    p_left, p_right, _, _, _ = _random_pair(4)
    empty = torch.empty(0, dtype=torch.int64)
    bound, grad_left, grad_right = bound_and_gradient(
        p_left, p_right, empty, empty, torch.empty(0, dtype=torch.float64),
        torch.full((3,), 1 / 3, dtype=torch.float64), 12)
    assert bound == 0 and not grad_left.any() and not grad_right.any()


def test_proportion_average_starts_uniform_and_tracks_the_batches():
    criterion = PRCutLoss(2, momentum=0.8, dtype=torch.float64)
    first = criterion._proportions(torch.tensor([1.0, 0.0], dtype=torch.float64))
    torch.testing.assert_close(first, torch.tensor([0.9, 0.1], dtype=torch.float64))
    second = criterion._proportions(torch.tensor([0.0, 1.0], dtype=torch.float64))
    torch.testing.assert_close(second, torch.tensor([0.18, 0.82], dtype=torch.float64))
    for _ in range(50):
        value = criterion._proportions(torch.tensor([0.3, 0.7], dtype=torch.float64))
    torch.testing.assert_close(value, torch.tensor([0.3, 0.7], dtype=torch.float64))


@pytest.mark.parametrize("start, match", [
    (float("nan"), "p_bar contains NaN"), (-0.5, "p_bar must hold non-negative")])
def test_a_start_of_the_proportions_that_is_not_one_is_named(start, match):
    # before: NaN gave a NaN loss, a negative share a finite loss, both silently
    criterion = PRCutLoss(2, dtype=torch.float64)
    criterion.p_bar.copy_(torch.tensor([start, 0.5]))
    proba = torch.tensor([[0.9, 0.1], [0.2, 0.8]], dtype=torch.float64)
    with pytest.raises(ValueError, match=match):
        criterion(proba[:1], proba[1:], torch.ones(1, 1, dtype=torch.float64))


@pytest.mark.parametrize("hidden", [(), (5, 4)])
def test_numpy_forward_matches_the_torch_network(hidden):
    network = AssignmentNetwork(3, hidden, 4, make_generator(0)).double()
    X = np.random.default_rng(0).normal(size=(10, 3))
    with torch.no_grad():
        expected = torch.softmax(network(torch.as_tensor(X)), 1).numpy()
    coefs, intercepts = network.weights_as_numpy()
    np.testing.assert_allclose(predict_probabilities(X, coefs, intercepts), expected,
                               rtol=1e-10)


@pytest.fixture(scope="module")
def digits():
    return load_digits(return_X_y=True)


def test_digits_accuracy_at_least_spectral_clustering_on_the_same_graph(digits):
    X, y = digits
    model = PRCut(n_clusters=10, n_neighbors=10, random_state=0, device="cpu").fit(X)
    # the graph of the data centred and scaled globally (the same neighbours as
    # the raw pixels', up to the order of ties); the digits' has hubs and no clear
    # eigengap, so the start reads its shared-neighbour weights, and training too
    W = knn_affinity(center_and_scale(X)[0], 10)
    np.testing.assert_array_equal(model.affinity_matrix_.toarray(),
                                  shared_neighbor_graph(W).toarray())
    spectral = SpectralClustering(10, affinity="precomputed", random_state=0).fit(W)
    ours = hungarian_accuracy(y, model.labels_)
    theirs = hungarian_accuracy(y, spectral.labels_)
    assert ours >= theirs - 0.02
    assert ours > 0.8
    assert model.n_clusters_ == 10
    # from spectral clustering's partition of this graph, training lowers its ratio
    # cut (the paper's claim; the default start is the shared-neighbour graph's)
    from_graph = PRCut(n_clusters=10, n_neighbors=10, init="spectral", n_eigenvectors=None,
                       random_state=0, device="cpu").fit(X)
    assert ratio_cut(W, from_graph.labels_) < ratio_cut(W, spectral.labels_)


def test_spectral_snn_starts_from_the_reweighted_graph_and_trains_on_it(digits):
    X, y = digits
    settings = dict(n_clusters=10, n_neighbors=30, n_eigenvectors=None, random_state=0,
                    device="cpu")
    plain = PRCut(init="spectral", **settings).fit(X)
    shared = PRCut(init="spectral_snn", **settings).fit(X)
    # training reads the graph its start read: the kNN graph, or its
    # shared-neighbour weights
    assert (shared.affinity_matrix_
            != shared_neighbor_graph(plain.affinity_matrix_)).nnz == 0
    # at 30 neighbours the plain graph's spectral start merges digits that the
    # shared-neighbour weights keep apart
    assert (normalized_mutual_info_score(y, shared.labels_)
            > normalized_mutual_info_score(y, plain.labels_))
    assert hungarian_accuracy(y, shared.labels_) > 0.8


def test_annealed_digits_ratio_cut_below_spectral_clustering_on_the_same_graph(digits):
    X, y = digits
    # the paper's linear network from a random start, at its step size, annealed
    model = PRCut(n_clusters=10, n_neighbors=10, balance=1.0, annealing=0.8, n_init=4,
                  init="random", hidden_layer_sizes=(), learning_rate=1e-2,
                  random_state=0, device="cpu").fit(X)
    W = model.affinity_matrix_
    spectral = SpectralClustering(10, affinity="precomputed", random_state=0).fit(W)
    assert model.n_clusters_ == 10
    assert ratio_cut(W, model.labels_) < ratio_cut(W, spectral.labels_)
    assert (hungarian_accuracy(y, model.labels_)
            >= hungarian_accuracy(y, spectral.labels_) - 0.02)


def test_hardness_rises_geometrically_to_the_papers_bound_then_stays():
    hardness = hardness_schedule(4)
    values = [hardness(step) for step in range(1, 8)]
    np.testing.assert_allclose(values[:4], [1e-2, 10 ** -1.5, 1e-1, 10 ** -0.5])
    assert values[4:] == [1.0, 1.0, 1.0]
    assert hardness_schedule(0)(1) == 1.0


def test_early_stopping_waits_for_the_end_of_annealing(blobs):
    X, _ = blobs
    model = PRCut(n_clusters=3, random_state=0, max_iter=100, batch_size=64, solver="network",
                  n_iter_no_change=5, tol=10.0, annealing=0.5, device="cpu").fit(X)
    # tol=10: no epoch after annealing improves enough, the patience stops it
    # (once the partition has settled), then the cool-down's epochs run
    cooldown_epochs, _ = cooldown_schedule(len(X) // 64)
    assert model.n_iter_ == 50 + 5 + cooldown_epochs


@pytest.fixture(scope="module")
def blobs():
    X, y = make_blobs(n_samples=150, centers=3, cluster_std=1.0, random_state=1)
    return X, y


def test_linear_prcut_recovers_blobs_and_predicts_its_own_labels(blobs):
    X, y = blobs
    model = PRCut(n_clusters=3, random_state=0, **FAST).fit(X)
    assert adjusted_rand_score(y, model.labels_) > 0.9
    np.testing.assert_array_equal(model.predict(X), model.labels_)
    proba = model.predict_proba(X)
    assert proba.shape == (150, 3)
    np.testing.assert_allclose(proba.sum(1), 1.0)
    assert model.labels_.dtype == np.int64


def test_same_random_state_gives_the_same_fit(blobs):
    X, _ = blobs
    first = PRCut(n_clusters=3, hidden_layer_sizes=(8,), random_state=3, **FAST).fit(X)
    second = PRCut(n_clusters=3, hidden_layer_sizes=(8,), random_state=3, **FAST).fit(X)
    np.testing.assert_array_equal(first.labels_, second.labels_)
    for a, b in zip(first.coefs_ + first.intercepts_,
                    second.coefs_ + second.intercepts_):
        np.testing.assert_array_equal(a, b)
    assert first.n_iter_ == second.n_iter_


@pytest.mark.parametrize("sparse", [False, True])
def test_a_constant_feature_changes_nothing(blobs, sparse):
    # a column of 0.1 (whose mean is not exactly 0.1) had deviations of 1e-17,
    # which standardising made noise of order 1: training diverged
    X, _ = blobs
    with_constant = np.column_stack([X, np.full(len(X), 0.1)])
    if sparse:
        with_constant = sp.csr_matrix(with_constant)
    params = dict(n_clusters=3, random_state=0, **FAST)
    np.testing.assert_array_equal(PRCut(**params).fit(with_constant).labels_,
                                  PRCut(**params).fit(X).labels_)


@pytest.mark.filterwarnings("ignore:PRCut found 1 non-empty cluster")
def test_a_constant_feature_streams_and_identical_rows_are_said(blobs):
    X, y = blobs
    with_constant = np.column_stack([X, np.full(len(X), 1 / 3)])
    stream = PRCut(n_clusters=3, random_state=0, **FAST)
    for chunk in np.array_split(with_constant, 2):
        stream.partial_fit(chunk)  # every sample went to one cluster, weights 1e31
    assert adjusted_rand_score(y, stream.predict(with_constant)) > 0.9
    assert max(np.abs(coefs).max() for coefs in stream.coefs_) < 1e3
    with pytest.warns(UserWarning, match="All samples are identical"):
        PRCut(n_clusters=2, **FAST).fit(np.tile([0.3, 0.7, 1.1], (12, 1)))


def test_global_random_states_and_torch_threads_are_left_alone(blobs):
    X, _ = blobs
    torch_state = torch.get_rng_state()
    numpy_state = np.random.get_state()[1].copy()
    threads = torch.get_num_threads()
    PRCut(n_clusters=3, random_state=0, **FAST).fit(X)
    assert torch.equal(torch.get_rng_state(), torch_state)
    np.testing.assert_array_equal(np.random.get_state()[1], numpy_state)
    assert torch.get_num_threads() == threads


def test_n_jobs_changes_no_fitted_bit(digits):
    """The network and the start's eigenvectors are computed on one torch thread
    whatever n_jobs: on two, torch summed in another order, and the loss curve
    (MNIST: 12 epochs against 15) and the labels differed."""
    X, _ = digits
    params = dict(n_clusters=10, batch_size=256, max_iter=8, n_eigenvectors=20,
                  solver="network", random_state=0)
    one, two = PRCut(n_jobs=1, **params).fit(X), PRCut(n_jobs=2, **params).fit(X)
    np.testing.assert_array_equal(one.loss_curve_, two.loss_curve_)
    np.testing.assert_array_equal(one.labels_, two.labels_)
    for a, b in zip(one.coefs_ + one.intercepts_, two.coefs_ + two.intercepts_):
        np.testing.assert_array_equal(a, b)


def test_n_init_keeps_the_lowest_objective(blobs):
    X, _ = blobs
    params = dict(n_clusters=3, random_state=1, balance=1.0, **FAST)
    single = PRCut(n_init=1, **params).fit(X)
    several = PRCut(n_init=3, **params).fit(X)
    # the first of the three trainings is the single one (same derived seeds)
    assert several.objective_ <= single.objective_


def test_early_stopping_reports_the_real_number_of_steps(blobs):
    X, _ = blobs
    model = PRCut(n_clusters=3, random_state=0, max_iter=5000, batch_size=64,
                  n_iter_no_change=20, tol=1e-2, device="cpu").fit(X)
    assert model.n_iter_ < 5000
    assert len(model.loss_curve_) == model.n_iter_


def test_precomputed_affinity_dense_or_sparse_and_predict_from_affinity_rows(blobs):
    X, y = blobs
    W = knn_affinity(X, 10)
    sparse = PRCut(n_clusters=3, affinity="precomputed", random_state=0, **FAST).fit(W)
    dense = PRCut(n_clusters=3, affinity="precomputed", random_state=0,
                  **FAST).fit(W.toarray())
    assert adjusted_rand_score(sparse.labels_, dense.labels_) == 1.0
    np.testing.assert_array_equal(sparse.predict(W), sparse.labels_)
    np.testing.assert_array_equal(sparse.predict(W.toarray()), sparse.labels_)
    with pytest.raises(ValueError, match="Negative values"):
        PRCut(affinity="precomputed", **FAST).fit(-W.toarray())
    with pytest.raises(ValueError, match="symmetric"):
        PRCut(affinity="precomputed", **FAST).fit(sp.triu(W).tocsr())


def test_score_and_predict_read_the_fit_not_parameters_set_since(blobs):
    # score built its graph and objective from the parameters: after
    # set_params(affinity='precomputed'), a NumPy error; after others, another score
    X, _ = blobs
    model = PRCut(n_clusters=3, random_state=0, **FAST).fit(X)
    before = model.score(X), model.predict(X)
    model.set_params(affinity="precomputed", n_neighbors=30, balance=5.0, n_clusters=5)
    assert model.score(X) == before[0]
    np.testing.assert_array_equal(model.predict(X), before[1])


@pytest.mark.parametrize("units", [1e-300, 1e-5, 3.0, 1e100])
@pytest.mark.parametrize("layout", [np.asarray, sp.csr_matrix])
def test_a_precomputed_affinity_in_any_units_gives_the_same_fit(blobs, units, layout):
    # the network read the rows as they were: weights of order 1e-5 gave every
    # sample the same output and the fit one cluster, 1e100 made it diverge, and a
    # sparse affinity of 1e-200 failed the symmetry check (a float32 tolerance of 0)
    X, _ = blobs
    A = rbf_kernel(X, gamma=0.5)
    params = dict(n_clusters=3, affinity="precomputed", random_state=0, **FAST)
    reference = PRCut(**params).fit(layout(A))
    scaled = PRCut(**params).fit(layout(A * units))
    np.testing.assert_array_equal(scaled.labels_, reference.labels_)
    np.testing.assert_array_equal(scaled.predict(layout(A * units)), scaled.labels_)
    # the graph of features (graph_input) too
    np.testing.assert_array_equal(
        PRCut(**params).fit(X, graph_input=layout(A * units)).labels_,
        PRCut(**params).fit(X, graph_input=layout(A)).labels_)


def _user_warnings(fit):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit()
    return [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def test_a_distance_matrix_as_precomputed_affinity_warns_as_the_forest_does(blobs):
    # ARI 0.01 and no word before (issue 45)
    X, _ = blobs
    D = pairwise_distances(X)
    with pytest.warns(UserWarning) as caught:  # and, on distances, an empty cluster
        PRCut(n_clusters=3, affinity="precomputed", random_state=0, **FAST).fit(D)
    assert any(re.search("X looks like a distance matrix .* PRCut would keep the most "
                         "distant samples together", str(w.message)) for w in caught)
    # an RBF kernel with the paper's zero diagonal (W_ii = 0) is an affinity: no warning
    W = rbf_kernel(X, gamma=0.5)
    np.fill_diagonal(W, 0.0)
    messages = _user_warnings(lambda: PRCut(n_clusters=3, affinity="precomputed",
                                            random_state=0, **FAST).fit(W))
    assert not any("distance matrix" in message for message in messages)


def test_a_sample_without_an_edge_is_named(blobs):
    # it became a cluster of its own without a word (issue 45)
    X, _ = blobs
    W = rbf_kernel(X, gamma=0.5)
    W[7], W[:, 7] = 0.0, 0.0
    with pytest.warns(UserWarning, match="1 sample has no edge .* index 7"):
        PRCut(n_clusters=3, affinity="precomputed", random_state=0, **FAST).fit(W)
    messages = _user_warnings(lambda: PRCut(n_clusters=3, random_state=0, **FAST).fit(X))
    assert not any("no edge" in message for message in messages)


def test_fitted_state_is_numpy_and_pickles(blobs):
    X, _ = blobs
    model = PRCut(n_clusters=3, hidden_layer_sizes=(8,), random_state=0, **FAST).fit(X)
    assert all(isinstance(a, np.ndarray) for a in model.coefs_ + model.intercepts_)
    clone = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(clone.predict(X), model.predict(X))


def test_too_many_neighbours_are_clipped_with_a_warning():
    X = np.random.default_rng(0).normal(size=(12, 2))
    with pytest.warns(UserWarning) as caught:
        model = PRCut(n_clusters=2, n_neighbors=20, random_state=0, **FAST).fit(X)
    messages = [str(w.message) for w in caught]
    assert any(m.startswith("n_neighbors=20 >= n_samples=12; using n_neighbors=11")
               for m in messages)
    assert any("12 samples to every other sample: it is complete" in m for m in messages)
    assert model.affinity_matrix_.nnz == 12 * 11


def test_a_disconnected_graph_warns_and_trains_to_finite_weights():
    X = np.concatenate([np.zeros((10, 2)), np.ones((10, 2)) * 100])
    X += np.random.default_rng(0).normal(scale=0.1, size=X.shape)
    # the paper's objective decides (keep_components=False): it warns, and trains
    with pytest.warns(UserWarning, match="2 connected components"):
        model = PRCut(n_clusters=2, n_neighbors=3, random_state=0, keep_components=False,
                      **FAST).fit(X)
    assert all(np.isfinite(a).all() for a in model.coefs_ + model.intercepts_)
    assert adjusted_rand_score(np.repeat([0, 1], 10), model.labels_) == 1.0


@pytest.mark.filterwarnings("ignore:PRCut found 1 non-empty clusters:UserWarning")
def test_identical_samples_warn_and_share_one_cluster():
    with pytest.warns(UserWarning, match="identical"):
        model = PRCut(n_clusters=3, n_neighbors=4, random_state=0,
                      **FAST).fit(np.ones((20, 3)))
    assert np.unique(model.labels_).tolist() == [0]
    assert model.n_clusters_ == 1
    assert all(np.isfinite(a).all() for a in model.coefs_ + model.intercepts_)


def test_empty_clusters_are_removed_and_labels_stay_consecutive(blobs):
    X, _ = blobs
    # without the balance prior, from a random start, clusters die out
    with pytest.warns(UserWarning, match="clusters are removed|of the n_clusters"):
        model = PRCut(n_clusters=12, balance=0.0, init="random", random_state=0,
                      **FAST).fit(X)
    assert model.n_clusters_ < 12
    np.testing.assert_array_equal(np.unique(model.labels_),
                                  np.arange(model.n_clusters_))
    assert model.predict_proba(X).shape == (150, model.n_clusters_)
    np.testing.assert_array_equal(model.predict(X), model.labels_)


@pytest.mark.parametrize("params, X, error, match", [
    (dict(), np.array([[0.0, np.nan], [1.0, 1.0], [2.0, 2.0]]), ValueError, "NaN"),
    (dict(n_clusters=5), np.zeros((4, 2)), ValueError,
     "n_clusters=5 must be <= n_samples=4"),
    (dict(hidden_layer_sizes=(4, 0)), np.zeros((4, 2)), ValueError,
     "hidden_layer_sizes"),
    (dict(affinity="precomputed"), np.ones((3, 4)), ValueError, "square"),
    (dict(balance=-1.0), np.zeros((4, 2)), ValueError, "balance"),
    (dict(n_eigenvectors=1), np.arange(8.0).reshape(4, 2), ValueError,
     "n_eigenvectors=1 is smaller than n_clusters=2"),
    (dict(n_eigenvectors=0), np.zeros((4, 2)), ValueError, "n_eigenvectors"),
])
def test_bad_input_gets_a_clear_error(params, X, error, match):
    with pytest.raises(error, match=match):
        PRCut(**{"n_clusters": 2, **FAST, **params}).fit(X)


def test_verbose_shows_a_progress_bar(blobs, capsys):
    X, _ = blobs
    PRCut(n_clusters=3, random_state=0, verbose=True, **{**FAST, "max_iter": 5}).fit(X)
    assert "PRCut" in capsys.readouterr().err


def test_importing_prcut_does_not_import_torch():
    code = ("import sys, skdiffclust.prcut; from skdiffclust.prcut import ratio_cut; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == ["False"]


def test_auto_start_of_blobs_with_hubs_and_a_clear_eigengap_is_the_graphs_own():
    # 32-D blobs: the 10-NN graph has hubs (high dimension) but also a clear
    # eigengap after 5, so init='auto' is the plain spectral start (its eigenvectors
    # computed once, for the gap and the start), not the shared-neighbour one
    from sklearn.datasets import make_blobs

    from skdiffclust._graphcut._graph import degree_skewness
    from skdiffclust._graphcut._start import HUB_SKEWNESS

    X, y = make_blobs(3000, 32, centers=5, cluster_std=6, random_state=0)
    auto = PRCut(n_clusters=5, random_state=0, device="cpu").fit(X)
    assert degree_skewness(auto.affinity_matrix_) > HUB_SKEWNESS
    plain = PRCut(n_clusters=5, init="spectral", random_state=0, device="cpu").fit(X)
    np.testing.assert_array_equal(auto.labels_, plain.labels_)
    assert adjusted_rand_score(y, auto.labels_) > 0.99


def test_many_small_groups_along_a_line_are_learnt_from_their_exact_start():
    # 40 groups of 10 points along a line: the start is exact, and the network must
    # learn it (two L-BFGS rounds left an error of 0.8; the fit ended at ARI 0.19
    # with 29 clusters and a warning)
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(40), 10)
    X = np.column_stack([y + rng.uniform(-0.3, 0.3, 400), 0.1 * rng.normal(size=400)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no cluster lost
        labels = PRCut(n_clusters=40, random_state=0, device="cpu").fit(X).labels_
    assert adjusted_rand_score(y, labels) > 0.95


@pytest.mark.parametrize("solver, least", [("network", 1.0), ("graph", 0.99)])
def test_small_separated_groups_in_high_dimension_start_from_the_graph_itself(solver, least):
    # 100 groups of 6 points in 100-D: the 10-NN graph has hubs (skewness about 10)
    # but its clusters hold half a neighbourhood; its own start is exact, the
    # shared-neighbour start cut the groups (ARI 0.95). The graph path's descent
    # moves the few samples with most of their neighbours in another group (without
    # its neighbours' majority rule, it broke the groups up: ARI 0.57)
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(100), 6)
    X = np.repeat(rng.normal(size=(100, 100)), 6, axis=0) + 0.5 * rng.normal(size=(600, 100))
    labels = PRCut(n_clusters=100, solver=solver, random_state=0, device="cpu").fit(X).labels_
    assert adjusted_rand_score(y, labels) >= least - 1e-9


def test_large_images_are_learnt_from_their_start():
    # 500 digits enlarged to 96 x 96 (9,216 standardised, strongly correlated
    # pixels), in mini-batches: at the start fit's step size for MNIST's 784 pixels
    # the network never learnt the start (37% misassigned after 666 steps) and
    # the fit ended with 7 clusters (NMI 0.66); scaled, 18 steps and NMI 0.86
    import torch
    from sklearn.datasets import load_digits
    from sklearn.metrics import normalized_mutual_info_score

    X, y = load_digits(return_X_y=True)
    images = torch.tensor(X[:500], dtype=torch.float32).reshape(-1, 1, 8, 8)
    X = torch.nn.functional.interpolate(images, size=(96, 96), mode="bilinear")
    X = X.reshape(500, -1).numpy().astype(np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no cluster lost
        labels = PRCut(n_clusters=10, batch_size=128, random_state=0,
                       device="cpu").fit(X).labels_
    assert normalized_mutual_info_score(y[:500], labels) > 0.8

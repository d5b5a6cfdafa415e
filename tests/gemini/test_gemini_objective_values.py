"""The VALUES of the GEMINI objectives against an independent computation.

The gradients are checked by finite differences and the torch loss against the
NumPy one elsewhere: a wrong formula with a consistent gradient would pass those.
Here every objective is recomputed from the definitions of Ohl et al. (2024,
eqs. 2-3 and appendices B-D), with plain loops over the samples and the clusters
(nothing of the package's helpers):

* the cluster distributions are the importance-weighted histograms
  ``p(x_i | y=k) = T_ik / sum_j T_jk`` and the data's is uniform, ``1 / n``;
* one-vs-all: ``sum_k pi_k D(p(x|k), p(x))``; one-vs-one:
  ``sum_{k, l} pi_k pi_l D(p(x|k), p(x|l))``, with ``pi_k = sum_i T_ik / n``;
* D is the MMD (the distance between the kernel mean embeddings, written out as
  sums of kernel entries), the Wasserstein distance (POT's exact transport
  ``ot.emd2``, or on the line the closed form ``int |F - G|``), and the mutual
  information is ``sum_{i, k} T_ik / n log(T_ik / pi_k)``;

and on small hand-made cases whose value is known in closed form.
"""

import math

import numpy as np
import pytest
from sklearn.metrics import pairwise_distances
from sklearn.metrics.pairwise import rbf_kernel

from skdiffclust import SparseGEMINI
from skdiffclust.gemini import OBJECTIVES, gemini_value_and_grad
from skdiffclust.gemini._fit import fitted_gemini

# the package floors each squared MMD at 1e-12 (an emptied or merged cluster keeps
# a finite gradient): a GEMINI whose distances are 0 reads sqrt(1e-12) = 1e-6
MMD_FLOOR = 1e-6


# -- the reference, straight from the definitions ----------------------------------


def _proportions(T):
    n, n_clusters = T.shape
    pi = [0.0] * n_clusters
    for k in range(n_clusters):
        for i in range(n):
            pi[k] += T[i, k]
        pi[k] /= n
    return pi


def _cluster_histogram(T, k):
    """p(x_i | y=k) = p(y=k | x_i) p(x_i) / p(y=k) with p(x_i) = 1 / n."""
    n = T.shape[0]
    mass = sum(T[i, k] for i in range(n))
    return [T[i, k] / mass for i in range(n)]


def _squared_mmd(kernel, a, b):
    """||sum_i a_i phi(x_i) - sum_j b_j phi(x_j)||^2 in the kernel's space."""
    n = len(a)
    total = 0.0
    for i in range(n):
        for j in range(n):
            total += (a[i] * a[j] - 2.0 * a[i] * b[j] + b[i] * b[j]) * kernel[i, j]
    return total


def _mmd(kernel):
    return lambda a, b: math.sqrt(max(_squared_mmd(kernel, a, b), 0.0))


def _exact_transport(distances):
    import ot

    return lambda a, b: float(ot.emd2(np.array(a), np.array(b), distances))


def _transport_on_a_line(x):
    """W1 between histograms on the points x (distances |x_i - x_j|): the integral
    of |F_a - F_b| over the line, F the cumulative distributions."""
    order = sorted(range(len(x)), key=lambda i: x[i])

    def distance(a, b):
        total, F_a, F_b = 0.0, 0.0, 0.0
        for this, following in zip(order[:-1], order[1:]):
            F_a += a[this]
            F_b += b[this]
            total += abs(F_a - F_b) * (x[following] - x[this])
        return total

    return distance


def _reference_gemini(T, distance, one_vs_one):
    """sum_k pi_k D(p(x|k), p(x)), or sum_{k, l} pi_k pi_l D(p(x|k), p(x|l))."""
    n, n_clusters = T.shape
    pi = _proportions(T)
    clusters = [_cluster_histogram(T, k) for k in range(n_clusters)]
    data = [1.0 / n] * n
    if not one_vs_one:
        return sum(pi[k] * distance(clusters[k], data) for k in range(n_clusters))
    return sum(pi[k] * pi[m] * distance(clusters[k], clusters[m])
               for k in range(n_clusters) for m in range(n_clusters) if m != k)


def _reference_mutual_information(T):
    n, n_clusters = T.shape
    pi = _proportions(T)
    total = 0.0
    for i in range(n):
        for k in range(n_clusters):
            if T[i, k] > 0:  # 0 log 0 = 0
                total += T[i, k] / n * math.log(T[i, k] / pi[k])
    return total


def _reference(T, objective, *, kernel=None, distances=None, line=None):
    if objective == "mi":
        return _reference_mutual_information(T)
    if objective.startswith("mmd"):
        distance = _mmd(kernel)
    elif line is not None:
        distance = _transport_on_a_line(line)
    else:
        distance = _exact_transport(distances)
    return _reference_gemini(T, distance, one_vs_one=objective.endswith("ovo"))


def _affinity(objective, X, kernel="linear"):
    """The matrix the objective reads: a kernel (MMD), distances (Wasserstein)."""
    if objective == "mi":
        return None
    if objective.startswith("mmd"):
        return X @ X.T if kernel == "linear" else rbf_kernel(X, gamma=0.5)
    return pairwise_distances(X)


def _soft_predictions(n, n_clusters, seed):
    return np.random.default_rng(seed).dirichlet(np.full(n_clusters, 0.7), n)


# -- random soft predictions: the package against the reference --------------------


@pytest.mark.parametrize("objective, kernel", [
    ("mmd_ova", "linear"), ("mmd_ova", "rbf"), ("mmd_ovo", "linear"), ("mmd_ovo", "rbf"),
    ("wasserstein_ova", None), ("wasserstein_ovo", None), ("mi", None)])
@pytest.mark.parametrize("n, n_clusters, seed", [(7, 2, 0), (9, 3, 1), (12, 4, 2)])
def test_values_equal_the_definitions_on_soft_predictions(objective, kernel, n, n_clusters,
                                                          seed):
    rng = np.random.default_rng(100 + seed)
    X = rng.normal(size=(n, 2))
    T = _soft_predictions(n, n_clusters, seed)
    affinity = _affinity(objective, X, kernel)
    value, _ = gemini_value_and_grad(T, affinity, objective)
    expected = _reference(T, objective, kernel=affinity, distances=affinity)
    assert expected > 1e-3  # far above the package's floors
    assert value == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize("objective", ["wasserstein_ova", "wasserstein_ovo"])
def test_wasserstein_values_equal_the_closed_form_on_a_line(objective):
    """On the line, W1 is the area between the cumulative distributions: no
    transport solver in the reference."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=11) * 3.0
    T = _soft_predictions(11, 3, 3)
    value, _ = gemini_value_and_grad(T, np.abs(x[:, None] - x[None, :]), objective)
    assert value == pytest.approx(_reference(T, objective, line=list(x)), rel=1e-10)


def test_the_exact_transport_reference_agrees_with_the_line_closed_form():
    """The two references of the Wasserstein GEMINIs agree where both apply."""
    x = np.array([0.0, 1.0, 2.5, 4.0, 7.0, 7.5])
    T = _soft_predictions(6, 3, 4)
    distances = np.abs(x[:, None] - x[None, :])
    for objective in ("wasserstein_ova", "wasserstein_ovo"):
        assert _reference(T, objective, distances=distances) == pytest.approx(
            _reference(T, objective, line=list(x)), rel=1e-12)


# -- hand-made cases with a closed form ------------------------------------------


@pytest.mark.parametrize("n_clusters", [2, 3, 5])
def test_mutual_information_of_balanced_one_hot_assignments_is_log_k(n_clusters):
    T = np.repeat(np.eye(n_clusters), 4, axis=0)
    value, _ = gemini_value_and_grad(T, None, "mi")
    assert value == pytest.approx(math.log(n_clusters), rel=1e-12)


def test_mutual_information_of_one_hot_assignments_is_the_clusters_entropy():
    counts = np.array([1, 2, 3, 6])
    T = np.repeat(np.eye(4), counts, axis=0)
    p = counts / counts.sum()
    value, _ = gemini_value_and_grad(T, None, "mi")
    assert value == pytest.approx(-(p * np.log(p)).sum(), rel=1e-12)


@pytest.mark.parametrize("row", [[1 / 3, 1 / 3, 1 / 3], [0.7, 0.2, 0.1]])
def test_mutual_information_of_predictions_that_ignore_the_sample_is_zero(row):
    T = np.tile(row, (8, 1))
    value, _ = gemini_value_and_grad(T, None, "mi")
    assert value == pytest.approx(0.0, abs=1e-15)


def test_mutual_information_of_a_binary_symmetric_channel():
    """Two samples, each in its own cluster with probability 1 - e: log 2 - H(e)."""
    e = 0.1
    T = np.array([[1 - e, e], [e, 1 - e]])
    value, _ = gemini_value_and_grad(T, None, "mi")
    binary_entropy = -e * math.log(e) - (1 - e) * math.log(1 - e)
    assert value == pytest.approx(math.log(2) - binary_entropy, rel=1e-12)
    assert value == pytest.approx(_reference_mutual_information(T), rel=1e-12)


def test_linear_mmd_of_one_hot_assignments_is_the_distance_between_cluster_means():
    """A linear kernel embeds a distribution as its mean: with one-hot assignments,
    OvA is sum_k pi_k |m_k - m| and OvO sum_{k != l} pi_k pi_l |m_k - m_l|."""
    # cluster means (1, 0), (1, 4) and (5, 4); the data's (7/3, 8/3)
    X = np.array([[0.0, 0.0], [2.0, 0.0], [1.0, 3.0], [1.0, 5.0], [4.0, 4.0], [6.0, 4.0]])
    T = np.repeat(np.eye(3), 2, axis=0)
    # |m_1 - m_2| = 4, |m_1 - m_3| = 4 sqrt(2), |m_2 - m_3| = 4
    ovo = 2.0 * (1 / 9) * (4.0 + 4.0 * math.sqrt(2.0) + 4.0)
    # |m_k - m|: sqrt(16/9 + 64/9), sqrt(16/9 + 16/9), sqrt(64/9 + 16/9)
    ova = (1 / 3) * (math.sqrt(80) + math.sqrt(32) + math.sqrt(80)) / 3
    assert gemini_value_and_grad(T, X @ X.T, "mmd_ovo")[0] == pytest.approx(ovo, rel=1e-12)
    assert gemini_value_and_grad(T, X @ X.T, "mmd_ova")[0] == pytest.approx(ova, rel=1e-12)


def test_rbf_mmd_of_two_points_in_their_own_clusters():
    """MMD^2(delta_a, delta_b) = 2 - 2 e and MMD^2(delta_a, data) = (1 - e) / 2, with
    e = k(a, b) = exp(-gamma |a - b|^2)."""
    X = np.array([[0.0, 0.0], [1.0, 2.0]])
    gamma = 0.3
    e = math.exp(-gamma * 5.0)
    kernel = rbf_kernel(X, gamma=gamma)
    T = np.eye(2)
    assert gemini_value_and_grad(T, kernel, "mmd_ovo")[0] == pytest.approx(
        2 * 0.25 * math.sqrt(2 - 2 * e), rel=1e-12)
    assert gemini_value_and_grad(T, kernel, "mmd_ova")[0] == pytest.approx(
        math.sqrt((1 - e) / 2), rel=1e-12)


def test_wasserstein_of_one_hot_assignments_on_a_line():
    """Clusters {0, 1} and {5, 6}: each is 2.5 from the data (the area between the
    cumulative distributions: 1/4 + 4/2 + 1/4) and 5 from the other (a shift)."""
    x = np.array([0.0, 1.0, 5.0, 6.0])
    D = np.abs(x[:, None] - x[None, :])
    T = np.repeat(np.eye(2), 2, axis=0)
    assert gemini_value_and_grad(T, D, "wasserstein_ova")[0] == pytest.approx(
        0.5 * 2.5 + 0.5 * 2.5, rel=1e-12)
    assert gemini_value_and_grad(T, D, "wasserstein_ovo")[0] == pytest.approx(
        2 * 0.25 * 5.0, rel=1e-12)
    # three unbalanced clusters {0}, {1, 5}, {6}: pi = (1/4, 1/2, 1/4); from the
    # data: 3/4 + 4/2 + 1/4 = 3, 1/4 + 0 + 1/4 = 1/2 and 3; between the clusters:
    # W(0, {1, 5}) = (1 + 5) / 2 = 3, W(0, 6) = 6, W({1, 5}, 6) = (5 + 1) / 2 = 3
    T = np.array([[1, 0, 0], [0, 1, 0], [0, 1, 0], [0, 0, 1]], dtype=float)
    ova = 0.25 * 3.0 + 0.5 * 0.5 + 0.25 * 3.0
    ovo = 2 * (0.25 * 0.5 * 3.0 + 0.25 * 0.25 * 6.0 + 0.5 * 0.25 * 3.0)
    assert gemini_value_and_grad(T, D, "wasserstein_ova")[0] == pytest.approx(ova, rel=1e-12)
    assert gemini_value_and_grad(T, D, "wasserstein_ovo")[0] == pytest.approx(ovo, rel=1e-12)


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_predictions_that_ignore_the_sample_give_zero(objective):
    """Every cluster's distribution is then the data's: every distance is 0 (the
    MMDs read the floor, sqrt(1e-12) per unit of weight)."""
    X = np.random.default_rng(5).normal(size=(6, 2))
    T = np.full((6, 3), 1 / 3)
    value, _ = gemini_value_and_grad(T, _affinity(objective, X), objective)
    floor = {"mmd_ova": MMD_FLOOR, "mmd_ovo": MMD_FLOOR * (1 - 3 * (1 / 3) ** 2)}
    assert value == pytest.approx(floor.get(objective, 0.0), rel=1e-6, abs=1e-15)


# -- what the estimator trains: its geometry, its kernel operator ------------------


def _kernel_coordinates(X):
    """The data centred and divided by one global scale, the root mean squared
    deviation of the features (SparseGEMINI's kernel and distances)."""
    centred = X - X.mean(axis=0)
    return centred / math.sqrt((centred**2).mean(axis=0).mean())


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # 5 epochs
@pytest.mark.parametrize("gemini, kernel", [("mmd_ovo", "linear"), ("mmd_ova", "linear"),
                                            ("mmd_ovo", "rbf"), ("wasserstein_ova", None),
                                            ("wasserstein_ovo", None), ("mi", None)])
def test_the_estimators_score_is_the_gemini_of_its_predictions(gemini, kernel):
    """``score`` (the training's objective) against the reference on the model's own
    predictions, in the geometry the class documents."""
    rng = np.random.default_rng(6)
    X = np.concatenate([rng.normal(size=(12, 3)), rng.normal(size=(12, 3)) + [4, 0, 1]])
    X *= [1.0, 3.0, 0.5]
    params = dict(kernel=kernel, n_kernel_features=None) if kernel else {}
    model = SparseGEMINI(2, gemini=gemini, hidden_layer_sizes=(), n_init=1, max_iter=5,
                         random_state=0, **params)
    model.fit(X)
    T = model.predict_proba(X)
    Phi = _kernel_coordinates(X)
    if gemini.startswith("mmd"):
        # rbf: gamma = 1 / (2 n_features) on these coordinates (the class's default)
        affinity = Phi @ Phi.T if kernel == "linear" else rbf_kernel(Phi, gamma=1 / 6)
    else:
        affinity = pairwise_distances(Phi)
    expected = _reference(T, gemini, kernel=affinity, distances=affinity)
    assert expected > 1e-2
    assert fitted_gemini(model, X) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("objective", ["mmd_ova", "mmd_ovo"])
def test_the_linear_kernel_operator_gives_the_reference_value(objective):
    """Training's MMD never forms the kernel (K = Phi Phi', through the features):
    two restarts at once, against the reference with the kernel written out."""
    from skdiffclust.gemini._data import LinearKernel, Standardisation
    from skdiffclust.gemini._objectives import batched_gemini

    rng = np.random.default_rng(7)
    X = rng.normal(size=(10, 3)) * [2.0, 1.0, 0.1] + 5.0
    standardisation = Standardisation(X)
    T = np.stack([_soft_predictions(10, 3, 8), _soft_predictions(10, 3, 9)])
    values, _ = batched_gemini(T, LinearKernel(standardisation.inputs(X),
                                               standardisation.kernel_weights), objective)
    Phi = _kernel_coordinates(X)
    for r in range(2):
        assert values[r] == pytest.approx(_reference(T[r], objective, kernel=Phi @ Phi.T),
                                          rel=1e-10)


# -- the torch loss ---------------------------------------------------------------


@pytest.mark.torch
@pytest.mark.parametrize("objective", OBJECTIVES)
def test_the_torch_loss_is_minus_the_reference(objective):
    import torch

    from skdiffclust.torch import gemini_loss

    X = np.random.default_rng(10).normal(size=(9, 2))
    T = _soft_predictions(9, 3, 11)
    affinity = _affinity(objective, X, "rbf")
    loss = gemini_loss(torch.tensor(T),
                       None if affinity is None else torch.tensor(affinity), objective)
    expected = _reference(T, objective, kernel=affinity, distances=affinity)
    assert loss.dtype == torch.float64
    assert loss.item() == pytest.approx(-expected, rel=1e-10)

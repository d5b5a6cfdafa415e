"""What reaches the spanning forests' numba kernels from the public functions that
are not estimators (``spanning_forest``, the torch operators,
``batch_clustering_error``), and from the estimator's float32 sweeps.

The kernels index with computed indices (union-find parents, tree ends, labels),
so every input is checked before them: each unusual input below gives a clear
error naming the problem, or the right answer. Inputs a kernel would read out of
bounds with, were a check missing (a matrix that is not square, constraints of
the wrong size), run in a subprocess, so that a regression fails its test
instead of killing pytest.
"""

import re
import warnings

import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

from skdiffclust import SpanningForestClustering, spanning_forest
from skdiffclust.metrics import batch_clustering_error
from tests._isolated import outcomes_in_subprocess

RNG = np.random.default_rng(0)
POINTS = RNG.normal(size=(8, 2))
S0 = -((POINTS[:, None] - POINTS[None]) ** 2).sum(-1)
REFERENCE_M = spanning_forest(S0, 2)[1]

SETUP = """
import numpy as np
from skdiffclust import spanning_forest
from skdiffclust.metrics import batch_clustering_error
rng = np.random.default_rng(0)
P = rng.normal(size=(8, 2))
S0 = -((P[:, None] - P[None]) ** 2).sum(-1)
def with_pair(S, value):
    S = S.copy(); S[0, 1] = S[1, 0] = value; return S
"""


def _check_outcomes(outcomes, expected):
    for name, (error, pattern) in expected.items():
        got = outcomes[name]
        assert got.startswith(error + ":") and re.search(pattern, got), (name, got)


# -- spanning_forest -----------------------------------------------------------------

SPANNING_FOREST_CASES = {
    "NaN": ("spanning_forest(with_pair(S0, np.nan), 2)", "ValueError", "NaN"),
    "infinity": ("spanning_forest(with_pair(S0, np.inf), 2)", "ValueError", "infinity"),
    "minus infinity": ("spanning_forest(with_pair(S0, -np.inf), 2)", "ValueError",
                       "infinity"),
    "not square": ("spanning_forest(S0[:, :5], 2)", "ValueError", "square"),
    "one row": ("spanning_forest(S0[:1], 1)", "ValueError", "square"),
    "3-D": ("spanning_forest(S0[None], 2)", "ValueError", "dim 3"),
    "1-D": ("spanning_forest(S0[0], 2)", "ValueError", "2D array"),
    "empty": ("spanning_forest(np.zeros((0, 0)), 1)", "ValueError", "0 sample"),
    "asymmetric": ("S = S0.copy(); S[0, 1] += 1; spanning_forest(S, 2)", "ValueError",
                   "symmetric"),
    "complex": ("spanning_forest(S0.astype(complex), 2)", "ValueError", "[Cc]omplex"),
    "sparse": ("import scipy.sparse as sp; spanning_forest(sp.csr_matrix(S0), 2)",
               "TypeError", "dense"),
    "no cluster": ("spanning_forest(S0, 0)", "ValueError", "n_clusters must be >= 1"),
    "more clusters than samples": ("spanning_forest(S0, 9)", "ValueError", "n_samples=8"),
    "float n_clusters": ("spanning_forest(S0, 2.0)", "TypeError", "integer"),
    "constraints of another size": (
        "spanning_forest(S0, 2, constraints=np.zeros((3, 3)))", "ValueError", r"\(8, 8\)"),
    "constraints as labels": (
        "spanning_forest(S0, 2, constraints=[0, 0, 1, 1, -1, -1, -1, -1])", "ValueError",
        r"\(8, 8\)"),
    "constraint 2": ("C = with_pair(np.zeros((8, 8)), 2); "
                     "spanning_forest(S0, 2, constraints=C)", "ValueError", r"\+1"),
    "constraint NaN": ("C = with_pair(np.zeros((8, 8)), np.nan); "
                       "spanning_forest(S0, 2, constraints=C)", "ValueError", r"\+1"),
    "asymmetric constraints": ("C = np.zeros((8, 8)); C[0, 1] = 1; "
                               "spanning_forest(S0, 2, constraints=C)", "ValueError",
                               "symmetric"),
    "cannot-link with itself": ("C = np.zeros((8, 8)); C[0, 0] = -1; "
                                "spanning_forest(S0, 2, constraints=C)", "ValueError",
                                "itself"),
    "error: NaN": ("batch_clustering_error([0, 0, 1, 1], [[0.0], [np.nan], [1], [2]], "
                   "n_clusters=2)", "ValueError", "NaN"),
    "error: values whose squares overflow": (
        "batch_clustering_error([0, 0, 1, 1], [[0.0, 0], [1e300, 0], [1, 0], [2, 0]], "
        "n_clusters=2)", "ValueError", "overflow"),
    "error: lengths": ("batch_clustering_error([0, 1], np.zeros((3, 2)), n_clusters=2)",
                       "ValueError", "inconsistent"),
    "error: no cluster": ("batch_clustering_error([0, 1], np.zeros((2, 2)), n_clusters=0)",
                          "ValueError", "n_clusters"),
}


def test_bad_similarities_and_constraints_are_refused_before_the_kernels():
    outcomes = outcomes_in_subprocess(
        SETUP, [(name, code) for name, (code, _, _) in SPANNING_FOREST_CASES.items()])
    _check_outcomes(outcomes, {name: (error, pattern) for name, (_, error, pattern)
                               in SPANNING_FOREST_CASES.items()})


@pytest.mark.parametrize("scale,dtype", [
    (1e300, np.float64), (1e307, np.float64), (1e-300, np.float64), (1e-320, np.float64),
    (1e20, np.float32), (3e37, np.float32), (1e-30, np.float32),
])
def test_extreme_scales_give_the_forest_of_the_unscaled_matrix(scale, dtype):
    # larger means more similar, whatever the scale: the kernels only compare entries
    S = (S0 / np.abs(S0).max() * scale).astype(dtype)
    A, M = spanning_forest(S, 2)
    assert A.dtype == dtype
    np.testing.assert_array_equal(M, REFERENCE_M)


def test_integer_and_boolean_similarities_are_solved_in_float64():
    A, M = spanning_forest(np.round(S0 * 10).astype(np.int64), 2)
    assert A.dtype == M.dtype == np.float64
    np.testing.assert_array_equal(M, REFERENCE_M)


def test_labels_far_beyond_the_number_of_samples_are_only_names():
    from skdiffclust import constraints_from_labels

    labels = [0, 2**62, 2**62, -1, -1, -1, -1, -1]
    C = constraints_from_labels(labels)
    assert C[1, 2] == 1 and C[0, 1] == -1
    _, M = spanning_forest(S0, 2, constraints=C)
    assert M[1, 2] == 1 and M[0, 1] == 0


@pytest.mark.parametrize("scale", [1e-300, 1e-200])
def test_batch_error_of_tiny_embeddings_is_the_error_of_the_rescaled_ones(scale):
    X, y = make_blobs(40, centers=2, random_state=0)
    reference = batch_clustering_error(y, X, n_clusters=2, batch_size=20)
    assert batch_clustering_error(y, X * scale, n_clusters=2, batch_size=20) == reference


# -- the estimator's float32 sweeps --------------------------------------------------

BLOBS, _ = make_blobs(60, n_features=10, centers=3, random_state=0, cluster_std=0.5)


@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
@pytest.mark.parametrize("scale", [1e20, 1e30, 1e-30, 1e-40])
def test_float32_data_whose_squares_leave_float32_give_the_float64_partition(metric, scale):
    # float32 squares of differences overflow from about 1e19 and underflow below
    # about 1e-19 (cosine: squared norms): such data are swept in float64. Before,
    # 1e20 raised "NaN or infinite distances" and 1e-30 returned an arbitrary forest
    # (all distances 0)
    reference = SpanningForestClustering(3, metric=metric).fit(BLOBS).labels_
    X = (BLOBS * scale).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow, no "samples at distance 0"
        model = SpanningForestClustering(3, metric=metric, algorithm="prim").fit(X)
    assert adjusted_rand_score(reference, model.labels_) == 1.0
    assert adjusted_rand_score(reference, model.predict(X)) == 1.0


def test_distances_that_overflow_name_the_cause():
    X = np.random.default_rng(0).normal(size=(20, 3)) * 1e5
    with pytest.raises(ValueError, match="overflow.*rescale X"):
        SpanningForestClustering(2, metric="minkowski", metric_params={"p": 100}).fit(X)


# -- the torch operators -------------------------------------------------------------

TORCH_SETUP = SETUP + """
import torch
from skdiffclust.torch import perturbed_spanning_forest as psf
from skdiffclust.torch import partial_fenchel_young_loss as pfy
T0 = torch.tensor(S0)
labels = torch.tensor([0, 0, 1, 1, -1, -1, -1, -1])
"""

TORCH_CASES = {
    "NaN": ("psf(torch.tensor(with_pair(S0, np.nan)), 2)", "ValueError", "NaN"),
    "infinity": ("pfy(torch.tensor(with_pair(S0, np.inf)), labels, 2)", "ValueError",
                 "infinity"),
    "not square": ("psf(T0[:, :5], 2)", "ValueError", "square"),
    "3-D": ("psf(T0[None], 2)", "ValueError", "square"),
    "asymmetric": ("S = T0.clone(); S[0, 1] += 1; psf(S, 2)", "ValueError", "symmetric"),
    "integer": ("psf(T0.long(), 2)", "TypeError", "floating point"),
    "complex": ("psf(T0.to(torch.complex64), 2)", "TypeError", "floating point"),
    "NumPy": ("psf(S0, 2)", "TypeError", "torch.Tensor"),
    "meta device": ("psf(torch.zeros(4, 4, device='meta'), 2)", "ValueError", "meta"),
    "sparse": ("psf(T0.to_sparse(), 2)", "TypeError", "S must be a dense tensor"),
    # read by its truth: "no" meant True
    "flag as a string": ("psf(T0, 2, control_variate='no')", "TypeError", "True or False"),
    "empty": ("psf(torch.zeros(0, 0), 1)", "ValueError", "n_samples=0"),
    "label -2": ("psf(T0, 2, constraints=torch.tensor([0, 0, 1, 1, -2, -1, -1, -1]))",
                 "ValueError", "negative label -2"),
    "label 0.5": ("psf(T0, 2, constraints=torch.tensor([0, 0, 1, 1, .5, -1, -1, -1]))",
                  "ValueError", "non-integer"),
    "label NaN": ("psf(T0, 2, constraints=torch.tensor([0, 0, 1, 1, np.nan, -1, -1, -1]))",
                  "ValueError", "NaN"),
    "boolean labels": ("psf(T0, 2, constraints=torch.tensor([True, False] * 4))",
                       "TypeError", "bool"),
    "too few labels": ("pfy(T0, torch.tensor([0, 0, 1, 1]), 2)", "ValueError",
                       "8 entries"),
    "constraints of another size": ("psf(T0, 2, constraints=torch.zeros(3, 3))",
                                    "ValueError", r"\(8, 8\)"),
    "labels in a matrix": ("pfy(T0, torch.zeros(2, 4), 2)", "ValueError", r"\(8, 8\)"),
    "constraint 2": ("psf(T0, 2, constraints=torch.tensor(with_pair(np.zeros((8, 8)), 2)))",
                     "ValueError", r"\+1"),
    "infeasible": ("pfy(T0, torch.tensor([0, 1, 2, -1, -1, -1, -1, -1]), 2)", "ValueError",
                   "infeasible"),
    "no constraints": ("pfy(T0, None, 2)", "ValueError", "required"),
    "no cluster": ("psf(T0, 0)", "ValueError", "n_clusters"),
    "generator": ("psf(T0, 2, generator=3)", "TypeError", "generator"),
}


@pytest.mark.torch
def test_bad_operator_inputs_are_refused_before_the_kernels():
    pytest.importorskip("torch")
    outcomes = outcomes_in_subprocess(
        TORCH_SETUP, [(name, code) for name, (code, _, _) in TORCH_CASES.items()])
    _check_outcomes(outcomes, {name: (error, pattern) for name, (_, error, pattern)
                               in TORCH_CASES.items()})


def _operators():
    torch = pytest.importorskip("torch")
    from skdiffclust.torch import partial_fenchel_young_loss, perturbed_spanning_forest

    return torch, perturbed_spanning_forest, partial_fenchel_young_loss


LABELS = [0, 0, 1, 1, -1, -1, -1, -1]


@pytest.mark.torch
@pytest.mark.parametrize("dtype,scale,epsilon", [
    ("float64", 1.0, 1e308),  # F was inf, the partial loss NaN
    ("float32", 1.0, 1e38),  # S + epsilon Z overflowed float32: F was inf
    ("float64", 1.5e307, 0.1),  # the forest's 7 edges weigh 2.1e308: F was inf
    ("float32", 3e37, 0.1),
])
def test_similarities_or_noise_too_large_for_the_dtype_are_refused(dtype, scale, epsilon):
    torch, forest, loss = _operators()
    positive = S0 - S0.min()  # the same forests, with weights near the largest entry
    S = torch.tensor(positive / positive.max() * scale, dtype=getattr(torch, dtype))
    with pytest.raises(ValueError, match="too large for " + dtype):
        forest(S, 2, epsilon=epsilon, n_samples=5)
    with pytest.raises(ValueError, match="too large for " + dtype):
        loss(S, torch.tensor(LABELS), 2, epsilon=epsilon, n_samples=5)


@pytest.mark.torch
@pytest.mark.parametrize("epsilon", [1e-320, 5e-324])
def test_a_subnormal_epsilon_is_refused(epsilon):
    # the score-function gradient's 1 / (2 epsilon n_samples) was inf, the gradient NaN
    torch, forest, _ = _operators()
    with pytest.raises(ValueError, match="epsilon must be at least"):
        forest(torch.tensor(S0), 2, epsilon=epsilon)


@pytest.mark.torch
@pytest.mark.parametrize("dtype,scale,epsilon", [
    ("float64", 1e300, 1e290), ("float64", 1e-300, 1e-302), ("float32", 1e30, 1e28),
    ("float64", 1.0, 1e-300),
])
def test_extreme_but_representable_scales_give_finite_forests(dtype, scale, epsilon):
    torch, forest, loss = _operators()
    S = torch.tensor(S0 * scale, dtype=getattr(torch, dtype)).requires_grad_(True)
    A, F, M = forest(S, 2, epsilon=epsilon, n_samples=5,
                     generator=torch.Generator().manual_seed(0))
    assert torch.isfinite(F) and F.dtype == S.dtype
    # the noise is far below the entries' gaps: every sample is the exact forest
    if epsilon < 1e-8 * scale:
        torch.testing.assert_close(M.detach(), torch.tensor(REFERENCE_M, dtype=S.dtype))
    (A.sum() + F + M.sum()).backward()
    assert torch.isfinite(S.grad).all()
    value = loss(S, torch.tensor(LABELS), 2, epsilon=epsilon, n_samples=5)
    assert torch.isfinite(value)


@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precisions_are_solved_in_float32_and_returned_in_theirs(dtype):
    torch, forest, _ = _operators()
    S = torch.tensor(S0, dtype=getattr(torch, dtype))
    A, F, M = forest(S, 2, epsilon=1e-3, n_samples=3)
    assert A.dtype == F.dtype == M.dtype == S.dtype
    torch.testing.assert_close(M.float(), torch.tensor(REFERENCE_M, dtype=torch.float32))


@pytest.mark.torch
def test_one_sample_is_its_own_tree():
    torch, forest, _ = _operators()
    A, F, M = forest(torch.zeros(1, 1), 1, n_samples=3)
    assert A.tolist() == [[0.0]] and float(F) == 0.0 and M.tolist() == [[1.0]]


@pytest.mark.torch
def test_an_epsilon_too_large_for_a_learned_embedding_is_named():
    pytest.importorskip("torch")
    X, y = make_blobs(30, n_features=3, centers=3, random_state=0)
    y[::2] = -1
    model = SpanningForestClustering(3, embedding="linear", epsilon=1e300, max_iter=1)
    with pytest.raises(ValueError, match=r"epsilon=1e\+300 is too large"):
        model.fit(X, partial_labels=y)


@pytest.mark.torch
@pytest.mark.parametrize("dtype,scale,epsilon", [
    ("float64", 1.0, 1e308), ("float32", 1.0, 1e38), ("float32", 3e37, 0.1),
])
def test_the_device_path_refuses_what_the_cpu_path_refuses(dtype, scale, epsilon):
    # its checks run on S's device with one read back: here on CPU tensors
    torch, _, _ = _operators()
    from skdiffclust.forest._torch import _device_constraints

    positive = S0 - S0.min()
    S = torch.tensor(positive / positive.max() * scale, dtype=getattr(torch, dtype))
    with pytest.raises(ValueError, match="too large for " + dtype):
        _device_constraints(S, 2, epsilon, 5, torch.tensor(LABELS))
    with pytest.raises(ValueError, match="epsilon must be at least"):
        _device_constraints(S / scale, 2, 1e-320, 5, None)
    assert _device_constraints(S / scale, 2, 0.1, 5, None) is None  # accepted

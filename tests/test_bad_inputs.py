"""Bad input to every public torch block and estimator gets a clear ValueError or
TypeError naming the problem: never a number that means nothing, a torch traceback
or a ZeroDivisionError (issue 29).

First the cases a new user met (the "silent" and "raw exception" lists of issue
29), replayed; then the fuzz classes over every block and estimator: NaN,
infinity, empty, one sample (which must work, or say why not), wrong dtype, wrong
shape, wrong device. Without torch only the estimators' cases run (PRCut's and
the blocks' are marked ``torch``).
"""

import ast
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning

import skdiffclust
from skdiffclust import ClAM
from skdiffclust._utils._validation import NumberInterval
from tests._estimators import each, each_with

TORCH = pytest.mark.torch
X, _ = make_blobs(60, centers=3, random_state=0)

ESTIMATORS = each(counting=True)


def _make(entry):
    return entry.make(n_clusters=3, max_iter=5)


def _quiet(call):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return call()


def _with(X, row, value):
    X = X.copy()
    X[row, 0] = value
    return X


# -- estimators ---------------------------------------------------------------------


@pytest.mark.parametrize("entry", ESTIMATORS)
def test_bools_are_refused_for_every_numeric_parameter(entry):
    estimator = _make(entry)
    numeric = [name for name, constraints in estimator._parameter_constraints.items()
               if any(isinstance(c, NumberInterval) for c in constraints)]
    assert "n_clusters" in numeric and "n_jobs" in numeric
    for name in numeric:
        with pytest.raises(ValueError, match=f"'{name}' parameter .* Got True instead"):
            _make(entry).set_params(**{name: True}).fit(entry.as_input(X))


FIT_CASES = {
    "NaN": (_with(X, 3, np.nan), "contains NaN"),
    "infinity": (_with(X, 3, np.inf), "contains infinity"),
    "empty": (X[:0], "0 sample"),
    "one sample": (X[:1], "n_samples=1|1 sample"),
    "complex dtype": (X + 1j, "Complex data not supported"),
    "strings": (np.full(X.shape, "a"), "could not convert string to float"),
    "1-D": (X[:, 0], "Expected 2D array"),
    "3-D": (X[:, :, None], "dim 3|2-D|3 dimensions"),
    "squares overflow": (X * 1e155, "overflow"),
}
# (n, height, width) arrays are images to an estimator that reads images, not a
# bad shape (tests/deep/test_deep_layouts.py: the shapes it cannot read)
NOT_BAD_FOR_IMAGES = {"3-D"}
# the forests' n_clusters='auto' answers one cluster for one sample, as the forest
# of one sample is (tests/forest/test_forest_n_clusters.py)
NOT_BAD_FOR_COUNTING_FORESTS = {"one sample"}


@pytest.mark.parametrize("case, entry", each_with(
    FIT_CASES, lambda entry, case: (entry.images and case in NOT_BAD_FOR_IMAGES) or (
        entry.name == "SpanningForestClustering-auto" and case in NOT_BAD_FOR_COUNTING_FORESTS),
    counting=True))
def test_fit_refuses_bad_data_clearly(entry, case):
    data, match = FIT_CASES[case]
    with pytest.raises(ValueError, match=match):
        _quiet(lambda: _make(entry).fit(entry.as_input(data)))


PREDICT_CASES = {
    "NaN": (_with(X, 0, np.nan), "contains NaN"),
    "infinity": (_with(X, 0, -np.inf), "contains infinity"),
    "other features": (X[:, :1], "features"),
    "1-D": (X[0], "Expected 2D array"),
}


@pytest.mark.parametrize("case", list(PREDICT_CASES))
@pytest.mark.parametrize("entry", ESTIMATORS)
def test_predict_refuses_bad_data_clearly(entry, case):
    estimator = _quiet(lambda: _make(entry).fit(entry.as_input(X)))
    data, match = PREDICT_CASES[case]
    methods = [m for m in ("predict", "predict_proba") if hasattr(estimator, m)]
    for method in methods:
        with pytest.raises(ValueError, match=match):
            getattr(estimator, method)(entry.as_input(data))
    # and one sample works
    assert estimator.predict(entry.as_input(X[:1])).shape == (1,)


def test_values_whose_squares_underflow_say_to_rescale():
    # was a ZeroDivisionError in beta='auto' (issue 29)
    with pytest.raises(ValueError, match="Rescale the data"):
        ClAM(n_clusters=3).fit(X * 1e-300)


@pytest.mark.parametrize("entry", each())  # an integer n_clusters
def test_more_clusters_than_samples_get_one_wording_everywhere(entry):
    # each estimator worded its own before (issue 45)
    with pytest.raises(ValueError, match="^n_clusters=5 must be <= n_samples=4: every "
                       "cluster needs at least one sample.$"):
        _quiet(lambda: entry.make(n_clusters=5).fit(entry.as_input(X[:4])))


@pytest.mark.parametrize("entry", each(
    lambda entry: "hidden_layer_sizes" in entry.estimator().get_params(), trained=True))
def test_bad_hidden_layer_sizes_get_one_wording_everywhere(entry):
    for sizes in ((4, 0), (2.5,)):
        with pytest.raises(ValueError, match=re.escape(
                f"hidden_layer_sizes must be a sequence of positive integers, got {sizes}")):
            _quiet(lambda: entry.make_trained(n_clusters=3, hidden_layer_sizes=sizes).fit(X))


@pytest.mark.parametrize("entry", ESTIMATORS)
def test_constant_data_warns(entry):
    with pytest.warns(UserWarning, match="identical|non-empty clusters"):
        _quiet(lambda: _make(entry).fit(entry.as_input(np.ones((30, 2)))))


@TORCH
@pytest.mark.parametrize("entry", ESTIMATORS)
def test_torch_tensors_numpy_cannot_read_are_refused_clearly(entry):
    # torch's own RuntimeError ("Can't call numpy() on Tensor that requires grad")
    # or TypeError before (issue 45)
    import torch

    good = entry.as_input(torch.tensor(X))
    for tensor, match in ((good.clone().requires_grad_(), "requires grad.*X.detach()"),
                          (good.to("meta"), "X is a torch tensor on meta.*X.cpu()")):
        with pytest.raises(ValueError, match=match):
            _quiet(lambda: _make(entry).fit(tensor))
    # a dtype without a NumPy counterpart: torch's "Got unsupported ScalarType"
    with pytest.raises(TypeError, match=r"dtype torch.bfloat16.*X.float\(\)"):
        _quiet(lambda: _make(entry).fit(good.to(torch.bfloat16)))
    estimator = _quiet(lambda: _make(entry).fit(good))  # a CPU tensor is data
    with pytest.raises(ValueError, match="requires grad"):
        estimator.predict(good.clone().requires_grad_())


@TORCH
@pytest.mark.parametrize("entry", each(lambda entry: "device" in entry.params, trained=True))
def test_cuda_without_cuda_is_a_clear_error(entry, no_cuda):
    model = entry.make_trained(n_clusters=3, device=no_cuda.device)
    with pytest.raises(ValueError, match=re.escape(no_cuda.message)):
        model.fit(entry.as_input(X), **entry.label_params(np.r_[0, 1, 2, [-1] * 57]))


# -- torch blocks -------------------------------------------------------------------


class NoCuda:
    """device='cuda' on a machine without CUDA, and the estimators' message."""

    device = "cuda"
    message = "device='cuda' was requested but CUDA is not available."


@pytest.fixture
def no_cuda(monkeypatch):
    """On a machine with CUDA, torch is told there is none (the estimators take
    only 'auto', 'cpu' and 'cuda', so no device number beyond the machine's)."""
    import torch

    if torch.cuda.is_available():  # and ClAM's fused kernel told numba.cuda has none
        from skdiffclust.clam import _cuda_fit

        monkeypatch.setattr(_cuda_fit, "cuda_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    return NoCuda()


@pytest.fixture
def blocks():
    """torch and skdiffclust.torch, and the good inputs the cases spoil."""
    import torch

    import skdiffclust.torch as blocks

    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(8, 3, generator=generator)
    points = torch.randn(8, 2, generator=generator)
    distances = torch.cdist(points, points)
    S = -distances**2
    graph = sp.csr_matrix(np.ones((6, 6)) - np.eye(6))
    return {"torch": torch, "T": blocks, "logits": logits,
            "P": torch.softmax(logits, dim=1), "points": points, "K": torch.exp(-S),
            "D": distances, "S": S, "W": torch.ones(4, 4), "graph": graph,
            "labels": torch.tensor([0, 1, -1, -1, 2, -1, -1, -1])}


def _spoil(tensor, value, index=(0, 0)):
    tensor = tensor.clone()
    tensor[index] = value
    return tensor


def _symmetric(S, value):
    return _spoil(_spoil(S, value, (0, 1)), value, (1, 0))


# (call on the fixture's dict, error, message): the issue's cases first
ISSUE_CASES = {
    "PRCutLoss on logits": (
        lambda b: b["T"].PRCutLoss(3)(b["logits"][:4], b["logits"][4:], b["W"]),
        ValueError, "negative entries .* torch.softmax"),
    "PRCutLoss on -3 P": (
        lambda b: b["T"].PRCutLoss(3)(b["P"][:4] * -3, b["P"][4:], b["W"]),
        ValueError, "proba_left has negative entries"),
    "PRCutLoss on 3 P": (
        lambda b: b["T"].PRCutLoss(3)(b["P"][:4], 3 * b["P"][4:], b["W"]),
        ValueError, "proba_right must have rows summing to 1 .*softmax"),
    "PRCutLoss negative weights": (
        lambda b: b["T"].PRCutLoss(3)(b["P"][:4], b["P"][4:], -b["W"]),
        ValueError, "affinity must hold non-negative weights"),
    "PRCutLoss NaN probability": (
        lambda b: b["T"].PRCutLoss(3)(_spoil(b["P"][:4], np.nan), b["P"][4:], b["W"]),
        ValueError, "proba_left contains NaN"),
    "PRCutLoss NaN weight": (
        lambda b: b["T"].PRCutLoss(3)(b["P"][:4], b["P"][4:], _spoil(b["W"], np.nan)),
        ValueError, "affinity contains NaN"),
    "PRCutLoss empty batch": (
        lambda b: b["T"].PRCutLoss(3)(b["P"][:0], b["P"][4:], b["W"][:0]),
        ValueError, "proba_left is empty"),
    "gemini_loss on logits": (
        lambda b: b["T"].gemini_loss(b["logits"], b["K"]), ValueError, "softmax"),
    "gemini_loss on -P": (
        lambda b: b["T"].gemini_loss(-b["P"], b["K"]), ValueError, "negative entries"),
    "gemini_loss on 5 P": (
        lambda b: b["T"].gemini_loss(5 * b["P"], b["K"]), ValueError, "summing to 1"),
    "gemini_loss negative distances": (
        lambda b: b["T"].gemini_loss(b["P"], -b["D"], "wasserstein_ovo"),
        ValueError, "non-negative distances"),
    "ClAMLayer NaN": (
        lambda b: b["T"].ClAMLayer(3, 2)(_spoil(b["points"], np.nan)),
        ValueError, "x contains NaN or infinity"),
    "ClAMLayer.predict NaN rows": (
        lambda b: b["T"].ClAMLayer(3, 2).predict(_spoil(b["points"], np.nan)),
        ValueError, "x contains NaN or infinity"),
    "clam_loss infinity": (
        lambda b: b["T"].clam_loss(b["T"].ClAMLayer(3, 2), _spoil(b["points"], np.inf)),
        ValueError, "x contains NaN or infinity"),
    "clam_loss empty batch": (
        lambda b: b["T"].clam_loss(b["T"].ClAMLayer(3, 2), b["points"][:0]),
        ValueError, "x is empty"),
    "PRCutBatchPairs integer dtype": (
        lambda b: b["T"].PRCutBatchPairs(b["graph"], 3, dtype=b["torch"].int64),
        TypeError, "floating point torch.dtype"),
    "PRCutBatchPairs batch_size above n_samples": (
        lambda b: b["T"].PRCutBatchPairs(b["graph"], 7), ValueError, "exceeds the graph's 6"),
    # before: the cast to float16 gave infinite weights, refused only by the loss
    "PRCutBatchPairs weights beyond float16": (
        lambda b: b["T"].PRCutBatchPairs(1e5 * b["graph"], 3, dtype=b["torch"].float16),
        ValueError, "overflows torch.float16"),
}


@TORCH
@pytest.mark.parametrize("case", list(ISSUE_CASES))
def test_the_issues_silent_cases_raise_a_clear_error(blocks, case):
    call, error, match = ISSUE_CASES[case]
    with pytest.raises(error, match=match):
        call(blocks)


@TORCH
@pytest.mark.parametrize("make", [
    lambda b, device: b["T"].ClAMLayer(2, 3, device=device),
    lambda b, device: b["T"].ClAMLayer.from_estimator(_quiet(
        lambda: ClAM(n_clusters=3, beta=1.0, max_iter=2, random_state=0).fit(X)),
        device=device),
    lambda b, device: b["T"].PRCutLoss(2, device=device),
    lambda b, device: b["T"].PRCutBatchPairs(b["graph"], 3, device=device),
], ids=["ClAMLayer", "ClAMLayer.from_estimator", "PRCutLoss", "PRCutBatchPairs"])
def test_cuda_without_cuda_is_the_estimators_error_in_every_block(blocks, make, no_cuda):
    with pytest.raises(ValueError, match=re.escape(no_cuda.message)):
        make(blocks, no_cuda.device)


@pytest.mark.parametrize("entry", each())  # an integer n_clusters
def test_n_clusters_true_is_refused_by_the_parameter_constraints(entry):
    with pytest.raises(ValueError, match="'n_clusters' parameter .* Got True"):
        entry.make(n_clusters=True).fit(entry.as_input(X))


# -- the fuzz classes over every block ------------------------------------------------


def _prcut(b, P=None, Q=None, W=None):
    P = b["P"][:4] if P is None else P
    Q = b["P"][4:] if Q is None else Q
    return b["T"].PRCutLoss(3)(P, Q, b["W"] if W is None else W)


def _layer_calls(method):
    def call(b, x):
        layer = b["T"].ClAMLayer(3, 2, generator=b["torch"].Generator().manual_seed(1))
        if method == "clam_loss":
            return b["T"].clam_loss(layer, x)
        return getattr(layer, method)(x)
    return call


# each block: how to call it on a given first input, and that input, good
BLOCKS = {
    "PRCutLoss": (lambda b, P: _prcut(b, P=P, W=b["W"][:P.shape[0]] if P.ndim == 2
                                      and P.shape[0] < 4 else None), "P4"),
    "gemini_loss": (lambda b, P: b["T"].gemini_loss(P, b["K"][:P.shape[0], :P.shape[0]]
                                                    if P.ndim == 2 else b["K"]), "P"),
    "ClAMLayer": (_layer_calls("forward"), "points"),
    "ClAMLayer.predict": (_layer_calls("predict"), "points"),
    "ClAMLayer.predict_proba": (_layer_calls("predict_proba"), "points"),
    "clam_loss": (_layer_calls("clam_loss"), "points"),
    "perturbed_spanning_forest": (
        lambda b, S: b["T"].perturbed_spanning_forest(S, 1 if S.shape[0] == 1 else 2,
                                                      n_samples=5)[1], "S"),
    "partial_fenchel_young_loss": (
        lambda b, S: b["T"].partial_fenchel_young_loss(
            S, b["labels"][:S.shape[0]] if S.ndim == 2 and S.shape[0] == S.shape[1]
            else b["labels"], 1 if S.shape[0] == 1 else 3, n_samples=5), "S"),
}


# what skdiffclust.torch exports besides the blocks fuzzed above: the batch pairs
# (fuzzed on their graph below) and two functions of no tensor input
NOT_FUZZED_AS_BLOCKS = {"PRCutBatchPairs", "constraints_from_labels", "set_input_checks"}


def test_every_exported_block_is_fuzzed():
    # a new block left out of BLOCKS was never fuzzed, and nothing said so
    source = (Path(skdiffclust.__file__).parent / "torch.py").read_text(encoding="utf-8")
    exported = next(ast.literal_eval(node.value) for node in ast.parse(source).body
                    if isinstance(node, ast.Assign)
                    and getattr(node.targets[0], "id", None) == "__all__")
    fuzzed = {name.split(".")[0] for name in BLOCKS}
    missing = sorted(set(exported) - fuzzed - NOT_FUZZED_AS_BLOCKS)
    assert not missing, f"add {missing} to BLOCKS in {Path(__file__).name}"


# layers map an empty batch to an empty output, as torch.nn.Linear does; losses (a
# mean over the batch) and the forest operators (a forest needs nodes) refuse it
TAKE_EMPTY_BATCHES = {"ClAMLayer", "ClAMLayer.predict", "ClAMLayer.predict_proba"}


def _good(b, name):
    return b["P"][:4] if name == "P4" else b[name]


def _square(block):
    return block in ("perturbed_spanning_forest", "partial_fenchel_young_loss")


FUZZ = {  # (spoil the good input, error, message); error None: must work
    "NaN": (lambda x, sq: _symmetric(x, np.nan) if sq else _spoil(x, np.nan),
            ValueError, "NaN or infinity"),
    "infinity": (lambda x, sq: _symmetric(x, np.inf) if sq else _spoil(x, np.inf),
                 ValueError, "NaN or infinity"),
    "empty": (lambda x, sq: x[:0, :0] if sq else x[:0], ValueError, "empty|n_samples=0"),
    "one sample": (lambda x, sq: x[:1, :1] if sq else x[:1], None, None),
    "wrong dtype": (lambda x, sq: x.to(dtype=__import__("torch").int64), TypeError,
                    "floating point|torch.int64"),
    "wrong shape": (lambda x, sq: x[:, :1] if sq else x[:, 0], ValueError, "shape"),
    "wrong device": (lambda x, sq: x.to("meta"), (TypeError, ValueError),
                     "meta"),
}


@TORCH
@pytest.mark.parametrize("fuzz", list(FUZZ))
@pytest.mark.parametrize("block", list(BLOCKS))
def test_every_block_refuses_each_fuzz_class_clearly(blocks, block, fuzz):
    call, good = BLOCKS[block]
    spoil, error, match = FUZZ[fuzz]
    x = spoil(_good(blocks, good), _square(block))
    if fuzz == "empty" and block in TAKE_EMPTY_BATCHES:  # as torch's layers do
        assert call(blocks, x).shape[0] == 0
        return
    if error is None:  # one sample: a real result
        result = call(blocks, x)
        assert blocks["torch"].isfinite(result).all()
        return
    with pytest.raises(error, match=match):
        call(blocks, x)


PAIRS_FUZZ = {
    "NaN": (lambda G: _sparse_spoil(G, np.nan), ValueError, "NaN or infinite"),
    "infinity": (lambda G: _sparse_spoil(G, np.inf), ValueError, "NaN or infinite"),
    "negative": (lambda G: -G, ValueError, "non-negative"),
    "empty": (lambda G: sp.csr_matrix((0, 0)), ValueError, "at least 2 samples"),
    "one sample": (lambda G: sp.csr_matrix((1, 1)), ValueError, "at least 2 samples"),
    "wrong dtype": (lambda G: G.astype(complex), TypeError, "real weights"),
    "wrong shape": (lambda G: G[:, :5], ValueError, "square"),
    "dense": (lambda G: G.toarray(), TypeError, "SciPy sparse matrix"),
}


def _sparse_spoil(G, value):
    G = G.copy()
    G.data[0] = value
    return G


@TORCH
@pytest.mark.parametrize("fuzz", list(PAIRS_FUZZ))
def test_batch_pairs_refuse_each_fuzz_class_clearly(blocks, fuzz):
    spoil, error, match = PAIRS_FUZZ[fuzz]
    with pytest.raises(error, match=match):
        blocks["T"].PRCutBatchPairs(spoil(blocks["graph"]), 2)


@TORCH
def test_wrong_generators_and_devices_between_inputs_are_clear(blocks):
    b, torch = blocks, blocks["torch"]
    with pytest.raises(TypeError, match="generator must be a torch.Generator"):
        b["T"].PRCutBatchPairs(b["graph"], 3, generator=np.random.default_rng(0))
    with pytest.raises(TypeError, match="generator must be a torch.Generator"):
        b["T"].clam_loss(b["T"].ClAMLayer(3, 2), b["points"], generator=0)
    with pytest.raises(TypeError, match="similarity is on meta but proba on cpu"):
        b["T"].gemini_loss(b["P"], b["K"].to("meta"))
    with pytest.raises(TypeError, match="affinity is on meta"):
        _prcut(b, W=b["W"].to("meta"))
    with pytest.raises(TypeError, match="share a dtype and a device"):
        _prcut(b, Q=b["P"][4:].double())
    with pytest.raises(ValueError, match="device must be a torch.device"):
        b["T"].ClAMLayer(3, 2, device="gpu")
    del torch


# -- the checks on CUDA: eager once, then assertions that read nothing back ---------


@TORCH
def test_after_the_first_call_on_cuda_the_checks_read_nothing_back(blocks, monkeypatch):
    """Simulated on CPU tensors: a block's first call on 'cuda' is checked with one
    read back; later calls assert on the device, and a bad input then fails the
    assertion (a device-side assert on CUDA, a RuntimeError here)."""
    from skdiffclust._utils import _torch_checks

    torch = blocks["torch"]
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    checks = _torch_checks.ValueChecks("gemini_loss", "proba")
    cuda = torch.device("cuda:0")
    good, bad = blocks["P"], blocks["logits"]
    with pytest.raises(ValueError, match="negative entries"):  # the first call
        checks(cuda, lambda: _torch_checks.probabilities(bad, "proba"))
    checks(cuda, lambda: _torch_checks.probabilities(good, "proba"))
    assert checks.checked_on == {"cuda:0"}

    def refuse_read_back(*args):
        raise AssertionError("a value was read back from the device")

    previous = _torch_checks.set_input_checks("async")  # every call asserted
    try:
        with monkeypatch.context() as patched:
            for method in ("item", "tolist", "__bool__", "__float__", "cpu", "numpy"):
                patched.setattr(torch.Tensor, method, refuse_read_back)
            checks(cuda, lambda: _torch_checks.probabilities(good, "proba"))
            with pytest.raises(RuntimeError,
                               match="skdiffclust.torch.gemini_loss: invalid"):
                checks(cuda, lambda: _torch_checks.probabilities(bad, "proba"))
    finally:
        _torch_checks.set_input_checks(previous)
    previous = _torch_checks.set_input_checks("eager")
    try:  # every call read back, with the full message
        with pytest.raises(ValueError, match="negative entries"):
            checks(cuda, lambda: _torch_checks.probabilities(bad, "proba"))
    finally:
        _torch_checks.set_input_checks(previous)


@TORCH
def test_on_cuda_auto_asserts_one_call_in_sixteen_and_every_captured_call(blocks,
                                                                           monkeypatch):
    """Simulated on CPU tensors: after the first call on 'cuda', 'auto' asserts on
    the device at one call in CUDA_CHECK_EVERY (a value gone bad in training, which
    stays bad, is met within that many calls) and at every call captured in a CUDA
    graph, whose replays are all its later steps."""
    from skdiffclust._utils import _torch_checks

    torch = blocks["torch"]
    capturing = [False]
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: capturing[0])
    checks = _torch_checks.ValueChecks("gemini_loss", "proba")
    cuda = torch.device("cuda:0")
    good, bad = blocks["P"], blocks["logits"]
    checks(cuda, lambda: _torch_checks.probabilities(good, "proba"))  # read back
    checks(cuda, lambda: _torch_checks.probabilities(good, "proba"))  # asserted
    every = _torch_checks.CUDA_CHECK_EVERY
    assert every == 16
    for _ in range(every - 1):  # skipped: nothing is computed
        checks(cuda, lambda: pytest.fail("a skipped call computed its condition"))
    with pytest.raises(RuntimeError, match="skdiffclust.torch.gemini_loss: invalid"):
        checks(cuda, lambda: _torch_checks.probabilities(bad, "proba"))
    capturing[0] = True
    with pytest.raises(RuntimeError, match="skdiffclust.torch.gemini_loss: invalid"):
        checks(cuda, lambda: _torch_checks.probabilities(bad, "proba"))


@TORCH
@pytest.mark.parametrize("block", ["PRCutLoss", "gemini_loss", "ClAMLayer", "clam_loss",
                                   "ClAMLayer.predict_proba"])
def test_the_blocks_steps_read_nothing_back_once_checked(blocks, block, monkeypatch):
    """A whole step of each block in the checks' device mode reads no value back
    (on CUDA: no host synchronisation), and the checks off change nothing."""
    from skdiffclust._utils._torch_checks import ValueChecks, set_input_checks

    call, good = BLOCKS[block]
    x = _good(blocks, good).clone().requires_grad_(True)
    monkeypatch.setattr(ValueChecks, "_eager", lambda self, mode, device: False)
    assert_async = blocks["torch"]._assert_async

    def short_message_assert(condition, message):
        # torch 2.11 on CUDA refuses messages of 255 characters or more (seen on an H100)
        assert len(message) < 255, message
        return assert_async(condition, message)

    monkeypatch.setattr(blocks["torch"], "_assert_async", short_message_assert)
    with monkeypatch.context() as patched:
        for method in ("item", "tolist", "__bool__", "__float__", "cpu", "numpy"):
            patched.setattr(blocks["torch"].Tensor, method,
                            lambda *args: pytest.fail("a value was read back"))
        checked = call(blocks, x)
        checked.sum().backward()
    previous = set_input_checks("off")
    try:
        unchecked = call(blocks, x)
    finally:
        set_input_checks(previous)
    blocks["torch"].testing.assert_close(checked, unchecked)


@TORCH
def test_a_device_without_number_is_the_current_one():
    """torch.Generator('cuda') is on 'cuda', a tensor on 'cuda:0': the same device
    (clam_loss refused such a generator on an H100)."""
    from skdiffclust._utils._torch_checks import same_device

    assert same_device("cuda", "cuda:0") and same_device("cuda:0", "cuda")
    assert same_device("cpu", "cpu") and same_device("cuda:1", "cuda:1")
    assert not same_device("cuda:1", "cuda:0") and not same_device("cpu", "cuda:0")


@pytest.mark.parametrize("entry", each(lambda entry: not entry.images))
def test_a_ragged_list_is_refused_clearly(entry):
    """numpy's "inhomogeneous shape" message before."""
    rows = [[0.0, 1.0], [2.0], [3.0, 4.0], [5.0, 6.0]]
    with pytest.raises(ValueError, match="X is a ragged sequence: its rows"):
        entry.make(n_clusters=2).fit(rows)


# -- inputs the estimators' checks did not reach ------------------------------------


def _malformed_constraints():
    """A CSR matrix of cannot-links whose first column index lies beyond its shape
    (10**7 crashed the interpreter in SciPy's ``toarray``; 100 was read silently)."""
    C = sp.csr_matrix(-(np.ones((6, 6)) - np.eye(6)))
    C.indices[0] = 100
    return C


def test_a_malformed_sparse_constraint_matrix_is_refused_before_scipy_reads_it():
    x = np.random.RandomState(0).randn(6, 2)
    S = -((x[:, None] - x[None]) ** 2).sum(-1)
    with pytest.raises(ValueError, match="constraints is a malformed CSR sparse matrix"):
        skdiffclust.spanning_forest(S, 2, _malformed_constraints())


@TORCH
def test_the_torch_forests_refuse_a_malformed_sparse_constraint_matrix():
    import torch

    from skdiffclust.torch import partial_fenchel_young_loss, perturbed_spanning_forest

    x = np.random.RandomState(0).randn(6, 2)
    S = torch.tensor(-((x[:, None] - x[None]) ** 2).sum(-1))
    for call in (lambda C: perturbed_spanning_forest(S, 2, constraints=C),
                 lambda C: partial_fenchel_young_loss(S, C, 2)):
        with pytest.raises(ValueError, match="constraints is a malformed CSR"):
            call(_malformed_constraints())


def test_sparse_geminis_transform_checks_x_as_predict_does():
    """``transform`` (scikit-learn's selector) read X unchecked: a malformed sparse
    matrix crashed the interpreter, strings came back as strings."""
    model = _quiet(lambda: skdiffclust.SparseGEMINI(n_clusters=3, max_iter=5,
                                                    random_state=0).fit(X))
    kept = model.get_support()
    bad = sp.csr_matrix(X)
    bad.indptr[-1] += 1000
    with pytest.raises(ValueError, match="X is a malformed CSR sparse matrix"):
        model.transform(bad)
    with pytest.raises(ValueError, match="strings"):
        model.transform(np.full(X.shape, "a"))
    np.testing.assert_array_equal(model.transform(X), X[:, kept])
    assert model.transform(X.astype(np.float32)).dtype == np.float32
    assert sp.issparse(model.transform(sp.csr_matrix(X)))


@TORCH
def test_sparse_geminis_transform_refuses_tensors_numpy_cannot_read():
    import torch

    model = _quiet(lambda: skdiffclust.SparseGEMINI(n_clusters=3, max_iter=5,
                                                    random_state=0).fit(X))
    with pytest.raises(ValueError, match="requires grad"):
        model.transform(torch.tensor(X, requires_grad=True))
    with pytest.raises(ValueError, match="on meta"):
        model.transform(torch.tensor(X, device="meta"))


def test_complex_numbers_are_refused_where_numpy_would_drop_their_imaginary_parts():
    with pytest.raises(ValueError, match="init is complex"):
        ClAM(n_clusters=3, init=X[:3] + 5j).fit(X)
    with pytest.raises(ValueError, match="init must hold real numbers"):
        ClAM(n_clusters=3, init=np.full((3, 2), "a")).fit(X)
    with pytest.raises(ValueError, match="proba is complex"):
        skdiffclust.gemini_value_and_grad(np.full((4, 2), 0.5) + 0.3j, np.eye(4))
    with pytest.raises(ValueError, match="constraints is complex"):
        skdiffclust.spanning_forest(-np.abs(np.subtract.outer(X[:6, 0], X[:6, 0])), 2,
                                    np.eye(6) + 1j)


@TORCH
def test_tensors_numpy_cannot_read_are_refused_by_the_functions_and_init():
    import torch

    S = -np.abs(np.subtract.outer(X[:6, 0], X[:6, 0]))
    with pytest.raises(ValueError, match="S is a torch tensor that requires grad"):
        skdiffclust.spanning_forest(torch.tensor(S, requires_grad=True), 2)
    with pytest.raises(ValueError, match="init is a torch tensor that requires grad"):
        ClAM(n_clusters=3, init=torch.tensor(X[:3], requires_grad=True)).fit(X)

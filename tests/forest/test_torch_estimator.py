"""Learning through clustering with SpanningForestClustering(embedding=...)."""

import pickle

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits
from sklearn.metrics import adjusted_rand_score
from sklearn.model_selection import train_test_split

from skdiffclust import SpanningForestClustering
from skdiffclust.datasets import make_denoising

from tests._torchless import run_without_torch

# expected: fits of a few epochs, to test other things quickly (the training
# contract's tests hold the warning itself)
pytestmark = [
    pytest.mark.torch,
    pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning"),
]


@pytest.fixture(scope="module")
def denoising():
    X, y = make_denoising(random_state=0)
    X_val, y_val = make_denoising(random_state=1)
    return X, y, X_val, y_val


def _fit_denoising(X, y, **params):
    settings = dict(embedding="linear", n_components=2, batch_size=32, max_iter=30,
                    learning_rate=0.01, random_state=0, device="cpu")
    settings.update(params)
    return SpanningForestClustering(n_clusters=4, **settings).fit(X, partial_labels=y)


def test_an_embedding_without_parameters_is_refused_clearly(denoising):
    X, y, _, _ = denoising  # a bare StopIteration before
    with pytest.raises(ValueError, match="nothing to train"):
        SpanningForestClustering(n_clusters=4, embedding=torch.nn.Identity()).fit(
            X, partial_labels=y)


class _DropsARow(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.linear(x)[:-1]


class _Returns(torch.nn.Module):
    def __init__(self, convert):
        super().__init__()
        self.linear, self.convert = torch.nn.Linear(4, 2), convert

    def forward(self, x):
        return self.convert(self.linear(x))


@pytest.mark.parametrize("module, error, match", [
    # fitted and gave 59 labels for 60 samples, silently
    (_DropsARow(), ValueError, r"embedding must return embeddings of shape \(batch, "
                               r"n_components\); on a batch of shape \(2, 4\) it "
                               r"returned shape \(1, 2\)"),
    # torch's or Python's errors from inside the training before
    (torch.nn.Linear(3, 2), ValueError, r"embedding failed on a batch of rows of X of "
                                        r"shape \(2, 4\) \(RuntimeError"),
    (_Returns(lambda z: z.long()), TypeError, "returned torch.int64 embeddings from "
                                              "torch.float32 parameters"),
    (_Returns(lambda z: z[:, None]), ValueError, r"returned shape \(2, 1, 2\)"),
    (_Returns(lambda z: (z,)), ValueError, "it returned a tuple"),
    (torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.Flatten(0)), ValueError,
     r"returned shape \(4,\)"),
    (_Returns(lambda z: z * float("nan")), ValueError, "non-finite embeddings"),
    (torch.nn.Linear(4, 2, device="meta"), ValueError, "meta device"),
    (torch.nn.Linear(4, 2).half(), TypeError, "parameters are torch.float16"),
])
def test_bad_embedding_modules_get_clear_errors_before_training(denoising, module, error,
                                                                match):
    X, y, _, _ = denoising
    model = SpanningForestClustering(n_clusters=4, embedding=module, max_iter=2)
    with pytest.raises(error, match=match):
        model.fit(X, partial_labels=y)
    assert not hasattr(model, "labels_")


def test_a_lazy_embedding_module_is_materialised_from_random_state(denoising):
    X, y, X_val, _ = denoising
    first, second = (_fit_denoising(X, y, embedding=torch.nn.LazyLinear(2), max_iter=3)
                     for _ in range(2))
    np.testing.assert_array_equal(first.transform(X_val), second.transform(X_val))


def test_inference_reads_the_fit_not_parameters_set_since(denoising):
    # predict read self.embedding: after set_params, an AttributeError (no
    # embedding_state_) or a search over the raw features of the embedded ones
    X, y, X_val, _ = denoising
    embedded = _fit_denoising(X, y, max_iter=3)
    before = embedded.predict(X_val)
    embedded.set_params(embedding=None)
    np.testing.assert_array_equal(embedded.predict(X_val), before)
    plain = SpanningForestClustering(n_clusters=4).fit(X)
    before = plain.predict(X_val)
    with pytest.raises(ValueError):  # a refit that fails leaves the fit as it was
        plain.set_params(embedding="linear").fit(np.full_like(X, np.nan), partial_labels=y)
    np.testing.assert_array_equal(plain.predict(X_val), before)
    assert plain.embedding_state_ is None


def test_denoising_reaches_perfect_validation_clustering(denoising):
    X, y, X_val, y_val = denoising
    raw = SpanningForestClustering(n_clusters=4).fit(X_val).labels_
    assert adjusted_rand_score(y_val, raw) < 0.5  # the noise hides the clusters
    est = _fit_denoising(X, y)
    embedded = est.transform(X_val)
    learned = SpanningForestClustering(n_clusters=4).fit(embedded).labels_
    assert adjusted_rand_score(y_val, learned) == 1.0
    assert adjusted_rand_score(y_val, est.predict(X_val)) == 1.0
    # the learned map ignores the noise columns
    weight = est.embedding_state_["weight"]
    assert np.abs(weight[:, 2:]).max() < 0.25 * np.abs(weight[:, :2]).max()
    assert est.loss_curve_[-1] < 0.1 * est.loss_curve_[0]
    assert est.n_iter_ == 30


def test_same_random_state_gives_identical_fits(denoising):
    X, y, X_val, _ = denoising
    partial = np.where(np.arange(60) % 3 == 0, y, -1)
    first = _fit_denoising(X, partial, max_iter=3)
    second = _fit_denoising(X, partial, max_iter=3)
    np.testing.assert_array_equal(first.labels_, second.labels_)
    for name, value in first.embedding_state_.items():
        np.testing.assert_array_equal(value, second.embedding_state_[name])
    np.testing.assert_array_equal(first.transform(X_val), second.transform(X_val))


def test_global_random_states_are_left_alone(denoising):
    X, y, _, _ = denoising
    torch_state = torch.get_rng_state()
    numpy_state = np.random.get_state()[1].copy()
    _fit_denoising(X, y, max_iter=2)
    assert torch.equal(torch.get_rng_state(), torch_state)
    np.testing.assert_array_equal(np.random.get_state()[1], numpy_state)


def test_fitted_state_is_numpy_and_pickles(denoising):
    X, y, X_val, _ = denoising
    est = _fit_denoising(X, y, max_iter=2)
    assert all(isinstance(v, np.ndarray) for v in est.embedding_state_.values())
    clone = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(clone.predict(X_val), est.predict(X_val))
    np.testing.assert_allclose(clone.transform(X_val), est.transform(X_val))


def test_user_module_is_trained_on_a_copy(denoising):
    X, y, X_val, y_val = denoising
    module = torch.nn.Sequential(torch.nn.Linear(4, 2))
    # the module's initial weights come from a local generator, not from torch's
    # global one, whose state depends on the tests that ran before
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.5)
    before = [p.detach().clone() for p in module.parameters()]
    est = _fit_denoising(X, y, embedding=module)
    for p, b in zip(module.parameters(), before):
        torch.testing.assert_close(p.detach(), b)  # the user's module is not modified
    assert est.transform(X_val).shape == (60, 2)
    assert adjusted_rand_score(y_val, est.predict(X_val)) > 0.9


def test_fit_without_labels_warns_and_keeps_the_initial_embedding(denoising):
    X, _, _, _ = denoising
    with pytest.warns(UserWarning, match="labelled"):
        est = SpanningForestClustering(n_clusters=4, embedding="linear", random_state=0).fit(X)
    assert est.n_iter_ == 0 and est.loss_curve_.size == 0


def test_embedding_with_precomputed_similarity_raises():
    S = -np.eye(5)
    model = SpanningForestClustering(embedding="linear", metric="precomputed")
    with pytest.raises(ValueError, match="precomputed"):
        model.fit(S, partial_labels=[0, 1, -1, -1, -1])


def test_cuda_device_trains_there_or_raises_without_cuda(denoising):
    X, y, X_val, _ = denoising
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA"):
            _fit_denoising(X, y, device="cuda", max_iter=1)
        return
    est = _fit_denoising(X, y, device="cuda", max_iter=2)
    assert all(isinstance(v, np.ndarray) for v in est.embedding_state_.values())
    assert est.predict(X_val).shape == (60,)


def test_semi_supervised_digits_cluster_held_out_points():
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X / 16.0, y, train_size=1200, random_state=0, stratify=y
    )
    partial = np.where(np.random.default_rng(0).random(1200) < 0.25, y_train, -1)
    est = SpanningForestClustering(
        n_clusters=10, embedding="mlp", n_components=16, max_iter=60,
        learning_rate=3e-3, random_state=0, device="cpu",
    ).fit(X_train, partial_labels=partial)
    embedded = est.transform(X_test)
    # the paper's protocol: cluster held-out mini-batches of 64 points
    order = np.random.default_rng(1).permutation(len(y_test))
    scores = []
    for start in range(0, len(order) - 63, 64):
        batch = order[start : start + 64]
        k = len(np.unique(y_test[batch]))
        labels = SpanningForestClustering(n_clusters=k).fit(embedded[batch]).labels_
        scores.append(adjusted_rand_score(y_test[batch], labels))
    assert np.mean(scores) >= 0.6
    # new points joining the learned clusters
    assert adjusted_rand_score(y_test, est.predict(X_test)) >= 0.85


def test_verbose_shows_a_progress_bar(denoising, capsys):
    X, y, _, _ = denoising
    _fit_denoising(X, y, max_iter=2, verbose=True)
    assert "SpanningForestClustering" in capsys.readouterr().err


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.filterwarnings("error")
def test_read_only_float32_input_trains_without_warnings(denoising):
    # torch warns when it is handed read-only memory it cannot share (memory maps)
    X, y, X_val, _ = denoising
    X = X.astype(np.float32)
    X.setflags(write=False)
    est = _fit_denoising(X, y, max_iter=2)
    frozen = X_val.astype(np.float32)
    frozen.setflags(write=False)
    assert est.transform(frozen).shape == (X_val.shape[0], 2)


# --------------------------------------------------------- defaults, conventions
@pytest.mark.filterwarnings("error::sklearn.exceptions.ConvergenceWarning")
def test_denoising_with_default_settings_reaches_perfect_validation_clustering():
    """The paper's toy problem with defaults only: n_clusters, embedding, n_components."""
    X, y = make_denoising(random_state=2024)
    X_val, y_val = make_denoising(random_state=7)
    est = SpanningForestClustering(n_clusters=4, embedding="linear", n_components=2,
                                   random_state=0, device="cpu").fit(X, partial_labels=y)
    learned = SpanningForestClustering(n_clusters=4).fit(est.transform(X_val)).labels_
    assert adjusted_rand_score(y_val, learned) == 1.0
    assert adjusted_rand_score(y_val, est.predict(X_val)) == 1.0
    assert est.n_iter_ < est.max_iter


def test_embedding_models_load_and_predict_without_torch(denoising, tmp_path):
    X, y, X_val, _ = denoising
    est = _fit_denoising(X, y, embedding="mlp", hidden_layer_sizes=(8,), max_iter=2)
    path = tmp_path / "model.pkl"
    path.write_bytes(pickle.dumps(est))
    np.save(tmp_path / "X_val.npy", X_val)
    out = tmp_path / "out.npy"
    done = run_without_torch(
        "import pickle\n"
        "import numpy as np\n"
        f"est = pickle.loads(open({str(path)!r}, 'rb').read())\n"
        f"X_val = np.load({str(tmp_path / 'X_val.npy')!r})\n"
        "np.save(sys.argv[1], np.column_stack([est.predict(X_val), est.transform(X_val)]))\n",
        out,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = np.load(out)
    np.testing.assert_array_equal(result[:, 0], est.predict(X_val))
    np.testing.assert_allclose(result[:, 1:], est.transform(X_val))


def test_the_numpy_forward_pass_is_the_torch_module(denoising):
    from skdiffclust._utils._torch import build_mlp, make_generator

    X, y, X_val, _ = denoising
    est = _fit_denoising(X, y, embedding="mlp", hidden_layer_sizes=(8,), max_iter=2)
    module = build_mlp(4, (8,), 2, make_generator(0))
    module.load_state_dict({k: torch.as_tensor(v) for k, v in est.embedding_state_.items()})
    with torch.no_grad():
        expected = module(torch.as_tensor(X_val, dtype=torch.float32)).numpy()
    np.testing.assert_allclose(est.transform(X_val.astype(np.float32)), expected,
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(est.transform(X_val), expected, rtol=1e-4, atol=1e-5)


def test_float32_in_float32_out_and_feature_names(denoising):
    X, y, X_val, _ = denoising
    est = _fit_denoising(X.astype(np.float32), y, max_iter=2)
    assert est.transform(X_val.astype(np.float32)).dtype == np.float32
    assert est.fit_transform(X.astype(np.float32), partial_labels=y).dtype == np.float32
    assert est.get_feature_names_out().tolist() == [
        "spanningforestclustering0", "spanningforestclustering1"]
    plain = SpanningForestClustering(n_clusters=4).fit(X)
    for method in ("transform", "fit_transform", "get_feature_names_out", "set_output"):
        assert not hasattr(plain, method)


def test_n_jobs_changes_neither_the_training_nor_the_thread_counts(denoising):
    import numba

    X, y, X_val, _ = denoising
    partial = np.where(np.arange(60) % 3 == 0, y, -1)
    before = numba.get_num_threads()
    one = _fit_denoising(X, partial, max_iter=3, n_jobs=1)
    assert numba.get_num_threads() == before
    two = _fit_denoising(X, partial, max_iter=3, n_jobs=2)
    np.testing.assert_array_equal(one.labels_, two.labels_)
    np.testing.assert_array_equal(one.loss_curve_, two.loss_curve_)
    for name, value in one.embedding_state_.items():
        np.testing.assert_array_equal(value, two.embedding_state_[name])


def test_score_is_higher_for_the_learned_embedding(denoising):
    X, y, X_val, _ = denoising
    untrained = _fit_denoising(X, y, max_iter=0)
    trained = _fit_denoising(X, y)
    assert trained.score(X_val) > untrained.score(X_val)


def test_auto_trains_small_batches_of_the_built_in_embeddings_on_the_cpu(monkeypatch):
    """On a machine with CUDA (simulated), device='auto' keeps the built-in
    embeddings' small batches on the CPU, where they train faster; a user's module,
    large batches and device='cuda' go to CUDA."""
    from skdiffclust._utils import _torch
    from skdiffclust.forest import _settings

    monkeypatch.setattr(_torch, "resolve_device", lambda device: torch.device(
        "cpu" if device == "cpu" else "cuda"))
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    module = torch.nn.Linear(4, 2)
    assert _settings.training_device("auto", "mlp", 63) == cpu
    assert _settings.training_device("auto", "mlp", 64) == cuda
    # 128 to 191 went to the CPU until an H200 trained batch 128 2.3 times as fast
    # on CUDA (benchmarks/results/gpu.csv)
    assert _settings.training_device("auto", "linear", 128) == cuda
    assert _settings.training_device("auto", "mlp", 192) == cuda
    assert _settings.training_device("auto", module, 64) == cuda
    assert _settings.training_device("cuda", "mlp", 64) == cuda
    assert _settings.training_device("cpu", module, 1024) == cpu

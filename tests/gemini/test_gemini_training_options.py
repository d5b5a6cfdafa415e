"""SparseGEMINI's MNIST settings on small stand-ins: dropout in the MLP, training in
float32 for float32 input, the selected features drawn as an image, and the
products with the data in blocks of rows (the same bits on any number of threads;
inference holding one block's activations)."""

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.datasets import load_digits, make_blobs
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import adjusted_rand_score

from skdiffclust import SparseGEMINI
from skdiffclust.gemini._data import Inputs
from skdiffclust.gemini._fit import fitted_gemini
from skdiffclust.gemini._models import backward, forward, init_random


def _model(dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(40, 6)).astype(dtype)
    params = {name: value.astype(dtype)
              for name, value in init_random(6, (16, 12), 3, 2, rng).items()}
    return Inputs(X, np.zeros(6), np.ones(6)), params


def test_dropout_backward_matches_finite_differences_with_the_same_masks():
    inputs, params = _model()
    rate, seed = 0.3, 7
    weights = np.random.default_rng(1).normal(size=(2, 40, 3))

    def objective(p):  # the same masks at every call: a generator of the same seed
        logits, _ = forward(p, inputs, rate, np.random.default_rng(seed))
        return float((weights * logits).sum())

    logits, activations = forward(params, inputs, rate, np.random.default_rng(seed))
    grads = backward(params, inputs, activations, weights, rate)
    for name, index in (("W0", (1, 2, 1)), ("W1", (1, 2, 1)), ("b1", (1, 2)),
                        ("skip", (1, 2, 1))):
        shifted = {k: v.copy() for k, v in params.items()}
        shifted[name][index] += 1e-6
        numeric = (objective(shifted) - objective(params)) / 1e-6
        assert grads[name][index] == pytest.approx(numeric, rel=1e-4, abs=1e-6)
    # about the rate of the active hidden units dropped, the others scaled up
    (_, hidden), = activations  # 40 rows: one block
    (_, plain), = forward(params, inputs)[1]
    kept = hidden[0] > 0
    assert 0.6 < kept.sum() / (plain[0] > 0).sum() < 0.8
    np.testing.assert_allclose(hidden[0][kept], plain[0][kept] / (1 - rate))


def test_blocks_of_rows_give_the_same_bits_on_any_number_of_threads():
    """forward and backward compute blocks of ROW_BLOCK rows and sum them in their
    order: the same bits on one thread and on three, the same values as one
    product of all the rows (to rounding), and the dropout masks of the batch."""
    from skdiffclust.gemini import _models

    rng = np.random.default_rng(0)
    n = 2 * _models.ROW_BLOCK + 37
    X = rng.normal(size=(n, 300))
    inputs = Inputs(X, np.zeros(300), np.ones(300))
    params = init_random(300, (400, 50), 4, 2, rng)
    grad_logits = rng.normal(size=(2, n, 4))
    runs = []
    for n_threads in (1, 3):
        logits, activations = forward(params, inputs, 0.2, np.random.default_rng(5),
                                      n_threads=n_threads)
        assert len(activations) == 3  # blocks of 256, 256 and 37 rows
        runs.append((logits, backward(params, inputs, activations, grad_logits, 0.2,
                                      n_threads=n_threads)))
    (logits, grads), (logits_3, grads_3) = runs
    np.testing.assert_array_equal(logits, logits_3)
    # inference keeps no activations, and computes the same bits without dropout
    plain, _ = forward(params, inputs, n_threads=3)
    np.testing.assert_array_equal(_models.logits_of(params, inputs, n_threads=1), plain)
    for name in grads:
        np.testing.assert_array_equal(grads[name], grads_3[name])
    # the same as one block of every row, with the batch's masks
    blocks = _models.row_blocks
    try:
        _models.row_blocks = lambda n_samples: [slice(0, n_samples)]
        whole, activations = forward(params, inputs, 0.2, np.random.default_rng(5))
        whole_grads = backward(params, inputs, activations, grad_logits, 0.2)
    finally:
        _models.row_blocks = blocks
    np.testing.assert_allclose(logits, whole, rtol=1e-12, atol=1e-12)
    for name in grads:
        np.testing.assert_allclose(grads[name], whole_grads[name], rtol=1e-10, atol=1e-10)


def _mlp_logits(params, X, dropout=0.0, rng=None):
    """X skip + MLP(X), the MLP's hidden units (after the first layer's ReLU)
    dropped at the rate ``dropout`` and the others scaled, where ``rng``."""
    n_layers = sum(name.startswith("W") for name in params)
    h = X @ params["W0"] + params["b0"]
    for i in range(1, n_layers):
        h = np.maximum(h, 0.0)
        if rng is not None:
            h = h * (rng.random(h.shape) >= dropout) / (1.0 - dropout)
        h = h @ params[f"W{i}"] + params[f"b{i}"]
    return X @ params["skip"] + h


def _centred_sorted(logits):
    """Each row's logits less their mean, sorted: what softmax keeps of them, in any
    column order."""
    return np.sort(logits - logits.mean(axis=1, keepdims=True), axis=1)


def test_dropout_trains_but_never_predicts():
    # init='random': the MLP's last layer starts away from zero (k-means++ starts it at
    # zero and it stays near there), so that the hidden units dropout masks weigh in
    X, y = make_blobs(300, centers=3, n_features=8, random_state=0)
    params = dict(hidden_layer_sizes=(32, 32), init="random", random_state=0)
    model = SparseGEMINI(3, dropout=0.2, **params).fit(X)
    assert adjusted_rand_score(y, model.labels_) > 0.95
    # predict is the network without masks: the MLP of params_ (raw features) by
    # hand, compared through the logits up to a constant per row (in any column order)
    logits = _mlp_logits(model.params_, X)
    np.testing.assert_allclose(_centred_sorted(np.log(model.predict_proba(X))),
                               _centred_sorted(logits), rtol=0, atol=1e-8)
    assert adjusted_rand_score(model.predict(X), logits.argmax(axis=1)) == 1.0
    # (the masks of a training pass move the logits far beyond that tolerance)
    masked = _mlp_logits(model.params_, X, dropout=0.2, rng=np.random.default_rng(0))
    assert np.abs(_centred_sorted(masked) - _centred_sorted(logits)).max() > 1.0
    np.testing.assert_array_equal(model.predict(X), model.labels_)
    again = SparseGEMINI(3, dropout=0.2, **params).fit(X)
    np.testing.assert_array_equal(again.labels_, model.labels_)
    without = SparseGEMINI(3, **params).fit(X)
    assert not np.allclose(without.params_["W2"], model.params_["W2"])
    with pytest.raises(ValueError, match="dropout"):
        SparseGEMINI(3, dropout=1.0).fit(X)


def test_float32_input_trains_in_float32_and_agrees_with_float64():
    X, y = make_blobs(400, centers=4, n_features=10, random_state=1)
    single = SparseGEMINI(4, random_state=0).fit(X.astype(np.float32))
    double = SparseGEMINI(4, random_state=0).fit(X)
    assert all(value.dtype == np.float32 for value in single._model.values())
    assert all(value.dtype == np.float64 for value in double._model.values())
    assert adjusted_rand_score(single.labels_, double.labels_) > 0.99
    assert adjusted_rand_score(y, single.labels_) > 0.95
    assert single.transform(X.astype(np.float32)).dtype == np.float32


def test_a_path_on_digits_keeps_pixels_where_the_digits_are():
    """The digits' stand-in for MNIST's figure 3: the path keeps central pixels,
    never the blank border columns."""
    X, y = load_digits(return_X_y=True)
    model = SparseGEMINI(10, hidden_layer_sizes=(64,), dropout=0.05, n_features_stop=16,
                         random_state=0)
    model.path(X[:600].astype(np.float32))
    mask = model.get_support()
    assert 16 <= mask.sum() <= 40
    assert not mask[X[:600].std(axis=0) == 0].any()  # blank pixels never kept
    rows, cols = np.divmod(np.arange(64), 8)
    from_centre = np.hypot(rows - 3.5, cols - 3.5)
    assert from_centre[mask].mean() < from_centre.mean() - 0.3
    assert adjusted_rand_score(y[:600], model.labels_) > 0.5  # measured: 0.67


def test_feature_mask_display_draws_the_kept_features():
    import matplotlib

    matplotlib.use("Agg")
    from skdiffclust.inspection import FeatureMaskDisplay

    X, _ = load_digits(return_X_y=True)
    model = SparseGEMINI(10, alpha=0.5, random_state=0).fit(X[:300])
    display = FeatureMaskDisplay.from_estimator(model, (8, 8), background=X.mean(0))
    shown = display.mask_image_.get_array()
    np.testing.assert_array_equal(~shown.mask.ravel(), model.get_support())
    np.testing.assert_allclose(shown.compressed(),
                               model.feature_importances_[model.get_support()])
    np.testing.assert_array_equal(display.background_image_.get_array(),
                                  X.mean(0).reshape(8, 8))
    assert FeatureMaskDisplay.from_estimator(model, (8, 8)).background_image_ is None
    with pytest.raises(ValueError, match="image_shape"):
        FeatureMaskDisplay.from_estimator(model, (7, 8))
    # NumPy's and matplotlib's messages before, none naming the argument
    for shape in (64, (-8, -8), (2, 4, 8), None, (True, 64)):  # None: not iterable
        with pytest.raises(ValueError, match="image_shape must be .height, width."):
            FeatureMaskDisplay.from_estimator(model, shape)
    with pytest.raises(ValueError, match="background must hold one value per feature"):
        FeatureMaskDisplay.from_estimator(model, (8, 8), background=np.zeros(10))
    with pytest.raises(TypeError, match="feature selector"):  # an AttributeError before
        FeatureMaskDisplay.from_estimator(KMeans(2, n_init=1).fit(X[:50]), (8, 8))


def test_a_cascade_within_a_step_leaves_its_models(monkeypatch):
    """Where most features leave within one step, the path keeps the model met
    after each epoch of it (the paper's section 4.1), so that the selection sees
    the models in between."""
    from skdiffclust._training import TrainingResult
    from skdiffclust.gemini import _fit
    from skdiffclust.gemini._models import SKIP

    # feature j leaves at penalty 10 + j / 100 (all 30 within one 5% step), one
    # feature per epoch
    exits = 10.0 + np.arange(30) / 100
    original = _fit.train_epochs

    def fake(params, problem, settings, *, penalty, hooks=(), **kwargs):
        if penalty == 0:
            return original(params, problem, settings, penalty=penalty, **kwargs)
        leaving = [j for j in np.flatnonzero(exits <= penalty) if params[SKIP][0, j].any()]
        for j in leaving:
            params[SKIP][:, j] = 0.0
            params["W0"][:, j] = 0.0
            for hook in hooks:  # as run_epochs does, with the epoch's objective
                hook.on_epoch_end(0.0)
        n_iter = max(len(leaving), 1)
        return TrainingResult(n_iter=n_iter, loss_curve=np.zeros((n_iter, 1)),
                              converged=True)

    monkeypatch.setattr(_fit, "train_epochs", fake)
    X, _ = make_blobs(200, centers=3, n_features=30, random_state=0)
    path = SparseGEMINI(3, lambda_start=9.5, n_features_stop=2, random_state=0).path(X)
    assert len(set(path.n_features[1:].tolist())) <= 3  # a cliff between steps
    assert set(range(30)) <= set(path.models)  # every count in between kept
    cascade = path.models[15]
    assert cascade["step"] == int(np.argmax(path.n_features < 30))
    assert cascade["epoch"] == 15


def _digits_600():
    X, y = load_digits(return_X_y=True)
    return X[:600].astype(np.float32), y[:600]


def test_relax_trains_the_selected_model_on_without_its_penalty():
    """relax=True (the relaxed lasso): the path and its selection are the same; the
    estimator's model is the selected one trained on, on its features only, to a
    higher GEMINI and a better agreement with the digits."""
    X, y = _digits_600()
    settings = {"hidden_layer_sizes": (64,), "dropout": 0.05, "n_features_stop": 16,
                "random_state": 0}
    plain, relaxed = SparseGEMINI(10, **settings), SparseGEMINI(10, relax=True, **settings)
    plain_path, path = plain.path(X), relaxed.path(X)

    np.testing.assert_array_equal(relaxed.get_support(), plain.get_support())
    assert path.selected == plain_path.selected
    np.testing.assert_array_equal(path.models[path.selected]["params"]["skip"],
                                  plain_path.models[plain_path.selected]["params"]["skip"])
    dropped = ~relaxed.get_support()
    assert not relaxed.params_["skip"][dropped].any()
    assert not relaxed.params_["W0"][dropped].any()
    # the relaxed epochs follow the selected model's own
    assert relaxed.n_iter_ > plain.n_iter_
    assert relaxed.loss_curve_.shape == (relaxed.n_iter_,)
    np.testing.assert_array_equal(relaxed.loss_curve_[: plain.n_iter_], plain.loss_curve_)
    assert fitted_gemini(relaxed, X) > fitted_gemini(plain, X)
    # measured: ARI 0.685 against 0.662, GEMINI 0.626 against 0.567
    assert adjusted_rand_score(y, relaxed.labels_) > adjusted_rand_score(y, plain.labels_)


def test_relax_after_a_penalised_fit_keeps_its_features():
    X, _ = _digits_600()
    plain = SparseGEMINI(10, alpha=0.5, random_state=0).fit(X)
    relaxed = SparseGEMINI(10, alpha=0.5, relax=True, random_state=0).fit(X)
    np.testing.assert_array_equal(relaxed.get_support(), plain.get_support())
    assert plain.get_support().sum() < X.shape[1]
    assert relaxed.n_iter_ > plain.n_iter_
    assert fitted_gemini(relaxed, X) > fitted_gemini(plain, X)


def test_predict_holds_one_block_of_hidden_activations_at_a_time():
    """predict_proba of 20,000 samples through 1,200 hidden units: the activations
    of every sample would take 190 MB (float64); inference keeps one block's."""
    import tracemalloc

    rng = np.random.default_rng(0)
    model = SparseGEMINI(5, hidden_layer_sizes=(1200,), max_iter=2, random_state=0)
    with pytest.warns(ConvergenceWarning):  # two epochs
        model.fit(rng.normal(size=(300, 20)))
    X = rng.normal(size=(20_000, 20))
    tracemalloc.start()
    try:
        proba = model.predict_proba(X)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert proba.shape == (20_000, model.n_clusters_)
    assert peak < 40 * 2**20

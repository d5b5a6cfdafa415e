"""SpanningForestClustering's training options on digits, the stand-in for MNIST:
images fed to a CNN in their shape, steps per epoch, weight decay, early stopping
on a validation split, labels -1 for unlabelled images."""

import warnings

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from torch import nn

from skdiffclust import SpanningForestClustering
from skdiffclust.metrics import batch_clustering_error

# expected: fits of a few epochs, to test other things quickly (the training
# contract's tests hold the warning itself), and fits without two labels (their
# tests say what then happens)
pytestmark = [
    pytest.mark.torch,
    pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning"),
    pytest.mark.filterwarnings("ignore:Fewer than two labelled samples:UserWarning"),
]


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    X = (X / 16).astype(np.float32)
    return X[:1200], y[:1200], X[1200:], y[1200:]


def _cnn(seed=0):
    """A small CNN on 1 x 8 x 8 images (no reshaping inside: it takes images)."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.MaxPool2d(2), nn.ReLU(),
                             nn.Flatten(), nn.Linear(128, 16))


def _fit(X, y, **params):
    settings = dict(embedding=_cnn(), learning_rate=3e-3, max_iter=6, steps_per_epoch=25,
                    device="cpu", random_state=0)
    settings.update(params)
    return SpanningForestClustering(10, **settings).fit(X, partial_labels=y)


def _images(X):
    return X.reshape(-1, 1, 8, 8)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_images_train_a_cnn_that_clusters_held_out_digits(digits):
    X, y, X_test, y_test = digits
    untrained = SpanningForestClustering(10, embedding=_cnn(), max_iter=0, device="cpu")
    before = batch_clustering_error(
        y_test, untrained.fit(_images(X)).transform(_images(X_test)), n_clusters=10)
    model = _fit(_images(X), y)
    embedded = model.transform(_images(X_test))
    assert embedded.shape == (X_test.shape[0], 16)
    after = batch_clustering_error(y_test, embedded, n_clusters=10)
    assert after < 0.5 * before
    assert model.n_features_in_ == 64
    # images or their flattened rows: the same embedding and labels
    np.testing.assert_allclose(model.transform(X_test), embedded)
    np.testing.assert_array_equal(model.predict(X_test), model.predict(_images(X_test)))


def test_images_of_another_shape_or_without_a_module_raise(digits):
    X, y, X_test, _ = digits
    model = _fit(_images(X), y, max_iter=1)
    with pytest.raises(ValueError, match="shape"):
        model.transform(X_test.reshape(-1, 1, 4, 16))
    with pytest.raises(ValueError, match="torch module"):
        SpanningForestClustering(10, embedding="mlp").fit(_images(X), partial_labels=y)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_steps_per_epoch_sets_the_length_of_an_epoch(digits, monkeypatch):
    from skdiffclust.forest import _embedding

    steps = []
    original = _embedding.PartialFenchelYoungTask.loss
    monkeypatch.setattr(_embedding.PartialFenchelYoungTask, "loss",
                        lambda self, batch: steps.append(1) or original(self, batch))
    X, y, _, _ = digits
    model = _fit(_images(X), y, max_iter=3, steps_per_epoch=7)
    assert model.n_iter_ == 3 and model.loss_curve_.shape == (3,)
    assert len(steps) == 21
    steps.clear()
    _fit(_images(X), y, max_iter=1, steps_per_epoch=None, batch_size=100)
    assert len(steps) == 12  # one pass: ceil(1200 / 100)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_weight_decay_shrinks_the_weights(digits):
    X, y, _, _ = digits
    norms = []
    for weight_decay in (0.0, 1.0):
        state = _fit(_images(X), y, weight_decay=weight_decay).embedding_state_
        norms.append(sum(float(np.square(v).sum()) for v in state.values()))
    assert norms[1] < 0.8 * norms[0]


def test_cosine_schedule_lowers_the_step_after_each_epoch(digits, monkeypatch):
    from skdiffclust._training import _torch as engine
    from skdiffclust.forest import _embedding

    optimizers, rates = [], []
    make_adam, loss = engine.adam, _embedding.PartialFenchelYoungTask.loss
    monkeypatch.setattr(engine, "adam", lambda *args, **kwargs: optimizers.append(
        make_adam(*args, **kwargs)) or optimizers[-1])
    monkeypatch.setattr(_embedding.PartialFenchelYoungTask, "loss", lambda self, batch: (
        rates.append(float(optimizers[-1].param_groups[0]["lr"])) or loss(self, batch)))
    X, y, _, _ = digits
    seen, warned = {}, {}
    for schedule in ("constant", "cosine"):
        rates.clear()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            _fit(_images(X), y, max_iter=4, steps_per_epoch=3, learning_rate=0.01,
                 learning_rate_schedule=schedule)
        warned[schedule] = any(issubclass(w.category, ConvergenceWarning) for w in caught)
        assert len(rates) == 12
        seen[schedule] = rates[::3]
        assert rates == [rate for rate in seen[schedule] for _ in range(3)]
    assert seen["constant"] == [0.01] * 4  # the paper's
    np.testing.assert_allclose(
        seen["cosine"], [0.005 * (1 + np.cos(np.pi * e / 4)) for e in range(4)])
    # the decay's end at max_iter is planned: only the constant step warns there
    assert warned == {"constant": True, "cosine": False}


def test_early_stopping_keeps_the_best_validation_epoch(digits, monkeypatch):
    X, y, _, _ = digits
    model = _fit(_images(X), y, early_stopping=True, max_iter=40, n_iter_no_change=3,
                 validation_fraction=0.2)
    scores = model.validation_scores_
    assert model.n_iter_ < 40  # stopped early: the validation error stopped improving
    assert scores.shape == (model.n_iter_,) and np.all((scores >= 0) & (scores <= 1))
    assert model.best_validation_score_ == scores.max()
    best = int(np.argmax(scores))
    assert model.n_iter_ - 1 - best >= 3  # patience counted in epochs
    assert scores.max() > 0.8
    # the kept weights are the best epoch's: refit with max_iter at that epoch
    again = _fit(_images(X), y, early_stopping=True, max_iter=best + 1,
                 n_iter_no_change=3, validation_fraction=0.2)
    for name, value in model.embedding_state_.items():
        np.testing.assert_array_equal(value, again.embedding_state_[name])


def test_early_stopping_holds_out_labelled_samples_only(digits, monkeypatch):
    from skdiffclust.forest import _fit as forest_fit

    X, y, _, _ = digits
    partial = np.where(np.arange(y.size) % 4 == 0, y, -1)
    seen = {}
    original = forest_fit.hold_out

    def spy(X, labels, fraction, seed):
        X_train, y_train, (X_val, y_val) = original(X, labels, fraction, seed)
        seen.update(train=y_train, val=y_val)
        return X_train, y_train, (X_val, y_val)

    monkeypatch.setattr(forest_fit, "hold_out", spy)
    model = _fit(_images(X), partial, early_stopping=True, max_iter=2,
                 validation_fraction=0.1)
    assert seen["val"].size == int(np.ceil(0.1 * 300)) and np.all(seen["val"] >= 0)
    assert seen["train"].size == y.size - seen["val"].size
    assert np.count_nonzero(seen["train"] == -1) == np.count_nonzero(partial == -1)
    assert model.labels_.shape == (y.size,)  # the final forest clusters every sample
    with pytest.raises(ValueError, match="validation_fraction"):
        _fit(_images(X), np.where(np.arange(y.size) < 3, y, -1), early_stopping=True)


def test_without_early_stopping_there_are_no_validation_scores(digits):
    X, y, _, _ = digits
    model = _fit(_images(X), y, max_iter=1)
    assert model.validation_scores_ is None and model.best_validation_score_ is None


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_unlabelled_images_and_withheld_classes(digits):
    """Semi-supervised, as in the paper's section 4.2: 100 labels, digits 0-2 never
    labelled; the clustering error of held-out digits falls by more than half."""
    X, y, X_test, y_test = digits
    rng = np.random.default_rng(0)
    partial = np.full(y.size, -1)
    chosen = rng.choice(np.flatnonzero(y >= 3), 100, replace=False)
    partial[chosen] = y[chosen]
    untrained = SpanningForestClustering(10, embedding=_cnn(), max_iter=0, device="cpu")
    before = batch_clustering_error(
        y_test, untrained.fit(_images(X)).transform(_images(X_test)), n_clusters=10)
    model = _fit(_images(X), partial, max_iter=8)
    error = batch_clustering_error(y_test, model.transform(_images(X_test)), n_clusters=10)
    assert error < 0.5 * before  # measured: 0.37 untrained, 0.14 trained

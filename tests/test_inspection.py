"""Display helpers of skdiffclust.inspection: the artists show the fitted data."""

import subprocess
import sys
import warnings

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.datasets import make_moons
from sklearn.exceptions import ConvergenceWarning, NotFittedError

from skdiffclust import SparseGEMINI, SpanningForestClustering
from skdiffclust.datasets import make_celeux_one
from skdiffclust.inspection import GeminiPathDisplay, SpanningForestDisplay

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
plt = pytest.importorskip("matplotlib.pyplot")


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def moons():
    X, y = make_moons(120, noise=0.05, random_state=0)
    partial = np.full_like(y, -1)
    partial[[0, 1, 2, 3]] = y[[0, 1, 2, 3]]
    return X, y, partial


@pytest.fixture(scope="module")
def gemini_path():
    X, _, _ = make_celeux_one(scenario=4, random_state=0)
    # the logistic model selects features with the paper's settings
    model = SparseGEMINI(n_clusters=3, hidden_layer_sizes=(), lambda_multiplier=1.3,
                         kernel="linear", learning_rate=0.01, tol=0.01, random_state=0)
    with warnings.catch_warnings():
        # how far each step trains is not what these tests draw
        warnings.simplefilter("ignore", ConvergenceWarning)
        path = model.path(X)
    return model, path


def test_forest_display_draws_one_segment_per_forest_edge(moons):
    X, _, partial = moons
    forest = SpanningForestClustering(n_clusters=3).fit(X, partial_labels=partial)
    display = SpanningForestDisplay.from_estimator(forest, X, partial)

    segments = display.edges_.get_segments()
    assert len(segments) == len(forest.forest_edges_) == X.shape[0] - 3
    for segment, (i, j) in zip(segments, forest.forest_edges_):
        np.testing.assert_array_equal(segment, X[[i, j]])
    np.testing.assert_array_equal(display.points_.get_offsets(), X)
    np.testing.assert_array_equal(display.points_.get_array(), forest.labels_)
    # tab10's first three colours, not spread over the whole colour map
    assert (display.points_.norm.vmin, display.points_.norm.vmax) == (0, 9)
    np.testing.assert_array_equal(display.labeled_.get_offsets(), X[partial != -1])
    assert display.ax_ is display.edges_.axes
    assert display.figure_ is display.ax_.figure


def test_forest_display_draws_on_given_axes_with_matplotlib_arguments(moons):
    X, _, _ = moons
    forest = SpanningForestClustering(n_clusters=2).fit(X)
    _, ax = plt.subplots()
    display = SpanningForestDisplay.from_estimator(
        forest, X, ax=ax, edge_kwargs={"colors": "red"}, scatter_kwargs={"cmap": "coolwarm"})
    assert display.ax_ is ax
    assert display.labeled_ is None
    np.testing.assert_allclose(display.edges_.get_colors(), [[1.0, 0.0, 0.0, 1.0]])
    assert display.points_.get_cmap().name == "coolwarm"
    # with another colour map, the two clusters take its two ends
    assert display.points_.norm.vmin == 0 and display.points_.norm.vmax == 1

    single = SpanningForestDisplay.from_estimator(forest, X, scatter_kwargs={"color": "k"})
    np.testing.assert_allclose(single.points_.get_facecolors(), [[0.0, 0.0, 0.0, 1.0]])


def test_forest_display_draws_a_projection_of_higher_dimensional_data():
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(0, 0.3, (30, 5)), rng.normal(3, 0.3, (30, 5))])
    forest = SpanningForestClustering(n_clusters=2).fit(X)
    display = SpanningForestDisplay.from_estimator(forest, X[:, :2])
    assert len(display.edges_.get_segments()) == 58


def test_forest_display_errors(moons):
    X, _, _ = moons
    with pytest.raises(NotFittedError):
        SpanningForestDisplay.from_estimator(SpanningForestClustering(), X)
    forest = SpanningForestClustering(n_clusters=2).fit(X)
    with pytest.raises(ValueError, match="2-D data"):
        SpanningForestDisplay.from_estimator(forest, np.hstack([X, X]))
    with pytest.raises(ValueError, match="one row per training sample"):
        SpanningForestDisplay.from_estimator(forest, X[:10])
    with pytest.raises(ValueError, match="partial_labels must give one partial label"):
        SpanningForestDisplay.from_estimator(forest, X, partial_labels=np.zeros(3))
    from sklearn.cluster import KMeans  # said to be not fitted before

    with pytest.raises(TypeError, match="SpanningForestClustering, got KMeans"):
        SpanningForestDisplay.from_estimator(KMeans(2, n_init=1).fit(X), X)


def test_gemini_path_display_lines_are_the_path(gemini_path):
    model, path = gemini_path
    display = GeminiPathDisplay.from_estimator(model)

    steps = path.lambdas > 0
    np.testing.assert_array_equal(display.n_features_line_.get_xdata(), path.lambdas[steps])
    np.testing.assert_array_equal(display.n_features_line_.get_ydata(), path.n_features[steps])
    np.testing.assert_array_equal(display.gemini_line_.get_xdata(), path.lambdas[steps])
    np.testing.assert_array_equal(display.gemini_line_.get_ydata(), path.gemini[steps])
    assert [ax.get_xscale() for ax in display.axes_] == ["log", "log"]
    assert display.figure_ is display.axes_[0].figure
    # the dense fit as a reference line
    assert display.dense_line_.get_ydata()[0] == path.gemini[0]


def test_gemini_path_display_marks_the_selected_model(gemini_path):
    model, path = gemini_path
    display = GeminiPathDisplay.from_estimator(model)

    selected = path.models[path.selected]
    assert display.selected_n_features == model.get_support().sum() == path.selected
    features_marker, gemini_marker = display.selected_markers_
    assert features_marker.get_ydata()[0] == path.selected
    assert gemini_marker.get_ydata()[0] == selected["gemini"]
    assert features_marker.get_xdata()[0] == gemini_marker.get_xdata()[0] == selected["lambda"]
    best = max(entry["gemini"] for entry in path.models.values())
    assert display.threshold_line_.get_ydata()[0] == pytest.approx(
        model.selection_threshold * best)
    assert selected["gemini"] >= display.gemini_threshold


def test_gemini_path_display_from_path_on_given_axes(gemini_path):
    _, path = gemini_path
    fig, axes = plt.subplots(1, 2)
    display = GeminiPathDisplay.from_path(path, ax=axes, line_kwargs={"color": "green"})
    assert list(display.axes_) == list(axes)
    assert display.threshold_line_ is None
    assert display.gemini_line_.get_color() == "green"


def test_gemini_path_display_marks_a_selected_dense_model_at_the_smallest_penalty():
    display = GeminiPathDisplay(
        np.array([0.0, 1.0, 1.1]), np.array([4, 4, 2]), np.array([1.0, 0.9, 0.2]),
        selected_lambda=0.0, selected_n_features=4, selected_gemini=1.0,
    ).plot()
    assert [marker.get_xdata()[0] for marker in display.selected_markers_] == [1.0, 1.0]
    assert display.selected_markers_[1].get_ydata()[0] == 1.0


def test_gemini_path_display_errors(gemini_path):
    X, _, _ = make_celeux_one(scenario=4, random_state=0)
    with pytest.raises(NotFittedError):
        GeminiPathDisplay.from_estimator(SparseGEMINI())
    fitted = SparseGEMINI(n_clusters=3, random_state=0).fit(X)
    with pytest.raises(ValueError, match="path"):
        GeminiPathDisplay.from_estimator(fitted)
    with pytest.raises(TypeError, match="SparseGEMINI fitted by path"):
        GeminiPathDisplay.from_estimator(KMeans(2, n_init=1).fit(X))  # "fit it with path"
    with pytest.raises(TypeError, match="GeminiPath"):
        GeminiPathDisplay.from_path({"lambdas": [1.0]})
    _, path = gemini_path
    with pytest.raises(ValueError, match="two Axes"):
        GeminiPathDisplay.from_path(path, ax=plt.subplots()[1])


def test_displays_without_matplotlib_raise_a_clear_import_error(moons, monkeypatch):
    X, _, _ = moons
    forest = SpanningForestClustering(n_clusters=2).fit(X)
    for name in [name for name in sys.modules if name.startswith("matplotlib")]:
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ImportError, match="needs matplotlib"):
        SpanningForestDisplay.from_estimator(forest, X)


def test_importing_the_module_does_not_import_matplotlib():
    out = subprocess.run(
        [sys.executable, "-c",
         "import sys, skdiffclust, skdiffclust.inspection; print('matplotlib' in sys.modules)"],
        capture_output=True, text=True, check=True,
    ).stdout
    assert out.split() == ["False"]

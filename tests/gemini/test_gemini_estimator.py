"""SparseGEMINI: feature selection along the path, fit, selector API, degenerate input."""

import pickle
import sys

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, make_blobs
from sklearn.metrics import adjusted_rand_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skdiffclust import SparseGEMINI
from skdiffclust.datasets import make_celeux_one, make_celeux_two
from skdiffclust.gemini._fit import fitted_gemini


def test_scenario_5_path_keeps_the_informative_features():
    exact, scores = [], []
    for seed in range(3):
        X, y, informative = make_celeux_one(5, random_state=1000 + seed)
        model = SparseGEMINI(n_clusters=3, random_state=seed)
        path = model.path(X)
        exact.append(np.array_equal(model.get_support(), informative))
        scores.append(adjusted_rand_score(y, model.labels_))
        assert path.selected == model.get_support().sum()
        assert path.n_features[0] == 100 and path.lambdas[0] == 0.0
        assert np.all(np.diff(path.lambdas[1:]) > 0)
    assert sum(exact) >= 2
    assert np.mean(scores) >= 0.75


def test_path_records_and_exit_lambdas_are_consistent():
    X, _, informative = make_celeux_one(4, random_state=0)
    model = SparseGEMINI(n_clusters=3, random_state=0)
    path = model.path(X)
    assert model.path_ is path
    assert path.masks.shape == (len(path.lambdas), X.shape[1])
    np.testing.assert_array_equal(path.masks.sum(axis=1), path.n_features)
    assert np.all(np.diff(path.n_features) <= 0)  # features never come back
    exits = model.feature_exit_lambdas_
    assert np.all(np.isinf(exits[path.masks[-1]]))
    assert np.all(np.isfinite(exits[~path.masks[-1]]))
    # informative features leave last
    assert exits[informative].min() >= np.median(exits[~informative])
    for count, entry in path.models.items():
        assert int((np.linalg.norm(entry["params"]["skip"], axis=1) > 0).sum()) == count
    # a REPL shows a summary, not every kept model's weights (thousands of lines)
    assert repr(path) == (f"GeminiPath({path.lambdas.size} steps, features "
                          f"{X.shape[1]} -> {path.n_features[-1]}, {len(path.models)} models "
                          f"kept, the selected one on {path.selected} features)")


def test_a_constant_feature_exits_the_path_first():
    # it was never selected, yet its exit lambda was inf ("still selected when the
    # path stopped"), ranking it above every informative feature (issue 45)
    X, _ = make_blobs(200, n_features=4, centers=3, random_state=0)
    X = np.c_[X, np.full(200, 5.0)]
    model = SparseGEMINI(n_clusters=3, lambda_multiplier=1.3, random_state=0)
    path = model.path(X)
    exits = model.feature_exit_lambdas_
    assert not path.masks[:, 4].any()
    assert exits[4] == 0.0 and np.all(exits[:4] > 0)
    assert np.argsort(-exits, kind="stable")[-1] == 4  # ranked last


def test_path_keeps_the_models_met_within_a_step():
    # as in the paper (section 4.1), a model is kept each time the number of
    # features changes during training, not only where a step ends; a coarse
    # penalty grid makes several features leave within a step
    X, _, _ = make_celeux_one(4, random_state=0)
    model = SparseGEMINI(n_clusters=3, random_state=0, lambda_multiplier=1.5)
    path = model.path(X)
    assert set(path.models) - set(path.n_features.tolist())  # met within a step
    for entry in path.models.values():
        assert 1 <= entry["epoch"] <= path.n_epochs[entry["step"]]
    kept = path.models[path.selected]
    # the selected model's epochs: the steps before its own, then its own up to it
    assert model.n_iter_ == path.n_epochs[: kept["step"]].sum() + kept["epoch"]
    assert model.loss_curve_.shape == (model.n_iter_,)


def test_logistic_model_selects_features_too():
    # the logistic path with the paper's linear kernel, step and tolerance (a dense
    # logistic model trained further uses the noise features to raise its GEMINI,
    # and the 90% rule then keeps them: see the user guide)
    X, y, informative = make_celeux_one(4, random_state=3)
    model = SparseGEMINI(n_clusters=3, hidden_layer_sizes=(), kernel="linear",
                         learning_rate=0.01, tol=0.01, random_state=0)
    model.path(X)
    np.testing.assert_array_equal(model.get_support(), informative)
    assert adjusted_rand_score(y, model.labels_) > 0.55


def test_wasserstein_path_on_a_small_problem():
    X, y, informative = make_celeux_one(2, random_state=0)
    model = SparseGEMINI(n_clusters=3, gemini="wasserstein_ovo", random_state=0,
                         n_features_stop=5)
    path = model.path(X)
    assert path.n_features[-1] <= 5
    assert np.all(np.isfinite(path.gemini))


def test_dense_fit_clusters_blobs_and_keeps_every_feature():
    X, y = make_blobs(n_samples=150, centers=3, n_features=4, random_state=0)
    model = SparseGEMINI(n_clusters=3, random_state=0).fit(X)
    assert adjusted_rand_score(y, model.labels_) > 0.9
    assert model.get_support().all()
    np.testing.assert_array_equal(model.predict(X), model.labels_)
    proba = model.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert model.n_iter_ >= 1


def test_alpha_removes_features_in_fit():
    X, _, informative = make_celeux_one(4, random_state=0)
    dense = SparseGEMINI(n_clusters=3, random_state=0).fit(X)
    sparse = SparseGEMINI(n_clusters=3, alpha=100.0, random_state=0).fit(X)
    assert sparse.get_support().sum() < dense.get_support().sum()
    assert sparse.get_support()[informative].all()
    assert sparse.transform(X).shape == (X.shape[0], sparse.get_support().sum())


def test_groups_leave_together():
    X, _, _ = make_celeux_two(n_samples=300, random_state=0)
    groups = np.repeat(np.arange(7), 2)
    model = SparseGEMINI(n_clusters=4, groups=groups, random_state=0, n_features_stop=4)
    path = model.path(X)
    for mask in path.masks:
        assert np.all(mask[0::2] == mask[1::2])


def test_same_random_state_same_result():
    X, _, _ = make_celeux_one(4, random_state=0)
    a = SparseGEMINI(n_clusters=3, random_state=5).fit(X)
    b = SparseGEMINI(n_clusters=3, random_state=5).fit(X)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    for name in a.params_:
        np.testing.assert_array_equal(a.params_[name], b.params_[name])


def test_pipeline_and_pickle():
    X, y = load_breast_cancer(return_X_y=True)
    pipe = make_pipeline(StandardScaler(), SparseGEMINI(n_clusters=2, random_state=0)).fit(X)
    clone = pickle.loads(pickle.dumps(pipe))
    np.testing.assert_array_equal(clone.predict(X), pipe.predict(X))
    assert adjusted_rand_score(y, pipe[-1].labels_) > 0.5


def test_labels_have_no_gaps_when_a_cluster_is_empty():
    X, _ = make_blobs(n_samples=60, centers=2, random_state=0)
    # the paper's random start, without re-seeding, leaves clusters empty
    model = SparseGEMINI(n_clusters=5, init="random", n_init=1, kernel="linear",
                         reseed_empty_clusters=False, tol=0.01, learning_rate=0.01,
                         max_iter=100, random_state=0)
    with pytest.warns(UserWarning, match="non-empty clusters of the n_clusters=5"):
        model.fit(X)
    assert model.n_clusters_ < 5
    np.testing.assert_array_equal(np.unique(model.labels_), np.arange(model.n_clusters_))
    np.testing.assert_array_equal(model.predict(X), model.labels_)


@pytest.mark.parametrize("gemini", ["mmd_ova", "mmd_ovo", "wasserstein_ova", "mi"])
def test_degenerate_data_gives_finite_weights(gemini):
    X = np.ones((20, 3))  # identical samples: every MMD is sqrt(0)
    X[:, 1] = 0.0  # and a constant feature
    model = SparseGEMINI(n_clusters=2, gemini=gemini, max_iter=20, random_state=0)
    with pytest.warns(UserWarning, match="found 1 non-empty clusters"):  # all alike
        model.fit(X)
    assert all(np.all(np.isfinite(v)) for v in model.params_.values())
    assert model.n_clusters_ == 1


def test_bad_input_raises():
    with pytest.raises(ValueError, match="n_clusters"):
        SparseGEMINI(n_clusters=5).fit(np.random.default_rng(0).standard_normal((3, 2)))
    X = np.random.default_rng(0).standard_normal((10, 2))
    X[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        SparseGEMINI().fit(X)
    with pytest.raises(ValueError, match="groups"):
        SparseGEMINI(groups=[0, 1, 2]).fit(np.zeros((10, 2)) + np.arange(10)[:, None])
    with pytest.raises(ValueError, match="gemini"):
        SparseGEMINI(gemini="nope").fit(np.zeros((10, 2)))


@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
def test_dense_and_csr_rows_meet_the_same_nystroem_landmarks(kernel):
    # the landmarks were in the frame of the fit's container (centred for dense
    # rows, not for CSR): scoring the other container gave 0.195 where 0.264
    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    X = np.abs(np.where(rng.random((240, 6)) < 0.5, 0.0, rng.standard_normal((240, 6)))) + 1
    X[:, 5] = 2.0  # a constant feature, which the kernel does not see
    for fitted_on in (X, sp.csr_matrix(X)):
        model = SparseGEMINI(n_clusters=3, kernel=kernel, random_state=0).fit(fitted_on)
        assert fitted_gemini(model, sp.csr_matrix(X)) == pytest.approx(
            fitted_gemini(model, X), rel=1e-9)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # 5 epochs
def test_score_reads_the_fits_gemini_not_one_set_since():
    X = np.random.default_rng(0).standard_normal((60, 3))
    model = SparseGEMINI(n_clusters=2, max_iter=5, random_state=0).fit(X)
    before = model.score(X)
    assert model.set_params(gemini="mi").score(X) == before


@pytest.mark.parametrize("kernel, params, takes", [
    ("rbf", {"gama": 100.0}, "gamma"), ("linear", {"gamma": 1.0}, "none")])
def test_kernel_params_the_kernel_does_not_take_are_refused(kernel, params, takes):
    # scikit-learn's kernels drop them silently: the misspelt gamma fitted the default
    X = np.random.default_rng(0).standard_normal((30, 2))
    with pytest.raises(ValueError, match=f"kernel_params has .*takes: {takes}"):
        SparseGEMINI(kernel=kernel, kernel_params=params).fit(X)


def test_runs_without_torch():
    import subprocess

    code = (
        "import sys\n"
        "from skdiffclust import SparseGEMINI\n"
        "from skdiffclust.datasets import make_celeux_one\n"
        "X, y, _ = make_celeux_one(4, random_state=0)\n"
        "model = SparseGEMINI(random_state=0, max_iter=10)\n"
        "model.fit(X)\n"
        "model.path(X)\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("gamma", [-1.0, 0.0, "x", np.inf])
def test_a_gamma_that_makes_no_kernel_is_refused(gamma):
    # -1 fitted exp(+|x - y|^2) without a word; 'x' failed inside scikit-learn
    X = np.random.default_rng(0).standard_normal((30, 2))
    with pytest.raises(ValueError, match="gamma.*must be a positive number"):
        SparseGEMINI(kernel_params={"gamma": gamma}).fit(X)


@pytest.mark.parametrize("degree", [2.5, 0, -2, "3", True])
def test_a_polynomial_degree_that_is_not_a_whole_number_is_refused(degree):
    # 2.5 raised negative <x, y> + 1 to a fractional power: NaN, and NumPy's
    # "SVD did not converge" from the Nystrom features
    X = np.random.default_rng(0).standard_normal((30, 2))
    with pytest.raises(ValueError, match=r"kernel_params\['degree'\] must be a whole number"):
        SparseGEMINI(kernel="poly", kernel_params={"degree": degree}).fit(X)


def test_a_whole_polynomial_degree_given_as_a_float_is_the_integer_degree():
    X, y = make_blobs(90, 2, centers=3, random_state=0)
    fits = [SparseGEMINI(n_clusters=3, kernel="poly", kernel_params={"degree": degree},
                         random_state=0).fit(X) for degree in (2, 2.0)]
    np.testing.assert_array_equal(fits[0].labels_, fits[1].labels_)
    assert adjusted_rand_score(y, fits[0].labels_) > 0.7


def _nan(a, b):
    return np.nan


def _negative(a, b):
    return -1.0


def _distance(a, b):
    return float(np.linalg.norm(a - b))


@pytest.mark.parametrize("params, match", [
    # NumPy's "SVD did not converge" (the Nystrom landmarks), LAPACK's complaints
    (dict(kernel=_nan), "kernel=.*gives NaN or infinite values"),
    (dict(kernel=_nan, n_kernel_features=None), "kernel=.*gives NaN or infinite values"),
    # the transport solver's "Problem unbounded" warnings, then labels
    (dict(gemini="wasserstein_ovo", metric=_nan), "metric=.*gives NaN or infinite values"),
    (dict(gemini="wasserstein_ovo", metric=_negative), "metric=.*gives negative distances"),
    # fitted silently: a distance as a kernel, a constant kernel (every MMD 0)
    (dict(kernel=_distance), "kernel=.*is not a kernel that tells these data apart"),
    (dict(kernel=_distance, n_kernel_features=None), "is not a kernel that tells"),
    (dict(kernel=_negative), "mean diagonal entry \\(-1\\) is not above its mean entry"),
    # NaN entries made one group
    (dict(groups=[0.0, np.nan]), "groups contains NaN"),
])
def test_a_callable_geometry_that_gives_no_usable_values_is_refused(params, match):
    X, _ = make_blobs(60, 2, centers=3, random_state=0)
    model = SparseGEMINI(n_clusters=3, random_state=0, max_iter=5).fit(X)
    labels = model.labels_.copy()
    with pytest.raises(ValueError, match=match):
        model.set_params(**params).fit(X)
    np.testing.assert_array_equal(model.labels_, labels)  # the earlier fit kept


def test_the_mutual_information_trains_float32_data_of_confident_clusters():
    # its floor of 1e-300 underflowed to 0 in float32: log(0) times 0 gave NaN, and
    # the fit stopped with "training diverged" where float64 data fitted
    X, _ = make_blobs(100, n_features=3, centers=2, cluster_std=0.1, random_state=0)
    fits = [SparseGEMINI(n_clusters=3, gemini="mi", max_iter=10, random_state=0)
            .fit(X.astype(dtype)) for dtype in (np.float64, np.float32)]
    np.testing.assert_array_equal(fits[1].labels_, fits[0].labels_)
    assert np.isfinite(fits[1].loss_curve_).all()

"""scikit-learn conventions across the estimators.

Transformers name their output features and follow ``set_output``; float32 in
gives float32 out; every estimator with an objective has ``score`` (higher is
better), so that GridSearchCV needs no scorer; ``n_jobs`` where work runs in
parallel; sparse CSR input where the method allows it, a clear error elsewhere;
partial labels and must-link pairs are validated.
"""

import inspect
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_digits, make_blobs
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import adjusted_rand_score
from sklearn.model_selection import GridSearchCV
from sklearn.utils._param_validation import StrOptions

from skdiffclust import SpanningForestClustering
from tests._estimators import each

X, Y = make_blobs(n_samples=120, n_features=4, centers=3, random_state=0)
PARTIAL = np.where(np.arange(120) % 4 == 0, Y, -1)

# this module's own settings: a penalty that drops features, so that transform
# keeps some
OWN = {"SparseGEMINI": dict(alpha=5.0)}


def _quiet_fit(estimator, X, fit_params=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return estimator.fit(X, **(fit_params or {}))


def _make(entry):
    return entry.make(n_clusters=3, **OWN.get(entry.name, {}))


def _transformer(entry):
    """As it trains (the forest: its learned embedding), fitted with ``_y(entry)``."""
    return entry.make_trained(n_clusters=3, **OWN.get(entry.name, {}))


def _y(entry):
    """fit's partial labels, for an estimator whose training learns from them."""
    return entry.label_params(PARTIAL)


def _takes_sparse(entry):
    return entry.estimator().__sklearn_tags__().input_tags.sparse


TRANSFORMERS = each(lambda entry: hasattr(entry.estimator, "transform"), trained=True)
ALL = each()


@pytest.mark.parametrize("entry", TRANSFORMERS)
def test_transformers_name_their_output_features(entry):
    estimator = _quiet_fit(_transformer(entry), entry.as_input(X), _y(entry))
    names = estimator.get_feature_names_out()
    out = estimator.transform(entry.as_input(X))
    assert names.dtype == object and len(names) == out.shape[1]
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("entry", TRANSFORMERS)
def test_transformers_follow_set_output(entry):
    pandas = pytest.importorskip("pandas")
    import pandas as pd

    frame = entry.as_input(pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])]))
    estimator = _transformer(entry).set_output(transform="pandas")
    _quiet_fit(estimator, frame, _y(entry))
    out = estimator.transform(frame)
    assert isinstance(out, pandas.DataFrame)
    np.testing.assert_array_equal(out.columns, estimator.get_feature_names_out())


@pytest.mark.parametrize("entry", TRANSFORMERS)
def test_float32_in_float32_out(entry):
    data = entry.as_input(X)
    estimator = _quiet_fit(_transformer(entry), data.astype(np.float32), _y(entry))
    assert estimator.transform(data.astype(np.float32)).dtype == np.float32
    assert estimator.transform(data).dtype == np.float64


# expected: the search tries n_clusters=2 and 3 on half the samples, where a
# penalised SparseGEMINI may leave a cluster empty and PRCut's graph have more
# components than clusters
@pytest.mark.filterwarnings("ignore:.*non-empty clusters:UserWarning")
@pytest.mark.filterwarnings("ignore:The affinity graph has:UserWarning")
@pytest.mark.parametrize("entry", ALL)
def test_score_is_a_finite_float_and_grid_search_needs_no_scorer(entry):
    data = entry.as_input(X)
    estimator = _quiet_fit(_make(entry), data)
    score = estimator.score(data)
    assert isinstance(score, float) and np.isfinite(score)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        search = GridSearchCV(_make(entry), {"n_clusters": [2, 3]}, cv=2).fit(data)
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()


@pytest.mark.filterwarnings("ignore:.*non-empty clusters:UserWarning")
@pytest.mark.filterwarnings("ignore:The affinity graph has:UserWarning")
@pytest.mark.parametrize("entry", ALL)
def test_grid_search_over_n_clusters_without_a_scorer_chooses_the_blobs(entry):
    # score compares fits with different numbers of clusters (a silhouette, a
    # modularity, the forest's gap), not the objective, which more (or fewer)
    # clusters always improve
    if entry.images:  # four digits
        digits = load_digits()
        data = digits.images[digits.target < 4][:400]
    else:
        data, _ = make_blobs(n_samples=240, n_features=4, centers=4, cluster_std=0.5,
                             random_state=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        search = GridSearchCV(entry.make(random_state=0), {"n_clusters": [2, 4, 7]},
                              cv=2).fit(data)
    assert search.best_params_ == {"n_clusters": 4}


@pytest.mark.parametrize("entry", ALL)
def test_n_jobs_changes_nothing_but_the_threads(entry):
    assert "n_jobs" in _make(entry).get_params()
    one = _quiet_fit(_make(entry).set_params(n_jobs=1), entry.as_input(X)).labels_
    two = _quiet_fit(_make(entry).set_params(n_jobs=2), entry.as_input(X)).labels_
    np.testing.assert_array_equal(one, two)


@pytest.mark.parametrize("entry", ALL)
def test_n_jobs_none_follows_scikit_learns_glossary_in_every_estimator(entry, monkeypatch):
    # one meaning of n_jobs=None in the five estimators, said in the same words:
    # scikit-learn's glossary, 1 unless in a joblib.parallel_config context (which
    # then sets it); the paths ask host_threads, none turns None into every core
    import joblib

    from skdiffclust._utils import _threads

    asked = []

    def spy(n_jobs):
        asked.append(n_jobs)
        return joblib.effective_n_jobs(n_jobs)

    monkeypatch.setattr(_threads, "effective_n_jobs", spy)
    with joblib.parallel_config(n_jobs=2):
        _quiet_fit(_make(entry).set_params(n_jobs=None), entry.as_input(X), _y(entry))
    assert None in asked and -1 not in asked, asked
    described = entry.estimator.__doc__.split("n_jobs : int, default=None")[1]
    assert ("``None`` means 1 unless in a ``joblib.parallel_config`` context, ``-1`` "
            "every core (:term:`n_jobs`)") in " ".join(described.split()[:80])


@pytest.mark.parametrize("entry", ALL)
@pytest.mark.parametrize("n_jobs", [0, True, 1.0])
def test_n_jobs_that_is_no_number_of_threads_is_refused_by_name(entry, n_jobs):
    # n_jobs=0 failed inside joblib ("n_jobs == 0 in Parallel has no meaning"),
    # except in PRCut's neighbour search
    with pytest.raises(ValueError, match=r"'n_jobs' parameter .* Got (0|True|1.0) instead"):
        _make(entry).set_params(n_jobs=n_jobs).fit(entry.as_input(X))


CONVENTIONS_PAGE = Path(__file__).resolve().parents[1] / "doc" / "user_guide" / "conventions.rst"


def conventions_table():
    """The conventions page's table of methods: each estimator's name and the
    optional methods its row names (a cell of ``--``: not there)."""
    lines = CONVENTIONS_PAGE.read_text(encoding="utf-8").split(
        "Methods and fitted attributes")[1].splitlines()
    rules = [i for i, line in enumerate(lines) if line.startswith("=====")]
    spans = [(m.start(), m.end()) for m in re.finditer(r"=+", lines[rules[0]])]
    header = [lines[rules[0] + 1][a:b].strip().strip("`") for a, b in spans]
    rows = {}
    for line in lines[rules[1] + 1:rules[2]]:
        cells = [line[a:b].strip() for a, b in spans]
        if cells[0]:  # a row's first line names its estimator
            name = cells[0]
            rows[name] = {header[i] for i, cell in enumerate(cells) if cell and cell != "--"}
        else:
            rows[name] |= {header[i] for i, cell in enumerate(cells) if cell}
    return rows


@pytest.mark.parametrize("entry", ALL)
def test_the_conventions_table_holds(entry):
    # doc/user_guide/conventions.rst: labels_, n_clusters_ and score everywhere,
    # the optional methods where its table's row for the estimator says so
    table = conventions_table()
    assert entry.name in table, f"{CONVENTIONS_PAGE.name}'s table has no row for {entry.name}"
    optional = {"predict_proba", "transform", "partial_fit"}
    assert ({name for name in optional if hasattr(entry.estimator, name)}
            == table[entry.name] & optional)
    model = _quiet_fit(_make(entry), entry.as_input(X), _y(entry))
    assert 1 <= model.n_clusters_ <= 3 and model.labels_.shape == (X.shape[0],)
    assert np.unique(model.labels_).size == model.n_clusters_
    assert isinstance(model.score(entry.as_input(X)), float)


@pytest.mark.parametrize("entry", ALL)
def test_former_parameter_names_are_refused_with_the_new_name(entry):
    # parameters renamed so that none means something else than scikit-learn's
    # parameter of the same name (SpectralClustering's gamma is an RBF width)
    for former, new in getattr(entry.estimator, "_renamed_parameters", {}).items():
        for call in (lambda: entry.estimator(**{former: 1.0}),
                     lambda: entry.make().set_params(**{former: 1.0})):
            with pytest.raises(TypeError, match=f"'{former}' is now named '{new}'"):
                call()
        assert new in entry.make().get_params()
    with pytest.raises(TypeError, match="unexpected keyword argument 'no_such'"):
        entry.estimator(no_such=1)


def _parameter_entry(estimator, name):
    """The text of parameter ``name``'s entry in the estimator's docstring."""
    doc = inspect.getdoc(estimator)
    found = re.search(rf"^{re.escape(name)} : .*?(?=^\w[\w, ]* : |^\w+\n-+$|\Z)", doc,
                      re.S | re.M)
    return found.group() if found else ""


# option lists too long to spell out, which the entry names by their source
LISTED_ELSEWHERE = ("pairwise_distances", "pairwise_kernels")


@pytest.mark.parametrize("entry", ALL)
def test_every_parameter_is_validated_and_its_options_documented(entry):
    # a parameter without a constraint was accepted with any value, and an option
    # left out of the docstring passed numpydoc's checks
    estimator = entry.estimator
    parameters = set(entry.make().get_params(deep=False))
    constrained = set(estimator._parameter_constraints)
    assert parameters == constrained, (
        f"{entry.name}: parameters without an entry in _parameter_constraints: "
        f"{sorted(parameters - constrained)}; entries of no parameter: "
        f"{sorted(constrained - parameters)}")
    for name, constraints in estimator._parameter_constraints.items():
        text = _parameter_entry(estimator, name)
        assert text, f"{entry.name}'s docstring has no entry for {name}"
        options = {option for constraint in constraints
                   if isinstance(constraint, StrOptions) for option in constraint.options}
        if any(source in text for source in LISTED_ELSEWHERE):
            continue
        undocumented = sorted(option for option in options if f"'{option}'" not in text)
        assert not undocumented, (
            f"{entry.name}'s docstring entry for {name} does not name {undocumented}")


def _outputs(model, data):
    """What a fitted model says of data: labels, probabilities, features, score."""
    return [getattr(model, method)(data) for method in
            ("predict", "predict_proba", "transform", "score") if hasattr(model, method)]


# of the digits, those an estimator that reads images is fitted on (its graph's
# features, neighbour search and spectral start, and the network's forward pass in
# NumPy, on 1 and 2 threads)
IMAGES_OF_DIGITS = 400


@pytest.mark.parametrize("entry", ALL)
def test_n_jobs_and_blas_threads_change_no_bit_on_the_digits(entry):
    # torch's and OpenBLAS's products round otherwise on other numbers of threads
    # (OpenBLAS: a 1,797 x 64 by 64 x 10 product already): PRCut's mini-batch
    # training and SparseGEMINI's landmarks and MMD differed with n_jobs=2, PRCut's
    # predict_proba with the machine's BLAS threads
    from threadpoolctl import threadpool_limits

    digits = entry.as_input(load_digits().data)  # images of 8 x 8 pixels
    if entry.images:  # a network's fit: seconds per thousand images
        digits = digits[:IMAGES_OF_DIGITS]
    fits, outputs = [], []
    for threads in (1, 2):
        with threadpool_limits(threads, user_api="blas"):
            fits.append(_quiet_fit(entry.make(n_clusters=10, n_jobs=threads), digits))
            outputs.append(_outputs(fits[-1], digits))
    for name, value in vars(fits[0]).items():
        if name.endswith("_") and isinstance(value, np.ndarray):
            np.testing.assert_array_equal(value, getattr(fits[1], name), err_msg=name)
    for one, two in zip(*outputs):
        np.testing.assert_array_equal(one, two)


@pytest.mark.parametrize("entry", ALL)
def test_the_users_openmp_threads_change_no_fitted_bit(entry):
    # SparseGEMINI's k-means start ran on every OpenMP thread: its last bits
    # hung on the machine's cores, OMP_NUM_THREADS or torch.set_num_threads
    from threadpoolctl import threadpool_limits

    data = entry.as_input(
        make_blobs(400, n_features=4, centers=3, cluster_std=2.0, random_state=0)[0])
    fits = []
    for threads in (1, 2):
        with threadpool_limits(threads, user_api="openmp"):
            fits.append(_quiet_fit(_make(entry), data))
    for name, value in vars(fits[0]).items():
        if name.endswith("_") and isinstance(value, np.ndarray):
            np.testing.assert_array_equal(value, getattr(fits[1], name), err_msg=name)


@pytest.mark.parametrize("entry", each(_takes_sparse))
def test_sparse_csr_features_give_the_dense_partition(entry):
    dense = _quiet_fit(_make(entry), X)
    sparse = _quiet_fit(_make(entry), sp.csr_matrix(X))
    assert adjusted_rand_score(dense.labels_, sparse.labels_) == 1.0
    # what scikit-learn's sparse checks cannot test on a clusterer with predict_proba
    np.testing.assert_allclose(sparse.predict_proba(sp.csr_matrix(X)),
                               sparse.predict_proba(X), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("entry", each(lambda entry: not _takes_sparse(entry)))
def test_estimators_without_sparse_input_reject_it_clearly(entry):
    with pytest.raises(TypeError, match="[Ss]parse"):
        _make(entry).fit(entry.as_input(sp.csr_matrix(X)))


@pytest.mark.parametrize("bad", [-2, -5])
def test_partial_labels_only_use_minus_one_for_unlabelled(bad):
    y = PARTIAL.copy()
    y[1] = bad
    with pytest.raises(ValueError, match="partial_labels contains the negative label.*-1"):
        SpanningForestClustering(n_clusters=3).fit(X, partial_labels=y)


@pytest.mark.parametrize("pairs", ["must_link", "cannot_link"])
def test_self_pairs_are_rejected(pairs):
    with pytest.raises(ValueError, match="itself"):
        SpanningForestClustering(n_clusters=3).fit(X, **{pairs: [(0, 1), (4, 4)]})


@pytest.mark.parametrize("entry", ALL)
def test_fit_ignores_y(entry):
    # as scikit-learn's clusterers: cross-validation passes the true labels as y
    # (the forest's partial labels are fit's partial_labels)
    def fit(*y):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            labels = _make(entry).fit(entry.as_input(X), *y).labels_
        ignored = [w for w in caught if "y is ignored" in str(w.message)]
        return labels, ignored

    plain, _ = fit()
    rng = np.random.default_rng(0)
    for y in (Y, rng.integers(0, 7, X.shape[0]), rng.normal(size=X.shape[0]), PARTIAL):
        labels, ignored = fit(y)
        np.testing.assert_array_equal(labels, plain)
        # a y holding -1 (the forest's former partial labels) says where they go now
        said = entry.name == "SpanningForestClustering" and y is PARTIAL
        assert [str(w.message).count("partial_labels=") for w in ignored] == [1] * said

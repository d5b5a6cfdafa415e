"""Must-link / cannot-link constraints: parsing, exactness, satisfaction."""

import itertools
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st

from skdiffclust import SpanningForestClustering, constraints_from_labels, spanning_forest
from skdiffclust.exceptions import InfeasibleConstraintsWarning
from skdiffclust.forest._constraints import Constraints


def test_must_links_are_closed_transitively_and_cannot_links_lifted():
    c = Constraints.from_pairs(6, must_link=[[0, 1], [1, 2]], cannot_link=[[2, 4]])
    assert c.group[0] == c.group[1] == c.group[2] >= 0
    assert c.group[3] == c.group[5] == -1
    assert c.conflict[c.group[0], c.group[4]] and c.conflict[c.group[4], c.group[0]]


@pytest.mark.parametrize("must_link,cannot_link", [
    ([[0, 1], [1, 2]], [[0, 2]]),
    ([], [[3, 3]]),
    ([[0, 1]], [[1, 0]]),
])
def test_contradictory_constraints_raise(must_link, cannot_link):
    X = np.random.default_rng(0).standard_normal((5, 2))
    with pytest.raises(ValueError, match="Contradictory constraints"):
        SpanningForestClustering(n_clusters=2).fit(
            X, must_link=must_link, cannot_link=cannot_link
        )


def test_fit_predict_takes_the_partial_labels_and_pairs_as_fit_does():
    X = np.array([[0.0, 0.0], [0.1, 0.0], [5.0, 5.0], [5.1, 5.0], [9.0, 0.0]])
    y = np.array([0, 1, -1, -1, -1])
    model = SpanningForestClustering(n_clusters=3)
    labels = model.fit_predict(X, partial_labels=y)
    np.testing.assert_array_equal(labels, model.fit(X, partial_labels=y).labels_)
    assert labels[0] != labels[1]
    np.testing.assert_array_equal(model.fit_predict(X, cannot_link=[[0, 1]]),
                                  model.fit(X, cannot_link=[[0, 1]]).labels_)


@given(st.lists(st.integers(-1, 4), min_size=1, max_size=30))
def test_checked_labels_build_the_constraints_of_the_checked_path(labels):
    y = np.array(labels, dtype=np.int64)
    fast, checked = Constraints.from_checked_labels(y), Constraints.from_labels(y, y.size)
    np.testing.assert_array_equal(fast.group, checked.group)
    np.testing.assert_array_equal(fast.apart, checked.apart)
    np.testing.assert_array_equal(fast.pairs, checked.pairs)
    assert fast.group.dtype == checked.group.dtype and fast.apart.dtype == checked.apart.dtype


def test_contradictory_labels_and_pairs_raise():
    X = np.random.default_rng(0).standard_normal((5, 2))
    with pytest.raises(ValueError, match="Contradictory constraints"):
        SpanningForestClustering(n_clusters=2).fit(X, partial_labels=[0, 0, -1, -1, -1],
                                                   cannot_link=[[0, 1]])


@pytest.mark.parametrize("pairs,match", [
    ([[0, 1, 2]], "shape"),
    ([[0, 9]], "outside"),
    ([[-1, 0]], "outside"),
    ([[0.5, 1]], "integer"),
])
def test_bad_pairs_raise(pairs, match):
    X = np.random.default_rng(0).standard_normal((5, 2))
    with pytest.raises((ValueError, TypeError), match=match):
        SpanningForestClustering(n_clusters=2).fit(X, must_link=pairs)


@pytest.mark.parametrize("C,match", [
    (np.zeros((3, 3)), "shape"),
    (np.array([[0, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]), "symmetric"),
    (np.full((4, 4), 2), "only contain"),
    (-np.eye(4), "itself"),
])
def test_bad_constraint_matrix_raises(C, match):
    S = -np.random.default_rng(0).uniform(size=(4, 4))
    S = S + S.T
    with pytest.raises(ValueError, match=match):
        spanning_forest(S, 2, constraints=C)


def test_bad_partial_labels_raise():
    X = np.random.default_rng(0).standard_normal((4, 2))
    with pytest.raises(ValueError, match="partial_labels has 3 entries"):
        SpanningForestClustering().fit(X, partial_labels=[0, 1, -1])
    with pytest.raises(ValueError, match="partial_labels must hold .*non-integer"):
        SpanningForestClustering().fit(X, partial_labels=[0.5, 1, -1, -1])
    with pytest.raises(ValueError, match="partial_labels contains NaN"):
        SpanningForestClustering().fit(X, partial_labels=[np.nan, 1, -1, -1])


def test_labels_make_the_rooted_exact_solver_apply():
    c = Constraints.from_labels(np.array([0, 1, 2, -1, 0]), 5)
    # three labels, pairwise apart: every labelled sample is tied to the root
    np.testing.assert_array_equal(c.rooted_samples(), [True, True, True, False, True])
    chain = Constraints.from_pairs(4, cannot_link=[[0, 1], [1, 2]])
    assert chain.rooted_samples() is None


def test_constraint_matrix_round_trips_through_the_functional_api():
    x = np.array([0.0, 0.1, 0.2, 5.0, 5.1])
    S = -(x[:, None] - x[None, :]) ** 2
    y = np.array([0, -1, 1, -1, -1])
    A, M = spanning_forest(S, 2, constraints=constraints_from_labels(y))
    assert M[0, 2] == 0
    assert int(np.triu(A).sum()) == 3


def test_infeasible_cannot_links_warn_and_report_clusters():
    X = np.random.default_rng(0).standard_normal((10, 2))
    y = np.array([0, 1, 2] + [-1] * 7)
    with pytest.warns(InfeasibleConstraintsWarning, match="keep 3 clusters apart") as caught:
        est = SpanningForestClustering(n_clusters=2).fit(X, partial_labels=y)
    assert caught[0].filename == __file__  # the user's fit, not the solver's line
    assert est.n_clusters_ == 3
    assert len(np.unique(est.labels_)) == 3
    assert len(np.unique(est.labels_[:3])) == 3


def test_infeasible_must_links_warn_and_report_clusters():
    X = np.random.default_rng(0).standard_normal((6, 2))
    y = np.array([0, 0, 0, 1, 1, 1])
    with pytest.warns(InfeasibleConstraintsWarning, match="leave only 2 clusters") as caught:
        est = SpanningForestClustering(n_clusters=3).fit(X, partial_labels=y)
    assert caught[0].filename == __file__
    assert est.n_clusters_ == 2


def test_infeasible_general_cannot_links_warn():
    # a triangle of cannot-links needs three clusters, whatever the greedy does
    X = np.random.default_rng(0).standard_normal((8, 2))
    cl = [[0, 1], [1, 2], [0, 2], [3, 4]]
    with pytest.warns(InfeasibleConstraintsWarning):
        est = SpanningForestClustering(n_clusters=2).fit(X, cannot_link=cl)
    assert est.n_clusters_ >= 3


# ------------------------------------------------------------- reference greedy
def _reference_greedy(S, k, must_link_closure, cannot_pairs):
    """Section 9.1 as written: must-link edges first, then by similarity, O(E n)."""
    n = S.shape[0]
    ml = must_link_closure
    edges = sorted(
        itertools.combinations(range(n), 2),
        key=lambda e: (not ml[e], -S[e], e[0], e[1]),
    )
    comp = list(range(n))
    forest = []
    for i, j in edges:
        if len(set(comp)) <= k and not ml[i, j]:
            break
        ci, cj = comp[i], comp[j]
        if ci == cj:
            continue
        members_i = [a for a in range(n) if comp[a] == ci]
        members_j = [b for b in range(n) if comp[b] == cj]
        if any((a, b) in cannot_pairs or (b, a) in cannot_pairs
               for a in members_i for b in members_j):
            continue
        comp = [ci if c == cj else c for c in comp]
        forest.append((i, j))
    return forest, comp


def _closure(n, must_link):
    ml = np.zeros((n, n), dtype=bool)
    c = Constraints.from_pairs(n, must_link=must_link)
    for g in range(c.n_groups):
        idx = np.flatnonzero(c.group == g)
        ml[np.ix_(idx, idx)] = True
    np.fill_diagonal(ml, False)
    return ml


def _partition(labels):
    return {frozenset(np.flatnonzero(labels == v)) for v in np.unique(labels)}


def _partition_from_comp(comp):
    comp = np.asarray(comp)
    return _partition(comp)


@st.composite
def constrained_problems(draw, labelled):
    n = draw(st.integers(3, 9))
    k = draw(st.integers(1, n))
    values = draw(st.lists(st.floats(-5, 5, allow_nan=False, width=32),
                           min_size=n * n, max_size=n * n, unique=True))
    W = np.array(values).reshape(n, n)
    S = W + W.T
    if labelled:
        y = np.array(draw(st.lists(st.integers(-1, 2), min_size=n, max_size=n)))
        return S, k, y, None, None
    pairs = st.tuples(st.integers(0, n - 1), st.integers(0, n - 1))
    distinct = pairs.filter(lambda p: p[0] != p[1])
    ml = draw(st.lists(distinct, max_size=3))
    cl = draw(st.lists(distinct, max_size=4))
    return S, k, None, ml, cl


def _fit_precomputed(S, k, y, ml, cl):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = SpanningForestClustering(n_clusters=k, metric="precomputed").fit(
            S, partial_labels=y, must_link=ml, cannot_link=cl
        )
    infeasible = any(issubclass(w.category, InfeasibleConstraintsWarning) for w in caught)
    return est, infeasible


@given(constrained_problems(labelled=True))
def test_partial_labels_are_always_respected(problem):
    S, k, y, _, _ = problem
    est, infeasible = _fit_precomputed(S, k, y, None, None)
    labelled = np.flatnonzero(y >= 0)
    for i, j in itertools.combinations(labelled, 2):
        assert (est.labels_[i] == est.labels_[j]) == (y[i] == y[j])
    n_classes = len(np.unique(y[labelled]))
    n_free_nodes = np.sum(y < 0) + n_classes
    feasible = max(n_classes, 1) <= k <= n_free_nodes
    assert infeasible == (not feasible)
    if feasible:
        assert est.n_clusters_ == k
        assert est.forest_edges_.shape == (S.shape[0] - k, 2)


@given(constrained_problems(labelled=False))
def test_pairs_are_respected_and_match_the_reference_greedy(problem):
    S, k, _, ml, cl = problem
    n = S.shape[0]
    closure = _closure(n, ml)
    cannot = {tuple(p) for p in cl}
    if any(closure[i, j] for i, j in cl):
        with pytest.raises(ValueError, match="Contradictory"):
            _fit_precomputed(S, k, None, ml, cl)
        return
    est, infeasible = _fit_precomputed(S, k, None, ml, cl)
    for i, j in ml:
        assert est.labels_[i] == est.labels_[j]
    for i, j in cl:
        assert est.labels_[i] != est.labels_[j]
    assert infeasible == (est.n_clusters_ != k)
    if Constraints.from_pairs(n, ml, cl).rooted_samples() is not None:
        return  # the rooted solver takes its must-link edges from the tree (tested below)
    # cannot-links are lifted to must-link groups before the greedy runs
    lifted = {(a, b) for i, j in cannot
              for a in [i, *np.flatnonzero(closure[i])]
              for b in [j, *np.flatnonzero(closure[j])]}
    _, comp = _reference_greedy(S, k, closure, lifted)
    assert _partition(est.labels_) == _partition_from_comp(comp)


def _best_constrained_forest(S, k, fixed_edges, group):
    """Brute force: best k-forest containing ``fixed_edges`` that keeps groups apart."""
    n = S.shape[0]
    free = [e for e in itertools.combinations(range(n), 2)]
    best = -np.inf
    need = n - k - len(fixed_edges)
    for subset in itertools.combinations(free, need):
        comp = list(range(n))
        ok = True
        for i, j in list(fixed_edges) + list(subset):
            ci, cj = comp[i], comp[j]
            if ci == cj:
                ok = False
                break
            comp = [ci if c == cj else c for c in comp]
        if not ok:
            continue
        comp = np.array(comp)
        groups_of = {}
        for i in range(n):
            if group[i] >= 0:
                groups_of.setdefault(comp[i], set()).add(group[i])
        if any(len(g) > 1 for g in groups_of.values()):
            continue
        best = max(best, sum(S[e] for e in list(fixed_edges) + list(subset)))
    return best


def _must_link_edges(n, edges, group):
    """Edges of a forest whose removal would split a must-link group."""
    needed = []
    for e in edges:
        rest = [f for f in edges if f != e]
        comp = list(range(n))
        for i, j in rest:
            ci, cj = comp[i], comp[j]
            comp = [ci if c == cj else c for c in comp]
        split = any(
            len({comp[i] for i in range(n) if group[i] == g}) > 1
            for g in set(group[group >= 0].tolist())
        )
        if split:
            needed.append(e)
    return needed


@given(constrained_problems(labelled=True))
def test_label_constrained_forest_is_optimal_given_its_must_link_edges(problem):
    S, k, y, _, _ = problem
    n = S.shape[0]
    if n > 7:
        return
    est, infeasible = _fit_precomputed(S, k, y, None, None)
    if infeasible:
        return
    group = np.where(y >= 0, y, -1)
    edges = [tuple(sorted(e)) for e in est.forest_edges_.tolist()]
    fixed = _must_link_edges(n, edges, group)
    value = sum(S[e] for e in edges)
    assert value == pytest.approx(_best_constrained_forest(S, k, fixed, group), abs=1e-6)


@given(constrained_problems(labelled=True))
def test_constraints_change_nothing_when_single_linkage_satisfies_them(problem):
    S, k, y, _, _ = problem
    free = SpanningForestClustering(n_clusters=k, metric="precomputed").fit(S)
    labelled = np.flatnonzero(y >= 0)
    satisfied = all(
        (free.labels_[i] == free.labels_[j]) == (y[i] == y[j])
        for i, j in itertools.combinations(labelled, 2)
    )
    if not satisfied:
        return
    est, infeasible = _fit_precomputed(S, k, y, None, None)
    assert not infeasible
    assert {frozenset(e) for e in est.forest_edges_.tolist()} == {
        frozenset(e) for e in free.forest_edges_.tolist()
    }


def test_a_sparse_constraint_matrix_is_read_as_the_dense_one():
    # "constraints must have shape (8, 8) like the similarity matrix, got ()" before
    x = np.arange(8.0)
    S = -(x[:, None] - x) ** 2
    C = np.zeros((8, 8))
    C[0, 7] = C[7, 0] = 1  # the two ends must link
    dense = spanning_forest(S, 2, constraints=C)
    sparse = spanning_forest(S, 2, constraints=sp.csr_matrix(C))
    np.testing.assert_array_equal(sparse[1], dense[1])
    assert sparse[1][0, 7] == 1


@pytest.mark.parametrize("huge", [1e300, 2.0**63])
def test_float_labels_beyond_the_integers_are_refused_as_such(huge):
    # cast to int64, they were refused as "the negative label -9223372036854775808"
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # NumPy's invalid cast
        with pytest.raises(ValueError, match="beyond the 64-bit integers"):
            constraints_from_labels([0.0, huge])

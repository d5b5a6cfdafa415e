"""``fit`` ignores ``y``, as every scikit-learn clusterer: partial labels come in as
``partial_labels``, which scikit-learn's metadata routing passes on.

A forest that read ``y`` took the true labels that cross-validation passes as
constraints, and was scored on answers it had been given.
"""

import warnings

import numpy as np
import pytest
import sklearn
from sklearn.datasets import make_moons
from sklearn.metrics import adjusted_rand_score
from sklearn.model_selection import KFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skdiffclust import SpanningForestClustering

X, Y = make_moons(500, noise=0.1, random_state=0)  # the README's moons


def _readme_partial():
    """The README's ten known labels."""
    partial = np.full_like(Y, -1)
    partial[:10] = Y[:10]
    return partial


def _fold_scores(partial=None):
    """cross_val_score's folds (KFold(3), no shuffle) fitted by hand."""
    scores = []
    for train, test in KFold(3).split(X):
        params = {} if partial is None else {"partial_labels": partial[train]}
        model = SpanningForestClustering(n_clusters=2, random_state=0).fit(X[train], **params)
        scores.append(adjusted_rand_score(Y[test], model.predict(X[test])))
    return scores


def test_cross_validation_does_not_leak_y_into_the_fit():
    # y was read as partial labels: [0.976, 1, 1] where fits without y give 0
    scores = cross_val_score(SpanningForestClustering(n_clusters=2, random_state=0), X, Y,
                             scoring="adjusted_rand_score", cv=3)
    np.testing.assert_array_equal(scores, _fold_scores())
    assert min(scores) == 0.0  # a fold's forest cuts off an outlier, as without labels


def test_the_readmes_ten_labels_separate_the_moons():
    model = SpanningForestClustering(n_clusters=2).fit(X, partial_labels=_readme_partial())
    assert adjusted_rand_score(Y, model.labels_) == 1.0
    np.testing.assert_array_equal(np.bincount(model.labels_), [250, 250])
    # as y, the same labels are ignored: one cluster and a lone outlier
    with pytest.warns(UserWarning, match="partial_labels"):
        ignored = SpanningForestClustering(n_clusters=2).fit(X, _readme_partial())
    np.testing.assert_array_equal(np.bincount(ignored.labels_), [499, 1])


@pytest.mark.parametrize("method", ["fit", "fit_predict"])
def test_partial_labels_in_y_warn_that_y_is_ignored(method):
    with pytest.warns(UserWarning, match=r"y is ignored.*fit\(X, partial_labels=\.\.\.\)") \
            as caught:
        getattr(SpanningForestClustering(n_clusters=2), method)(X, _readme_partial())
    assert len(caught) == 1
    assert caught[0].filename == __file__  # the user's line, not the package's


def test_a_full_labelling_in_y_is_ignored_silently():
    # what cross-validation and scikit-learn's checks pass
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = SpanningForestClustering(n_clusters=2).fit(X, Y)
        labels = SpanningForestClustering(n_clusters=2).fit_predict(X, Y.astype(float))
    plain = SpanningForestClustering(n_clusters=2).fit(X).labels_
    np.testing.assert_array_equal(model.labels_, plain)
    np.testing.assert_array_equal(labels, plain)


def test_y_is_never_validated():
    # strings, the wrong length, NaN: ignored, as scikit-learn's clusterers ignore y
    plain = SpanningForestClustering(n_clusters=2).fit(X).labels_
    for y in (np.array(["a", "b"] * 250), np.arange(3), np.full(500, np.nan), [[-1]]):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            labels = SpanningForestClustering(n_clusters=2).fit(X, y).labels_
        np.testing.assert_array_equal(labels, plain)


def test_fit_transform_takes_partial_labels_and_ignores_y():
    pytest.importorskip("torch")
    partial = np.where(np.arange(500) % 10 == 0, Y, -1)
    params = dict(n_clusters=2, embedding="linear", max_iter=2, n_perturbations=5,
                  random_state=0, device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sklearn.exceptions.ConvergenceWarning)
        fitted = SpanningForestClustering(**params).fit(X, partial_labels=partial)
        out = SpanningForestClustering(**params).fit_transform(X, partial_labels=partial)
        np.testing.assert_array_equal(out, fitted.transform(X))
        with pytest.warns(UserWarning, match="partial_labels") as caught:
            unlabelled = SpanningForestClustering(**params).fit_transform(X, partial)
    # ignored: no labels to learn from (that warning too), the input's own forest
    assert any("Fewer than two labelled samples" in str(w.message)
               and "fit(X, partial_labels=labels)" in str(w.message) for w in caught)
    assert [w.filename for w in caught if "y is ignored" in str(w.message)] == [__file__]
    assert not np.array_equal(unlabelled, out)


def test_metadata_routing_passes_partial_labels_to_each_fold():
    partial = np.where(np.arange(500) % 25 == 0, Y, -1)
    with sklearn.config_context(enable_metadata_routing=True):
        model = SpanningForestClustering(n_clusters=2, random_state=0).set_fit_request(
            partial_labels=True)
        scores = cross_val_score(model, X, Y, scoring="adjusted_rand_score", cv=3,
                                 params={"partial_labels": partial})
        pipe = make_pipeline(StandardScaler(), SpanningForestClustering(
            n_clusters=2).set_fit_request(partial_labels=True))
        piped = pipe.fit(X, partial_labels=partial)[-1].labels_
    np.testing.assert_array_equal(scores, _fold_scores(partial))
    assert scores.min() > 0.95  # each fold's labels separate its moons
    scaled = StandardScaler().fit_transform(X)
    np.testing.assert_array_equal(
        piped, SpanningForestClustering(n_clusters=2).fit(scaled, partial_labels=partial)
        .labels_)


def test_partial_labels_are_requested_by_name():
    # scikit-learn builds set_fit_request from fit's signature
    with sklearn.config_context(enable_metadata_routing=True):
        requests = SpanningForestClustering().set_fit_request(
            partial_labels=True, must_link=False).get_metadata_routing()
    assert requests.fit.requests == {"partial_labels": True, "must_link": False,
                                     "cannot_link": None}


def test_partial_labels_of_another_shape_are_named_as_such():
    # scikit-learn's "y should be a 1d array" before, and a warning naming y for a
    # column: the user passed no y
    X = np.random.default_rng(0).random((30, 2))
    labels = np.r_[[0, 1, 2], -np.ones(27, dtype=int)]
    with pytest.raises(ValueError, match=r"partial_labels must be 1-D.*\(1, 30\)"):
        SpanningForestClustering(3).fit(X, partial_labels=labels[None, :])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        column = SpanningForestClustering(3).fit(X, partial_labels=labels[:, None])
    np.testing.assert_array_equal(
        column.labels_, SpanningForestClustering(3).fit(X, partial_labels=labels).labels_)

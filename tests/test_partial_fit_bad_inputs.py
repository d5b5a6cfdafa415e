"""partial_fit on chunks it cannot train on: a clear error naming the call, the
estimator left exactly as it was, and the stream going on as if the chunk had
never been passed."""

import pickle
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from tests._estimators import each

STREAMING = each(lambda entry: entry.has_partial_fit)


@pytest.fixture(scope="module")
def chunks():
    X, _ = make_blobs(900, n_features=4, centers=3, random_state=0)
    return X[:300], X[300:600], X[600:]


def _started(entry, first):
    return entry.make(n_clusters=3).partial_fit(first)


def _with(X, position, value):
    X = X.copy()
    X.flat[position] = value
    return X


def _bad_chunks(chunk):
    return {
        "1e25 times larger": (chunk * 1e25, r"partial_fit \(call 2\) holds values up to "
                              r"[0-9.]+e\+25 in the units of the first chunk"),
        "shifted by 1e20": (chunk + 1e20, r"partial_fit \(call 2\) holds values up to "
                            r"[0-9.]+e\+19 in the units of the first chunk"),
        "1e25 times smaller": (chunk * 1e-25, r"chunk passed to partial_fit \(call 2\) "
                               r"differ by at most [0-9.]+e-2[0-9] in the units of the "
                               r"first chunk"),
        "one NaN": (_with(chunk, 5, np.nan), "NaN"),
        "one infinity": (_with(chunk, 5, np.inf), "infinity"),
        "other features": (chunk[:, :3], "3 features, but .* is expecting 4 features"),
    }


@pytest.mark.parametrize("case", list(_bad_chunks(np.zeros((2, 4)))))
@pytest.mark.parametrize("entry", STREAMING)
def test_a_bad_chunk_is_refused_and_the_estimator_left_as_it_was(entry, chunks, case):
    first, second, _ = chunks
    bad, message = _bad_chunks(second)[case]
    estimator = _started(entry, first)
    before = pickle.dumps(estimator)
    with pytest.raises(ValueError, match=message):
        estimator.partial_fit(bad)
    assert pickle.dumps(estimator) == before  # fitted attributes and stream alike


@pytest.mark.parametrize("entry", STREAMING)
def test_the_stream_goes_on_as_if_the_refused_chunk_had_never_come(entry, chunks):
    first, second, third = chunks
    estimator, twin = _started(entry, first), _started(entry, first)
    with pytest.raises(ValueError, match="units of the first chunk"):
        estimator.partial_fit(second * 1e25)
    for chunk in (second, third):
        estimator.partial_fit(chunk)
        twin.partial_fit(chunk)
    assert estimator.n_iter_ == 3
    np.testing.assert_array_equal(estimator.labels_, twin.labels_)
    np.testing.assert_array_equal(estimator.predict(first), twin.predict(first))
    assert pickle.dumps(estimator) == pickle.dumps(twin)


@pytest.mark.parametrize("change", ["scaled by 1e6", "shifted by 1e8"])
@pytest.mark.parametrize("entry", STREAMING)
def test_a_chunk_on_another_but_representable_scale_is_trained_on_with_a_warning(
        entry, chunks, change):
    """Under the refusal, a chunk off the first chunk's scale was trained on silently
    (ClAM and SparseGEMINI at ARI 0.57 on the scaled chunk) or under the generic
    warnings of empty clusters (ARI 0 on the shifted one): a warning names it."""
    first, second, _ = chunks
    chunk = second * 1e6 if change == "scaled by 1e6" else second + 1e8
    estimator = _started(entry, first)
    with pytest.warns(UserWarning, match=r"partial_fit \(call 2\) holds values far beyond "
                      r"the first chunk's: feature \d reaches .*on another scale") as record:
        estimator.partial_fit(chunk)
    assert any(w.filename == __file__ for w in record
               if "far beyond the first chunk's" in str(w.message))
    assert estimator.n_iter_ == 2 and estimator.labels_.shape == (300,)


@pytest.mark.parametrize("entry", STREAMING)
def test_chunks_of_the_same_data_give_no_scale_warning(entry, chunks):
    """Chunks drawn from the same data, one of a single cluster, are not flagged."""
    first, second, third = chunks
    estimator = _started(entry, first)
    one_cluster = third[np.argsort(third[:, 0])[:100]]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for chunk in (second, one_cluster, second * 1.5 + 2.0):
            estimator.partial_fit(chunk)
    assert not [w for w in caught if "far beyond" in str(w.message)]


@pytest.mark.torch
def test_prcut_approximate_search_refuses_a_chunk_on_another_scale_without_crashing():
    # in a child process: before, the approximate index wrote out of bounds and the
    # interpreter aborted ("corrupted size vs. prev_size")
    code = textwrap.dedent("""
        import numpy as np
        from sklearn.datasets import make_blobs
        from skdiffclust import PRCut
        X, _ = make_blobs(300, n_features=2, random_state=0)
        model = PRCut(3, neighbors_algorithm="approximate", random_state=0).partial_fit(X)
        try:
            model.partial_fit(X * 1e25)
        except ValueError as error:
            print("refused:", error)
        print("calls:", model.n_iter_)
        """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "refused: The chunk passed to partial_fit (call 2)" in result.stdout
    assert "calls: 1" in result.stdout


@pytest.mark.parametrize("entry", STREAMING)
def test_a_chunk_of_one_repeated_sample_is_trained_on(entry, chunks):
    """All samples equal is no sign of another scale (the spread bound leaves it)."""
    first, second, _ = chunks
    estimator = _started(entry, first)
    with pytest.warns(UserWarning, match="found 1 non-empty clusters"):
        estimator.partial_fit(np.repeat(second[:1], 50, axis=0))
    assert estimator.n_iter_ == 2 and estimator.labels_.shape == (50,)

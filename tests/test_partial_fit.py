"""partial_fit: chunks of the data, one pass each, the training state carried over."""

import pickle

import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

from skdiffclust import ClAM
from tests._estimators import each

# every registered estimator with partial_fit
STREAMING = each(lambda entry: entry.has_partial_fit)


def _make(entry):
    return entry.make(n_clusters=5)


@pytest.fixture(scope="module")
def blobs():
    return make_blobs(50_000, n_features=8, centers=5, random_state=0)


def _stream(estimator, X, n_chunks=10):
    for chunk in np.array_split(np.arange(len(X)), n_chunks):
        estimator.partial_fit(X[chunk])
    return estimator


@pytest.mark.parametrize("entry", STREAMING)
def test_ten_chunks_reach_the_fit_on_all_the_data(entry, blobs):
    X, y = blobs
    streamed = _stream(_make(entry), X)
    fitted = _make(entry).fit(X)
    streamed_ari = adjusted_rand_score(y, streamed.predict(X))
    fit_ari = adjusted_rand_score(y, fitted.labels_)
    assert streamed_ari >= 0.95
    assert streamed_ari >= fit_ari - 0.02


@pytest.mark.parametrize("entry", STREAMING)
def test_each_call_counts_its_work_and_leaves_a_usable_estimator(entry, blobs):
    X, _ = blobs
    X = X[:3000]
    estimator = _make(entry)
    chunks = np.array_split(np.arange(len(X)), 3)
    for calls, chunk in enumerate(chunks, start=1):
        estimator.partial_fit(X[chunk])
        assert estimator.n_iter_ == calls and estimator.loss_curve_.shape == (calls,)
        assert estimator.n_samples_seen_ == chunk[-1] + 1
        assert estimator.labels_.shape == (chunk.size,)  # the last chunk's
        np.testing.assert_array_equal(estimator.predict(X[chunk]), estimator.labels_)
    assert estimator.n_steps_ >= 3
    assert estimator.predict(X).shape == (len(X),)


@pytest.mark.parametrize("entry", STREAMING)
def test_the_stream_is_reproducible_and_survives_pickling(entry, blobs):
    X, _ = blobs
    X = X[:2000]
    first, second = _make(entry), _make(entry)
    first.partial_fit(X[:1000])
    second.partial_fit(X[:1000])
    second = pickle.loads(pickle.dumps(second))
    first.partial_fit(X[1000:])
    second.partial_fit(X[1000:])
    np.testing.assert_array_equal(first.labels_, second.labels_)
    np.testing.assert_array_equal(first.predict(X), second.predict(X))


@pytest.mark.parametrize("entry", STREAMING)
def test_a_first_chunk_smaller_than_n_clusters_is_refused(entry):
    with pytest.raises(ValueError, match="n_clusters=5"):
        _make(entry).partial_fit(np.random.default_rng(0).normal(size=(3, 2)))


@pytest.mark.parametrize("entry", STREAMING)
def test_a_chunk_with_other_features_is_refused_and_the_state_kept(entry, blobs):
    X, _ = blobs
    estimator = _make(entry).partial_fit(X[:500])
    before = estimator.predict(X[:100])
    with pytest.raises(ValueError, match="features"):
        estimator.partial_fit(X[:500, :3])
    assert estimator.n_iter_ == 1
    np.testing.assert_array_equal(estimator.predict(X[:100]), before)


@pytest.mark.parametrize("entry", STREAMING)
def test_a_changed_n_clusters_is_refused_mid_stream_and_the_state_kept(entry, blobs):
    # PRCut failed loading a state dict of the wrong shape, SparseGEMINI indexed out
    # of bounds, ClAM trained on with the first call's 5 clusters
    X, _ = blobs
    estimator = _make(entry).partial_fit(X[:500])
    before = estimator.predict(X[:100])
    estimator.set_params(n_clusters=3)
    with pytest.raises(ValueError, match="cannot change n_clusters=3.*started with 5"):
        estimator.partial_fit(X[500:1000])
    np.testing.assert_array_equal(estimator.predict(X[:100]), before)
    estimator.set_params(n_clusters=5).partial_fit(X[500:1000])  # the stream goes on
    assert estimator.n_iter_ == 2


@pytest.mark.parametrize("entry", STREAMING)
def test_fit_starts_afresh_after_partial_fit(entry, blobs):
    X, _ = blobs
    X = X[:2000]
    estimator = _make(entry).partial_fit(X[:1000])
    estimator.fit(X)
    assert not hasattr(estimator, "n_samples_seen_")
    np.testing.assert_array_equal(estimator.labels_, _make(entry).fit(X).labels_)
    estimator.partial_fit(X[:1000])  # a new stream
    assert estimator.n_iter_ == 1 and estimator.n_samples_seen_ == 1000


@pytest.mark.parametrize("entry", STREAMING)
def test_partial_fit_after_fit_starts_a_new_stream_as_documented(entry, blobs):
    """After fit, partial_fit does not continue the fit's model: a chunk of another
    number of features starts a stream as on a new estimator. PRCut did so without
    saying it; every streaming estimator's docstring now says so."""
    X, _ = blobs
    estimator = _make(entry).fit(X[:1000])
    estimator.partial_fit(X[1000:2000, :6])
    fresh = _make(entry).partial_fit(X[1000:2000, :6])
    assert estimator.n_features_in_ == 6 and estimator.n_iter_ == 1
    np.testing.assert_array_equal(estimator.labels_, fresh.labels_)
    assert "the first after :meth:`fit`" in " ".join(
        entry.estimator.partial_fit.__doc__.split())


# expected: the second chunk lies far from the first one's prototypes
@pytest.mark.filterwarnings("ignore:ClAM found .* non-empty clusters:UserWarning")
def test_clam_keeps_the_first_chunks_coordinates():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 4))
    clam = ClAM(3, random_state=0).partial_fit(X[:300])
    shift, scale = clam._shift.copy(), clam._scale
    clam.partial_fit(X[300:] * 5.0 + 100.0)  # a chunk on another scale
    np.testing.assert_array_equal(clam._shift, shift)
    assert clam._scale == scale


def test_clam_cluster_numbers_stay_from_call_to_call():
    X, y = make_blobs(3000, n_features=4, centers=3, random_state=1)
    clam = ClAM(3, random_state=0)
    previous = None
    for chunk in np.array_split(np.arange(len(X)), 5):
        clam.partial_fit(X[chunk])
        labels = clam.predict(X)
        if previous is not None:
            assert (labels == previous).mean() > 0.99  # not a permutation
        previous = labels

"""dask-ml's wrappers on a two-process dask cluster: ``Incremental`` streams the
blocks of a dask array through ``partial_fit``, ``ParallelPostFit`` predicts
block by block with an estimator fitted in memory."""

import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

from skdiffclust import ClAM
from tests._estimators import each

REASON = 'needs dask-ml and dask.distributed (pip install "skdiffclust[dask]")'
da = pytest.importorskip("dask.array", reason=REASON)
distributed = pytest.importorskip("distributed", reason=REASON)
wrappers = pytest.importorskip("dask_ml.wrappers", reason=REASON)

N_CLUSTERS = 4
BLOCK_ROWS = 1_000
# every registered estimator with partial_fit
STREAMING = each(lambda entry: entry.has_partial_fit)


def _estimator(entry):
    if entry.needs_torch():
        pytest.importorskip("torch", reason=f"{entry.name} needs PyTorch")
    return entry.make(n_clusters=N_CLUSTERS)


@pytest.fixture(scope="module")
def client():
    """Two worker processes, one thread each: every block is pickled to a worker and
    the estimator travels from one ``partial_fit`` to the next between processes."""
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            client.run(_load_libraries)  # on both workers at once
            yield client


def _load_libraries():
    """What a worker's first task would load: ClAM's numba kernels (from the cache
    the test process wrote), and torch where it is installed."""
    ClAM(2, random_state=0).fit(np.arange(20.0).reshape(10, 2))
    try:
        import torch  # noqa: F401
    except ImportError:
        pass


@pytest.fixture(scope="module")
def blobs():
    # overlapping enough that each block's kNN graph is connected: PRCut trains
    # rather than returning the graph's components
    X, y = make_blobs(6_000, n_features=8, centers=N_CLUSTERS, cluster_std=3.0,
                      random_state=0)
    return X, y, da.from_array(X, chunks=(BLOCK_ROWS, X.shape[1]))


@pytest.mark.parametrize("entry", STREAMING)
def test_incremental_streams_every_block_through_partial_fit(entry, blobs, client):
    X, y, blocks = blobs
    model = wrappers.Incremental(_estimator(entry), random_state=0).fit(blocks)
    fitted = model.estimator_
    assert fitted.n_samples_seen_ == X.shape[0]
    assert fitted.n_iter_ == blocks.numblocks[0]  # one pass per block
    labels = model.predict(blocks)
    assert isinstance(labels, da.Array)
    labels = labels.compute()
    assert adjusted_rand_score(y, labels) >= 0.95
    np.testing.assert_array_equal(labels, fitted.predict(X))


@pytest.mark.parametrize("entry", STREAMING)
def test_incremental_partial_fit_continues_the_stream(entry, blobs, client):
    X, _, blocks = blobs
    model = wrappers.Incremental(_estimator(entry), random_state=0)
    model.partial_fit(blocks[:3 * BLOCK_ROWS])
    first = model.estimator_
    model.partial_fit(blocks[3 * BLOCK_ROWS:])
    assert model.estimator_.n_samples_seen_ == X.shape[0]
    assert model.estimator_.n_iter_ == first.n_iter_ + 3
    assert first.n_samples_seen_ == 3 * BLOCK_ROWS  # the first fit is left as it was


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("entry", STREAMING)
def test_parallel_post_fit_predicts_as_in_memory(entry, dtype, blobs, client):
    X, _, _ = blobs
    X = X.astype(dtype)
    estimator = _estimator(entry).fit(X[:1_500])
    labels = wrappers.ParallelPostFit(estimator).predict(
        da.from_array(X, chunks=(BLOCK_ROWS, X.shape[1])))
    assert isinstance(labels, da.Array)
    np.testing.assert_array_equal(labels.compute(), estimator.predict(X))

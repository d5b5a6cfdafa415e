"""Shared fixtures: warm numba kernels once, locate the benchmark datasets."""

import os

# scikit-learn runs its array-API conformance check only in this mode; with NumPy
# inputs it changes nothing else. It must be set before scipy is imported.
os.environ.setdefault("SCIPY_ARRAY_API", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

from tests._data import SHARED_DATA  # noqa: E402

# derandomized: the same examples on every run, so that CI is reproducible
settings.register_profile("skdiffclust", deadline=None, max_examples=60, derandomize=True)
settings.load_profile("skdiffclust")


@pytest.fixture(scope="session", autouse=True)
def warm_numba_kernels():
    """Compile (or load from cache) every kernel once, before any test is timed."""
    from skdiffclust import SpanningForestClustering, spanning_forest

    rng = np.random.default_rng(0)
    for dtype in (np.float64, np.float32):
        X = rng.standard_normal((12, 3)).astype(dtype)
        y = np.array([0, 1, -1] * 4)
        for metric in ("euclidean", "manhattan", "chebyshev", "minkowski", "cosine"):
            SpanningForestClustering(n_clusters=3, metric=metric, algorithm="prim").fit(X)
        SpanningForestClustering(n_clusters=3).fit(X, partial_labels=y)
        SpanningForestClustering(n_clusters=3).fit(X, cannot_link=[[0, 1], [1, 2]])
        S = -((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
        spanning_forest(S, 3)


@pytest.fixture(scope="session")
def shared_data():
    """Path of the Clustering Benchmarks suite; skips the test when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"benchmark data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture
def one_torch_thread():
    """One torch CPU thread for the test (restored after): small training loops only
    wait for each other with more threads than free cores."""
    from skdiffclust._training._torch import torch_threads

    with torch_threads(1):
        yield

"""Access to the Clustering Benchmarks suite in ../shared (optional for tests)."""

import os
from pathlib import Path

import pytest

SHARED_DATA = Path(
    os.environ.get(
        "SKDIFFCLUST_DATA",
        Path(__file__).resolve().parents[1].parent / "shared" / "data" / "clustering-data-v1",
    )
)


# The loader adds white noise of 1e-6 times the data's standard deviation, drawn
# afresh on every call unless seeded: the tests see the same bits in every run.
LOADER_SEED = 0


def load_benchmark(path, battery, name, random_state=LOADER_SEED):
    """Data, reference labels and number of clusters (noise points dropped).

    ``random_state`` seeds the loader's jitter (the same data in every run; the
    stability tests load other copies on purpose).
    """
    clustbench = pytest.importorskip("clustbench")
    ds = clustbench.load_dataset(battery, name, path=str(path), random_state=random_state)
    labels = ds.labels[0]
    keep = labels > 0
    return ds.data[keep], labels[keep], int(ds.n_clusters[0])

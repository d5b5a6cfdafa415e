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


def load_benchmark(path, battery, name):
    """Data, reference labels and number of clusters (noise points dropped)."""
    clustbench = pytest.importorskip("clustbench")
    ds = clustbench.load_dataset(battery, name, path=str(path))
    labels = ds.labels[0]
    keep = labels > 0
    return ds.data[keep], labels[keep], int(ds.n_clusters[0])

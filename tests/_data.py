"""Access to the Clustering Benchmarks suite (optional for tests).

Where the benchmarks look (``benchmarks/_data.py``): ``SKDIFFCLUST_DATA``, else
``clustering-data-v1/`` in the data folder (``SKDIFFCLUST_DATA_HOME``, else
``~/skdiffclust_data``); the folder beside the checkout that CI fills last.
"""

import os
from pathlib import Path

import pytest

_SUITE = "clustering-data-v1"
_CHECKOUT = Path(__file__).resolve().parents[1]


def _suite_folder():
    if os.environ.get("SKDIFFCLUST_DATA"):
        return Path(os.environ["SKDIFFCLUST_DATA"])
    home = Path(os.environ.get("SKDIFFCLUST_DATA_HOME") or "~/skdiffclust_data").expanduser()
    if (home / _SUITE).is_dir():
        return home / _SUITE
    return _CHECKOUT.parent / "shared" / "data" / _SUITE


SHARED_DATA = _suite_folder()


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

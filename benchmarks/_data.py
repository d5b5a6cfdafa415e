"""Where the benchmarks find their data: the package's data folder.

The same folder as :func:`skdiffclust.datasets.load_mnist`'s: the environment
variable ``SKDIFFCLUST_DATA_HOME``, else ``~/skdiffclust_data``. It holds
``mnist/`` and ``fashion-mnist/`` (the IDX files) and ``clustering-data-v1/``
(the Clustering Benchmarks suite, https://github.com/gagolews/clustering-data-v1).
``SKDIFFCLUST_DATA`` still names the suite's folder itself, where it is elsewhere.
"""

import os
from pathlib import Path

from skdiffclust.datasets import DATA_HOME_VARIABLE, DEFAULT_DATA_HOME


def data_home():
    """The data folder: ``$SKDIFFCLUST_DATA_HOME``, else ``~/skdiffclust_data``."""
    return Path(os.environ.get(DATA_HOME_VARIABLE) or DEFAULT_DATA_HOME).expanduser()


def suite_folder():
    """The Clustering Benchmarks suite: ``$SKDIFFCLUST_DATA``, else
    ``clustering-data-v1/`` in the data folder."""
    return Path(os.environ.get("SKDIFFCLUST_DATA") or data_home() / "clustering-data-v1")

"""The package's warnings point at the user's line (``_utils._warn.warn_user``).

Python shows a warning at the line its ``stacklevel`` names, and
``warnings.filterwarnings(..., module=...)`` matches that line's module: the
user's call, not the package's internals. The training contract checks the
``ConvergenceWarning`` of every trained estimator the same way
(``test_training_contract.py``).
"""

import os
import re
import threading
import warnings

import numpy as np
import pytest
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import skdiffclust
from skdiffclust import SpanningForestClustering
from skdiffclust._utils._warn import warn_user
from skdiffclust.exceptions import InfeasibleConstraintsWarning


def _as_package_code(source):
    """The functions of ``source``, compiled as if they were a module of the package."""
    path = os.path.join(os.path.dirname(skdiffclust.__file__), "_as_package.py")
    namespace = {"warn_user": warn_user}
    exec(compile(source, path, "exec"), namespace)
    return namespace


NESTED = _as_package_code(
    "def inner():\n"
    "    warn_user('raised two calls deep')\n"
    "def outer():\n"
    "    inner()\n")


def test_a_warning_raised_deep_in_the_package_points_at_the_callers_line():
    with pytest.warns(UserWarning, match="two calls deep") as caught:
        NESTED["outer"]()
    assert caught[0].filename == __file__


def test_a_fit_reached_through_a_pipeline_warns_at_the_pipelines_call():
    X = np.random.default_rng(0).standard_normal((10, 2))
    y = np.array([0, 1, 2] + [-1] * 7)  # three labelled classes for two clusters
    pipeline = make_pipeline(StandardScaler(), SpanningForestClustering(n_clusters=2))
    with pytest.warns(InfeasibleConstraintsWarning, match="keep 3 clusters apart") as caught:
        pipeline.fit(X, spanningforestclustering__partial_labels=y)
    assert caught[0].filename == __file__  # not the solver's, nor sklearn's Pipeline


def test_with_no_user_frame_the_warning_stays_at_the_package_line():
    # a worker thread's stack holds the package and the threading module only
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        worker = threading.Thread(target=NESTED["outer"])
        worker.start()
        worker.join()
    assert [os.path.basename(w.filename) for w in caught] == ["_as_package.py"]
    assert caught[0].lineno == 2  # inner's warn_user line


def test_a_filter_on_the_users_module_silences_the_warning():
    # conventions.rst: filterwarnings(module=...) names the user's module
    X = np.random.default_rng(0).standard_normal((6, 2))
    y = np.array([0, 0, 0, 1, 1, 1])  # must-links leave 2 clusters for 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", category=InfeasibleConstraintsWarning,
                                module=re.escape(__name__))
        model = SpanningForestClustering(n_clusters=3).fit(X, partial_labels=y)
    assert model.n_clusters_ == 2

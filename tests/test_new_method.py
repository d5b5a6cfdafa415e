"""A sixth method, added as ARCHITECTURE.md's "Adding a method" says: its own folder,
one registry entry and its paragraph in ARCHITECTURE.md, nothing else. In a copy of
the package and of the tests,
a throwaway soft k-means is added so; the architecture tests then pass with it
(its folder is a method folder, on its floor, under every rule), and every test
module that iterates the registry collects tests of it, so that no hand-written
list of the estimators is left to update.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import skdiffclust

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(skdiffclust.__file__).resolve().parent

# the throwaway method: a soft k-means (Lloyd's iterations with soft assignments),
# fitted by full passes and streamed by partial_fit
ESTIMATOR = '''"""A soft k-means (a test's throwaway method)."""

from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin, TransformerMixin, _fit_context
from sklearn.utils.validation import check_is_fitted, validate_data

from skdiffclust._utils._random import derive_seeds
from skdiffclust._utils._validation import NumberInterval


class SoftKMeans(TransformerMixin, ClusterMixin, BaseEstimator):
    """Soft k-means.

    Parameters
    ----------
    n_clusters : int, default=8
        The number of clusters.
    temperature : float, default=1.0
        The softmax temperature of the assignments, in squared distances.
    max_iter : int, default=50
        Passes over the data.
    random_state : int, RandomState instance or None, default=None
        Seeds the initial centres.
    """

    _parameter_constraints = {
        "n_clusters": [NumberInterval(Integral, 1, None, closed="left")],
        "temperature": [NumberInterval(Real, 0, None, closed="neither")],
        "max_iter": [NumberInterval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    }

    def __init__(self, n_clusters=8, *, temperature=1.0, max_iter=50, random_state=None):
        self.n_clusters = n_clusters
        self.temperature = temperature
        self.max_iter = max_iter
        self.random_state = random_state

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Fit the centres; ``y`` is ignored."""
        X = validate_data(self, X)
        centres = self._initial_centres(X)
        for _ in range(self.max_iter):
            centres = self._step(X, centres)
        return self._fitted(X, centres)

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y=None):
        """One pass over a chunk; ``y`` is ignored."""
        first = not hasattr(self, "cluster_centers_")
        X = validate_data(self, X, reset=first)
        centres = self._initial_centres(X) if first else self.cluster_centers_
        return self._fitted(X, self._step(X, centres))

    def _initial_centres(self, X):
        rng = np.random.default_rng(derive_seeds(self.random_state, 1)[0])
        return X[rng.choice(X.shape[0], self.n_clusters, replace=False)].astype(float)

    def _step(self, X, centres):
        proba = self._proba(X, centres)
        weights = proba.sum(0)[:, None]
        return np.where(weights > 0, proba.T @ X / np.maximum(weights, 1e-300), centres)

    def _proba(self, X, centres):
        logits = -self._distances(X, centres) / self.temperature
        logits -= logits.max(1, keepdims=True)
        proba = np.exp(logits)
        return proba / proba.sum(1, keepdims=True)

    @staticmethod
    def _distances(X, centres):
        return ((X[:, None, :] - centres[None]) ** 2).sum(-1)

    def _fitted(self, X, centres):
        self.cluster_centers_ = centres
        self.labels_ = self._proba(X, centres).argmax(1)
        self.n_clusters_ = int(np.unique(self.labels_).size)
        return self

    def predict_proba(self, X):
        """Each sample's soft assignment."""
        check_is_fitted(self)
        return self._proba(validate_data(self, X, reset=False), self.cluster_centers_)

    def predict(self, X):
        """Each sample's most likely cluster."""
        return self.predict_proba(X).argmax(1)

    def transform(self, X):
        """Squared distances to the centres."""
        check_is_fitted(self)
        return self._distances(validate_data(self, X, reset=False), self.cluster_centers_)

    def score(self, X, y=None):
        """Minus the mean squared distance to the nearest centre; ``y`` is ignored."""
        return float(-self.transform(X).min(1).mean())
'''

ENTRY = '''

# a test's throwaway method (tests/test_new_method.py)
from skdiffclust.softkmeans import SoftKMeans  # noqa: E402

ESTIMATORS = ESTIMATORS + (Entry(
    "SoftKMeans", SoftKMeans, "soft k-means", params=dict(random_state=0),
    stability_cases=(("uci", "glass"),)),)
BY_NAME = {entry.name: entry for entry in ESTIMATORS}
'''


def _ignored(folder, names):
    return [name for name in names if name == "__pycache__" or name.endswith((".nbi", ".nbc"))]


@pytest.fixture(scope="module")
def with_a_sixth_method(tmp_path_factory):
    """A copy of the package and the tests with the throwaway method's folder,
    registry entry, paragraph of ARCHITECTURE.md (and its tests' folder), and
    nothing else changed."""
    root = tmp_path_factory.mktemp("sixth")
    shutil.copytree(PACKAGE, root / "skdiffclust", ignore=_ignored)
    shutil.copytree(ROOT / "tests", root / "tests", ignore=_ignored)
    for name in ("ARCHITECTURE.md", "setup.cfg", "conftest.py"):
        shutil.copy(ROOT / name, root / name)
    folder = root / "skdiffclust" / "softkmeans"
    folder.mkdir()
    (folder / "__init__.py").write_text(
        '"""Soft k-means."""\n\nfrom skdiffclust.softkmeans._estimator import SoftKMeans\n\n'
        '__all__ = ["SoftKMeans"]\n')
    (folder / "_estimator.py").write_text(ESTIMATOR)
    registry = root / "skdiffclust" / "_registry.py"
    registry.write_text(registry.read_text() + ENTRY)
    architecture = root / "ARCHITECTURE.md"
    architecture.write_text(architecture.read_text(encoding="utf-8") + (
        "\n**softkmeans/** (`SoftKMeans`): `_estimator` (the class).\n"), encoding="utf-8")
    (root / "tests" / "softkmeans").mkdir()
    (root / "tests" / "softkmeans" / "__init__.py").write_text("")
    return root


def _pytest(root, *args):
    env = {key: value for key, value in os.environ.items()
           if key not in ("SKDIFFCLUST_TEST_INSTALLED", "PYTHONPATH")}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n0",
                           *args], cwd=root, env=env, capture_output=True, text=True,
                          timeout=600)


def _registry_driven(tests):
    """The test modules that iterate the registry (they import it, or the tests'
    helpers built on it)."""
    iterating = re.compile(r"^from (skdiffclust\._registry|tests\._estimators) import",
                           re.MULTILINE)
    return sorted(str(path.relative_to(tests.parent)) for path in tests.rglob("test_*.py")
                  if iterating.search(path.read_text(encoding="utf-8")))


# the runs that execute tests leave out the conftest files: their session warm-up
# would compile the copied package's kernels (a new path, so not from the cache),
# which neither the architecture tests nor the two registry-wide tests use
NO_WARM_UP = "--noconftest"


def test_the_architecture_tests_pass_with_a_sixth_method(with_a_sixth_method):
    result = _pytest(with_a_sixth_method, NO_WARM_UP, "tests/test_architecture.py")
    assert result.returncode == 0, result.stdout[-3000:]
    # its folder is one of the method folders the rules ran over
    listed = _pytest(with_a_sixth_method, "--collect-only", "tests/test_architecture.py")
    assert "[softkmeans]" in listed.stdout


def test_every_registry_driven_test_module_reaches_a_sixth_method(with_a_sixth_method):
    modules = _registry_driven(with_a_sixth_method / "tests")
    assert "tests/test_common.py" in modules and "tests/test_stability.py" in modules
    result = _pytest(with_a_sixth_method, "--collect-only", *modules)
    assert result.returncode == 0, result.stdout[-3000:]
    collected = [line for line in result.stdout.splitlines() if "::" in line]
    reached = {line.split("::")[0] for line in collected if "softkmeans" in line.lower()}
    # a module skipped whole here (an extra not installed: dask, numpydoc) collects nothing
    modules = sorted({line.split("::")[0] for line in collected} & set(modules))
    # the torch-only modules collect only the estimators whose checks need torch
    torch_only = {"tests/test_torch_common.py", "tests/prcut/test_torch_common_prcut.py"}
    # two tests read the registry whole: the public names and the quickstart's tour,
    # which fail until the method is exported and toured (the two other files to touch)
    whole = {"tests/test_package.py::test_public_names",
             "tests/test_quickstart.py::test_quickstart_tours_every_registered_estimator"}
    missing = sorted(set(modules) - reached - torch_only - {t.split("::")[0] for t in whole})
    assert len(modules) >= 10, modules
    assert not missing, f"test modules that do not reach a sixth method: {missing}"
    told = _pytest(with_a_sixth_method, NO_WARM_UP, *whole)
    assert "2 failed" in told.stdout and told.stdout.count("SoftKMeans") >= 2, told.stdout[-3000:]

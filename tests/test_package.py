"""The package as a whole: light import, quickstart."""

import importlib
import importlib.metadata
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import skdiffclust

CHECKOUT = Path(__file__).resolve().parents[1]


def _run_python(code):
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout


def test_import_is_light():
    out = _run_python(
        "import sys, skdiffclust\n"
        "from skdiffclust.forest import _kruskal, _mst\n"
        "kernels = [_mst.similarity_sweep, _mst.relax_keys, _kruskal.forest_from_tree,\n"
        "           _kruskal.greedy_forest_with_conflicts, _kruskal.component_labels]\n"
        "print('torch' in sys.modules, sum(len(k.signatures) for k in kernels))\n"
    )
    assert out.split() == ["False", "0"]


def test_clam_trains_and_predicts_on_the_cpu_without_importing_torch():
    out = _run_python(
        "import pickle, sys\n"
        "from sklearn.datasets import make_blobs\n"
        "from skdiffclust import ClAM\n"
        "X, _ = make_blobs(60, centers=3, random_state=0)\n"
        "model = pickle.loads(pickle.dumps(\n"
        "    ClAM(n_clusters=3, max_iter=5, device='cpu', random_state=0).fit(X)))\n"
        "print('torch' in sys.modules, (model.predict(X) == model.labels_).all())\n"
    )
    assert out.split() == ["False", "True"]


def test_public_names():
    """Each public name is the object of the method's folder that defines it, and the
    version is the one the installed distribution carries."""
    from skdiffclust._registry import ESTIMATORS

    homes = {  # every registered estimator, from its method's folder; the functions
        **{entry.name: entry.estimator.__module__.rsplit(".", 1)[0] for entry in ESTIMATORS},
        "gemini_value_and_grad": "skdiffclust.gemini",
        "constraints_from_labels": "skdiffclust.forest",
        "spanning_forest": "skdiffclust.forest",
    }
    exported, known = set(skdiffclust.__all__), {*homes, "__version__"}
    assert exported == known, (
        f"exported but without a home in this test: {sorted(exported - known)} (add the "
        f"folder that defines each to homes); not exported: {sorted(known - exported)}")
    for name, home in homes.items():
        public = getattr(skdiffclust, name)
        assert public is getattr(importlib.import_module(home), name)
        assert public.__name__ == name and public.__module__.startswith(home + ".")
    assert skdiffclust.__version__ == importlib.metadata.version("skdiffclust")


@pytest.mark.skipif(os.environ.get("SKDIFFCLUST_TEST_INSTALLED") != "1",
                    reason="the suite tests the checkout here; .ci/run sets "
                           "SKDIFFCLUST_TEST_INSTALLED=1 where it tests the installed package")
def test_the_suite_runs_against_the_installed_package():
    """CI's second run: ``import skdiffclust`` finds the package installed in the
    environment's site-packages (a wheel's files, not an editable link to sources),
    never a checkout's folder beside the tests."""
    package = Path(skdiffclust.__file__).resolve()
    site_packages = {Path(sysconfig.get_paths()[key]).resolve() for key in ("purelib", "platlib")}
    assert any(package.is_relative_to(folder) for folder in site_packages), package
    assert not package.is_relative_to(CHECKOUT), package
    assert not (CHECKOUT / "skdiffclust").exists()


def test_importing_deep_image_clustering_is_light():
    """The exported DeepImageClustering imports no torch and none of its training
    modules until a fit needs them."""
    out = _run_python(
        "import sys\n"
        "from skdiffclust import DeepImageClustering\n"
        "print('torch' in sys.modules, 'skdiffclust.deep._fit' in sys.modules)\n"
    )
    assert out.split() == ["False", "False"]

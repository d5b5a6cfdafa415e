"""The package as a whole: light import, quickstart."""

import subprocess
import sys

import skdiffclust


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
    assert set(skdiffclust.__all__) >= {
        "SpanningForestClustering", "spanning_forest", "constraints_from_labels"
    }
    for name in skdiffclust.__all__:
        assert getattr(skdiffclust, name) is not None

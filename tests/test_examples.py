"""Every gallery example runs to the end (figures drawn off-screen)."""

import runpy
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("plot_*.py"))


TORCH_MARKERS = ("import torch", "embedding=", "PRCut(", "DeepImageClustering(")
# examples importing another optional package: skipped, with the reason, without it
OPTIONAL = {"dask_ml": 'needs dask-ml (pip install "skdiffclust[dask]")'}

# examples that take more than about 20 s on two CPU cores (their docstrings say how
# long); CI runs them through the documentation build. plot_sparse_gemini_mnist.py
# takes about 25 s of CPU on MNIST; test_mnist_example_without_mnist runs it on its
# stand-in, the digits, in a few seconds. plot_prcut_mnist.py takes about 15 s with
# ../shared/data/mnist beside the repository (a few seconds on the digits without it).
# plot_deep_clustering_images.py takes about 45 s with MNIST beside the repository
# (30 s on the digits); DeepImageClustering has its own tests (tests/deep).
SLOW = {"plot_sparse_gemini_mnist.py", "plot_deep_clustering_images.py"}

# warnings an example expects: a quick grid (max_iter=30) has points that stop
# first; a warm-up fit of five epochs before the timings; scikit-learn's spectral
# clustering, a peer, on a kNN graph in pieces
EXPECTED_WARNINGS = {
    "plot_clam_grid_search.py": "ignore::sklearn.exceptions.ConvergenceWarning",
    "plot_prcut_scaling.py": "ignore::sklearn.exceptions.ConvergenceWarning",
    "plot_compare_clusterers.py": "ignore:Graph is not fully connected:UserWarning",
}


def _needs_torch(path):
    source = path.read_text()
    return any(marker in source for marker in TORCH_MARKERS)


def _marks(path):
    marks = [pytest.mark.torch] if _needs_torch(path) else []
    if path.name in EXPECTED_WARNINGS:
        marks.append(pytest.mark.filterwarnings(EXPECTED_WARNINGS[path.name]))
    return marks + ([pytest.mark.slow] if path.name in SLOW else [])


PARAMS = [pytest.param(path, id=path.name, marks=_marks(path)) for path in EXAMPLES]


@pytest.mark.parametrize("path", PARAMS)
def test_example_runs(path, monkeypatch):
    source = path.read_text()
    for module, reason in OPTIONAL.items():
        if f"import {module}" in source or f"from {module}" in source:
            pytest.importorskip(module, reason=reason)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    monkeypatch.setattr(plt, "show", lambda *args, **kwargs: None)
    try:
        runpy.run_path(str(path), run_name="__main__")
    finally:
        plt.close("all")


def test_examples_exist():
    assert len(EXAMPLES) >= 2
    assert SLOW <= {path.name for path in EXAMPLES}


def test_mnist_example_without_mnist(tmp_path, monkeypatch):
    """Without the MNIST folder the MNIST example runs on scikit-learn's digits and
    draws its two figures (the path, then the 8 x 8 mask the user guide shows)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    monkeypatch.setenv("SKDIFFCLUST_MNIST", str(tmp_path))
    monkeypatch.setattr(plt, "show", lambda *args, **kwargs: None)
    path = next(path for path in EXAMPLES if path.name == "plot_sparse_gemini_mnist.py")
    plt.close("all")
    try:
        namespace = runpy.run_path(str(path), run_name="__main__")
        assert namespace["shape"] == (8, 8)
        assert len(plt.get_fignums()) == 2
        assert 0 < namespace["model"].get_support().sum() < 64
    finally:
        plt.close("all")

"""Every gallery example runs to the end (figures drawn off-screen)."""

import runpy
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("plot_*.py"))


TORCH_MARKERS = ("import torch", "embedding=", "PRCut(")


def _needs_torch(path):
    source = path.read_text()
    return any(marker in source for marker in TORCH_MARKERS)


PARAMS = [
    pytest.param(path, id=path.name, marks=[pytest.mark.torch] if _needs_torch(path) else [])
    for path in EXAMPLES
]


@pytest.mark.parametrize("path", PARAMS)
def test_example_runs(path, monkeypatch):
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

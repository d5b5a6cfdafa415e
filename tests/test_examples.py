"""Every gallery example runs to the end (figures drawn off-screen)."""

import runpy
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("plot_*.py"))


def _needs_torch(path):
    source = path.read_text()
    return "import torch" in source or "embedding=" in source


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

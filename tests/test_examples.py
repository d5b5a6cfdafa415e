"""Every gallery example runs to the end (figures drawn off-screen); the MNIST ones
need the data folder, and without it stop with the loader's message."""

import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from skdiffclust.datasets import DATA_HOME_VARIABLE, _idx_files

CHECKOUT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((CHECKOUT / "examples").glob("plot_*.py"))

# the examples that read MNIST or Fashion-MNIST with load_mnist, and the data folder
# they are given here: the environment variable's, else ../shared/data beside the
# checkout (where CI's data sets are)
MNIST_EXAMPLES = {path.name for path in EXAMPLES if "load_mnist(" in path.read_text()}
DATA_HOME = Path(os.environ.get(DATA_HOME_VARIABLE) or CHECKOUT.parent / "shared" / "data")


TORCH_MARKERS = ("import torch", "embedding=", "PRCut(", "DeepImageClustering(")
# examples importing another optional package: skipped, with the reason, without it
OPTIONAL = {"dask_ml": 'needs dask-ml (pip install "skdiffclust[dask]")'}

# examples that take more than about 10 s on two CPU cores: CI runs them once,
# through the documentation build, which executes every example (its gallery), not
# here too. plot_sparse_gemini_mnist.py takes about 25 s of CPU,
# plot_deep_clustering_images.py about 45 s (DeepImageClustering has its own tests,
# tests/deep), plot_prcut_mnist.py, plot_digits_deep_clustering.py and
# plot_dask_streaming.py 13 to 16 s each (CI's --durations)
SLOW = {"plot_sparse_gemini_mnist.py", "plot_deep_clustering_images.py",
        "plot_prcut_mnist.py", "plot_digits_deep_clustering.py", "plot_dask_streaming.py"}

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


def _kinds(source):
    """The data sets an example loads with load_mnist."""
    return set(re.findall(r'kind="([\w-]+)"', source)) or {"mnist"}


@pytest.mark.parametrize("path", PARAMS)
def test_example_runs(path, monkeypatch):
    source = path.read_text()
    for module, reason in OPTIONAL.items():
        if f"import {module}" in source or f"from {module}" in source:
            pytest.importorskip(module, reason=reason)
    if path.name in MNIST_EXAMPLES:
        for kind in _kinds(source):
            try:
                _idx_files(kind, "train", DATA_HOME)
            except FileNotFoundError:
                pytest.skip(f"needs the {kind} IDX files: set {DATA_HOME_VARIABLE} to the "
                            f"folder that holds {kind}/ (nothing found under {DATA_HOME})")
        monkeypatch.setenv(DATA_HOME_VARIABLE, str(DATA_HOME))
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


def _mnist_params():
    return [pytest.param(path, id=path.name, marks=[pytest.mark.torch] if _needs_torch(path)
                         else []) for path in EXAMPLES if path.name in MNIST_EXAMPLES]


def _assert_tells_how_to_get_mnist(message, home):
    for told in (f"looked in {home / 'skdiffclust_data' / 'mnist'}, which does not exist",
                 DATA_HOME_VARIABLE, "train-images-idx3-ubyte.gz",
                 "https://ossci-datasets.s3.amazonaws.com/mnist/",
                 "fetch_openml('mnist_784'"):
        assert told in message, told


def test_an_mnist_example_run_without_the_data_stops_with_the_message(tmp_path):
    """As a user runs it, in a new process: without the variable and with nothing in
    the default folder, the example stops at the loading, before it fits or prints
    anything, with the message that says where the loader looked and how to get
    the files."""
    import matplotlib

    path = CHECKOUT / "examples" / "plot_sparse_gemini_mnist.py"
    env = {key: value for key, value in os.environ.items() if key != DATA_HOME_VARIABLE}
    # matplotlib's configuration (its font cache) stays where it is: a new HOME
    # would rebuild it
    env.update(HOME=str(tmp_path), MPLBACKEND="Agg",
               MPLCONFIGDIR=env.get("MPLCONFIGDIR", matplotlib.get_configdir()))
    result = subprocess.run([sys.executable, str(path)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert result.stdout == ""  # stopped before its first print, so before any fit
    assert result.stderr.strip().splitlines()[-1].startswith(
        "With a network, scikit-learn gives the same")
    _assert_tells_how_to_get_mnist(
        result.stderr[result.stderr.rindex("FileNotFoundError: "):], tmp_path)


@pytest.mark.parametrize("path", _mnist_params())
def test_every_mnist_example_without_the_data_stops_with_the_message(
        path, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(DATA_HOME_VARIABLE, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(FileNotFoundError) as error:
        runpy.run_path(str(path), run_name="__main__")
    assert capsys.readouterr().out == ""  # nothing printed, nothing fitted
    _assert_tells_how_to_get_mnist(str(error.value), tmp_path)


# run in a new process: the example, then (even when it raised) whether torch was
# imported; its traceback follows on stderr
_RUN_AND_TELL = """
import runpy, sys
try:
    runpy.run_path(sys.argv[1], run_name="__main__")
finally:
    sys.stderr.write(f"torch imported: {'torch' in sys.modules}\\n")
"""


@pytest.mark.parametrize("path", _mnist_params())
def test_every_mnist_example_with_an_empty_data_folder_stops_at_once(path, tmp_path):
    """As a user runs it with the variable naming a folder without the files (and
    nothing in the default folder): the example stops at the loading, in seconds,
    before it imports torch, prints or fits anything, with the message that says
    where the loader looked and how to get the files."""
    import time

    import matplotlib

    data, home = tmp_path / "data", tmp_path / "home"
    data.mkdir()
    home.mkdir()
    env = dict(os.environ, HOME=str(home), MPLBACKEND="Agg",
               MPLCONFIGDIR=os.environ.get("MPLCONFIGDIR", matplotlib.get_configdir()))
    env[DATA_HOME_VARIABLE] = str(data)
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", _RUN_AND_TELL, str(path)], cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=120)
    seconds = time.perf_counter() - started
    assert result.returncode != 0
    assert result.stdout == ""  # stopped before its first print, so before any fit
    assert "torch imported: False" in result.stderr
    assert seconds < 60, f"{path.name} took {seconds:.0f} s to stop without its data"
    message = result.stderr[result.stderr.rindex("FileNotFoundError: "):]
    kind = sorted(_kinds(path.read_text()))[0]
    for told in (f"looked in {data / kind}, which does not exist",
                 f"the {DATA_HOME_VARIABLE} environment variable",
                 "train-images-idx3-ubyte.gz", "Nothing is downloaded"):
        assert told in message, told


# what an example could read data with, other than load_mnist
_OTHER_READERS = ("read_idx", "fetch_openml", "SKDIFFCLUST_DATA_HOME", "skdiffclust_data",
                  "shared/data", "np.load(", "open(")


def test_only_the_mnist_examples_read_data_and_only_with_the_loader():
    assert MNIST_EXAMPLES == {"plot_deep_clustering_images.py", "plot_prcut_mnist.py",
                              "plot_sparse_gemini_mnist.py"}
    for path in EXAMPLES:
        code = "\n".join(line for line in path.read_text().splitlines()
                         if not line.lstrip().startswith("#"))
        code = code[code.index('"""', code.index('"""') + 3) + 3:]  # the docstring aside
        readers = [reader for reader in _OTHER_READERS if reader in code]
        assert not readers, f"{path.name} reads data with {readers}"
        assert ("load_mnist" in code) == (path.name in MNIST_EXAMPLES), path.name

"""Collection rules shared by the test suite and the doctests of the package, and the
summary of the skipped tests (one line per reason).

Without torch, a module that imports it at the top cannot even be imported. Such
modules are found by reading their source, so that a new one cannot break the
torch-free run: test modules are reported as skipped with the reason, package
modules (whose only tests are doctests) are not collected. The environment with
torch runs all of them.
"""

import collections
import importlib.util
import re
from pathlib import Path

import pytest

HAS_TORCH = importlib.util.find_spec("torch") is not None
REASON = 'needs PyTorch, which is not installed (pip install ".[test,torch]")'

# a top-level import of torch, or of it through skdiffclust's optional-import helper
_TOP_LEVEL_TORCH_IMPORT = re.compile(
    r"^(import torch\b|from torch\b|import_optional\(\"torch\")", re.MULTILINE)

# Package modules without a top-level torch import whose doctests still fit a torch
# model, by their path in the package (the checkout's or an installed copy's).
_DOCTESTS_NEEDING_TORCH = {
    ("skdiffclust", "prcut", "_estimator.py"),
}


def _imports_torch_at_top(path):
    try:
        source = Path(path).read_text(encoding="utf-8")
    except OSError:
        return False
    return _TOP_LEVEL_TORCH_IMPORT.search(source) is not None


def _is_test_module(path):
    return path.name.startswith("test_") and path.suffix == ".py"


def pytest_ignore_collect(collection_path, config):
    """Leave out, without torch, the package modules whose doctests need it."""
    if HAS_TORCH or collection_path.suffix != ".py" or _is_test_module(collection_path):
        return None
    path = collection_path.resolve()
    if path.parts[-3:] in _DOCTESTS_NEEDING_TORCH or _imports_torch_at_top(path):
        return True
    return None


class _ModuleNeedingTorch(pytest.Module):
    """A test module importing torch at the top, reported as skipped without torch."""

    def collect(self):
        pytest.skip(REASON, allow_module_level=True)


def pytest_pycollect_makemodule(module_path, parent):
    if not HAS_TORCH and _imports_torch_at_top(module_path):
        return _ModuleNeedingTorch.from_parent(parent, path=module_path)
    return None


@pytest.hookimpl(wrapper=True)
def pytest_collect_file(file_path, parent):
    """Drop the doctest collector of a test module that cannot be imported without torch."""
    collectors = yield
    if HAS_TORCH or not _is_test_module(file_path) or not _imports_torch_at_top(file_path):
        return collectors
    return [c for c in collectors if isinstance(c, _ModuleNeedingTorch)]


# the test modules of the longest shared set-ups (CI's --durations), run first: on
# the workers of pytest-xdist (each module on one), a long module started last
# keeps one worker busy while the others have finished
LONGEST_FIRST = ("test_forest_gpu.py", "test_thread_bits.py", "test_deep_n_clusters.py",
                 "test_numba_layer.py", "test_new_method.py", "test_quickstart.py",
                 "test_examples.py")


def pytest_collection_modifyitems(config, items):
    """The modules of :data:`LONGEST_FIRST` first (the rest in their order); skip,
    with the reason, every collected test marked ``torch`` when torch is absent."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
    if HAS_TORCH:
        return
    skip = pytest.mark.skip(reason=REASON)
    for item in items:
        if "torch" in item.keywords:
            item.add_marker(skip)


def _skip_reason(report):
    """The reason a report was skipped, without pytest's prefix."""
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    return reason.removeprefix("Skipped: ")


def pytest_terminal_summary(terminalreporter):
    """Skips summarised, one line per reason (``-rs`` lists each test instead)."""
    reasons = collections.Counter(
        _skip_reason(report) for report in terminalreporter.stats.get("skipped", ()))
    if not reasons:
        return
    terminalreporter.section("skipped, by reason")
    for reason, count in reasons.most_common():
        terminalreporter.write_line(f"{count:5d}  {reason}")
    terminalreporter.write_line("(pytest -rs lists each skipped test)")

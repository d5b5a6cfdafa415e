"""Collection rules shared by the test suite and the doctests of the package."""

import importlib.util

import pytest

HAS_TORCH = importlib.util.find_spec("torch") is not None

# Without torch, modules that import it at the top cannot even be collected; the
# environment with torch runs all of them.
collect_ignore_glob = []
if not HAS_TORCH:
    collect_ignore_glob += [
        "skdiffclust/torch.py",
        "skdiffclust/_training/_torch.py",
        "skdiffclust/forest/_torch_ops.py",
        "skdiffclust/forest/_embedding.py",
        "skdiffclust/forest/_gpu*.py",
        "skdiffclust/_utils/_torch.py",
        "skdiffclust/clam/_backprop.py",
        "skdiffclust/clam/_dynamics.py",
        "skdiffclust/clam/_torch_training.py",
        "skdiffclust/prcut/_device.py",
        "skdiffclust/prcut/_estimator.py",  # its doctest fits a model
        "skdiffclust/prcut/_loss.py",
        "skdiffclust/prcut/_training.py",
        "tests/test_torch_*.py",
    ]


def pytest_collection_modifyitems(config, items):
    """Skip, with the reason, every collected test marked ``torch`` when torch is absent."""
    if HAS_TORCH:
        return
    skip = pytest.mark.skip(
        reason='needs PyTorch, which is not installed (pip install ".[test,torch]")'
    )
    for item in items:
        if "torch" in item.keywords:
            item.add_marker(skip)

"""Every public class, function and method documents the parameters it takes,
and only those, in numpydoc's form (numpydoc's own validation, as scikit-learn's
``test_docstrings.py`` runs it)."""

import importlib
import importlib.util
import inspect

import pytest

from skdiffclust._registry import ESTIMATORS

validate = pytest.importorskip(
    "numpydoc.validate", reason="numpydoc (the doc extra) validates the docstrings").validate

HAS_TORCH = importlib.util.find_spec("torch") is not None
# the public modules: the package's own, and each registered estimator's folder
MODULES = ("skdiffclust", "skdiffclust.torch", "skdiffclust.metrics", "skdiffclust.datasets",
           "skdiffclust.inspection",
           *sorted({entry.estimator.__module__.rsplit(".", 1)[0] for entry in ESTIMATORS}))
# the public modules that import torch (their callables are checked where it is
# installed, and marked ``torch``; without it, one skipped test each says so)
TORCH_MODULES = ("skdiffclust.torch",)
# numpydoc's codes held here: a parameter undocumented (PR01), documented but not
# taken (PR02), documented out of order (PR03), a colon without its space (PR10),
# no summary (SS01), a function that returns without a Returns section (RT01)
CHECKED = {"PR01", "PR02", "PR03", "PR10", "SS01", "RT01"}
# a dataclass documents its fields as Attributes, which numpydoc reads as the
# parameters of the generated __init__
EXEMPT = {"skdiffclust.gemini.GeminiPath"}


def _public_callables(modules):
    names = set()
    for module_name in modules:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if not callable(obj):
                continue
            qualified = f"{obj.__module__}.{obj.__qualname__}"
            names.add((f"{module_name}.{name}", qualified))
            if inspect.isclass(obj):
                for attribute, value in vars(obj).items():
                    if not attribute.startswith("_") and inspect.isfunction(value):
                        names.add((f"{module_name}.{name}.{attribute}",
                                   f"{qualified}.{attribute}"))
    shortest = {}  # one name per object: its shortest public path
    for public, qualified in names:
        shortest[qualified] = min(shortest.get(qualified, public), public,
                                  key=lambda path: (len(path), path))
    return sorted(shortest.values())


def _needs_torch(name):
    return any(name == module or name.startswith(module + ".") for module in TORCH_MODULES)


PUBLIC = _public_callables(
    [module for module in MODULES if HAS_TORCH or not _needs_torch(module)])


def _parameters():
    """A test per public callable, marked ``torch`` where its module imports torch;
    without torch, one per such module, skipped (the ``torch`` marker) with the
    reason."""
    params = [pytest.param(name, marks=[pytest.mark.torch] if _needs_torch(name) else [])
              for name in PUBLIC if name not in EXEMPT]
    if not HAS_TORCH:
        params += [pytest.param(f"{module}.*", marks=pytest.mark.torch)
                   for module in TORCH_MODULES]
    return params


def test_the_public_callables_are_found():
    assert {"skdiffclust.PRCut", "skdiffclust.PRCut.fit",
            "skdiffclust.DeepImageClustering.predict"} <= set(PUBLIC)


@pytest.mark.torch
def test_the_public_torch_callables_are_found():
    assert {"skdiffclust.torch.PRCutLoss", "skdiffclust.torch.gemini_loss"} <= set(PUBLIC)


@pytest.mark.parametrize("name", _parameters())
def test_docstring(name):
    errors = [f"{code}: {message}" for code, message in validate(name)["errors"]
              if code in CHECKED]
    assert not errors, "\n".join(errors)

"""Every reference of the documentation to skdiffclust resolves: doc/conf.py never
hides one from Sphinx's nitpicky mode, and the site (without the gallery) builds
with ``-n -W``, with torch and without it (the API pages of skdiffclust.torch are
then read against a stand-in torch)."""

import ast
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import skdiffclust

from tests._torchless import run_without_torch

CHECKOUT = Path(__file__).resolve().parents[1]
DOC = CHECKOUT / "doc"


def _has_doc_extra():
    try:  # sphinx.__main__: not a stray "sphinx" package
        return all(importlib.util.find_spec(module) is not None for module in (
            "sphinx.__main__", "sphinx_gallery", "numpydoc", "pydata_sphinx_theme"))
    except ImportError:
        return False


NEEDS_SPHINX = pytest.mark.skipif(not _has_doc_extra(), reason="needs the doc extra")


def _conf_value(name):
    """The literal assigned to ``name`` in doc/conf.py (``[]`` when not assigned)."""
    return _module_value(DOC / "conf.py", name)


def _module_value(path, name):
    """The literal last assigned to ``name`` at the top of a module's source."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    values = [ast.literal_eval(node.value) for node in tree.body
              if isinstance(node, ast.Assign)
              and any(getattr(target, "id", None) == name for target in node.targets)]
    return values[-1] if values else []


def _documented_names():
    """The objects api.rst lists, fully qualified, after its current module."""
    module, names = None, set()
    for line in (DOC / "api.rst").read_text().splitlines():
        directive = re.match(r"\.\. (?:current)?module:: (\S+)", line)
        if directive:
            module = directive.group(1)
            names.add(module)
        elif module and re.fullmatch(r"   [A-Za-z_][\w.]*", line):
            names.add(f"{module}.{line.strip()}")
    return names


def test_the_api_reference_is_read():
    names = _documented_names()
    assert {"skdiffclust.PRCut", "skdiffclust.torch", "skdiffclust.torch.PRCutLoss",
            "skdiffclust.inspection.SpanningForestDisplay"} <= names


PUBLIC_MODULES = ("skdiffclust", "skdiffclust.metrics", "skdiffclust.torch",
                  "skdiffclust.inspection", "skdiffclust.datasets", "skdiffclust.exceptions")


def test_every_public_name_is_in_the_api_reference():
    # a name added to a module's __all__ but not to doc/api.rst passed every test
    documented = _documented_names()
    for module in PUBLIC_MODULES:
        # the package under test (in CI, the installed one)
        package = Path(skdiffclust.__file__).parent
        path = package / (module.removeprefix("skdiffclust").lstrip(".") or "__init__")
        path = path.with_suffix(".py")
        exported = _module_value(path, "__all__")
        assert exported, f"{path} has no __all__"
        missing = [name for name in exported
                   if not name.startswith("__") and f"{module}.{name}" not in documented]
        assert not missing, f"add {missing} to doc/api.rst under {module}"


def test_nitpick_ignores_no_skdiffclust_reference():
    """External names unresolved offline may be ignored, skdiffclust's never: not
    qualified, nor as written under ``.. currentmodule:: skdiffclust``."""
    ignored = [(re.escape(kind), re.escape(target))
               for kind, target in _conf_value("nitpick_ignore")]
    ignored += _conf_value("nitpick_ignore_regex")
    assert ignored, "nothing is ignored: this test reads doc/conf.py wrong"
    targets = set()
    for name in _documented_names():
        targets |= {name, name.split(".")[-1], f"{name}.fit", name.removeprefix("skdiffclust.")}
    # but "torch.X" is torch's name (skdiffclust.torch's objects are written
    # skdiffclust.torch.X, or X under ``.. currentmodule:: skdiffclust.torch``)
    targets = {target for target in targets if target.split(".")[0] != "torch"}
    for kind in ("py:class", "py:func", "py:meth", "py:mod", "py:obj", "py:attr"):
        for target in targets:
            hidden = [pattern for pattern in ignored
                      if re.fullmatch(pattern[0], kind) and re.fullmatch(pattern[1], target)]
            assert not hidden, f"{kind} {target} is ignored by {hidden}"


def test_terms_are_scikit_learns():
    """conf.py leaves every :term: to scikit-learn's glossary: the pages have none."""
    pages = [*DOC.rglob("*.rst"), *(CHECKOUT / "skdiffclust").rglob("*.py")]
    assert not [page for page in pages if ".. glossary::" in page.read_text()]


def _copy_doc(tmp_path):
    """What the site is built from (doc/, the gallery's examples/, the benchmarks'
    results the pages quote and the image battery whose halves they name) in its
    layout, without what a build writes."""
    generated = shutil.ignore_patterns("_build", "generated", "auto_examples",
                                       "gen_modules", "sg_execution_times.rst", "__pycache__")
    shutil.copytree(DOC, tmp_path / "doc", ignore=generated)
    shutil.copytree(CHECKOUT / "examples", tmp_path / "examples", ignore=generated)
    if (CHECKOUT / "benchmarks" / "results").is_dir():
        shutil.copytree(CHECKOUT / "benchmarks" / "results", tmp_path / "benchmarks" / "results")
        shutil.copy(CHECKOUT / "benchmarks" / "_image_battery.py", tmp_path / "benchmarks")
    return tmp_path / "doc"


SPHINX = ("import runpy\n"
          "sys.argv = ['sphinx', '-b', 'html', '-n', '-W', '--keep-going', '-q',\n"
          "            '-D', 'plot_gallery=0', sys.argv[1], sys.argv[2]]\n"
          "runpy.run_module('sphinx', run_name='__main__')\n")


# a substitution left as typed in a built page (a figure's name: words joined by hyphens)
UNRESOLVED = re.compile(r"\|[a-z0-9]+(?:-[a-z0-9]+)+\|")


@pytest.mark.slow
@NEEDS_SPHINX
@pytest.mark.parametrize("torch", [
    pytest.param(True, marks=[pytest.mark.torch, pytest.mark.skipif(
        importlib.util.find_spec("torch") is None, reason="needs PyTorch")]),
    False,
], ids=["with-torch", "without-torch"])
def test_the_site_builds_nitpicky_without_the_gallery(torch, tmp_path, monkeypatch):
    """``-n -W``: every reference resolves (skdiffclust's in particular), with or
    without torch (the gallery off: it is without torch anyway). A class's page
    lists the members it defines: torch.nn.Module's and BaseEstimator's are
    documented by torch and scikit-learn."""
    monkeypatch.setenv("SKDIFFCLUST_DOC_OFFLINE", "1")
    doc = _copy_doc(tmp_path)
    if torch:
        finished = subprocess.run([sys.executable, "-c", "import sys\n" + SPHINX,
                                   str(doc), str(tmp_path / "html")],
                                  capture_output=True, text=True)
    else:
        finished = run_without_torch(SPHINX, doc, tmp_path / "html")
    warnings = [line for line in finished.stderr.splitlines()
                if "WARNING" in line or "ERROR" in line]
    assert not warnings, "\n".join(warnings)
    assert finished.returncode == 0, finished.stderr[-5000:]

    generated = doc / "generated"
    page = (generated / "skdiffclust.torch.ClAMLayer.rst").read_text()
    assert "~ClAMLayer.forward" in page and "~ClAMLayer.predict" in page
    for inherited in ("state_dict", "zero_grad", "register_buffer", "training"):
        assert f"~ClAMLayer.{inherited}" not in page
    page = (generated / "skdiffclust.ClAM.rst").read_text()
    assert "~ClAM.fit" in page and "~ClAM.get_params" not in page
    # the gallery's examples using the class, after scikit-learn's pages
    assert ".. minigallery:: skdiffclust.ClAM" in page
    # the signature and the docstring, read without torch too
    html = (tmp_path / "html" / "generated" / "skdiffclust.torch.PRCutLoss.html").read_text()
    signature = re.search(r'<dt [^>]*id="skdiffclust\.torch\.PRCutLoss">(.*?)</dt>', html, re.S)
    signature = re.sub(r"<[^>]+>", "", signature.group(1))
    assert "n_clusters" in signature and "args" not in signature, signature
    assert "moving average" in html
    # every figure's substitution resolved: inside inline markup (``**|name|**``)
    # reStructuredText leaves it as typed, and the page showed "|mnist-...|"
    unresolved = {page.name: found for page in (tmp_path / "html").rglob("*.html")
                  if (found := UNRESOLVED.findall(re.sub(r"<[^>]+>", "", page.read_text())))}
    assert not unresolved, unresolved


@NEEDS_SPHINX
def test_asking_for_the_gallery_without_torch_stops_with_the_install_command(tmp_path):
    code = ("import runpy\n"
            "sys.argv = ['sphinx', '-b', 'html', '-q', '-D', 'plot_gallery=1',\n"
            "            sys.argv[1], sys.argv[2]]\n"
            "runpy.run_module('sphinx', run_name='__main__')\n")
    finished = run_without_torch(code, _copy_doc(tmp_path), tmp_path / "html")
    assert finished.returncode != 0
    lines = finished.stderr.strip().splitlines()
    assert len(lines) == 1 and re.fullmatch(
        r'The gallery needs the torch and dask extras \(missing: torch(, \w+)*\): '
        r'pip install "\.\[doc,torch,dask\]"', lines[0]), finished.stderr

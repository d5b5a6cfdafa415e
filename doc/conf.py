"""Sphinx configuration of the skdiffclust documentation.

Build: ``pip install ".[doc,torch,dask]" && python -m sphinx -b html -n -W doc
doc/_build/html``.
The gallery (``examples/``) is executed during the build.

Without the gallery (the guide and the API pages only):
``python -m sphinx -b html -n -W -D plot_gallery=0 doc doc/_build/html``. That
build needs only the doc extra: where torch, dask-ml or distributed is missing,
the gallery is off by default (the examples need them), the API pages of
skdiffclust.torch are read with a stand-in for torch (``autodoc_mock_imports``:
their docstrings and signatures, without torch), and the guide shows
sphinx-gallery's placeholder for the figures it takes from the gallery. Asking
for the gallery there (``-D plot_gallery=1``) stops with the install command.
"""

import ast
import importlib.util
import inspect
import os
import re
import shutil
import socket
import sys
import warnings
from pathlib import Path

import skdiffclust

INSTALL = 'pip install ".[doc,torch,dask]"'


def _missing(modules=("torch", "dask_ml", "distributed")):
    missing = []
    for module in modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except ImportError:
            found = False
        if not found:
            missing.append(module)
    return missing


MISSING = _missing()


def _as_bool(value):
    """A config value given as a bool or, with ``-D``, as a string ("0", "False")."""
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            pass
    return bool(value)


project = "skdiffclust"
author = "The skdiffclust developers"
copyright = "2026, The skdiffclust developers"
release = skdiffclust.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

autosummary_generate = True
# scikit-learn's generated metadata-routing methods are documented by scikit-learn,
# torch.nn.Module's extra_repr (a layer's repr) by torch
EXCLUDED_MEMBERS = [
    "set_fit_request", "set_predict_request", "set_transform_request",
    "set_score_request", "set_path_request", "get_metadata_routing", "set_output",
    "extra_repr",
]
# a class's page documents what the class defines; what it inherits from
# scikit-learn's BaseEstimator or torch.nn.Module is documented there
# (_templates/autosummary/class.rst lists the same members)
autodoc_default_options = {
    "members": True,
    "inherited-members": False,
    "exclude-members": ",".join(EXCLUDED_MEMBERS),
}
autosummary_context = {"excluded_members": EXCLUDED_MEMBERS}
# without torch, skdiffclust.torch is imported against a stand-in torch: its pages
# keep their docstrings and signatures
autodoc_mock_imports = ["torch"] if "torch" in MISSING else []
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
exclude_patterns = ["_build", "auto_examples/*.ipynb", "auto_examples/*.py"]
templates_path = ["_templates"]

# -n: every reference to skdiffclust must resolve. Those to the libraries we build
# on resolve only with their inventories (below, online only): offline they are
# left as text. Never add a skdiffclust name here (tests/test_doc_build.py checks).
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(sklearn|numpy|scipy|torch|dask|dask_ml|distributed|matplotlib)(\..+)?"),
    # the pages have no glossary: a :term: is scikit-learn's (its glossary, n_jobs)
    (r"std:term", r".+"),
]

# Cross-links to the libraries we build on. Their inventories are downloaded at
# build time; on a machine without access to them (CI here reaches package
# registries only) the links are left out rather than failing a -W build.
_INVENTORIES = {
    "python": ("https://docs.python.org/3", None),
    "numpy": ("https://numpy.org/doc/stable", None),
    "scipy": ("https://docs.scipy.org/doc/scipy", None),
    "sklearn": ("https://scikit-learn.org/stable", None),
    "torch": ("https://pytorch.org/docs/stable", None),
}


def _online(host="docs.python.org", timeout=2.0):
    if os.environ.get("SKDIFFCLUST_DOC_OFFLINE"):
        return False
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


intersphinx_mapping = _INVENTORIES if _online() else {}

sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": "/plot_",
    "doc_module": ("skdiffclust",),
    "backreferences_dir": "gen_modules/backreferences",
    "reference_url": {"skdiffclust": None},
    "download_all_examples": False,
    "remove_config_comments": True,
    "matplotlib_animations": False,
}

# The examples need torch and dask: without them the gallery is off unless asked
# for (-D plot_gallery=1), and then the build stops at once with the install command
plot_gallery = str(not MISSING)  # a string, as sphinx-gallery declares it


def _gallery_needs_the_extras(app, config):
    if MISSING and _as_bool(config.plot_gallery):
        # one line; os._exit because Sphinx turns any exception here, SystemExit
        # included, into a page of diagnostics that hides the message
        print(f"The gallery needs the torch and dask extras (missing: "
              f"{', '.join(MISSING)}): {INSTALL}", file=sys.stderr, flush=True)
        os._exit(2)


# the figures the guide takes from the gallery (auto_examples/images/sphx_glr_*.png)
FIGURE = re.compile(r"auto_examples/images/(sphx_glr_\w+\.png)")


def _placeholder_figures(app):
    """Without the gallery, sphinx-gallery's "no image" stands for its figures."""
    if _as_bool(app.config.sphinx_gallery_conf["plot_gallery"]):
        return
    from sphinx_gallery import glr_path_static

    srcdir = Path(app.srcdir)
    images = srcdir / "auto_examples" / "images"
    for page in srcdir.rglob("*.rst"):
        if images.parent in page.parents:
            continue
        for name in FIGURE.findall(page.read_text(encoding="utf-8")):
            if not (images / name).exists():
                images.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(Path(glr_path_static()) / "no_image.png", images / name)


def _signature_without_torch(app, what, name, obj, options, signature, return_annotation):
    """Under the stand-in torch, a torch.nn.Module subclass would show the
    stand-in's ``(*args, **kwargs)``: its own ``__init__``'s signature instead."""
    if what != "class" or not getattr(obj, "__sphinx_mock__", False) \
            or "__init__" not in vars(obj):
        return None
    init = inspect.signature(obj.__init__)
    init = init.replace(parameters=list(init.parameters.values())[1:],
                        return_annotation=inspect.Signature.empty)
    return str(init), return_annotation


def setup(app):
    app.connect("config-inited", _gallery_needs_the_extras)
    # after sphinx-gallery's builder-inited (priority 500), which sets plot_gallery
    app.connect("builder-inited", _placeholder_figures, priority=600)
    app.connect("autodoc-process-signature", _signature_without_torch)
    app.connect("source-read", _define_figures)


# the gallery runs off-screen; tqdm bars and torch notices are not documentation
os.environ.setdefault("MPLBACKEND", "Agg")
warnings.filterwarnings("ignore", message="Matplotlib is currently using agg")

html_theme = "pydata_sphinx_theme"
html_title = "skdiffclust"
html_theme_options = {"navigation_with_keys": False}
html_static_path = []

# The benchmark figures: every page quotes them as substitutions (|quality-prcut-ari|,
# |quality-when|, ...) defined here from the result files benchmarks/results/*.csv,
# and shows their tables as csv-tables of the files written into _generated/
# (_figures.py; tests/test_figures.py checks that no page types one by hand)
sys.path.insert(0, str(Path(__file__).resolve().parent))
import _figures  # noqa: E402

_FIGURES = _figures.substitutions()
_figures.write_tables()


def _define_figures(app, docname, source):
    """Append to a page the definitions of the figures it quotes."""
    used = re.findall(r"\|([A-Za-z0-9_.-]+)\|", source[0])
    source[0] += "\n" + _figures.definitions(used, _FIGURES) + "\n"

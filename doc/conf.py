"""Sphinx configuration of the skdiffclust documentation.

Build: ``pip install ".[doc,torch,dask]" && python -m sphinx -b html -W doc
doc/_build/html``.
The gallery (``examples/``) is executed during the build.
"""

import importlib.util
import os
import socket
import sys
import warnings

import skdiffclust

# The API pages import skdiffclust.torch and the gallery runs the torch and dask
# examples: without those extras the build would stop in a traceback of
# autosummary. One line instead; os._exit because Sphinx turns any exception
# here, SystemExit included, into a page of diagnostics that hides the message.
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


if _missing():
    print(f"The documentation needs the torch and dask extras (missing: "
          f"{', '.join(_missing())}): {INSTALL}", file=sys.stderr, flush=True)
    os._exit(2)

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
# scikit-learn's generated metadata-routing methods are documented by scikit-learn
autodoc_default_options = {
    "members": True,
    "inherited-members": False,
    "exclude-members": ",".join([
        "set_fit_request", "set_predict_request", "set_transform_request",
        "set_score_request", "set_path_request", "get_metadata_routing", "set_output",
    ]),
}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
exclude_patterns = ["_build", "auto_examples/*.ipynb", "auto_examples/*.py"]
templates_path = []

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

# the gallery runs off-screen; tqdm bars and torch notices are not documentation
os.environ.setdefault("MPLBACKEND", "Agg")
warnings.filterwarnings("ignore", message="Matplotlib is currently using agg")

html_theme = "pydata_sphinx_theme"
html_title = "skdiffclust"
html_theme_options = {"navigation_with_keys": False}
html_static_path = []

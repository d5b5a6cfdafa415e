"""Sphinx configuration of the skdiffclust documentation."""

import skdiffclust

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
numpydoc_show_class_members = False
exclude_patterns = ["_build"]

intersphinx_mapping = {
    "python": ("https://docs.python.org/3", None),
    "numpy": ("https://numpy.org/doc/stable", None),
    "scipy": ("https://docs.scipy.org/doc/scipy", None),
    "sklearn": ("https://scikit-learn.org/stable", None),
    "torch": ("https://pytorch.org/docs/stable", None),
}

sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": "/plot_",
    "doc_module": ("skdiffclust",),
    "backreferences_dir": "gen_modules/backreferences",
}

html_theme = "pydata_sphinx_theme"
html_title = "skdiffclust"

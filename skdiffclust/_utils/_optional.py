"""Optional dependencies: one way to import them, one message when they are missing.

skdiffclust needs only NumPy, SciPy, scikit-learn and numba; the rest is optional,
installed with an extra of the package (``pip install "skdiffclust[torch]"``) or on
its own. :func:`import_optional` imports such a module where a feature needs it,
and, when it is missing, raises an ImportError that names the feature and the
command that installs what it needs.
"""

import importlib

# module -> (what pip installs, the extra of skdiffclust that brings it, or None)
OPTIONAL = {
    "torch": ("PyTorch", "torch"),
    "dask": ("dask", "dask"),
    "dask_ml": ("dask-ml", "dask"),
    "matplotlib": ("matplotlib", None),
}


def install_hint(module):
    """The pip command that installs ``module`` (a key of :data:`OPTIONAL`)."""
    package, extra = OPTIONAL[module.split(".")[0]]
    if extra is None:
        return f"pip install {package}"
    return f'pip install "skdiffclust[{extra}]"'


def import_optional(module, needed_for):
    """Import ``module``, or raise an ImportError naming ``needed_for`` and the fix.

    Parameters
    ----------
    module : str
        A module of an optional dependency (its top-level package a key of
        :data:`OPTIONAL`), e.g. ``"torch"`` or ``"matplotlib.pyplot"``.
    needed_for : str
        What needs it, as the message starts: ``"PRCut"``,
        ``"SpanningForestClustering(embedding=...)"``.

    Returns
    -------
    module : module
    """
    try:
        return importlib.import_module(module)
    except ImportError as error:
        package = OPTIONAL[module.split(".")[0]][0]
        raise ImportError(
            f"{needed_for} needs {package}: {install_hint(module)}") from error

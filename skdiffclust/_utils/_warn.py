"""Warnings that point at the user's line.

A warning raised deep inside a fit is most useful at the line that called the
fit: that is where Python shows it, and where ``warnings.filterwarnings(...,
module=...)`` matches it. Counting ``stacklevel`` by hand breaks whenever a
function moves, and cannot be right for a function reached by several paths, so
:func:`warn_user` finds the level itself: the first frame outside the package and the
libraries it is called through (scikit-learn's wrappers and meta-estimators,
torch's ``Module.__call__``, numba's compiler, ...). Python 3.12's
``skip_file_prefixes`` does the same; this works on 3.10 too.
"""

import os
import sys
import warnings

# Libraries whose frames stand between the user and the package: a fit reached
# through GridSearchCV, a block called as a torch module, a kernel compiled by numba,
# a piece computed on a worker thread.
_CALLED_THROUGH = ("skdiffclust", "sklearn", "torch", "numba", "joblib", "dask",
                   "numpy", "scipy", "threadpoolctl", "threading", "concurrent")


def _library_prefixes():
    """The files of the modules of ``_CALLED_THROUGH`` already imported (none is
    imported here): a package's folder, a single module's file."""
    prefixes = []
    for name in _CALLED_THROUGH:
        file = getattr(sys.modules.get(name), "__file__", None)
        if file:
            file = os.path.abspath(file)
            is_package = os.path.basename(file).startswith("__init__.")
            prefixes.append(os.path.dirname(file) + os.sep if is_package else file)
    return tuple(prefixes)


def warn_user(message, category=UserWarning):
    """``warnings.warn(message, category)`` at the first frame outside the package
    and its libraries: the user's line (at the caller's own line where every frame
    is inside, as in a worker thread)."""
    prefixes = _library_prefixes()
    frame, level = sys._getframe(1), 2  # stacklevel 2: warn's caller
    while frame is not None:
        if not os.path.abspath(frame.f_code.co_filename).startswith(prefixes):
            break
        frame, level = frame.f_back, level + 1
    else:
        level = 2
    warnings.warn(message, category, stacklevel=level)

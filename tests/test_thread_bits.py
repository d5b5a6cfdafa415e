"""The same bits on any number of threads, for every estimator, 'auto' included.

Each registered estimator (and each that takes it again with ``n_clusters='auto'``)
is fitted in fresh processes whose thread pools are set when they start
(``OMP_NUM_THREADS``, ``NUMBA_NUM_THREADS``, ``MKL_NUM_THREADS``,
``OPENBLAS_NUM_THREADS``): on one thread with ``n_jobs=1``, on two with
``n_jobs=None`` (one thread, scikit-learn's glossary), and on two with
``n_jobs=2``. Every fitted NumPy attribute (a name ending in ``_``; lists, tuples,
dicts and sparse matrices of them taken apart) must be the same, bit for bit.

The data are scikit-learn's digits, whose integer pixels put many samples at equal
distances: more than 1,024 of them, where scikit-learn's exact neighbour search
shared its work out otherwise on one and on two threads and kept other samples
among equally near ones (:func:`skdiffclust._neighbors.same_neighbours_on_any_threads`).
One process fits every case (one start-up, kernels loaded once).
"""

import importlib.util
import json
import os
import pickle
import subprocess
import sys
import tempfile

import joblib
import numpy as np
import pytest
from sklearn.utils._param_validation import StrOptions

from skdiffclust._registry import BY_NAME, ESTIMATORS
from skdiffclust._utils._threads import host_threads
from tests._estimators import TORCH

# per estimator: a short fit of its own, on how many digits (1,100 by default),
# and what 'auto' adds (a few candidates)
QUICK = {
    "ClAM": dict(max_iter=5),
    "PRCut": dict(max_iter=30),
    "SparseGEMINI": dict(max_iter=20),
    "DeepImageClustering": dict(max_iter=2),
}
N_SAMPLES = {"DeepImageClustering": 300}
AUTO = {
    "PRCut": dict(max_clusters=12),
    "SparseGEMINI": dict(max_clusters=4, n_init=1),
    "DeepImageClustering": dict(max_clusters=6),
}
# the processes: the thread count set at start, and n_jobs
RUNS = {"1 thread, n_jobs=1": ("1", 1), "2 threads, n_jobs=None": ("2", None),
        "2 threads, n_jobs=2": ("2", 2)}
THREAD_VARIABLES = ("OMP_NUM_THREADS", "NUMBA_NUM_THREADS", "MKL_NUM_THREADS",
                    "OPENBLAS_NUM_THREADS")

SCRIPT = """
import pickle, sys, warnings
import numpy as np
import scipy.sparse as sp
from sklearn.datasets import load_digits, make_blobs
from skdiffclust._registry import BY_NAME

warnings.simplefilter("ignore")
cases, n_jobs, out = pickle.loads(bytes.fromhex(sys.argv[1]))
DATA = {"digits": load_digits().data,
        "grid": np.round(2 * make_blobs(1100, 2, centers=5, random_state=0)[0])}


def arrays(value, name, found):
    if sp.issparse(value):
        value = value.tocsr()
        for part in ("data", "indices", "indptr", "shape"):
            arrays(getattr(value, part), f"{name}.{part}", found)
    elif isinstance(value, dict):
        for key in sorted(value, key=str):
            arrays(value[key], f"{name}[{key!r}]", found)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            arrays(item, f"{name}[{i}]", found)
        found[name + ".len"] = np.asarray(len(value))
    elif isinstance(value, (np.ndarray, np.generic, int, float, bool, str)) or value is None:
        found[name] = np.asarray(value, dtype=object if value is None else None)
    return found


fitted = {}
for case, name, params, data, n_samples in cases:
    entry = BY_NAME[name]
    try:
        X = entry.as_input(DATA[data][:n_samples])
        estimator = entry.make(**params, n_jobs=n_jobs).fit(X)
    except Exception as error:
        fitted[case] = f"{type(error).__name__}: {error}"
        continue
    found = {}
    for attribute, value in sorted(vars(estimator).items()):
        if attribute.endswith("_") and not attribute.startswith("_"):
            arrays(value, attribute, found)
    fitted[case] = found
with open(out, "wb") as file:
    pickle.dump(fitted, file)
"""


def _takes_auto(entry):
    return any(isinstance(option, StrOptions) and "auto" in option.options
               for option in entry.estimator._parameter_constraints["n_clusters"])


def _case(entry, auto, data="digits"):
    params = {**QUICK.get(entry.name, {}), "n_clusters": 10}
    if auto:
        params.update(AUTO.get(entry.name, {}), n_clusters="auto")
    case = f"{entry.name}-{'auto' if auto else 10}" + ("" if data == "digits" else f"-{data}")
    marks = [TORCH] if entry.needs_torch(**params) else []
    return pytest.param((case, entry.name, params, data, N_SAMPLES.get(entry.name, 1100)),
                        id=case, marks=marks)


CASES = [_case(entry, auto) for entry in ESTIMATORS
         for auto in ((False, True) if _takes_auto(entry) else (False,))]
# the forest's k-d tree (data in at most 8 dimensions) on points at equal distances:
# 1,100 blobs rounded to a grid
CASES.append(_case(BY_NAME["SpanningForestClustering"], False, "grid"))


def _fit_in_process(cases, threads, n_jobs, folder):
    out = os.path.join(folder, f"{threads}-{n_jobs}.pkl")
    env = {**os.environ, **dict.fromkeys(THREAD_VARIABLES, threads)}
    argument = pickle.dumps((cases, n_jobs, out)).hex()
    process = subprocess.run([sys.executable, "-c", SCRIPT, argument], env=env,
                             capture_output=True, text=True, timeout=600)
    assert process.returncode == 0, process.stderr[-3000:]
    with open(out, "rb") as file:
        return pickle.load(file)


@pytest.fixture(scope="module")
def fits(request):
    """Every selected case's fitted attributes, by run (one process each)."""
    has_torch = importlib.util.find_spec("torch") is not None
    selected = [item.callspec.params["case"] for item in request.session.items
                if getattr(item, "module", None) is sys.modules[__name__]
                and hasattr(item, "callspec")
                and "case" in item.callspec.params
                and (has_torch or "torch" not in item.keywords)]
    with tempfile.TemporaryDirectory() as folder:
        return {run: _fit_in_process(selected, threads, n_jobs, folder)
                for run, (threads, n_jobs) in RUNS.items()}


def _differences(reference, other):
    if isinstance(reference, str) or isinstance(other, str):  # a fit that raised
        return [] if reference == other else [f"{reference!r} against {other!r}"]
    differ = sorted(set(reference) ^ set(other))
    for name in sorted(set(reference) & set(other)):
        a, b = reference[name], other[name]
        numeric = a.dtype.kind in "biufc" and b.dtype.kind in "biufc"
        if not (a.shape == b.shape and a.dtype == b.dtype and (
                np.array_equal(a, b, equal_nan=a.dtype.kind in "fc") if numeric
                else a.tolist() == b.tolist())):
            gap = (f" (largest difference {np.max(np.abs(a - b)):.3g})"
                   if numeric and a.shape == b.shape else "")
            differ.append(name + gap)
    return differ


@pytest.mark.parametrize("case", CASES)
def test_the_same_bits_on_one_and_two_threads(case, fits):
    reference, *others = (fits[run][case[0]] for run in RUNS)
    assert not isinstance(reference, str), reference  # the fit itself failed
    for run, other in zip(list(RUNS)[1:], others):
        differ = _differences(reference, other)
        assert not differ, f"{run} against 1 thread: {json.dumps(differ)}"


def test_n_jobs_none_means_one_thread_unless_joblib_says_otherwise():
    # scikit-learn's glossary: None is 1 outside a joblib.parallel_config context
    assert host_threads(None) == host_threads(1) == 1
    for n in (2, 3):
        with joblib.parallel_config(n_jobs=n):
            assert host_threads(None) == n
            assert host_threads(1) == 1
    assert host_threads(-1) == joblib.cpu_count()

"""Bad input to the kNN search (``skdiffclust._neighbors.kneighbors``) in each of its
paths: scikit-learn's exact search, the approximate index (numba) and the blockwise
torch search. NaN and infinity are refused with the same ValueError, the arguments
are checked with the same words, and data at any scale float64 can hold get their
neighbours.

The cases that once aborted the interpreter (the index's kernels indexed out of
range with a placeholder cell left by infinite float32 distances) run in a
subprocess, so that a return of that fault fails these tests instead of killing
the test run.
"""

import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_blobs

from skdiffclust import _neighbors
from skdiffclust._neighbors import kneighbors, recall

TORCH = pytest.mark.torch

# 2,000 samples: 45 cells, of which 32 probed, so the index is approximate
X, _ = make_blobs(2_000, 6, centers=5, random_state=0)
SMALL, _ = make_blobs(300, 4, random_state=0)
K = 8


def _torch_path(monkeypatch):
    """The exact search above AUTO_EXACT_MAX_SAMPLES: torch's blockwise search."""
    pytest.importorskip("torch")
    monkeypatch.setattr(_neighbors, "AUTO_EXACT_MAX_SAMPLES", 10)
    return "exact"


def _paths(*names):
    """The paths as parameters, torch's with the ``torch`` marker."""
    return [pytest.param(name, marks=TORCH) if name == "torch" else name for name in names]


PATHS = _paths("exact", "approximate", "torch")


def _search(path, monkeypatch, data, n_neighbors, **kwargs):
    algorithm = _torch_path(monkeypatch) if path == "torch" else path
    return kneighbors(data, n_neighbors, algorithm=algorithm, random_state=0, **kwargs)


def _run(code):
    """``code`` in a fresh interpreter, after ``import numpy as np`` and
    ``kneighbors``, with X (300 x 4 blobs); returns the finished process."""
    prologue = ("import numpy as np; from sklearn.datasets import make_blobs; "
                "from skdiffclust._neighbors import kneighbors, recall; "
                "X = make_blobs(300, 4, random_state=0)[0]; ")
    return subprocess.run([sys.executable, "-c", prologue + code], capture_output=True,
                          text=True, timeout=300)


# ---------------------------------------------------------------- once a crash


# Each case prints one line, in a process of its own for all: a kernel that
# indexes out of range again kills it (a negative or 134 return code) and fails
# every case from that one on, instead of the test run.
DANGEROUS = {
    # the index's float32 squares overflowed: a placeholder cell was used as an index
    "scale 1e19": "report(kneighbors(X * 1e19, 5, algorithm='approximate', random_state=0))",
    "scale 1e20": "report(kneighbors(X * 1e20, 5, algorithm='approximate', random_state=0))",
    "scale 1e25": "report(kneighbors(X * 1e25, 5, algorithm='approximate', random_state=0))",
    "scale 1e300": "report(kneighbors(X * 1e300, 5, algorithm='approximate', random_state=0))",
    "infinity": "Y = X.copy(); Y[3, 1] = np.inf; kneighbors(Y, 5, algorithm='approximate')",
    "NaN": "Y = X.copy(); Y[3, 1] = np.nan; kneighbors(Y, 5, algorithm='approximate')",
    # neighbours 3e308 apart: found, but their distance is beyond float64
    "distances beyond float64": "kneighbors(np.array([[1.5e308, 0.0], [-1.5e308, 0.0], "
                                "[1.5e308, 1.0]]), 2, algorithm='approximate')",
    # the kernels' own entries refuse what would make them index out of range
    "points with infinity": "P = X.astype(np.float32); P[0, 0] = np.inf; "
                            "ivf.ivf_kneighbors(P, 5, seed=0)",
    "points beyond float32's squares": "ivf.ivf_kneighbors(np.float32(X * 1e19), 5, seed=0)",
    "points in float64": "ivf.ivf_kneighbors(X, 5, seed=0)",
    "no neighbour": "ivf.ivf_kneighbors(np.float32(X), 0, seed=0)",
    "probes beyond the cells": (
        "P = ivf._with_squared_norms(np.float32(X)); "
        "ivf._scan_in_calls(P, P, np.array([0, 150, 300]), np.full((300, 1), 2, np.int32), "
        "np.array([0, 300]), True, np.full((300, 5), np.inf, np.float32), "
        "np.full((300, 5), 300))"),
    "neighbours beyond the rows": (
        "nb._sorted_by_exact_distance(X, np.full((300, 5), 300))"),
    "distances of NaN": (
        "Y = X.copy(); Y[0, 0] = np.nan; nb._sorted_by_exact_distance(Y, np.ones((300, 5), int))"),
}

REPORT = (
    "from skdiffclust import _ivf as ivf, _neighbors as nb\n"
    "exact_d, exact_i = kneighbors(X, 5, algorithm='exact')\n"
    "scale = 1.0\n"
    "def report(found):\n"
    "    error = np.max(np.abs(found[0] / scale - exact_d) / exact_d)\n"
    "    print(f'ok recall={recall(found[1], exact_i):.3f} error={error:.1e}', end='')\n"
    "for name, code in CASES.items():\n"
    "    print(name + ':', end=' ', flush=True)\n"
    "    scale = float(name.split()[-1]) if name.startswith('scale') else 1.0\n"
    "    try:\n"
    "        exec(code)\n"
    "    except Exception as error:\n"
    "        print(type(error).__name__ + ':', error, end='')\n"
    "    print(flush=True)\n"
)


@pytest.fixture(scope="module")
def dangerous():
    process = _run(f"CASES = {DANGEROUS!r}\n" + REPORT)
    lines = dict(line.split(": ", 1) for line in process.stdout.splitlines() if ": " in line)
    return process, lines


def test_no_case_aborts_the_interpreter(dangerous):
    process, _ = dangerous
    assert process.returncode == 0, process.stderr[-2000:]


@pytest.mark.parametrize("name", [name for name in DANGEROUS if name.startswith("scale")])
def test_huge_values_get_their_exact_neighbours_from_the_index(dangerous, name):
    # 300 samples: every cell probed, so the index finds the exact neighbours
    line = dangerous[1].get(name, "not reached: " + dangerous[0].stderr[-500:])
    assert line.startswith("ok recall=1.000 error="), line
    assert float(line.rsplit("=", 1)[1]) < 1e-12, line


@pytest.mark.parametrize("name, expected", [
    ("infinity", "ValueError: Input X contains infinity"),
    ("NaN", "ValueError: Input X contains NaN."),
    ("distances beyond float64", "ValueError: X's values are so large that the distances "
                                 "between samples exceed float64's range"),
    ("points with infinity", "ValueError: points must be finite with magnitudes up to"),
    ("points beyond float32's squares", "ValueError: points must be finite with magnitudes "
                                        "up to 4.12e+18 at 4 features"),
    ("points in float64", "TypeError: points must be a C-contiguous 2-D float32 array"),
    ("no neighbour", "ValueError: n_neighbors must be a positive integer; got 0."),
    ("probes beyond the cells", "RuntimeError: The approximate neighbour search's scan was "
                                "given probes that are not cell numbers from 0 to 1."),
    ("neighbours beyond the rows", "ValueError: neighbours must be row numbers from 0 to "
                                   "299; got 300 to 300."),
    ("distances of NaN", "ValueError: X must be finite with magnitudes up to"),
])
def test_the_kernels_entries_refuse_what_they_cannot_index_safely(dangerous, name,
                                                                  expected):
    line = dangerous[1].get(name, "not reached: " + dangerous[0].stderr[-500:])
    assert line.startswith(expected), line


@TORCH
def test_prcut_learns_a_chunk_of_huge_values_without_aborting():
    # the public route to the index's fault: a second chunk 1e25 times the first
    process = _run(
        "from skdiffclust import PRCut; "
        "m = PRCut(n_clusters=3, neighbors_algorithm='approximate', random_state=0); "
        "m.partial_fit(X); m.partial_fit(X * 1e25); print('done')")
    last = (process.stderr.strip().splitlines() or [""])[-1]
    # learnt, or refused with a ValueError naming the chunk: never a crash
    assert process.returncode == 0 and "done" in process.stdout or (
        process.returncode == 1 and last.startswith("ValueError")), process.stderr[-2000:]


# ---------------------------------------------------------------- non-finite values


@pytest.mark.parametrize("path", _paths("exact", "torch"))
@pytest.mark.parametrize("value, message", [(np.nan, "Input X contains NaN."),
                                            (np.inf, "Input X contains infinity"),
                                            (-np.inf, "Input X contains infinity")])
def test_nan_and_infinity_are_refused(path, value, message, monkeypatch):
    # the approximate path's cases run in a subprocess (above)
    data = X.copy()
    data[7, 2] = value  # one value: a NaN once dropped its whole feature
    with pytest.raises(ValueError, match=message):
        _search(path, monkeypatch, data, K)


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_nan_and_infinity_are_refused_in_sparse_input(value):
    data = sp.random(50, 6, density=0.5, format="csr", random_state=0)
    data.data[3] = value
    with pytest.raises(ValueError, match="Input X contains"):
        kneighbors(data, 3, algorithm="exact")


# ---------------------------------------------------------------- scales


# the index's huge scales run in the subprocess above (they once aborted it)
SCALES = [pytest.param(path, scale, marks=[TORCH] if path == "torch" else [])
          for path in ("exact", "approximate", "torch")
          for scale in (1e20, 1e25, 1e300, 1e-30, 1e-200, 1e-305)
          if not (path == "approximate" and scale > 1)]


@pytest.mark.parametrize("path, scale", SCALES)
def test_any_scale_float64_holds_gets_the_neighbours_of_unit_scale(path, scale,
                                                                   monkeypatch):
    # in float32 (the index, torch) squares of 1e-30 underflowed and of 1e20
    # overflowed; the search works on X times a power of two and gives the
    # distances in X's units
    _, exact = _exact(X)
    found_d, found = _search(path, monkeypatch, X, K)
    scaled_d, scaled = _search(path, monkeypatch, X * scale, K)
    assert recall(scaled, exact) >= recall(found, exact) - 0.01
    assert recall(scaled, exact) > 0.95
    np.testing.assert_allclose(scaled_d, found_d * scale, rtol=1e-12)


def _exact(data, n_neighbors=K):
    from sklearn.neighbors import NearestNeighbors

    return NearestNeighbors(n_neighbors=n_neighbors).fit(data).kneighbors()


@pytest.mark.parametrize("path", PATHS)
def test_a_large_offset_keeps_its_neighbours(path, monkeypatch):
    # centred in float64 before any float32 product; scikit-learn's search is
    # given the values as they are
    offset = X + 1e6
    _, exact = _exact(X)
    _, found = _search(path, monkeypatch, offset, K)
    assert recall(found, exact) > 0.95


@pytest.mark.parametrize("path", _paths("exact", "torch"))
def test_distances_beyond_float64_are_refused(path, monkeypatch):
    # neighbours 3e308 apart: the search is right, the distance unrepresentable
    # (the index's case runs in the subprocess above)
    data = np.array([[1.5e308, 0.0], [-1.5e308, 0.0], [1.5e308, 1.0]])
    with pytest.raises(ValueError, match="exceed float64's range"):
        _search(path, monkeypatch, data, 2)


# ---------------------------------------------------------------- arguments


ALL_PATHS = _paths("exact", "approximate", "auto", "torch")


@pytest.mark.parametrize("n_neighbors, error, message", [
    (5.0, TypeError, r"n_neighbors must be an integer; got 5.0 \(float\)."),
    ([5], TypeError, r"n_neighbors must be an integer; got \[5\] \(list\)."),
    (True, TypeError, r"n_neighbors must be an integer; got True \(bool\)."),
    ("5", TypeError, r"n_neighbors must be an integer; got '5' \(str\)."),
    (None, TypeError, r"n_neighbors must be an integer; got None \(NoneType\)."),
    (0, ValueError, "n_neighbors=0 must be between 1 and n_samples - 1 = 299."),
    (-3, ValueError, "n_neighbors=-3 must be between 1 and n_samples - 1 = 299."),
    (300, ValueError, "n_neighbors=300 must be between 1 and n_samples - 1 = 299."),
])
@pytest.mark.parametrize("path", ALL_PATHS)
def test_n_neighbors_is_checked_with_the_same_words_in_every_path(
        path, n_neighbors, error, message, monkeypatch):
    with pytest.raises(error, match=f"^{message}$"):
        _search(path, monkeypatch, SMALL, n_neighbors)


def test_an_integer_of_numpy_is_a_number_of_neighbours():
    expected = kneighbors(SMALL, 5, algorithm="approximate", random_state=0)
    found = kneighbors(SMALL, np.int32(5), algorithm="approximate", random_state=0)
    np.testing.assert_array_equal(found[1], expected[1])


@pytest.mark.parametrize("data, message", [
    (SMALL[:, 0], "Expected 2D array, got 1D array instead"),
    (SMALL[None], "Found array with dim 3"),
    (np.zeros((0, 4)), r"Found array with 0 sample\(s\) \(shape=\(0, 4\)\) while a "
                       "minimum of 2 is required"),
    (SMALL[:1], r"Found array with 1 sample\(s\) \(shape=\(1, 4\)\) while a minimum "
                "of 2 is required"),
    (np.zeros((10, 0)), r"Found array with 0 feature\(s\)"),
    (np.array([["a", "b"]] * 10), "dtype='numeric' is not compatible with arrays of "
                                  "bytes/strings"),
    (SMALL + 1j, "Complex data not supported"),
])
@pytest.mark.parametrize("path", ALL_PATHS)
def test_samples_that_are_not_a_table_of_numbers_are_refused(path, data, message,
                                                             monkeypatch):
    with pytest.raises(ValueError, match=message):
        _search(path, monkeypatch, data, 1)


@pytest.mark.parametrize("path", ALL_PATHS)
def test_a_list_of_rows_is_searched_as_the_array(path, monkeypatch):
    found = _search(path, monkeypatch, SMALL.tolist(), 5)
    expected = _search(path, monkeypatch, SMALL, 5)
    np.testing.assert_array_equal(found[1], expected[1])
    np.testing.assert_array_equal(found[0], expected[0])


@pytest.mark.parametrize("algorithm", ["brute", None, 3, ["exact"]])
def test_an_unknown_algorithm_is_named(algorithm):
    with pytest.raises(ValueError, match="algorithm must be one of 'auto', 'exact', "
                                         "'approximate'; got"):
        kneighbors(SMALL, 5, algorithm=algorithm)


@pytest.mark.parametrize("n_jobs, error, message", [
    (0, ValueError, "n_jobs=0 means no thread"),
    (1.5, TypeError, r"n_jobs must be None or an integer; got 1.5 \(float\)."),
    (True, TypeError, r"n_jobs must be None or an integer; got True \(bool\)."),
])
@pytest.mark.parametrize("path", ALL_PATHS)
def test_n_jobs_is_checked_in_every_path(path, n_jobs, error, message, monkeypatch):
    with pytest.raises(error, match=message):
        _search(path, monkeypatch, SMALL, 5, n_jobs=n_jobs)


def test_the_searches_called_directly_check_their_arguments_too():
    with pytest.raises(TypeError, match=r"n_neighbors must be an integer; got 5.0"):
        _neighbors.approximate_kneighbors(SMALL, 5.0)
    with pytest.raises(ValueError, match="Input X contains NaN"):
        _neighbors.approximate_kneighbors(np.full((5, 2), np.nan), 2)


@TORCH
def test_the_torch_search_called_directly_checks_its_arguments_too():
    data = SMALL.copy()
    data[0, 0] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN"):
        _neighbors.torch_kneighbors(data, 5, "cpu")
    with pytest.raises(ValueError, match="n_neighbors=300 must be between 1"):
        _neighbors.torch_kneighbors(SMALL, 300, "cpu")

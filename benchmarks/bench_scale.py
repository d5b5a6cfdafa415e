"""Scale: kNN search and PRCut from 20,000 to 1,000,000 samples, peers in one process.

Data: ``make_blobs(n, 32, centers=10, cluster_std=6, random_state=0)``,
scaled as PRCut scales them for its graph (centred, one global scale). Sections,
in this order (all by default):

* ``search``: the exact kNN search against the approximate one
  (``skdiffclust._neighbors``: its inverted-file index, ``skdiffclust._ivf``),
  10 neighbours: wall and CPU seconds, recall@10 against the exact neighbours of
  2,000 random samples. Above ``--exact-max-n`` the exact search of all samples
  is not run; its time is extrapolated quadratically from the largest size where
  it ran. (``bench_neighbors.py`` sets the search beside pynndescent and FAISS.)
* ``prcut``: ``PRCut(n_clusters=10)`` end to end on the CPU, with the time of
  each phase (kNN search, symmetrisation, connected components, eigengap, spectral start,
  fit to the partition, training, objectives of the candidates, final labels,
  the rest), the peak resident memory above the level before, and the ARI;
  ``neighbors_algorithm='exact'`` too up to ``--exact-max-n``.
* ``peers``: the rows of :data:`FULL_FIT_ROWS` (``KMeans``; ``ClAM.fit`` and
  ``SparseGEMINI.fit`` up to ``--full-fit-max-n``) and of :data:`STREAMING_ROWS`
  (``partial_fit`` over 10 consecutive chunks, then ``predict`` chunk by chunk:
  ``MiniBatchKMeans``, ``ClAM``, ``SparseGEMINI``, and ``PRCut`` where this
  version has ``PRCut.partial_fit``) on the same data: wall and CPU seconds, peak
  resident memory above the level before (freed memory handed back to the
  system before each row), peak of NumPy's allocations (tracemalloc), ARI.
* ``mnist``: the kNN graph of MNIST's 60,000 training images (raw pixels / 255,
  784 features) at ``--mnist-k`` neighbours (150, the paper's graph, and 10),
  exact and approximate (and which one ``'auto'`` picks): wall and CPU seconds,
  and the recall@k of the whole approximate graph against the exact one; with
  ``--mnist-prcut``, PRCut on each graph too (the paper's protocol of
  ``bench_mnist.py`` at k=150, the defaults otherwise): ACC and ARI. Skipped
  when ``mnist/`` is not in the data folder (``$SKDIFFCLUST_DATA_HOME``, else
  ``~/skdiffclust_data``).

Each timing is printed with the load average at its start: the project's
machine has 2 cores shared with other jobs. Usage::

    python benchmarks/bench_scale.py                      # 20k, 70k, 1M
    python benchmarks/bench_scale.py --quick              # 20k only
    python benchmarks/bench_scale.py --sizes 5000,10000,20000 --only search
    python benchmarks/bench_scale.py --only prcut,mnist --sizes 70000,1000000
    python benchmarks/bench_scale.py --only mnist --mnist-prcut
    python benchmarks/bench_scale.py --only peers --sizes 70000
    python benchmarks/bench_scale.py --only prcut,peers --sizes 70000,1000000 \\
        --csv benchmarks/results/scale.csv

Out of core (``--memmap``, run alone): 10,000,000 x 16 float32 blobs (10
clusters, standard deviation 6, centres uniform in [-10, 10]; 640 MB) are
written to a temporary file chunk by chunk with ordinary writes (the pages go to
the page cache, not into the process), then each estimator with ``partial_fit``
(``MiniBatchKMeans``, ``ClAM``, ``SparseGEMINI``, ``PRCut`` if this version has
``PRCut.partial_fit``) streams the file in a fresh process: ``partial_fit`` on
each chunk of ``--chunk-rows`` rows, then ``predict`` chunk by chunk into an
int8 array of all the labels. Before the stream, the estimator is warmed up on
3,000 points in memory (numba kernels loaded, torch initialised) and the file's
pages are dropped from the page cache (reads go to the disk). Printed: the
seconds of the stream and of stream + predict, the peak resident set size
(VmRSS, sampled every 5 ms) above its level just before the stream, of it the
file pages mapped (RssFile), the whole process's peak (``ru_maxrss``, imports
and warm-up included: an upper bound), ``n_samples_seen_`` and the ARI on
200,000 random rows. A page of a memory-mapped file that is read counts in the
resident set while it stays mapped, so ``--memmap-access`` says how the chunks
are read (see :func:`file_chunks`): ``reopen`` (default) maps each chunk alone
and unmaps it after use; ``madvise`` maps the file once and releases each
chunk's pages with ``madvise(MADV_DONTNEED)``; ``plain`` maps the file once and
releases nothing (the resident set grows by every page read, up to the file's
size: what ``X = np.memmap(...); est.partial_fit(X[a:b])`` does)::

    python benchmarks/bench_scale.py --memmap                          # 10M rows
    python benchmarks/bench_scale.py --memmap --memmap-access all \\
        --memmap-estimators MiniBatchKMeans
    python benchmarks/bench_scale.py --memmap --memmap-rows 10000000,PRCut=1000000 \\
        --chunk-rows 250000,PRCut=100000
    python benchmarks/bench_scale.py --memmap --memmap-rows 1000000 --chunk-rows 100000
    python benchmarks/bench_scale.py --memmap --memmap-path /tmp/blobs.f32  # kept, reused
    python benchmarks/bench_scale.py --memmap --chunk-rows 250000,PRCut=100000 \\
        --csv benchmarks/results/scale.csv
    python benchmarks/bench_scale.py --memmap --memmap-access plain \\
        --memmap-estimators MiniBatchKMeans --csv benchmarks/results/scale.csv
    python benchmarks/bench_scale.py --memmap --memmap-estimators PRCut \\
        --csv benchmarks/results/scale.csv                  # 250,000 rows a chunk

``--memmap-rows`` gives the rows of the file and, as ``NAME=ROWS`` items, caps
one estimator's stream (the first rows of the file) where the whole file would
take too long; ``--chunk-rows`` takes ``NAME=ROWS`` items too.
"""

import argparse
import contextlib
import functools
import gc
import importlib
import json
import mmap
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
import warnings

import numpy as np
from sklearn.cluster import KMeans, MiniBatchKMeans
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score
from sklearn.neighbors import NearestNeighbors

from _memory import release_freed_memory
from _results import load_average, save_run
from bench_prcut import measured
from skdiffclust import _neighbors
from skdiffclust._utils._validation import center_and_scale

N_NEIGHBORS = 10
N_CLUSTERS = 10
N_CHUNKS = 10
RECALL_SAMPLES = 2_000
SECTIONS = ("search", "prcut", "peers", "mnist")


@functools.lru_cache(maxsize=1)
def blobs(n_samples):
    """The issue's blobs: (X, y, Z), Z scaled as PRCut's graph sees them."""
    X, y = make_blobs(n_samples, 32, centers=N_CLUSTERS, cluster_std=6,
                      random_state=0)
    return X, y, center_and_scale(X)[0]


def load():
    return f"load {os.getloadavg()[0]:.1f}"


def timed(fn):
    """(wall seconds, CPU seconds of the process, result) of fn()."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, result


# -- search ------------------------------------------------------------------------


def exact_sample(Z, rows, n_neighbors=N_NEIGHBORS):
    """The exact neighbours (itself excluded) of the samples ``rows``."""
    found = NearestNeighbors(n_neighbors=n_neighbors + 1).fit(Z).kneighbors(
        Z[rows], return_distance=False)
    return _neighbors._without_self(found, n_neighbors, rows)


def recall_rows(n_samples):
    return np.sort(np.random.default_rng(0).choice(
        n_samples, min(RECALL_SAMPLES, n_samples), replace=False))


def run_search(sizes, exact_max_n, n_jobs):
    print(f"\nkNN search, {N_NEIGHBORS} neighbours, n_jobs={n_jobs}: wall / CPU seconds, "
          f"recall@{N_NEIGHBORS} on {RECALL_SAMPLES:,} samples")
    largest = None
    for n in sizes:
        Z = blobs(n)[2]
        rows = recall_rows(n)
        truth = exact_sample(Z, rows)
        cells = []
        if n <= exact_max_n:
            state = load()
            wall, cpu, (_, exact) = timed(lambda: _neighbors.kneighbors(
                Z, N_NEIGHBORS, algorithm="exact", n_jobs=n_jobs))
            largest = (n, wall)
            cells.append(f"exact {wall:6.1f} / {cpu:6.1f} s ({state})")
        elif largest is not None:
            estimate = largest[1] * (n / largest[0]) ** 2
            cells.append(f"exact ~{estimate:,.0f} s (extrapolated from n={largest[0]:,})")
        state = load()
        wall_a, cpu_a, (_, approx) = timed(lambda: _neighbors.kneighbors(
            Z, N_NEIGHBORS, algorithm="approximate", n_jobs=n_jobs, random_state=0))
        cells.append(f"approximate {wall_a:6.1f} / {cpu_a:6.1f} s, recall "
                     f"{_neighbors.recall(approx[rows], truth):.4f} ({state})")
        if n <= exact_max_n:
            cells.append(f"exact / approximate {wall / wall_a:.1f}x")
        print(f"  n={n:>9,}: " + " | ".join(cells), flush=True)


# -- MNIST: many features, k = 150 and 10 --------------------------------------------


def mnist_pixels():
    """MNIST's 60,000 training images, raw pixels / 255 (float64), and labels; None
    when the data folder is absent."""
    from _mnist_data import DEFAULT_DATA_DIR, FILES, _idx_file, load_mnist

    if not all(_idx_file(DEFAULT_DATA_DIR, name) for name in FILES.values()):
        print(f"\nMNIST: not found in {DEFAULT_DATA_DIR}, skipped")
        return None
    data = load_mnist(DEFAULT_DATA_DIR)
    return data.train_images.reshape(len(data.train_images), -1).astype(np.float64), \
        data.train_labels


def run_mnist(ks, n_jobs, with_prcut):
    """Each k's graph of MNIST's pixels, exact and approximate: wall / CPU seconds,
    and the recall of the whole approximate graph against the exact one; with
    ``with_prcut``, PRCut (the paper's protocol at k=150, the defaults at k=10)
    on both graphs."""
    loaded = mnist_pixels()
    if loaded is None:
        return
    X, y = loaded
    print(f"\nMNIST: the kNN graph of the 60,000 training images' raw pixels / 255, "
          f"n_jobs={n_jobs}: wall / CPU seconds, recall@k of the whole graph")
    for k in ks:
        state = load()
        wall, cpu, (_, exact) = timed(lambda: _neighbors.kneighbors(
            X, k, algorithm="exact", n_jobs=n_jobs))
        print(f"  k={k:<4} exact {wall:6.1f} / {cpu:6.1f} s ({state})", flush=True)
        state = load()
        wall, cpu, (_, approximate) = timed(lambda: _neighbors.kneighbors(
            X, k, algorithm="approximate", n_jobs=n_jobs, random_state=0))
        auto = "exact" if _neighbors.exact_is_affordable(*X.shape, k) else "approximate"
        print(f"  k={k:<4} approximate {wall:6.1f} / {cpu:6.1f} s, recall "
              f"{_neighbors.recall(approximate, exact):.4f} ({state}); 'auto' searches "
              f"{auto}ly", flush=True)
        if with_prcut:
            run_mnist_prcut(X, y, k)


def run_mnist_prcut(X, y, k):
    from _mnist_cases import PRCUT_MNIST

    from skdiffclust import PRCut
    from skdiffclust.metrics import clustering_accuracy

    params = PRCUT_MNIST if k == PRCUT_MNIST["n_neighbors"] else dict(
        n_neighbors=k, random_state=0)
    for algorithm in ("exact", "approximate"):
        state = load()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            wall, cpu, model = timed(lambda: PRCut(
                N_CLUSTERS, device="cpu", neighbors_algorithm=algorithm, **params).fit(X))
        print(f"    PRCut({params}) on the {algorithm} graph: ACC "
              f"{clustering_accuracy(y, model.labels_):.4f}, ARI "
              f"{adjusted_rand_score(y, model.labels_):.4f}, {wall:.0f} / {cpu:.0f} s "
              f"({state})", flush=True)


# -- PRCut, phase by phase ---------------------------------------------------------

# (phase, module, function): the time spent in each function, less the time of
# the phases called inside it (fit to the partition runs inside the training)
PHASES = [
    ("kNN search", "skdiffclust._graphcut._graph", "kneighbors"),
    ("symmetrisation", "skdiffclust._graphcut._graph", "affinity_from_neighbors"),
    ("components", "skdiffclust.prcut._start", "connected_component_labels"),
    ("eigengap", "skdiffclust._graphcut._spectral", "narrow_eigengap"),
    ("spectral start", "skdiffclust._graphcut._spectral", "spectral_partition"),
    ("fit to partition", "skdiffclust.prcut._fit", "fit_to_partition"),
    ("training", "skdiffclust.prcut._fit", "train_prcut"),
    ("objectives", "skdiffclust._graphcut._graph", "partition_objective"),
    ("final labels", "skdiffclust.prcut._estimator", "exported_network"),
]


@contextlib.contextmanager
def phase_clock():
    """Wall and CPU seconds per phase of :data:`PHASES`, exclusive of nested phases.

    The functions are wrapped in their modules for the duration (a phase whose
    function a later version renamed is reported as absent).
    """
    totals = {name: [0.0, 0.0] for name, _, _ in PHASES}
    stack = []
    patched = []

    def wrap(name, function):
        @functools.wraps(function)
        def timed_phase(*args, **kwargs):
            stack.append([0.0, 0.0])  # time of nested phases
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                spent = (time.perf_counter() - wall, time.process_time() - cpu)
                nested = stack.pop()
                totals[name][0] += spent[0] - nested[0]
                totals[name][1] += spent[1] - nested[1]
                if stack:
                    stack[-1][0] += spent[0]
                    stack[-1][1] += spent[1]
        return timed_phase

    for name, module_name, attribute in PHASES:
        module = importlib.import_module(module_name)
        if hasattr(module, attribute):
            original = getattr(module, attribute)
            patched.append((module, attribute, original))
            setattr(module, attribute, wrap(name, original))
        else:
            totals[name] = None
    try:
        yield totals
    finally:
        for module, attribute, original in patched:
            setattr(module, attribute, original)


def run_prcut(sizes, exact_max_n):
    from skdiffclust import PRCut

    print(f"\nPRCut(n_clusters={N_CLUSTERS}) end to end on the CPU (defaults, random_state=0): "
          "wall / CPU seconds per phase")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        PRCut(n_clusters=2, max_iter=2, random_state=0, device="cpu").fit(
            blobs(sizes[0])[0][:500])  # torch's lazy initialisation, not timed
    for n in sizes:
        X, y, _ = blobs(n)
        algorithms = ["exact", "auto"] if n <= exact_max_n else ["auto"]
        if "neighbors_algorithm" not in PRCut().get_params():
            algorithms = [None]  # a version before the parameter (its search: exact)
        for algorithm in algorithms:
            params = {} if algorithm is None else {"neighbors_algorithm": algorithm}
            state = load()
            with phase_clock() as phases, warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cpu = time.process_time()
                wall, memory, model = measured(lambda: PRCut(
                    n_clusters=N_CLUSTERS, device="cpu", random_state=0,
                    **params).fit(X))
                cpu = time.process_time() - cpu
            ari = adjusted_rand_score(y, model.labels_)
            RESULT_ROWS.append({
                "dataset": f"blobs-{n}", "estimator": "PRCut" if algorithm in (None, "auto")
                else f"PRCut-{algorithm}", "seconds": wall, "cpu_seconds": cpu,
                "peak_mib": memory / 2**20, "ari": ari, "epochs": model.n_iter_,
                "note": f"PRCut(n_clusters={N_CLUSTERS}) end to end" + (
                    "" if algorithm is None else f", neighbors_algorithm={algorithm!r}")})
            print(f"  n={n:,} neighbors_algorithm={algorithm!r}: {wall:.1f} / {cpu:.1f} s, "
                  f"peak +{memory / 2**20:,.0f} MiB, ARI {ari:.4f}, {model.n_iter_} "
                  f"epochs ({state})")
            accounted = [0.0, 0.0]
            for name, spent in phases.items():
                if spent is None:
                    print(f"    {name:<18} (no such function in this version)")
                    continue
                accounted = [accounted[0] + spent[0], accounted[1] + spent[1]]
                print(f"    {name:<18} {spent[0]:8.2f} / {spent[1]:8.2f} s")
            print(f"    {'the rest':<18} {wall - accounted[0]:8.2f} / "
                  f"{cpu - accounted[1]:8.2f} s", flush=True)


# -- peers: full fits and streamed fits on the same data ---------------------------


def clam(n_clusters, seed):
    from skdiffclust import ClAM

    return ClAM(n_clusters, random_state=seed)


def sparse_gemini(n_clusters, seed):
    from skdiffclust import SparseGEMINI

    return SparseGEMINI(n_clusters, random_state=seed)


def prcut(n_clusters, seed):
    from skdiffclust import PRCut

    return PRCut(n_clusters, random_state=seed, device="cpu")


def minibatch_kmeans(n_clusters, seed):
    return MiniBatchKMeans(n_clusters, random_state=seed)


# estimator factories (n_clusters, seed) of the streamed rows and the memmap runs
STREAMED = {"MiniBatchKMeans": minibatch_kmeans, "ClAM": clam,
            "SparseGEMINI": sparse_gemini, "PRCut": prcut}


def streams(name):
    """Whether this version's estimator has partial_fit (PRCut's came later)."""
    return hasattr(STREAMED[name](2, 0), "partial_fit")


def chunk_bounds(n_samples, n_chunks):
    edges = np.linspace(0, n_samples, n_chunks + 1).round().astype(int)
    return list(zip(edges[:-1], edges[1:]))


def kmeans_fit(X, n_clusters, n_chunks, seed):
    return KMeans(n_clusters, random_state=seed).fit(X).labels_


def full_fit(make):
    def fit(X, n_clusters, n_chunks, seed):
        return make(n_clusters, seed).fit(X).labels_
    return fit


def streamed_fit(make):
    """partial_fit over n_chunks consecutive chunks of X, then predict chunk by chunk."""
    def fit(X, n_clusters, n_chunks, seed):
        model = make(n_clusters, seed)
        bounds = chunk_bounds(X.shape[0], n_chunks)
        for start, stop in bounds:
            model.partial_fit(X[start:stop])
        return np.concatenate([model.predict(X[start:stop]) for start, stop in bounds])
    return fit


# Rows of the peers table: name -> fit(X, n_clusters, n_chunks, seed) returning the
# labels of every row of X. STREAMING_ROWS see X in n_chunks consecutive chunks
# (X may be an np.memmap; the out-of-core runs are the --memmap section).
# FULL_FIT_MAX_N: the full fits run only up to that many samples (--full-fit-max-n
# changes it; SparseGEMINI.fit takes about a minute at 70,000).
FULL_FIT_ROWS = {"KMeans": kmeans_fit, "ClAM.fit": full_fit(clam),
                 "SparseGEMINI.fit": full_fit(sparse_gemini)}
FULL_FIT_MAX_N = {"ClAM.fit": 100_000, "SparseGEMINI.fit": 100_000}
STREAMING_ROWS = {f"{name}.partial_fit ({N_CHUNKS} chunks)": streamed_fit(make)
                  for name, make in STREAMED.items() if streams(name)}


def warm_up(rows):
    """numba's kernels loaded (compiled the first time), torch initialised: not timed."""
    X, _ = make_blobs(3000, 32, centers=N_CLUSTERS, random_state=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for fit in rows.values():
            fit(X, N_CLUSTERS, 2, 0)


def run_peers(sizes, full_fit_max_n=None):
    print("\npeers on the same data: wall / CPU seconds, peak resident memory above the "
          "level before, peak of NumPy's allocations (tracemalloc), ARI")
    missing = [name for name in STREAMED if not streams(name)]
    if missing:
        print(f"  no partial_fit in this version: {', '.join(missing)}")
    limits = dict(FULL_FIT_MAX_N)
    if full_fit_max_n is not None:
        limits = {name: full_fit_max_n for name in limits}
    rows = {**FULL_FIT_ROWS, **STREAMING_ROWS}
    warm_up({name: fit for name, fit in rows.items() if name != "KMeans"})
    for n in sizes:
        X, y, _ = blobs(n)
        for name, fit in rows.items():
            if n > limits.get(name, n):
                print(f"  n={n:>9,} {name:<40} not run above n={limits[name]:,}")
                continue
            release_freed_memory()
            state = load()
            tracemalloc.start()
            cpu = time.process_time()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                wall, memory, labels = measured(lambda: fit(X, N_CLUSTERS, N_CHUNKS, 0))
            cpu = time.process_time() - cpu
            traced = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            RESULT_ROWS.append({
                "dataset": f"blobs-{n}", "estimator": name.split(" ")[0], "seconds": wall,
                "cpu_seconds": cpu, "peak_mib": memory / 2**20, "numpy_mib": traced / 2**20,
                "ari": adjusted_rand_score(y, labels), "note": f"peers: {name}"})
            print(f"  n={n:>9,} {name:<40} {wall:7.1f} / {cpu:7.1f} s  "
                  f"+{memory / 2**20:7,.0f} MiB RSS  {traced / 2**20:7,.0f} MiB traced  "
                  f"ARI {adjusted_rand_score(y, labels):.4f} ({state})", flush=True)


# -- out of core: a float32 file on disk, streamed through partial_fit -----------------

MEMMAP_FEATURES = 16
MEMMAP_STD = 6.0
# make_blobs' centers (uniform in [-10, 10]), fixed so that every chunk of the file
# is drawn from the same mixture
MEMMAP_CENTERS = np.random.default_rng(0).uniform(-10, 10, (N_CLUSTERS, MEMMAP_FEATURES))
ARI_SAMPLES = 200_000
ACCESS = ("reopen", "madvise", "plain")
WRITE_ROWS = 250_000  # rows drawn (each block from its own seed) and written at a time


def write_blobs_file(path, n_rows):
    """Blobs as raw float32 rows (what ``np.memmap`` reads) in ``path``, their true
    clusters (int8) in ``path + '.labels.npy'``.

    Written block by block with ordinary writes, ``WRITE_ROWS`` at a time: the
    file's pages go to the page cache, never into this process's memory.
    """
    labels = np.empty(n_rows, dtype=np.int8)
    with open(path, "wb") as file:
        for index, (start, stop) in enumerate(chunk_ranges(n_rows, WRITE_ROWS)):
            X, y = make_blobs(stop - start, centers=MEMMAP_CENTERS,
                              cluster_std=MEMMAP_STD, random_state=index)
            file.write(X.astype(np.float32).tobytes())
            labels[start:stop] = y
        file.flush()
        os.fsync(file.fileno())
    np.save(path + ".labels.npy", labels)


def chunk_ranges(n_rows, chunk_rows):
    return [(start, min(start + chunk_rows, n_rows)) for start in range(0, n_rows, chunk_rows)]


def drop_page_cache(path):
    """The file's pages out of the page cache (it was synced): reads go to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _rss_status():
    """(VmRSS, RssFile) of this process in bytes: file pages mapped and read count."""
    values = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "RssFile"):
                values[key] = int(rest.split()[0]) * 1024
    return values["VmRSS"], values["RssFile"]


@contextlib.contextmanager
def file_chunks(path, n_rows, access):
    """chunk(start, stop) -> rows start:stop of the float32 file as an array, and
    done(start, stop) to call once the chunk is no longer used.

    * ``reopen``: an ``np.memmap`` of the chunk's rows only, unmapped when dropped;
    * ``madvise``: one ``np.memmap`` of the file, the chunk's pages released from
      this process with ``madvise(MADV_DONTNEED)`` after use (they stay in the page
      cache, which is not this process's memory);
    * ``plain``: one ``np.memmap`` of the file, nothing released: every page read
      stays mapped, and counted in the resident set, until the kernel reclaims it.
    """
    row_bytes = MEMMAP_FEATURES * 4
    if access == "reopen":
        def chunk(start, stop):
            return np.memmap(path, dtype=np.float32, mode="r", offset=start * row_bytes,
                             shape=(stop - start, MEMMAP_FEATURES))
        yield chunk, lambda start, stop: None
        return
    with open(path, "rb") as file:
        mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    X = np.frombuffer(mapped, dtype=np.float32).reshape(n_rows, MEMMAP_FEATURES)

    def done(start, stop):
        if access == "madvise":
            first = start * row_bytes // mmap.PAGESIZE * mmap.PAGESIZE
            mapped.madvise(mmap.MADV_DONTNEED, first, stop * row_bytes - first)

    try:
        yield (lambda start, stop: X[start:stop]), done
    finally:
        X = None  # the array's buffer must go before the map closes
        mapped.close()


def memmap_worker(spec):
    """One estimator streamed over the file, in this (fresh) process; prints JSON."""
    path, name, n_rows, chunk_rows, access = (spec[key] for key in (
        "path", "name", "n_rows", "chunk_rows", "access"))
    file_rows = os.path.getsize(path) // (MEMMAP_FEATURES * 4)
    warnings.simplefilter("ignore")
    make = STREAMED[name]
    X, _ = make_blobs(3000, centers=MEMMAP_CENTERS, cluster_std=MEMMAP_STD,
                      random_state=10**6)
    warm = make(N_CLUSTERS, 1)  # kernels loaded, torch initialised: not measured
    warm.partial_fit(X[:1500])
    warm.partial_fit(X[1500:])
    warm.predict(X)
    del warm, X
    gc.collect()
    drop_page_cache(path)
    model = make(N_CLUSTERS, 0)
    ranges = chunk_ranges(n_rows, chunk_rows)
    before, before_file = _rss_status()
    peaks = [before, before_file]
    stop_sampling = threading.Event()

    def sample():
        while not stop_sampling.wait(0.005):
            rss, rss_file = _rss_status()
            peaks[0], peaks[1] = max(peaks[0], rss), max(peaks[1], rss_file)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    cpu, wall = time.process_time(), time.perf_counter()
    with file_chunks(path, file_rows, access) as (chunk, done):
        for start, stop in ranges:
            model.partial_fit(chunk(start, stop))
            done(start, stop)
        fit_wall = time.perf_counter() - wall
        labels = np.empty(n_rows, dtype=np.int8)
        for start, stop in ranges:
            labels[start:stop] = model.predict(chunk(start, stop))
            done(start, stop)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    stop_sampling.set()
    sampler.join()
    rss, rss_file = _rss_status()
    peaks = [max(peaks[0], rss), max(peaks[1], rss_file)]
    max_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    rows = np.sort(np.random.default_rng(0).choice(n_rows, min(ARI_SAMPLES, n_rows),
                                                   replace=False))
    truth = np.load(path + ".labels.npy", mmap_mode="r")[rows]
    print(json.dumps({
        "fit_wall": fit_wall, "wall": wall, "cpu": cpu, "before": before,
        "peak": peaks[0] - before, "peak_file": peaks[1] - before_file,
        "max_rss": max_rss, "ari": adjusted_rand_score(truth, labels[rows]),
        "n_samples_seen": (int(model.n_samples_seen_) if hasattr(model, "n_samples_seen_")
                           else None),
    }))


def run_memmap(file_rows, rows, chunk_rows, names, accesses, path=None):
    """The ``--memmap`` section: see the module's docstring. ``rows`` and
    ``chunk_rows[1]``: {estimator: rows} overriding ``file_rows`` and
    ``chunk_rows[0]``."""
    chunk_rows, chunks_by_name = chunk_rows
    print(f"\nout of core: {file_rows:,} x {MEMMAP_FEATURES} float32 blobs in a file "
          f"({file_rows * MEMMAP_FEATURES * 4 / 1e6:,.0f} MB), streamed through "
          f"partial_fit in chunks (rows per call below), then predicted in chunks; "
          "each estimator in a fresh process, the file's pages dropped from the page "
          "cache before it starts. Peak resident set above the level before the "
          "stream (sampled every 5 ms; file pages mapped count), of it file pages; "
          f"ARI on {ARI_SAMPLES:,} random rows")
    with contextlib.ExitStack() as stack:
        if path is None:
            path = os.path.join(stack.enter_context(tempfile.TemporaryDirectory(
                prefix="bench_scale_")), "blobs.f32")
        expected = file_rows * MEMMAP_FEATURES * 4
        if os.path.exists(path) and os.path.getsize(path) == expected and \
                os.path.exists(path + ".labels.npy"):
            print(f"  reusing {path}")
        else:
            state = load()
            wall, memory, _ = measured(lambda: write_blobs_file(path, file_rows))
            print(f"  wrote {path} in {wall:.1f} s, peak +{memory / 2**20:,.0f} MiB "
                  f"RSS ({state})", flush=True)
        for name in names:
            if not streams(name):
                print(f"  {name}: no partial_fit in this version, skipped")
                continue
            n = min(rows.get(name, file_rows), file_rows)
            chunk = chunks_by_name.get(name, chunk_rows)
            for access in accesses:
                spec = dict(path=path, name=name, n_rows=n, chunk_rows=chunk,
                            access=access)
                state = load()
                out = subprocess.run(
                    [sys.executable, os.path.abspath(__file__), "--memmap-worker",
                     json.dumps(spec)], capture_output=True, text=True)
                if out.returncode != 0:
                    print(f"  {name} ({access}): failed\n{out.stderr[-2000:]}")
                    continue
                r = json.loads(out.stdout.strip().splitlines()[-1])
                RESULT_ROWS.append({
                    "dataset": f"memmap-{n}-by-{chunk}",
                    "estimator": f"{name}.partial_fit" + ("" if access == "reopen"
                                                          else f"-{access}"),
                    "seconds": r["wall"], "cpu_seconds": r["cpu"],
                    "peak_mib": r["peak"] / 2**20, "file_mib": r["peak_file"] / 2**20,
                    "ari": r["ari"], "note": f"out of core: {n:,} rows in chunks of "
                    f"{chunk:,} ({access}), fit and predict, peak above the level before"})
                seen = ("" if r["n_samples_seen"] is None
                        else f", n_samples_seen_ {r['n_samples_seen']:,}")
                print(f"  {name + '.partial_fit':<30} {access:<8} {n:>11,} rows in "
                      f"chunks of {chunk:,}: fit "
                      f"{r['fit_wall']:6.1f} s, fit + predict {r['wall']:6.1f} / "
                      f"{r['cpu']:6.1f} s wall / CPU, peak +{r['peak'] / 2**20:5,.0f} MiB "
                      f"(file pages +{r['peak_file'] / 2**20:4,.0f}) above "
                      f"{r['before'] / 2**20:,.0f} MiB, process peak "
                      f"{r['max_rss'] / 2**20:,.0f} MiB, ARI {r['ari']:.4f}{seen} ({state})",
                      flush=True)


# the rows --csv writes: one per measured fit, appended by the sections
RESULT_ROWS = []


def parse_rows(text, default):
    """'10000000,PRCut=1000000' -> (10000000, {'PRCut': 1000000})."""
    rows, by_name = default, {}
    for item in text.split(","):
        name, _, value = item.rpartition("=")
        if name:
            by_name[name] = int(value)
        else:
            rows = int(value)
    return rows, by_name


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20,000 samples only")
    parser.add_argument("--sizes", default="20000,70000,1000000",
                        help="sample sizes, comma-separated")
    parser.add_argument("--only", default=",".join(SECTIONS),
                        help=f"sections, comma-separated, among {', '.join(SECTIONS)}")
    parser.add_argument("--mnist-k", default="150,10",
                        help="neighbours of the MNIST graphs, comma-separated")
    parser.add_argument("--mnist-prcut", action="store_true",
                        help="PRCut on MNIST's exact and approximate graphs (minutes)")
    parser.add_argument("--exact-max-n", type=int, default=70_000,
                        help="largest size searched exactly (default 70,000)")
    parser.add_argument("--full-fit-max-n", type=int, default=None,
                        help="largest size of the full fits of ClAM and SparseGEMINI in "
                             "the peers (default 100,000)")
    parser.add_argument("--n-jobs", type=int, default=2,
                        help="threads of the searches (default 2, the machine's cores)")
    group = parser.add_argument_group("out of core (--memmap)")
    group.add_argument("--memmap", action="store_true",
                       help="the out-of-core runs only: a float32 file streamed through "
                            "partial_fit")
    group.add_argument("--memmap-rows", default="10000000",
                       help="rows of the file (default 10,000,000), and NAME=ROWS items "
                            "capping one estimator's stream, e.g. 10000000,PRCut=1000000")
    group.add_argument("--chunk-rows", default="250000",
                       help="rows per partial_fit (and predict) call (default 250,000), "
                            "and NAME=ROWS items for one estimator, e.g. "
                            "250000,PRCut=100000")
    group.add_argument("--memmap-estimators", default=",".join(STREAMED),
                       help=f"comma-separated, among {', '.join(STREAMED)} (default all)")
    group.add_argument("--memmap-access", default="reopen",
                       help=f"how chunks are read, comma-separated among {', '.join(ACCESS)}"
                            " or 'all' (default reopen; see file_chunks)")
    group.add_argument("--memmap-path", default=None,
                       help="keep the file there (reused when it has the right size) "
                            "instead of a temporary one")
    group.add_argument("--memmap-worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--csv", help="the result file to write the rows of the prcut, "
                        "peers and --memmap runs to (benchmarks/results/scale.csv, which "
                        "the pages quote); a rerun replaces the rows it measured")
    args = parser.parse_args()
    if args.memmap_worker is not None:
        memmap_worker(json.loads(args.memmap_worker))
        return
    print(f"{os.cpu_count()} CPUs, {load()}")
    load_start = load_average()
    run_sections(args)
    if args.csv and RESULT_ROWS:
        save_run(args.csv, [{"device": "cpu", **row} for row in RESULT_ROWS], "bench_scale",
                 load_start)


def run_sections(args):
    if args.memmap:
        file_rows, caps = parse_rows(args.memmap_rows, 10_000_000)
        chunk_rows = parse_rows(args.chunk_rows, 250_000)
        accesses = ACCESS if args.memmap_access == "all" else args.memmap_access.split(",")
        run_memmap(file_rows, caps, chunk_rows, args.memmap_estimators.split(","),
                   accesses, args.memmap_path)
        return
    sizes = [20_000] if args.quick else [int(n) for n in args.sizes.split(",")]
    sections = args.only.split(",")
    if "search" in sections:
        run_search(sizes, args.exact_max_n, args.n_jobs)
    if "prcut" in sections:
        run_prcut([n for n in sizes if n >= 20_000] or sizes, args.exact_max_n)
    if "peers" in sections:
        run_peers(sizes, args.full_fit_max_n)
    if "mnist" in sections:
        run_mnist([int(k) for k in args.mnist_k.split(",")], args.n_jobs, args.mnist_prcut)


if __name__ == "__main__":
    main()

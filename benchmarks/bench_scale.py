"""Scale: kNN search and PRCut from 20,000 to 1,000,000 samples, peers in one process.

Data: ``make_blobs(n, 32, centers=10, cluster_std=6, random_state=0)`` (issue 21),
scaled as PRCut scales them for its graph (centred, one global scale). Sections,
in this order (all by default):

* ``search``: the exact kNN search (scikit-learn) against the approximate one
  (``skdiffclust._neighbors``, FAISS IVF-Flat), 10 neighbours: wall and CPU
  seconds, recall@10 against the exact neighbours of 2,000 random samples. Above
  ``--exact-max-n`` the exact search of all samples is not run; its time is
  extrapolated quadratically from the largest size where it ran.
* ``libraries`` (only with ``--compare-libraries``): pynndescent, FAISS HNSW and
  FAISS IVF-Flat side by side (the choice written in ``_neighbors``), each
  library's first call in a fresh process (pynndescent's numba compilation with
  an empty ``NUMBA_CACHE_DIR``) and its installed size.
* ``prcut``: ``PRCut(n_clusters=10)`` end to end on the CPU, with the time of
  each phase (kNN search, symmetrisation, connected components, spectral start,
  fit to the partition, training, objectives of the candidates, final labels,
  the rest), the peak resident memory above the level before, and the ARI;
  ``neighbors_algorithm='exact'`` too up to ``--exact-max-n``.
* ``peers``: the rows of :data:`FULL_FIT_ROWS` (``KMeans``) and of
  :data:`STREAMING_ROWS` (``MiniBatchKMeans.partial_fit`` over 10 chunks) on the
  same data: wall and CPU seconds, peak resident memory, peak of NumPy's
  allocations (tracemalloc), ARI.

Each timing is printed with the load average at its start: the project's
machine has 2 cores shared with other jobs. Usage::

    python benchmarks/bench_scale.py                      # 20k, 70k, 1M
    python benchmarks/bench_scale.py --quick              # 20k only
    python benchmarks/bench_scale.py --sizes 5000,10000,20000 --only search
    python benchmarks/bench_scale.py --compare-libraries --sizes 20000,70000
"""

import argparse
import contextlib
import functools
import importlib
import importlib.metadata
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
import warnings

import numpy as np
from sklearn.cluster import KMeans, MiniBatchKMeans
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score
from sklearn.neighbors import NearestNeighbors

from bench_prcut import measured
from skdiffclust import _neighbors
from skdiffclust._utils._validation import center_and_scale

N_NEIGHBORS = 10
N_CLUSTERS = 10
N_CHUNKS = 10
RECALL_SAMPLES = 2_000
SECTIONS = ("search", "prcut", "peers")


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


def exact_sample(Z, rows):
    """The exact neighbours (itself excluded) of the samples ``rows``."""
    found = NearestNeighbors(n_neighbors=N_NEIGHBORS + 1).fit(Z).kneighbors(
        Z[rows], return_distance=False)
    return _neighbors._without_self(found, N_NEIGHBORS, rows)


def recall_rows(n_samples):
    return np.sort(np.random.default_rng(0).choice(
        n_samples, min(RECALL_SAMPLES, n_samples), replace=False))


def run_search(sizes, exact_max_n, n_jobs):
    print(f"\nkNN search, {N_NEIGHBORS} neighbours, n_jobs={n_jobs}: wall / CPU seconds, "
          f"recall@{N_NEIGHBORS} on {RECALL_SAMPLES:,} samples")
    if not _neighbors.approximate_available():
        print('  FAISS is not installed (pip install "skdiffclust[ann]"): exact only')
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
        if _neighbors.approximate_available():
            state = load()
            wall_a, cpu_a, (_, approx) = timed(lambda: _neighbors.kneighbors(
                Z, N_NEIGHBORS, algorithm="approximate", n_jobs=n_jobs, random_state=0))
            cells.append(f"approximate {wall_a:6.1f} / {cpu_a:6.1f} s, recall "
                         f"{_neighbors.recall(approx[rows], truth):.4f} ({state})")
            if n <= exact_max_n:
                cells.append(f"exact / approximate {wall / wall_a:.1f}x")
        print(f"  n={n:>9,}: " + " | ".join(cells), flush=True)


# -- libraries ---------------------------------------------------------------------


def pynndescent_search(Z, n_jobs):
    from pynndescent import NNDescent

    index = NNDescent(Z, n_neighbors=N_NEIGHBORS + 1, random_state=0, n_jobs=n_jobs)
    return index.neighbor_graph[0]


def faiss_search(Z, n_jobs, index_factory):
    import faiss

    faiss.omp_set_num_threads(n_jobs)
    points = np.ascontiguousarray(Z, dtype=np.float32)
    index = index_factory(faiss, points)
    index.add(points)
    return index.search(points, N_NEIGHBORS + 1)[1]


def hnsw(faiss, points, m=32, ef_search=64):
    index = faiss.IndexHNSWFlat(points.shape[1], m)
    index.hnsw.efSearch = ef_search
    return index


def ivf_flat(faiss, points):
    n_lists = int(round(np.sqrt(points.shape[0])))
    index = faiss.IndexIVFFlat(faiss.IndexFlatL2(points.shape[1]), points.shape[1],
                               n_lists)
    index.cp.seed = 0
    index.train(points)
    index.nprobe = _neighbors.probed_cells(points.shape[0], n_lists)
    return index


LIBRARIES = {
    "pynndescent (defaults)": ("pynndescent", pynndescent_search),
    "FAISS HNSW (M=32, efSearch=64)": ("faiss", lambda Z, j: faiss_search(Z, j, hnsw)),
    "FAISS HNSW (M=16, efSearch=64)": (
        "faiss", lambda Z, j: faiss_search(Z, j, functools.partial(hnsw, m=16))),
    "FAISS IVF-Flat (as _neighbors: sqrt(n) lists)": (
        "faiss", lambda Z, j: faiss_search(Z, j, ivf_flat)),
}

# what a fresh process runs for each library's first call on 1,000 samples
FIRST_CALL = {
    "pynndescent": ("from pynndescent import NNDescent; "
                    "NNDescent(X, n_neighbors=11, random_state=0).neighbor_graph"),
    "faiss": ("import faiss; i = faiss.IndexIVFFlat(faiss.IndexFlatL2(32), 32, 8); "
              "i.train(X); i.add(X); i.search(X, 11)"),
}


def first_call_seconds(library):
    code = ("import time; start = time.perf_counter(); import numpy as np; "
            "X = np.random.default_rng(0).normal(size=(1000, 32)).astype(np.float32); "
            f"{FIRST_CALL[library]}; print(time.perf_counter() - start)")
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                             capture_output=True, text=True).stdout
    return float(out.split()[-1])


def installed_megabytes(distribution):
    files = importlib.metadata.distribution(distribution).files or []
    return sum(f.locate().stat().st_size for f in files if f.locate().exists()) / 1e6


def run_libraries(sizes, n_jobs):
    print(f"\nANN libraries side by side, n_jobs={n_jobs}: wall / CPU seconds, "
          f"recall@{N_NEIGHBORS} on {RECALL_SAMPLES:,} samples (warm: after a first call)")
    available = {}
    for library, distribution in (("pynndescent", "pynndescent"), ("faiss", "faiss-cpu")):
        try:
            importlib.import_module(library)
        except ImportError:
            print(f"  {library}: not installed, skipped")
            continue
        available[library] = True
        print(f"  {library} {importlib.metadata.version(distribution)}: first call in a "
              f"fresh process (empty numba cache) {first_call_seconds(library):.1f} s, "
              f"installed {installed_megabytes(distribution):.1f} MB", flush=True)
    warm = blobs(sizes[0])[2][:2000]
    for n in sizes:
        Z = blobs(n)[2]
        rows = recall_rows(n)
        truth = exact_sample(Z, rows)
        for name, (library, search) in LIBRARIES.items():
            if library not in available:
                continue
            search(warm, n_jobs)
            state = load()
            wall, cpu, found = timed(lambda: search(Z, n_jobs))
            found = _neighbors._without_self(found[rows], N_NEIGHBORS, rows)
            print(f"  n={n:>9,} {name:<46} {wall:7.1f} / {cpu:7.1f} s  recall "
                  f"{_neighbors.recall(found, truth):.4f} ({state})", flush=True)


# -- PRCut, phase by phase ---------------------------------------------------------

# (phase, module, function): the time spent in each function, less the time of
# the phases called inside it (fit to the partition runs inside the training)
PHASES = [
    ("kNN search", "skdiffclust.prcut._graph", "kneighbors"),
    ("symmetrisation", "skdiffclust.prcut._graph", "affinity_from_neighbors"),
    ("components", "skdiffclust.prcut._estimator", "connected_component_labels"),
    ("spectral start", "skdiffclust.prcut._training", "spectral_partition"),
    ("fit to partition", "skdiffclust.prcut._training", "fit_to_partition"),
    ("training", "skdiffclust.prcut._training", "train_prcut"),
    ("objectives", "skdiffclust.prcut._estimator", "partition_objective"),
    ("final labels", "skdiffclust.prcut._estimator", "predict_probabilities"),
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


def kmeans_fit(X, n_clusters, n_chunks, seed):
    return KMeans(n_clusters, random_state=seed).fit(X).labels_


def minibatch_kmeans_partial_fit(X, n_clusters, n_chunks, seed):
    model = MiniBatchKMeans(n_clusters, random_state=seed)
    for chunk in np.array_split(np.arange(X.shape[0]), n_chunks):
        model.partial_fit(X[chunk])
    return model.predict(X)


# Rows of the peers table: name -> fit(X, n_clusters, n_chunks, seed) returning the
# labels of every row of X. STREAMING_ROWS see X in n_chunks consecutive chunks
# (X may be an np.memmap): the hook where partial_fit rows of ClAM, PRCut and
# SparseGEMINI, and an out-of-core np.memmap row, are added (issue 21).
FULL_FIT_ROWS = {"KMeans": kmeans_fit}
STREAMING_ROWS = {f"MiniBatchKMeans.partial_fit ({N_CHUNKS} chunks)":
                  minibatch_kmeans_partial_fit}


def run_peers(sizes):
    print("\npeers on the same data: wall / CPU seconds, peak resident memory above the "
          "level before, peak of NumPy's allocations (tracemalloc), ARI")
    for n in sizes:
        X, y, _ = blobs(n)
        for name, fit in {**FULL_FIT_ROWS, **STREAMING_ROWS}.items():
            state = load()
            tracemalloc.start()
            cpu = time.process_time()
            wall, memory, labels = measured(lambda: fit(X, N_CLUSTERS, N_CHUNKS, 0))
            cpu = time.process_time() - cpu
            traced = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            print(f"  n={n:>9,} {name:<40} {wall:7.1f} / {cpu:7.1f} s  "
                  f"+{memory / 2**20:7,.0f} MiB RSS  {traced / 2**20:7,.0f} MiB traced  "
                  f"ARI {adjusted_rand_score(y, labels):.4f} ({state})", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20,000 samples only")
    parser.add_argument("--sizes", default="20000,70000,1000000",
                        help="sample sizes, comma-separated")
    parser.add_argument("--only", default=",".join(SECTIONS),
                        help=f"sections, comma-separated, among {', '.join(SECTIONS)}")
    parser.add_argument("--compare-libraries", action="store_true",
                        help="pynndescent and FAISS side by side (not run otherwise)")
    parser.add_argument("--exact-max-n", type=int, default=70_000,
                        help="largest size searched exactly (default 70,000)")
    parser.add_argument("--n-jobs", type=int, default=2,
                        help="threads of the searches (default 2, the machine's cores)")
    args = parser.parse_args()
    sizes = [20_000] if args.quick else [int(n) for n in args.sizes.split(",")]
    sections = args.only.split(",")
    print(f"{os.cpu_count()} CPUs, {load()}")
    if args.compare_libraries:
        run_libraries(sizes, args.n_jobs)
    if "search" in sections:
        run_search(sizes, args.exact_max_n, args.n_jobs)
    if "prcut" in sections:
        run_prcut([n for n in sizes if n >= 20_000] or sizes, args.exact_max_n)
    if "peers" in sections:
        run_peers(sizes)


if __name__ == "__main__":
    main()

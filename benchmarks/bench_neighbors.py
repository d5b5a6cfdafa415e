"""Choosing the approximate kNN search: the libraries side by side, in one process.

Searches, with every library installed among ``skdiffclust`` (its own
inverted-file index, ``_neighbors.kneighbors(algorithm='approximate')``, and its
exact search), ``pynndescent`` (defaults) and FAISS (``faiss-cpu``: IVF-Flat with
the same cells and probes as ours, and HNSW), the k nearest neighbours of

* ``make_blobs(n, 32, centers=10, cluster_std=6, random_state=0)`` scaled as
  PRCut scales them (the blobs of ``bench_scale.py``; isotropic 32-dimensional
  blobs, a hard case), 10 neighbours;
* MNIST's 60,000 training images, raw pixels / 255 (784 features), 150 and 10
  neighbours (the paper's graph, and PRCut's default), when ``mnist/`` is in
  the data folder (``$SKDIFFCLUST_DATA_HOME``, else ``~/skdiffclust_data``).

Printed: each library's first call in a fresh process (an empty numba cache: its
compilation) and installed size; then per case the wall and CPU seconds of a
warm search and its recall@k against the exact neighbours of 2,000 random
samples, with the load average at its start (the project's machine has 2 cores
shared with other jobs). pynndescent and FAISS are not dependencies of the
package: install them to compare (``pip install pynndescent faiss-cpu``)::

    python benchmarks/bench_neighbors.py                          # 70k blobs, MNIST
    python benchmarks/bench_neighbors.py --sizes 20000,70000,1000000 --no-mnist
    python benchmarks/bench_neighbors.py --sizes 0 --searches skdiffclust,faiss-ivf
    python benchmarks/bench_neighbors.py --sizes 70000,1000000 \
        --csv benchmarks/results/neighbors.csv

``--csv PATH`` writes each search's row (wall and CPU seconds, recall@k) to a
result file, which the pages quote; a rerun replaces the rows it measured.
"""

import argparse
import functools
import importlib
import importlib.metadata
import os
import subprocess
import sys
import tempfile

import numpy as np

from _results import load_average, save_run
from bench_scale import blobs, exact_sample, load, mnist_pixels, recall_rows, timed
from skdiffclust import _ivf, _neighbors

RECALL_SAMPLES = 2_000


def skdiffclust_search(Z, n_jobs, n_neighbors, algorithm="approximate"):
    """``_neighbors.kneighbors`` whole: centring, the search, the exact float64
    distances of the pairs found (the libraries below return float32 ones)."""
    return _neighbors.kneighbors(Z, n_neighbors, algorithm=algorithm, n_jobs=n_jobs,
                                 random_state=0)[1]


def pynndescent_search(Z, n_jobs, n_neighbors):
    from pynndescent import NNDescent

    index = NNDescent(Z, n_neighbors=n_neighbors + 1, random_state=0, n_jobs=n_jobs)
    return _neighbors._without_self(index.neighbor_graph[0], n_neighbors)


def faiss_search(Z, n_jobs, n_neighbors, index_factory):
    import faiss

    faiss.omp_set_num_threads(n_jobs)
    points = np.ascontiguousarray(Z, dtype=np.float32)
    index = index_factory(faiss, points, n_neighbors)
    index.add(points)
    return _neighbors._without_self(index.search(points, n_neighbors + 1)[1], n_neighbors)


def hnsw(faiss, points, n_neighbors, m=32, ef_search=64):
    index = faiss.IndexHNSWFlat(points.shape[1], m)
    index.hnsw.efSearch = max(ef_search, n_neighbors + 1)
    return index


def ivf_flat(faiss, points, n_neighbors):
    """FAISS's IVF-Flat with the cells and probes of ``skdiffclust._ivf``."""
    n_cells = _ivf.cell_count(points.shape[0])
    index = faiss.IndexIVFFlat(faiss.IndexFlatL2(points.shape[1]), points.shape[1],
                               n_cells)
    index.cp.seed = 0
    index.train(points)
    index.nprobe = _ivf.probed_cells(points.shape[0], n_cells, n_neighbors)
    return index


# id: (module, description, search(Z, n_jobs, n_neighbors))
SEARCHES = {
    "skdiffclust": ("skdiffclust", "skdiffclust IVF ('approximate')", skdiffclust_search),
    "exact": ("skdiffclust", "skdiffclust exact ('exact': torch above 20k)",
              functools.partial(skdiffclust_search, algorithm="exact")),
    "pynndescent": ("pynndescent", "pynndescent (defaults)", pynndescent_search),
    "faiss-ivf": ("faiss", "FAISS IVF-Flat (the same cells and probes)",
                  lambda Z, j, k: faiss_search(Z, j, k, ivf_flat)),
    "faiss-hnsw16": ("faiss", "FAISS HNSW (M=16, efSearch=64)",
                     lambda Z, j, k: faiss_search(Z, j, k, functools.partial(hnsw, m=16))),
    "faiss-hnsw32": ("faiss", "FAISS HNSW (M=32, efSearch=64)",
                     lambda Z, j, k: faiss_search(Z, j, k, hnsw)),
}

# what a fresh process runs for each library's first call on 3,000 samples
FIRST_CALL = {
    "skdiffclust": ("from skdiffclust._neighbors import kneighbors; "
                    "kneighbors(X, 10, algorithm='approximate')"),
    "pynndescent": ("from pynndescent import NNDescent; "
                    "NNDescent(X, n_neighbors=11, random_state=0).neighbor_graph"),
    "faiss": ("import faiss; i = faiss.IndexIVFFlat(faiss.IndexFlatL2(32), 32, 8); "
              "i.train(X); i.add(X); i.search(X, 11)"),
}
DISTRIBUTIONS = {"skdiffclust": None, "pynndescent": "pynndescent", "faiss": "faiss-cpu"}


def first_call_seconds(library):
    code = ("import time; start = time.perf_counter(); import numpy as np; "
            "X = np.random.default_rng(0).normal(size=(3000, 32)).astype(np.float32); "
            f"{FIRST_CALL[library]}; print(time.perf_counter() - start, "
            "time.process_time())")
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                             capture_output=True, text=True).stdout
    return [float(value) for value in out.split()[-2:]]


def installed_megabytes(distribution):
    files = importlib.metadata.distribution(distribution).files or []
    return sum(f.locate().stat().st_size for f in files if f.locate().exists()) / 1e6


def available_libraries(wanted):
    """The libraries of the searches ``wanted`` that import, each introduced by its
    first call's cost."""
    available = set()
    for library, distribution in DISTRIBUTIONS.items():
        if not any(SEARCHES[search][0] == library for search in wanted):
            continue
        try:
            importlib.import_module(library)
        except ImportError:
            print(f"  {library}: not installed, skipped")
            continue
        available.add(library)
        wall, cpu = first_call_seconds(library)
        size = ("" if distribution is None else f", {distribution} "
                f"{importlib.metadata.version(distribution)} installed "
                f"{installed_megabytes(distribution):.1f} MB")
        print(f"  {library}: first call in a fresh process (empty numba cache, imports "
              f"included) {wall:.1f} / {cpu:.1f} s{size}", flush=True)
    return available


def run_libraries(cases, n_jobs, wanted):
    """``cases``: (name, Z, n_neighbors) searched by every search of ``wanted``
    whose library is installed."""
    print(f"\nANN libraries side by side, n_jobs={n_jobs}: wall / CPU seconds, recall@k "
          f"on {RECALL_SAMPLES:,} samples (warm: after a first call)")
    available = available_libraries(wanted)
    results = []
    for name, Z, k in cases:
        rows = recall_rows(Z.shape[0])
        truth = exact_sample(Z, rows, k)
        for search_id in wanted:
            library, description, search = SEARCHES[search_id]
            if library not in available:
                continue
            search(Z[:3000], n_jobs, k)
            state = load()
            wall, cpu, found = timed(lambda: search(Z, n_jobs, k))
            recall = _neighbors.recall(found[rows], truth)
            print(f"  {name:<20} k={k:<4} {description:<44} {wall:7.1f} / {cpu:7.1f} s  "
                  f"recall {recall:.4f} ({state})", flush=True)
            results.append({"dataset": f"{name} k={k}", "estimator": search_id,
                            "device": "cpu", "seconds": wall, "cpu_seconds": cpu,
                            "recall": recall,
                            "note": f"{description}; {n_jobs} threads; recall@{k} on "
                                    f"{len(rows):,} samples"})
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="70000",
                        help="sizes of the blobs, comma-separated (0: none)")
    parser.add_argument("--mnist-k", default="150,10",
                        help="neighbours of the MNIST cases, comma-separated")
    parser.add_argument("--no-mnist", action="store_true", help="the blobs only")
    parser.add_argument("--searches", default=",".join(SEARCHES),
                        help="comma-separated, among " + ", ".join(SEARCHES))
    parser.add_argument("--n-jobs", type=int, default=2,
                        help="threads of the searches (default 2, the machine's cores)")
    parser.add_argument("--csv", help="the result file to write the searches' rows to "
                        "(benchmarks/results/neighbors.csv, which the pages quote)")
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs, {load()}")
    load_start = load_average()
    cases = [(f"blobs {n:,} x 32", blobs(n)[2], 10)
             for n in map(int, args.sizes.split(",")) if n]
    if not args.no_mnist:
        loaded = mnist_pixels()
        if loaded is not None:
            cases += [("MNIST 60,000 x 784", loaded[0], int(k))
                      for k in args.mnist_k.split(",")]
    rows = run_libraries(cases, args.n_jobs, args.searches.split(","))
    if args.csv:
        save_run(args.csv, rows, "bench_neighbors", load_start, threads=args.n_jobs)


if __name__ == "__main__":
    main()

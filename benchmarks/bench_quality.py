"""Clustering quality on the Clustering Benchmarks suite: ours against scikit-learn's.

Runs, on every dataset of the six batteries of the Clustering Benchmarks suite
(Gagolewski, clustering-data-v1) with at most 10,000 points, 73 of them (the
development batteries ``sipu``, ``fcps`` and ``uci``, on which our estimators'
settings were chosen, and the evaluation batteries ``wut``, ``graves`` and
``other``), our four estimators at their defaults and five of scikit-learn's
clusterers, each fitted once per dataset, in one process:

* ``SpanningForest``: ``SpanningForestClustering(n_clusters=k, random_state=0)``;
* ``ClAM``: ``ClAM(n_clusters=k, random_state=0)``;
* ``PRCut``: ``PRCut(n_clusters=k, random_state=0)`` (skipped, with a note, when
  PyTorch is not installed);
* ``SparseGEMINI``: ``SparseGEMINI(n_clusters=k, random_state=0)``, by ``fit``
  (no feature-selection path);
* ``KMeans``: ``KMeans(n_clusters=k, n_init=10, random_state=0)``;
* ``GMM``: ``GaussianMixture(n_components=k, random_state=0)``, labels by
  ``predict``;
* ``Ward``: ``AgglomerativeClustering(n_clusters=k, linkage='ward')``;
* ``Spectral``: ``SpectralClustering(n_clusters=k, affinity='nearest_neighbors',
  n_neighbors=10, assign_labels='cluster_qr', random_state=0)``: the same
  symmetric 10-NN graph as PRCut's default. ``'cluster_qr'`` reads the labels off
  the spectral embedding directly, with no random k-means restarts; on the three
  batteries scikit-learn's default ``'kmeans'`` and ``'discretize'``
  (``--spectral-labels``) gave the same mean ARI within 0.01;
* ``HDBSCAN``: ``HDBSCAN(copy=True)``, otherwise at its defaults (``copy=True``
  is the coming default; it only silences a FutureWarning); it does not take k;
* ``Genie``: ``genieclust.Genie(n_clusters=k)`` at its defaults
  (``gini_threshold=0.3``; Gagolewski, Bartoszuk and Cena, 2016), a spanning-tree
  method with a balance rule (the ``benchmark`` extra; skipped, with a note, where
  genieclust is not installed).

Data: ``clustbench.load_dataset(battery, name, random_state=0)``, i.e. the
suite's own preprocessing (constant columns removed, centred, scaled by one
overall standard deviation, plus a tiny white noise, seeded here so that every
run sees the same bits). ``uci`` datasets are then standardised per feature
(StandardScaler); the others are clustered as they are. k is the number of
clusters of the first reference labelling, ``labels0``.

Scoring (the suite's convention): every point is clustered, and the adjusted Rand
index (ARI) against ``labels0`` is computed on the points that are not noise
(label 0 in clustbench); ``--reference best`` takes the highest ARI over the dataset's
reference labellings instead (the suite's "best-fitting" convention). HDBSCAN's
noise points (label -1) count as one more cluster. The mean ARI and the mean
rank (1 = best, ties averaged) are taken over the datasets on which every
estimator ran. ``--seeds 0,1,2,3,4`` repeats the run with each
``random_state`` of the estimators (the data stay those of seed 0) and prints the
mean ARI of each seed and over them; ``--seeds-csv PATH`` writes them to a result
file.

Also printed: fit times (wall and CPU, per dataset and in total), the number of
clusters an estimator returned when fewer than k (and whether it warned), the
warnings each estimator emitted (by category, over its fits), failures (an
exception is recorded, the run goes on), and a summary over the datasets whose
symmetrised 10-NN graph (on the data as clustered) has more than one connected
component, where PRCut is compared with SpectralClustering. The summary table at
the end is reStructuredText, for ``doc/benchmarks.rst``; each estimator's mean ARI
per battery follows it. ``--batteries sipu,fcps,uci`` runs the development
batteries only.

Every fit runs under ``threadpool_limits(--threads)`` (BLAS and OpenMP, default 1)
with numba and torch limited to as many threads, so that no estimator gets more
cores than another; each estimator is fitted once on small data before the timed
runs (numba compilation, torch's lazy initialisation).

The full run takes a few minutes on a 2-core CPU (most of it PRCut's fits, then
SparseGEMINI's), ``--quick`` about one, plus numba's first compilation in a fresh
checkout (in the warm-up, before the timed fits).
``--jobs 2`` fits two datasets at a time (each fit still on ``--threads``
threads): faster, but the fit times then include the competition for the cores.

Usage::

    python benchmarks/bench_quality.py --quick          # 10 datasets
    python benchmarks/bench_quality.py                  # all 33 datasets
    python benchmarks/bench_quality.py --estimators PRCut,Spectral --datasets fcps/atom
    python benchmarks/bench_quality.py --csv benchmarks/results/quality.csv

The last is the comparison the documentation quotes: its rows, with the machine,
the date and the load average over the run, replace the file's rows of every
machine (one run is the comparison); then ``python benchmarks/plot_benchmarks.py``
redraws its picture.
"""

import argparse
import importlib.util
import os
import sys
import time
import warnings
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
from scipy.sparse.csgraph import connected_components
from scipy.stats import rankdata
from sklearn.cluster import HDBSCAN, AgglomerativeClustering, KMeans, SpectralClustering
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score
from sklearn.mixture import GaussianMixture
from sklearn.neighbors import kneighbors_graph
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from _data import suite_folder
from _results import load_average, load_span, write_results

import skdiffclust
from skdiffclust import ClAM, PRCut, SpanningForestClustering, SparseGEMINI

DATA = suite_folder()
BATTERIES = ["sipu", "fcps", "uci", "wut", "graves", "other"]
STANDARDISED = {"uci"}
MAX_N = 10_000
SEED = 0
N_NEIGHBORS = 10
# a spread of shapes, sizes and k across the three batteries: clusters lost by
# ClAM or SparseGEMINI (aggregation, d31, r15, s1, statlog), a disconnected 10-NN
# graph (aggregation, d31, r15, s1, atom, target), shapes only a graph separates
# (spiral, atom), balanced two-cluster data (twodiamonds)
QUICK = ["sipu/aggregation", "sipu/d31", "sipu/r15", "sipu/s1", "sipu/spiral",
         "fcps/atom", "fcps/target", "fcps/twodiamonds", "uci/ecoli", "uci/statlog"]

OURS = ["SpanningForest", "ClAM", "PRCut", "SparseGEMINI"]
ESTIMATOR_NAMES = OURS + ["KMeans", "GMM", "Ward", "Spectral", "HDBSCAN", "Genie"]
NEEDS_TORCH = {"PRCut"}
# the peers of other packages (the benchmark extra): the module each needs
NEEDS_MODULE = {"Genie": "genieclust"}
# which reference labelling a fit is scored against: "first" (labels0) or "best"
REFERENCE = "first"
TAKES_NO_K = {"HDBSCAN"}


def make_estimator(name, k, spectral_labels="cluster_qr", seed=SEED):
    """A new, unfitted estimator ``name`` asked for k clusters, seeded by ``seed``."""
    factories = {
        "SpanningForest": lambda: SpanningForestClustering(n_clusters=k, random_state=seed),
        "ClAM": lambda: ClAM(n_clusters=k, random_state=seed),
        "PRCut": lambda: PRCut(n_clusters=k, random_state=seed),
        "SparseGEMINI": lambda: SparseGEMINI(n_clusters=k, random_state=seed),
        "KMeans": lambda: KMeans(n_clusters=k, n_init=10, random_state=seed),
        "GMM": lambda: GaussianMixture(n_components=k, random_state=seed),
        "Ward": lambda: AgglomerativeClustering(n_clusters=k, linkage="ward"),
        "Spectral": lambda: SpectralClustering(
            n_clusters=k, affinity="nearest_neighbors", n_neighbors=N_NEIGHBORS,
            assign_labels=spectral_labels, random_state=seed),
        "HDBSCAN": lambda: HDBSCAN(copy=True),
        "Genie": lambda: importlib.import_module("genieclust").Genie(n_clusters=k),
    }
    return factories[name]()


@dataclass
class Dataset:
    key: str  # battery/name
    X: np.ndarray
    y: np.ndarray  # labels0, 0 = noise
    k: int
    components: int  # of the symmetrised 10-NN graph of X
    smallest: int  # points in its smallest component
    references: tuple = ()  # every reference labelling (labels0 first), 0 = noise


@dataclass
class Fit:
    dataset: str
    estimator: str
    ari: float = float("nan")
    nmi: float = float("nan")
    n_found: int = 0
    seconds: float = float("nan")
    cpu_seconds: float = float("nan")
    warnings: Counter = field(default_factory=Counter)  # (category, message) -> count
    error: str = ""

    @property
    def ok(self):
        return not self.error


# ---------------------------------------------------------------- data


def knn_components(X):
    """Components of the symmetrised 10-NN graph (SpectralClustering's), smallest's size."""
    graph = kneighbors_graph(X, min(N_NEIGHBORS, len(X) - 1), include_self=False)
    count, labels = connected_components(graph + graph.T, directed=False)
    return count, int(np.bincount(labels).min())


def load(key):
    import clustbench

    battery, name = key.split("/")
    ds = clustbench.load_dataset(battery, name, path=str(DATA), random_state=SEED)
    X = ds.data
    if battery in STANDARDISED:
        X = StandardScaler().fit_transform(X)
    return Dataset(key, X, ds.labels[0], int(ds.n_clusters[0]), *knn_components(X),
                   references=tuple(ds.labels))


def suite_keys(batteries, max_n):
    """battery/name of every dataset of the batteries with at most max_n points."""
    import clustbench

    keys = []
    for battery in batteries:
        for name in clustbench.get_dataset_names(battery, path=str(DATA)):
            n = len(clustbench.load_dataset(battery, name, path=str(DATA),
                                            preprocess=False, random_state=SEED).data)
            if n <= max_n:
                keys.append(f"{battery}/{name}")
    return keys


# ---------------------------------------------------------------- fitting


def limit_threads(threads):
    """Numba's and torch's threads (threadpoolctl limits BLAS/OpenMP at each fit)."""
    import numba

    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    if "torch" in sys.modules:  # imported by the warm-up if an estimator needs it
        sys.modules["torch"].set_num_threads(threads)


def scores(ds, labels):
    """ARI and NMI of ``labels`` against labels0, or (``REFERENCE='best'``) the
    highest ARI over the reference labellings and its NMI, on the points that are
    not noise in that labelling."""
    found = []
    for y in ds.references if REFERENCE == "best" and ds.references else [ds.y]:
        keep = y > 0  # the suite's noise points are clustered but not scored
        found.append((adjusted_rand_score(y[keep], labels[keep]),
                      normalized_mutual_info_score(y[keep], labels[keep])))
    return max(found)


def fit_one(name, ds, threads, spectral_labels, seed=SEED):
    """Fit ``name`` once on ``ds``: ARI, clusters found, times, warnings or error."""
    fit = Fit(ds.key, name)
    model = make_estimator(name, ds.k, spectral_labels, seed)
    with warnings.catch_warnings(record=True) as caught, threadpool_limits(threads):
        warnings.simplefilter("always")
        try:
            wall, cpu = time.perf_counter(), time.process_time()
            model.fit(ds.X)
            fit.seconds = time.perf_counter() - wall
            fit.cpu_seconds = time.process_time() - cpu
            labels = model.labels_ if hasattr(model, "labels_") else model.predict(ds.X)
        except Exception as exc:  # recorded and reported; the run goes on
            fit.error = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
    fit.warnings.update((w.category.__name__, str(w.message).splitlines()[0][:200])
                        for w in caught)
    if fit.ok:
        fit.ari, fit.nmi = scores(ds, np.asarray(labels))
        fit.n_found = np.unique(labels[labels >= 0]).size
    return fit


def warm_up(names, threads, spectral_labels):
    """Fit each estimator on small data: numba compilation, torch's initialisation.

    In 3 and 12 dimensions: estimators take other paths (and kernels) above a few
    features, e.g. ClAM's masked loss and the spanning forest's Prim algorithm;
    and with 20 clusters, where ClAM's batches take its vectorised kernel (a
    batch of few lanes takes the compact one): without it the first dataset with
    many clusters would time ClAM's compilation.
    """
    for n_samples, n_features, k in ((200, 3, 3), (200, 12, 3), (400, 2, 20), (400, 12, 20)):
        X, y = make_blobs(n_samples, n_features, centers=k, random_state=SEED)
        tiny = Dataset("warm-up", X, y + 1, k, 1, len(X))
        for name in names:
            fit_one(name, tiny, threads, spectral_labels)


def run_dataset(ds, names, threads, spectral_labels, seed):
    return [fit_one(name, ds, threads, spectral_labels, seed) for name in names]


def init_worker(names, threads, spectral_labels, seed=SEED):
    warm_up(names, threads, spectral_labels)
    limit_threads(threads)


def run_all(datasets, names, threads, spectral_labels, jobs, seed=SEED):
    """(dataset, its fits) for each dataset, in the order they are run."""
    options = dict(names=names, threads=threads, spectral_labels=spectral_labels, seed=seed)
    if jobs == 1:
        start = time.perf_counter()
        init_worker(**options)
        print(f"warm-up: {time.perf_counter() - start:.1f} s")
        yield from ((ds, run_dataset(ds, **options)) for ds in datasets)
        return
    order = sorted(datasets, key=lambda ds: -len(ds.X) * ds.k)  # largest first: balance
    with ProcessPoolExecutor(jobs, initializer=init_worker,
                             initargs=(names, threads, spectral_labels, seed)) as pool:
        yield from zip(order, pool.map(partial(run_dataset, **options), order))


# ---------------------------------------------------------------- reporting


def rst_table(header, rows):
    """A reStructuredText simple table (readable as plain text too)."""
    rows = [[str(cell) for cell in row] for row in rows]
    widths = [max(len(row[j]) for row in [header] + rows) for j in range(len(header))]
    rule = "  ".join("=" * w for w in widths)

    def line(cells):
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()

    return "\n".join([rule, line(header), rule] + [line(r) for r in rows] + [rule])


def ari_cell(fit):
    if fit is None:
        return "n/a"
    return f"{fit.ari:.2f}" if fit.ok else "fail"


def seconds_cell(seconds):
    return f"{seconds:.3f}" if seconds < 10 else f"{seconds:.1f}"


def common_keys(fits, keys, names):
    """Datasets on which every estimator ran."""
    return [key for key in keys if all((key, n) in fits and fits[key, n].ok for n in names)]


def mean_ari(fits, keys, name):
    return np.mean([fits[key, name].ari for key in keys])


def mean_nmi(fits, keys, name):
    return np.mean([fits[key, name].nmi for key in keys])


def mean_ranks(fits, keys, names):
    ranks = np.array([rankdata([-fits[key, n].ari for n in names]) for key in keys])
    return dict(zip(names, ranks.mean(axis=0))) if keys else {}


def print_per_dataset(datasets, fits, names):
    print("\nARI against labels0 (fail: exception, n/a: not run)\n")
    rows = [[ds.key, f"{len(ds.X)}x{ds.X.shape[1]}", ds.k, ds.components]
            + [ari_cell(fits.get((ds.key, n))) for n in names] for ds in datasets]
    print(rst_table(["dataset", "n x d", "k", "comp."] + names, rows))
    print("\nFit time, wall seconds\n")
    rows = [[ds.key] + [seconds_cell(fits[ds.key, n].seconds) if (ds.key, n) in fits
                        and fits[ds.key, n].ok else "n/a" for n in names]
            for ds in datasets]
    rows.append(["total"] + [seconds_cell(total_time(fits, n, "seconds")) for n in names])
    print(rst_table(["dataset"] + names, rows))


def total_time(fits, name, attr):
    return sum(getattr(f, attr) for (_, n), f in fits.items() if n == name and f.ok)


def lost_clusters(fits, datasets, name):
    """[(key, found, asked, warned)] where ``name`` returned fewer than k clusters."""
    if name in TAKES_NO_K:
        return []
    return [(ds.key, fit.n_found, ds.k, bool(fit.warnings)) for ds in datasets
            if (fit := fits.get((ds.key, name))) is not None and fit.ok
            and fit.n_found < ds.k]


def summary_rows(datasets, fits, names):
    keys = [ds.key for ds in datasets]
    common = common_keys(fits, keys, names)
    ranks = mean_ranks(fits, common, names)
    disconnected = [ds.key for ds in datasets if ds.components > 1 and ds.key in common]
    rows = []
    for n in names:
        ran = sum(fits[key, n].ok for key in keys if (key, n) in fits)
        lost = lost_clusters(fits, datasets, n)
        silent = sum(not warned for *_, warned in lost)
        rows.append([
            n, f"{ran}/{len(keys)}",
            f"{mean_ari(fits, common, n):.2f}" if common else "n/a",
            f"{mean_nmi(fits, common, n):.3f}" if common else "n/a",
            f"{ranks[n]:.1f}" if common else "n/a",
            f"{mean_ari(fits, disconnected, n):.2f}" if disconnected else "n/a",
            "n/a" if n in TAKES_NO_K else f"{len(lost)} ({silent} silent)",
            seconds_cell(total_time(fits, n, "seconds")),
            seconds_cell(total_time(fits, n, "cpu_seconds")),
        ])
    header = ["estimator", "ran", "mean ARI", "mean NMI", "mean rank",
              f"mean ARI, disconn. ({len(disconnected)})", "fewer clusters",
              "fit s (wall)", "fit s (CPU)"]
    return header, rows, common, disconnected


def print_battery_means(fits, common, names):
    """Each estimator's mean ARI per battery, over the datasets on which all ran."""
    batteries = sorted({key.split("/")[0] for key in common})
    print("\nMean ARI per battery (datasets on which all ran)\n")
    rows = []
    for n in names:
        rows.append([n] + [f"{mean_ari(fits, [k for k in common if k.startswith(b + '/')], n):.3f}"
                           for b in batteries] + [f"{mean_ari(fits, common, n):.3f}"])
    counts = [sum(k.startswith(b + "/") for k in common) for b in batteries]
    print(rst_table(["estimator"] + [f"{b} ({c})" for b, c in zip(batteries, counts)]
                    + [f"all ({len(common)})"], rows))


def print_cluster_loss(datasets, fits, names):
    print("\nFewer clusters than asked (found/k; silent: no warning during the fit)\n")
    for n in names:
        if n in TAKES_NO_K:
            found = [fits[ds.key, n].n_found for ds in datasets
                     if (ds.key, n) in fits and fits[ds.key, n].ok]
            print(f"  {n}: takes no k (found {min(found, default=0)} to "
                  f"{max(found, default=0)} clusters)")
            continue
        lost = lost_clusters(fits, datasets, n)
        details = ", ".join(f"{key} {found}/{k}{'' if warned else ' silent'}"
                            for key, found, k, warned in lost)
        print(f"  {n}: {len(lost)} datasets{': ' + details if lost else ''}")


def print_warnings(fits, names):
    print("\nWarnings emitted during the fits (fits: datasets with at least one)\n")
    rows = []
    for n in names:
        per_category = defaultdict(lambda: [0, 0, ""])  # fits, total, example
        for (_, name), fit in fits.items():
            if name != n:
                continue
            for category in {c for c, _ in fit.warnings}:
                per_category[category][0] += 1
            for (category, message), count in fit.warnings.items():
                per_category[category][1] += count
                per_category[category][2] = per_category[category][2] or message
        for category, (n_fits, total, example) in sorted(per_category.items()):
            rows.append([n, category, n_fits, total, example[:90]])
        if not per_category:
            rows.append([n, "none", 0, 0, ""])
    print(rst_table(["estimator", "category", "fits", "total", "example"], rows))


def print_failures(fits):
    failed = [fit for fit in fits.values() if not fit.ok]
    print(f"\nFailures: {len(failed)}")
    for fit in failed:
        print(f"  {fit.estimator} on {fit.dataset}: {fit.error}")


def print_disconnected(datasets, fits, names, disconnected):
    print(f"\nDatasets whose symmetrised {N_NEIGHBORS}-NN graph is disconnected "
          f"({len(disconnected)}; ARI; smallest: points in the smallest component)\n")
    if not disconnected:
        return
    by_key = {ds.key: ds for ds in datasets}
    rows = [[key, by_key[key].k, by_key[key].components, by_key[key].smallest]
            + [ari_cell(fits.get((key, n))) for n in names] for key in disconnected]
    rows.append(["mean", "", "", ""] + [f"{mean_ari(fits, disconnected, n):.2f}" for n in names])
    print(rst_table(["dataset", "k", "comp.", "smallest"] + names, rows))
    if {"PRCut", "Spectral"} <= set(names):
        prcut, spectral = (mean_ari(fits, disconnected, n) for n in ("PRCut", "Spectral"))
        print(f"PRCut {prcut:.3f} vs Spectral {spectral:.3f}: PRCut >= Spectral - 0.05: "
              f"{'yes' if prcut >= spectral - 0.05 else 'NO'}")


def print_acceptance(fits, names, common):
    if "KMeans" not in names or not common:
        return
    kmeans = mean_ari(fits, common, "KMeans")
    for n in ("ClAM", "PRCut", "SparseGEMINI"):
        if n in names:
            mean = mean_ari(fits, common, n)
            print(f"{n} mean ARI {mean:.3f} vs KMeans {kmeans:.3f}: >= KMeans: "
                  f"{'yes' if mean >= kmeans else 'NO'}")


def write_csv(path, datasets, fits, names, seed=SEED, load=None, threads=None):
    """One row per dataset and estimator (``_results.write_results``): ARI, NMI and
    fit seconds, with the dataset's shape, the clusters found, the CPU seconds and
    the warnings in columns of their own; ``load``: the load average over the run,
    ``threads``: the threads the run kept busy (jobs times threads per fit)."""
    rows = []
    for ds in datasets:
        for n in names:
            if (fit := fits.get((ds.key, n))) is None:
                continue
            rows.append({
                "dataset": ds.key, "estimator": n, "device": "cpu",
                "ari": fit.ari, "nmi": fit.nmi, "seconds": fit.seconds,
                "note": f"random_state={seed}" + (f"; {fit.error}" if fit.error else ""),
                "n": len(ds.X), "d": ds.X.shape[1], "k": ds.k, "components": ds.components,
                "n_clusters_found": fit.n_found, "cpu_seconds": fit.cpu_seconds,
                "n_warnings": sum(fit.warnings.values()),
                "warning_categories": ";".join(sorted({c for c, _ in fit.warnings})),
                "threads": threads,
            })
    # one run is the comparison: it replaces the rows of its datasets and
    # estimators whatever machine measured them
    return write_results(path, rows, "bench_quality", load=load,
                         key=("benchmark", "dataset", "estimator", "device"))


# ---------------------------------------------------------------- main


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"only {len(QUICK)} representative datasets")
    parser.add_argument("--datasets", help="comma list of battery/name")
    parser.add_argument("--batteries", default=",".join(BATTERIES),
                        help="comma list, when --datasets is not given")
    parser.add_argument("--max-n", type=int, default=MAX_N,
                        help="largest dataset of the batteries to run")
    parser.add_argument("--estimators", default=",".join(ESTIMATOR_NAMES),
                        help="comma list among " + ",".join(ESTIMATOR_NAMES))
    parser.add_argument("--spectral-labels", default="cluster_qr",
                        choices=["cluster_qr", "kmeans", "discretize"])
    parser.add_argument("--threads", type=int, default=1, help="threads per fit")
    parser.add_argument("--jobs", type=int, default=1,
                        help="datasets fitted in parallel (processes)")
    parser.add_argument("--seeds", default=str(SEED),
                        help="comma list of the estimators' random_state (the data stay "
                        "those of seed 0); with several, the summary is printed for each "
                        "and the mean ARI over them at the end")
    parser.add_argument("--reference", default="first", choices=["first", "best"],
                        help="score against labels0, or the best-fitting reference labelling")
    parser.add_argument("--csv", metavar="PATH",
                        help="write the per-dataset results of the first seed to this CSV "
                        "file (e.g. benchmarks/results/quality.csv, read by "
                        "plot_benchmarks.py)")
    parser.add_argument("--seeds-csv", metavar="PATH",
                        help="write each seed's mean ARI per estimator to this CSV file "
                        "(benchmarks/results/quality_seeds.csv, which the pages quote)")
    args = parser.parse_args()
    args.seeds = [int(seed) for seed in args.seeds.split(",")]
    args.estimators = args.estimators.split(",")
    unknown = set(args.estimators) - set(ESTIMATOR_NAMES)
    if unknown:
        parser.error(f"unknown estimators {sorted(unknown)}; choose among {ESTIMATOR_NAMES}")
    return args


def run_seed(args, datasets, names, seed):
    """Fit and report every estimator on every dataset with ``random_state=seed``;
    returns each estimator's mean ARI over the datasets on which all ran."""
    fits = {}
    results = run_all(datasets, names, args.threads, args.spectral_labels, args.jobs, seed)
    for i, (ds, dataset_fits) in enumerate(results):
        for fit in dataset_fits:
            fits[ds.key, fit.estimator] = fit
        slowest = max(dataset_fits, key=lambda f: f.seconds if f.ok else 0)
        print(f"[{i + 1}/{len(datasets)}] {ds.key} ({len(ds.X)}x{ds.X.shape[1]}, k={ds.k}, "
              f"{ds.components} comp.): {sum(f.seconds for f in dataset_fits if f.ok):.1f} s; "
              f"slowest {slowest.estimator} {slowest.seconds:.1f} s", flush=True)

    print_per_dataset(datasets, fits, names)
    header, rows, common, disconnected = summary_rows(datasets, fits, names)
    print_cluster_loss(datasets, fits, names)
    print_warnings(fits, names)
    print_failures(fits)
    print_disconnected(datasets, fits, names, disconnected)
    print(f"\nSummary over {len(common)} datasets on which all ran "
          f"(reStructuredText, for doc/benchmarks.rst)\n")
    print(rst_table(header, rows))
    if common:
        print_battery_means(fits, common, names)
    print()
    print_acceptance(fits, names, common)
    if args.csv and seed == args.seeds[0]:
        write_csv(args.csv, datasets, fits, names, seed,
                  load_span(args.load_start, load_average()), args.jobs * args.threads)
        print(f"per-dataset results written to {args.csv}")
    return {n: mean_ari(fits, common, n) for n in names} if common else {}


# the groups of batteries a seeds' result row is named by
BATTERY_GROUPS = {"sipu,fcps,uci": "development", "wut,graves,other": "evaluation"}


def write_seeds_csv(path, mean_aris, names, args, n_datasets):
    """Each seed's mean ARI per estimator (``--seeds-csv``), a row each, named by the
    batteries run and the seed; a rerun replaces the rows of the same seeds."""
    group = BATTERY_GROUPS.get(args.batteries, args.batteries)
    rows = [{"dataset": f"{group} seed {seed}", "estimator": n, "device": "cpu",
             "ari": means[n], "seed": seed,
             "note": f"mean ARI over the {n_datasets} datasets of {args.batteries}, the "
                     f"estimators' random_state={seed} (the data: loader seed 0)"}
            for seed, means in mean_aris.items() for n in names if n in means]
    load = load_span(args.load_start, load_average())
    write_results(path, rows, "bench_quality", load=load)
    print(f"each seed's mean ARI written to {path}")


def print_mean_over_seeds(mean_aris, names):
    seeds = list(mean_aris)
    print(f"\nMean ARI per estimator seed, and over the {len(seeds)} seeds\n")
    rows = [[n] + [f"{mean_aris[seed].get(n, float('nan')):.4f}" for seed in seeds]
            + [f"{np.mean([mean_aris[seed].get(n, np.nan) for seed in seeds]):.4f}"]
            for n in names]
    print(rst_table(["estimator"] + [f"seed {seed}" for seed in seeds] + ["mean"], rows))


def main():
    args = parse_args()
    start = time.perf_counter()
    load_start = os.getloadavg()
    args.load_start = load_average()
    names = list(args.estimators)
    global REFERENCE
    REFERENCE = args.reference
    for n, module in NEEDS_MODULE.items():
        if n in names and importlib.util.find_spec(module) is None:
            print(f"note: {n} skipped, it needs {module} (pip install 'skdiffclust[benchmark]')")
            names.remove(n)
    if importlib.util.find_spec("torch") is None:
        for n in sorted(NEEDS_TORCH & set(names)):
            print(f"note: {n} skipped, it needs PyTorch (pip install 'skdiffclust[torch]')")
        names = [n for n in names if n not in NEEDS_TORCH]
    if args.datasets:
        keys = args.datasets.split(",")
    elif args.quick:
        keys = QUICK
    else:
        keys = suite_keys(args.batteries.split(","), args.max_n)
    datasets = [load(key) for key in keys]
    load_seconds = time.perf_counter() - start
    print(f"{len(datasets)} datasets, {len(names)} estimators, {args.threads} thread(s) "
          f"per fit, {args.jobs} job(s); load average {load_start[0]:.2f} "
          f"(1 min), {os.cpu_count()} CPUs; data and graphs: {load_seconds:.1f} s\n"
          f"skdiffclust from {Path(skdiffclust.__file__).parent}")

    mean_aris = {}
    for seed in args.seeds:
        if len(args.seeds) > 1:
            print(f"\n==== estimators' random_state={seed}")
        mean_aris[seed] = run_seed(args, datasets, names, seed)
    if len(args.seeds) > 1:
        print_mean_over_seeds(mean_aris, names)
    if args.seeds_csv:
        write_seeds_csv(args.seeds_csv, mean_aris, names, args, len(datasets))
    print(f"total run time {time.perf_counter() - start:.0f} s; load average "
          f"{load_start[0]:.2f} at the start, {os.getloadavg()[0]:.2f} at the end (1 min)")


if __name__ == "__main__":
    main()

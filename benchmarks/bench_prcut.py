"""PRCut against scikit-learn's SpectralClustering on the same graph, in one process.

Both cluster the same symmetric k-nearest-neighbour graph (``n_neighbors=10``):
PRCut builds it and trains on it; SpectralClustering gets it as a precomputed
affinity, and its time adds the graph's construction, timed apart. For each case
it prints the wall time, the peak memory (resident set size above the level before
the call, once the memory freed before is returned to the system, sampled every
10 ms), the ratio cut on the graph, the accuracy (one-to-one Hungarian matching,
``skdiffclust.metrics.clustering_accuracy``), NMI and ARI against the true classes.

Cases: scikit-learn's digits (1,797 x 64, 10 classes), then 10 Gaussian blobs in
32 dimensions (``cluster_std=6``: overlapping enough for a connected graph) at
n = 10,000, 70,000 and 200,000. SpectralClustering is skipped above
``--sc-max-n`` samples (default 70,000); ``--full`` runs it everywhere.

``--small``: small data, where a fit should take under 0.3 s: 300 points (three
blobs, two moons, two circles), then 1,000 (blobs in 2 and 64 dimensions, unequal
blobs, moons, the first 1,000 digits) and iris and wine, PRCut's warm fit time (median of
``--repeats`` fits, wall and CPU) next to SpectralClustering's
(``affinity='nearest_neighbors'``, 10 neighbours) in the same process, with ARIs.

``--graph-cases``: the generated cases of
:func:`skdiffclust.datasets.make_graph_case` (groups of sizes 10:3:1, with a thin
bridge, concentric rings, five groups in three components), PRCut's and
SpectralClustering's mean ARI over three draws.

``--memory``: the peak memory of ``affinity='precomputed'`` on a dense (n, n)
float64 affinity (an RBF kernel, every entry positive), as a multiple of the
input's size: the peak resident set size above the level before the fit
(sampled every 10 ms; torch's allocations included) and the peak of NumPy's
allocations (tracemalloc).

Usage::

    python benchmarks/bench_prcut.py            # all cases
    python benchmarks/bench_prcut.py --quick    # digits and n = 10,000 only
    python benchmarks/bench_prcut.py --small    # at most 1,000 points
    python benchmarks/bench_prcut.py --graph-cases
    python benchmarks/bench_prcut.py --memory   # dense precomputed affinity
    python benchmarks/bench_prcut.py --memory --csv benchmarks/results/prcut.csv
    python benchmarks/bench_prcut.py --csv benchmarks/results/prcut.csv
    python benchmarks/bench_prcut.py --small --csv benchmarks/results/prcut.csv
"""

import argparse
import statistics
import time
import tracemalloc
import warnings

import numpy as np
from sklearn.cluster import SpectralClustering
from sklearn.datasets import (
    load_digits,
    load_iris,
    load_wine,
    make_blobs,
    make_circles,
    make_moons,
)
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score
from sklearn.metrics.pairwise import rbf_kernel

from _memory import PeakMemory
from _results import load_average, save_run

from skdiffclust._utils._validation import center_and_scale
from skdiffclust.datasets import make_graph_case
from skdiffclust.metrics import clustering_accuracy
from skdiffclust.prcut import PRCut, ratio_cut
from skdiffclust._graphcut._graph import knn_affinity

N_NEIGHBORS = 10
N_CLUSTERS = 10
BLOB_SIZES = [10_000, 70_000, 200_000]
# the result file's estimator of each row name
ESTIMATORS = {"PRCut": "PRCut", "PRCut, the paper's (random, linear, balance=100)": "PRCut-paper",
              "PRCut annealed (random init, linear)": "PRCut-annealed",
              "SpectralClustering (+ graph)": "SpectralClustering"}
# the paper's settings, then annealing with a small balance (the lower ratio cut)
DIGITS_SETTINGS = {
    "PRCut": {},
    "PRCut, the paper's (random, linear, balance=100)": {
        "init": "random", "hidden_layer_sizes": (), "balance": 100.0},
    "PRCut annealed (random init, linear)": {
        "init": "random", "hidden_layer_sizes": (), "annealing": 0.8, "n_init": 10},
}
SMALL = {
    "three blobs": lambda: make_blobs(300, centers=3, random_state=0),
    "two moons": lambda: make_moons(300, noise=0.05, random_state=0),
    "two circles": lambda: make_circles(300, noise=0.05, factor=0.5, random_state=0),
    "four blobs, 1,000": lambda: make_blobs(1000, centers=4, random_state=0),
    "three unequal blobs, 1,000": lambda: make_blobs(
        1000, centers=3, cluster_std=[1.0, 2.5, 0.5], random_state=170),
    "two moons, 1,000": lambda: make_moons(1000, noise=0.05, random_state=0),
    "ten blobs 1,000 x 64": lambda: make_blobs(1000, 64, centers=10, random_state=0),
    "digits[:1000]": lambda: tuple(a[:1000] for a in load_digits(return_X_y=True)),
    "iris": lambda: load_iris(return_X_y=True),
    "wine": lambda: load_wine(return_X_y=True),
}
GRAPH_CASES = ("unequal", "bridge", "rings", "fewer_components")


def warm_up(X, **params):
    """A short fit that pays for torch's lazy initialisation, its warnings hidden."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        PRCut(n_clusters=2, max_iter=2, device="cpu", random_state=0, **params).fit(X)


def measured(fn):
    """(seconds, peak RSS increase in bytes, result) of fn(): the peak of
    :class:`_memory.PeakMemory`, above the level once the memory freed before is
    returned to the system."""
    with PeakMemory() as memory:
        start = time.perf_counter()
        result = fn()
        seconds = time.perf_counter() - start
    return seconds, memory.above, result


def scores(W, y, labels):
    return dict(rc=ratio_cut(W, labels), acc=clustering_accuracy(y, labels),
                nmi=normalized_mutual_info_score(y, labels),
                ari=adjusted_rand_score(y, labels))


def row(name, seconds, memory, s):
    print(f"  {name:<60} {seconds:8.1f} s {memory / 2**20:8.0f} MiB   "
          f"RC={s['rc']:8.3f}  ACC={s['acc']:.3f}  NMI={s['nmi']:.3f}  "
          f"ARI={s['ari']:.3f}")


def result_row(dataset, name, seconds, memory, s, epochs=None):
    """The result file's row of a printed :func:`row`."""
    return {"dataset": dataset, "estimator": ESTIMATORS[name], "device": "cpu",
            "seconds": seconds, "peak_mib": memory / 2**20, "ratio_cut": s["rc"],
            "acc": s["acc"], "nmi": s["nmi"], "ari": s["ari"], "epochs": epochs,
            "note": f"{name}, 10-NN graph; SpectralClustering's time and peak include the "
                    "graph's; peak: resident memory above the level before"}


def run_case(title, X, y, prcut_settings, run_spectral, dataset):
    """prcut_settings: {row name: PRCut parameters}, each run and printed. Every
    row's ratio cut is that of the kNN graph, which SpectralClustering clusters;
    PRCut trains on it, or on its shared-neighbour weights where its start reads
    those (``init='auto'`` on a graph with hubs, as the digits'). Returns the
    result file's rows, ``dataset`` their dataset."""
    print(f"\n{title}")
    rows = []
    # PRCut's graph: the data centred and scaled globally (ties among the
    # neighbours, as in the integer pixels of digits, then break the same way)
    graph_seconds, graph_memory, W = measured(
        lambda: knn_affinity(center_and_scale(X)[0], N_NEIGHBORS, random_state=0))
    graph_bytes = W.data.nbytes + W.indices.nbytes + W.indptr.nbytes
    print(f"  graph: {W.nnz:,} stored entries ({graph_bytes:,} bytes); a dense "
          f"n x n float64 matrix would take {8 * X.shape[0] ** 2:,} bytes")
    first_seconds = None
    for name, params in prcut_settings.items():
        seconds, memory, model = measured(
            lambda: PRCut(n_clusters=N_CLUSTERS, n_neighbors=N_NEIGHBORS,
                          random_state=0, device="cpu", **params).fit(X))
        trained_on = model.affinity_matrix_
        assert (trained_on.astype(bool) != W.astype(bool)).nnz == 0  # the same edges
        same = (trained_on != W).nnz == 0  # and weights: not the shared neighbours'
        fit_scores = scores(W, y, model.labels_)
        row(f"{name} ({model.n_iter_} epochs{'' if same else ', shared neighbours'})",
            seconds, memory, fit_scores)
        rows.append(result_row(dataset, name, seconds, memory, fit_scores, model.n_iter_))
        first_seconds = first_seconds or seconds
    if not run_spectral:
        print(f"  {'SpectralClustering':<60} skipped (--sc-max-n; --full to run it)")
        return rows
    sc_seconds, sc_memory, spectral = measured(
        lambda: SpectralClustering(N_CLUSTERS, affinity="precomputed",
                                   random_state=0).fit(W))
    name, memory = "SpectralClustering (+ graph)", max(graph_memory, sc_memory)
    sc_scores = scores(W, y, spectral.labels_)
    row(name, graph_seconds + sc_seconds, memory, sc_scores)
    rows.append(result_row(dataset, name, graph_seconds + sc_seconds, memory, sc_scores))
    ratio = (graph_seconds + sc_seconds) / first_seconds
    print(f"  time SpectralClustering / {next(iter(prcut_settings))} = {ratio:.2f}x")
    return rows


def timed(fit, repeats):
    """Median wall and CPU seconds of ``fit(seed)`` over seeds 0 .. repeats - 1, and
    the fitted estimators."""
    walls, cpus, fitted = [], [], []
    for seed in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        fitted.append(fit(seed))
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus), fitted


def run_small(repeats):
    """PRCut's and SpectralClustering's warm fit times on at most 1,000 points.

    Each is fitted with random_state 0 .. repeats - 1: the median time, and the
    mean (min) ARI over those seeds (one seed's ARI says little on overlapping
    blobs). Returns the result file's rows (dataset ``small-<case>``).
    """
    rows = []
    print(f"\nat most 1,000 points: warm fit, median over random_state 0..{repeats - 1} "
          "(wall / CPU seconds); ARI mean (min)")
    warm_up(SMALL["two moons"]()[0])
    slowest = 0.0
    for name, make in SMALL.items():
        X, y = make()
        k = len(np.unique(y))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # disconnected graphs, for both
            ours = timed(lambda seed: PRCut(n_clusters=k, device="cpu",
                                            random_state=seed).fit(X), repeats)
            theirs = timed(lambda seed: SpectralClustering(
                k, affinity="nearest_neighbors", n_neighbors=N_NEIGHBORS,
                random_state=seed).fit(X), repeats)

        epochs = statistics.median(model.n_iter_ for model in ours[2])
        ari = {}  # per estimator: the mean and the lowest over the seeds
        for estimator, (wall, cpu, fitted) in (("PRCut", ours), ("SpectralClustering", theirs)):
            values = [adjusted_rand_score(y, model.labels_) for model in fitted]
            ari[estimator] = f"{np.mean(values):.3f} ({np.min(values):.3f})"
            rows.append({
                "dataset": f"small-{name}", "estimator": estimator, "device": "cpu",
                "seconds": wall, "cpu_seconds": cpu, "ari": np.mean(values),
                "ari_min": np.min(values), "epochs": epochs if estimator == "PRCut" else None,
                "note": f"--small: {len(X):,} x {X.shape[1]}, warm fits, median seconds and "
                        f"mean (min) ARI over random_state 0 to {repeats - 1}"})
        slowest = max(slowest, ours[0])
        print(f"  {name:<26} {len(X):>5} x {X.shape[1]:<3} PRCut {ours[0]:5.2f} / "
              f"{ours[1]:5.2f} s ({epochs:g} epochs) ARI {ari['PRCut']}   "
              f"SpectralClustering {theirs[0]:5.2f} / {theirs[1]:5.2f} s ARI "
              f"{ari['SpectralClustering']}   wall ratio {ours[0] / theirs[0]:.2f}x")
    print(f"  slowest PRCut fit: {slowest:.2f} s (target: under 0.3 s)")
    return rows


def run_graph_cases(n_draws):
    """PRCut and SpectralClustering (the same 10-NN graph) on the generated cases of
    :func:`skdiffclust.datasets.make_graph_case`: mean ARI over draws 0..n_draws-1."""
    print(f"\ngenerated cases (skdiffclust.datasets.make_graph_case), mean ARI over "
          f"{n_draws} draws; PRCut's target: SpectralClustering's minus 0.01")
    for case in GRAPH_CASES:
        ours, theirs = [], []
        for draw in range(n_draws):
            X, y, k = make_graph_case(case, random_state=draw)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ours.append(adjusted_rand_score(y, PRCut(
                    n_clusters=k, device="cpu", random_state=0).fit(X).labels_))
                theirs.append(adjusted_rand_score(y, SpectralClustering(
                    k, affinity="nearest_neighbors", n_neighbors=N_NEIGHBORS,
                    assign_labels="cluster_qr", random_state=0).fit(X).labels_))
        met = np.mean(ours) >= np.mean(theirs) - 0.01
        print(f"  {case:<18} PRCut {np.mean(ours):.3f} (min {min(ours):.3f})   "
              f"SpectralClustering {np.mean(theirs):.3f}   target met: "
              f"{'yes' if met else 'NO'}")


def run_memory(sizes, csv=None):
    """Peak memory of PRCut on a dense precomputed affinity, in units of the input;
    with ``csv``, each size's row written to that result file."""
    print("\ndense precomputed affinity (RBF kernel, float64): peak memory of the fit")
    rows, load_start = [], load_average()
    warm = rbf_kernel(make_blobs(100, 8, random_state=0)[0], gamma=0.05)
    warm_up(warm, affinity="precomputed")
    for n in sizes:
        X, _ = make_blobs(n, 8, centers=5, random_state=0)
        affinity = rbf_kernel(X, gamma=0.05)
        size = affinity.nbytes
        tracemalloc.start()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # max_iter=20 may run out: that is the point
            seconds, rss, model = measured(lambda: PRCut(
                n_clusters=5, affinity="precomputed", random_state=0, device="cpu",
                max_iter=20).fit(affinity))
        _, traced = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(f"  n={n:>6,}: input {size / 2**20:7.0f} MiB | peak above it: resident "
              f"{rss / size:4.2f}x, NumPy (tracemalloc) {traced / size:4.2f}x | "
              f"{seconds:5.1f} s, {model.n_iter_} epochs")
        rows.append({"dataset": f"dense-affinity-{n}", "estimator": "PRCut",
                     "device": "cpu", "seconds": seconds, "input_mib": size / 2**20,
                     "peak_mib": rss / 2**20, "peak_ratio": rss / size,
                     "numpy_ratio": traced / size,
                     "note": f"affinity='precomputed', a dense {n:,} x {n:,} RBF kernel "
                             "(float64), max_iter=20: peak memory above the input"})
    if csv:
        save_run(csv, rows, "bench_prcut", load_start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="digits and n=10,000 only")
    parser.add_argument("--full", action="store_true",
                        help="SpectralClustering at all sizes")
    parser.add_argument("--sc-max-n", type=int, default=70_000)
    parser.add_argument("--small", action="store_true",
                        help="data of at most 1,000 points only")
    parser.add_argument("--graph-cases", action="store_true",
                        help="the generated cases of make_graph_case only")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--memory", action="store_true",
                        help="dense precomputed affinity only")
    parser.add_argument("--memory-sizes", default="4000,6000")
    parser.add_argument("--csv", help="the result file to write the rows of the default "
                        "cases (or --quick's), of --small or of --memory to "
                        "(benchmarks/results/prcut.csv, which the guide quotes); a rerun "
                        "replaces the rows it measured")
    args = parser.parse_args()

    if args.small:
        load_start = load_average()
        rows = run_small(args.repeats)
        if args.csv:
            save_run(args.csv, rows, "bench_prcut", load_start)
        return
    if args.graph_cases:
        run_graph_cases(3)
        return
    if args.memory:
        run_memory([int(n) for n in args.memory_sizes.split(",")], args.csv)
        return
    load_start = load_average()
    X, y = load_digits(return_X_y=True)
    warm_up(X[:100])
    rows = run_case("digits: n=1,797, d=64", X, y, DIGITS_SETTINGS, True, "digits")
    for n in BLOB_SIZES[:1] if args.quick else BLOB_SIZES:
        X, y = make_blobs(n, 32, centers=N_CLUSTERS, cluster_std=6.0, random_state=0)
        rows += run_case(f"blobs: n={n:,}, d=32", X, y, {"PRCut": {}},
                         args.full or n <= args.sc_max_n, f"blobs-{n}")
    if args.csv:
        save_run(args.csv, rows, "bench_prcut", load_start)


if __name__ == "__main__":
    main()

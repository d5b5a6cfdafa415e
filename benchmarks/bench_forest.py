"""SpanningForestClustering against single-linkage peers, in one process.

Times the warm fit of our forest and of scikit-learn's single linkage, scipy,
fastcluster and quitefastmst (the spanning tree only: it stops before the cut and
the labels, so it is a lower bound for any single-linkage clustering), and prints
each peer's time divided by ours. Peers whose O(n^2) memory or time is out of reach
at a size are skipped (``--full`` lifts the time limits).

Two more modes measure what the estimator keeps between calls:

* ``--memory``: peak memory (``tracemalloc``, NumPy buffers included) and time of a
  fit with partial labels of many classes: 20,000 points, 10,000 labels (two
  samples each); constraints are stored per label, in O(n) memory;
* ``--predict``: ``predict`` of 1,000 queries against 1,000,000 training points in
  2-D, called three times: the first call builds the neighbour index, which the
  estimator keeps for the next ones (and rebuilds once after unpickling).

Usage::

    pip install ".[benchmark]"
    python benchmarks/bench_forest.py            # every size
    python benchmarks/bench_forest.py --quick    # small sizes, for a smoke run
    python benchmarks/bench_forest.py --memory --predict   # those modes only
    python benchmarks/bench_forest.py --csv benchmarks/results/forest.csv
    python benchmarks/bench_forest.py --memory --predict --csv benchmarks/results/forest.csv

``--csv`` writes the run's rows to a result file, which the pages quote: the
timings (each estimator's best time at each size), or the rows of ``--memory`` and
``--predict``.
"""

import argparse
import importlib
import pickle
import time
import tracemalloc

import numpy as np
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.spatial.distance import squareform
from sklearn.cluster import AgglomerativeClustering
from sklearn.metrics import adjusted_rand_score, pairwise_distances

from _results import load_average, save_run

from skdiffclust import SpanningForestClustering

# the last: more dimensions than the k-d tree serves, so the fit is Prim's sweep
FEATURE_CASES = [(10_000, 16), (20_000, 8), (100_000, 2), (1_000_000, 2), (54_000, 84)]
PRECOMPUTED_N = 5_000
N_CLUSTERS = 10
# largest n each O(n^2) peer is run at (time or memory), unless --full
PEER_MAX_N = {"sklearn": 20_000, "scipy": 20_000, "fastcluster": 20_000}
PEER_MAX_N_FULL = {"sklearn": 100_000, "scipy": 20_000, "fastcluster": 100_000}


def best_time(fn, repeats):
    best, result = np.inf, None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def _peer(module):
    """The peer package ``module``, or None where it is not installed (its row then
    says how to install it)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


NOT_INSTALLED = "not installed: pip install 'skdiffclust[benchmark]'"


def feature_peers(X, k):
    import quitefastmst

    fastcluster = _peer("fastcluster")
    return {
        "sklearn": lambda: AgglomerativeClustering(n_clusters=k, linkage="single").fit(X).labels_,
        "scipy": lambda: fcluster(linkage(X, "single"), k, criterion="maxclust"),
        "fastcluster": fastcluster and (
            lambda: fcluster(fastcluster.linkage_vector(X, "single"), k, "maxclust")),
        "quitefastmst (tree only)": lambda: quitefastmst.mst_euclid(X) and None,
    }


def precomputed_peers(D, k):
    fastcluster = _peer("fastcluster")
    condensed = squareform(D, checks=False)
    return {
        "sklearn": lambda: AgglomerativeClustering(
            n_clusters=k, linkage="single", metric="precomputed").fit(D).labels_,
        "scipy": lambda: fcluster(linkage(condensed, "single"), k, criterion="maxclust"),
        "fastcluster": fastcluster and (
            lambda: fcluster(fastcluster.linkage(condensed, "single"), k, "maxclust")),
    }


def report(title, ours, peer_times, agreement):
    print(f"\n{title}")
    print(f"  {'skdiffclust':<26} {ours:9.3f} s")
    for name, (seconds, note) in peer_times.items():
        if seconds is None:
            print(f"  {name:<26} {'skipped':>9}   ({note})")
        else:
            print(f"  {name:<26} {seconds:9.3f} s   peer / ours = {seconds / ours:6.2f}x")
    timed = {n: s for n, (s, _) in peer_times.items() if s is not None}
    if timed:
        fastest = min(timed, key=timed.get)
        print(f"  fastest peer: {fastest}, ours is {timed[fastest] / ours:.2f}x its speed")
    if agreement is not None:
        print(f"  ARI(ours, reference single linkage) = {agreement:.3f}")


def run_case(X, dataset, title, peers, ours_fn, limits, repeats):
    """Time ours and each peer on ``X``; returns the result file's rows: ours (its
    ARI against the first peer's single linkage) and each peer that ran."""
    n = X.shape[0]
    ours, labels = best_time(ours_fn, repeats)
    peer_times, reference = {}, None
    for name, fn in peers.items():
        key = name.split()[0]
        if fn is None:
            peer_times[name] = (None, NOT_INSTALLED)
            continue
        if n > limits.get(key, np.inf):
            peer_times[name] = (None, f"O(n^2) at n={n}; --full to try")
            continue
        seconds, peer_labels = best_time(fn, 1 if n > 20_000 else repeats)
        peer_times[name] = (seconds, None)
        if reference is None and peer_labels is not None:
            reference = peer_labels
    agreement = None if reference is None else adjusted_rand_score(labels, reference)
    report(title, ours, peer_times, agreement)
    rows = [{"dataset": dataset, "estimator": "SpanningForestClustering", "seconds": ours,
             "ari": agreement, "note": f"{title}; warm fit, best of {repeats}; ari: against "
                                       "the first peer's single linkage"}]
    rows += [{"dataset": dataset, "estimator": name, "seconds": seconds, "note": title}
             for name, (seconds, _) in peer_times.items() if seconds is not None]
    return rows


def memory_case(n=20_000, n_labels=10_000):
    """Peak memory and time of a fit with partial labels of many classes, and the
    size a list of their cannot-linked pairs would take: the result file's row."""
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(n, 2))
    y = rng.permutation(np.arange(n) % n_labels)
    SpanningForestClustering(2).fit(X[:50], partial_labels=np.r_[0, 1, [-1] * 48])  # warm
    est = SpanningForestClustering(n_clusters=n_labels)
    seconds, _ = best_time(lambda: est.fit(X, partial_labels=y), 1)
    tracemalloc.start()  # a second fit, traced (tracing slows Python code down)
    est.fit(X, partial_labels=y)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # every pair of samples of two labels, as two int64 columns
    per_label = np.bincount(y)
    pairs = (n * (n - 1) - int(per_label @ (per_label - 1))) // 2
    print(f"\npartial labels: n={n}, {n_labels} labels (2 samples each), "
          f"n_clusters={n_labels}")
    print(f"  fit {seconds:.2f} s, peak memory {peak / 2**20:.1f} MiB "
          f"(X itself: {X.nbytes / 2**20:.1f} MiB); {est.n_clusters_} clusters; "
          f"a list of the {pairs:,} cannot-linked pairs: {pairs * 16 / 2**20:,.0f} MiB")
    return {"dataset": f"partial-labels-{n}-by-{n_labels}",
            "estimator": "SpanningForestClustering", "seconds": seconds,
            "numpy_mib": peak / 2**20, "pairs_mib": pairs * 16 / 2**20,
            "note": f"fit with partial labels of {n_labels:,} classes of 2 samples, "
                    "n_clusters the number of labels: NumPy's peak (tracemalloc), and "
                    "the cannot-linked pairs as two int64 columns"}


def predict_case(n=1_000_000, n_queries=1_000, repeats=3):
    """predict against many training points: the index is built once and kept.
    Returns the result file's row: the first call and the best later one."""
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(n, 2))
    queries = rng.uniform(size=(n_queries, 2))
    est = SpanningForestClustering(n_clusters=N_CLUSTERS).fit(X)
    print(f"\npredict: {n_queries} queries, {n} training points in 2-D")
    calls = []
    for call in range(repeats):
        seconds, _ = best_time(lambda: est.predict(queries), 1)
        calls.append(seconds)
        print(f"  call {call + 1}: {seconds:.4f} s")
    clone = pickle.loads(pickle.dumps(est))
    for call in range(2):
        seconds, _ = best_time(lambda: clone.predict(queries), 1)
        print(f"  after unpickling, call {call + 1}: {seconds:.4f} s")
    return {"dataset": f"predict-{n_queries}-of-{n}", "estimator": "SpanningForestClustering",
            "seconds": min(calls[1:]), "first_seconds": calls[0],
            "note": f"predict of {n_queries:,} queries against {n:,} training points in "
                    "2-D: the best later call (seconds) and the first, which builds the "
                    "neighbour index"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    parser.add_argument("--full", action="store_true", help="run slow peers too")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--memory", action="store_true",
                        help="only the peak memory of a fit with 10,000 labels")
    parser.add_argument("--predict", action="store_true",
                        help="only predict's time against 1,000,000 training points")
    parser.add_argument("--csv", help="the result file to write the run's rows to "
                        "(benchmarks/results/forest.csv, which the pages quote); a rerun "
                        "replaces the rows it measured")
    args = parser.parse_args()
    if args.memory or args.predict:
        load_start = load_average()
        rows = ([memory_case()] if args.memory else []) + \
               ([predict_case()] if args.predict else [])
        if args.csv:
            save_run(args.csv, [{"device": "cpu", **row} for row in rows], "bench_forest",
                     load_start)
        return
    limits = PEER_MAX_N_FULL if args.full else PEER_MAX_N
    cases = [(2000, 16), (4000, 8), (20000, 2)] if args.quick else FEATURE_CASES
    n_pre = 1000 if args.quick else PRECOMPUTED_N
    rng = np.random.default_rng(0)
    load_start = load_average()

    # warm the numba kernels (compiled once, then cached on disk)
    SpanningForestClustering(n_clusters=2, algorithm="prim").fit(rng.standard_normal((50, 3)))
    SpanningForestClustering(n_clusters=2, metric="precomputed").fit(-np.eye(5))

    print(f"warm fit times, best of {args.repeats}; n_clusters={N_CLUSTERS}")
    rows = []
    for n, d in cases:
        X = rng.standard_normal((n, d))
        est = SpanningForestClustering(n_clusters=N_CLUSTERS)
        rows += run_case(X, f"{n} x {d}", f"features: n={n}, d={d}",
                         feature_peers(X, N_CLUSTERS), lambda: est.fit(X).labels_, limits,
                         args.repeats)

    X = rng.standard_normal((n_pre, 8))
    D = pairwise_distances(X)
    S = -(D**2)
    est = SpanningForestClustering(n_clusters=N_CLUSTERS, metric="precomputed")
    rows += run_case(D, f"precomputed {n_pre} x {n_pre}",
                     f"precomputed: n={n_pre} (ours: similarity -D^2, peers: distances D)",
                     precomputed_peers(D, N_CLUSTERS), lambda: est.fit(S).labels_, limits,
                     args.repeats)
    if args.csv:
        save_run(args.csv, [{"device": "cpu", **row} for row in rows], "bench_forest",
                 load_start)


if __name__ == "__main__":
    main()

"""Stability under the data's last digits: the same fit on three jittered copies.

The Clustering Benchmarks loader (``clustbench.load_dataset``) adds white noise of
1e-6 times the data's standard deviation, drawn from its ``random_state``. Every
estimator is fitted with the same ``random_state=0`` on three copies of each
dataset (loader ``random_state`` 0, 1 and 2), and the three labellings are
compared pairwise by the adjusted Rand index: 1 means the result is a function of
the data's structure, not of the noise in their seventh digit. (The noise is
1e-6 times the standard deviation of all the data: after the per-feature
standardisation of the ``uci`` battery it is up to a few percent of a
small-scale feature's spread, e.g. on ``uci/wdbc``, where KMeans and
SpectralClustering too disagree with themselves on a few samples.)

The datasets are those of ``bench_quality.py`` (the six batteries' datasets of at
most 10,000 points, ``uci`` standardised per feature; fewer with
``--batteries``), the estimators too (ours and scikit-learn's
KMeans, GMM and SpectralClustering at the same settings), and ClAM without its
per-example gradient clipping (``gradient_clip=None``), from its k-means starts
and from k-means++ starts, to show what the clipping changes. Printed: the pairwise
ARIs per dataset (the lowest of the three), then, per estimator, the mean over
datasets of each dataset's mean pairwise ARI, the lowest of those means, and the
lowest single pair,
as a reStructuredText table for ``doc/benchmarks.rst`` (with the mean ARI of the
first copy's labels against the reference labels: ``bench_quality.py``'s, since
that copy is its data), and whether the stability target (mean >= 0.99,
min >= 0.95) holds for ClAM, PRCut and SparseGEMINI.

Usage::

    python benchmarks/bench_stability.py                      # the six batteries
    python benchmarks/bench_stability.py --jobs 2             # two processes
    python benchmarks/bench_stability.py --estimators ClAM --datasets uci/yeast
    python benchmarks/bench_stability.py --batteries wut,graves,other
    python benchmarks/bench_stability.py --jobs 2 --csv benchmarks/results/stability.csv

``--csv PATH`` writes a row per dataset and estimator (the three pairwise ARIs,
their mean and lowest, the first copy's ARI against the reference labels and the
three fits' seconds) to a result file, which the pages quote; a rerun replaces
the rows it measured.
"""

import argparse
import importlib.util
import itertools
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path

import numpy as np
from sklearn.metrics import adjusted_rand_score
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_quality as quality  # noqa: E402  (datasets, estimators, tables)
from _results import load_average, save_run  # noqa: E402

COPIES = (0, 1, 2)
ESTIMATOR_NAMES = ["ClAM", "ClAM-unclipped", "ClAM-unclipped-kmeans++", "PRCut",
                   "SparseGEMINI", "KMeans", "GMM", "Spectral"]
CHECKED = ("ClAM", "PRCut", "SparseGEMINI")
TARGET_MEAN, TARGET_MIN = 0.99, 0.95


def load_copy(key, copy):
    """Data and reference labels of ``key`` with the loader's noise seeded by ``copy``."""
    import clustbench

    battery, name = key.split("/")
    ds = clustbench.load_dataset(battery, name, path=str(quality.DATA), random_state=copy)
    X = ds.data
    if battery in quality.STANDARDISED:
        X = StandardScaler().fit_transform(X)
    return X, ds.labels[0], int(ds.n_clusters[0])


# ClAM without its per-example clipping (the paper's plain gradient), from its default
# k-means starts and from k-means++ starts: what the clipping changes
VARIANTS = {"ClAM-unclipped": {"gradient_clip": None},
            "ClAM-unclipped-kmeans++": {"gradient_clip": None, "init": "k-means++"}}


def make_estimator(name, k):
    """bench_quality.py's estimator ``name``, or ClAM with a :data:`VARIANTS` setting."""
    if name in VARIANTS:
        return quality.make_estimator("ClAM", k).set_params(**VARIANTS[name])
    return quality.make_estimator(name, k)


def fit_labels(name, X, k, threads):
    model = make_estimator(name, k)
    with warnings.catch_warnings(), threadpool_limits(threads):
        warnings.simplefilter("ignore")
        model.fit(X)
    return model.labels_ if hasattr(model, "labels_") else model.predict(X)


def run_dataset(key, names, threads):
    """{estimator: [ARI of each pair of copies]}, {estimator: ARI of the first copy's
    labels against the reference (as in bench_quality.py)}, seconds per estimator."""
    copies = [load_copy(key, c) for c in COPIES]
    pairs, truth, seconds = {}, {}, {}
    for name in names:
        start = time.perf_counter()
        try:
            labels = [fit_labels(name, X, k, threads) for X, _, k in copies]
        except Exception as exc:  # reported, the run goes on
            print(f"  {name} failed on {key}: {type(exc).__name__}: {exc}", flush=True)
            continue
        seconds[name] = time.perf_counter() - start
        pairs[name] = [adjusted_rand_score(a, b) for a, b in itertools.combinations(labels, 2)]
        X, y, _ = copies[0]
        truth[name] = adjusted_rand_score(y[y > 0], labels[0][y > 0])
    return key, pairs, truth, seconds


def init_worker(names, threads):
    quality.limit_threads(threads)


def run_all(keys, names, threads, jobs):
    if jobs == 1:
        init_worker(names, threads)
        yield from (run_dataset(key, names, threads) for key in keys)
        return
    with ProcessPoolExecutor(jobs, initializer=init_worker,
                             initargs=(names, threads)) as pool:
        yield from pool.map(partial(run_dataset, names=names, threads=threads), keys)


def summary(results, names):
    """Per estimator: the mean over datasets of their mean pairwise ARI, the lowest
    of those means with its dataset, the lowest single pair with its dataset, and
    the mean ARI of the first copy against the reference."""
    rows = {}
    for name in names:
        per_dataset = [(key, pairs[name], truth[name]) for key, pairs, truth, _ in results
                       if name in pairs]
        if not per_dataset:
            continue
        means = [(key, float(np.mean(p))) for key, p, _ in per_dataset]
        lowest_mean = min(means, key=lambda t: t[1])
        lowest_pair = min(((key, min(p)) for key, p, _ in per_dataset), key=lambda t: t[1])
        rows[name] = (float(np.mean([m for _, m in means])), lowest_mean, lowest_pair,
                      float(np.mean([t for *_, t in per_dataset])))
    return rows


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", help="comma list of battery/name")
    parser.add_argument("--batteries", default=",".join(quality.BATTERIES))
    parser.add_argument("--max-n", type=int, default=quality.MAX_N)
    parser.add_argument("--estimators", default=",".join(ESTIMATOR_NAMES))
    parser.add_argument("--threads", type=int, default=1, help="threads per fit")
    parser.add_argument("--jobs", type=int, default=1, help="datasets in parallel")
    parser.add_argument("--csv", help="write per dataset and estimator: the three "
                        "pairwise ARIs and the first copy's ARI against labels0")
    return parser.parse_args()


def result_rows(results):
    """The result file's rows: per dataset and estimator, the pairwise ARIs of the
    three copies' labels, their mean and lowest, the first copy's ARI against the
    reference labels (``ari``) and the seconds of the three fits."""
    return [{"dataset": key, "estimator": name, "device": "cpu", "ari": truth[name],
             "pair_mean": float(np.mean(pairs[name])), "pair_min": min(pairs[name]),
             **dict(zip(("ari_01", "ari_02", "ari_12"), pairs[name])),
             "seconds": seconds[name],
             "note": "ari: the first copy against labels0; pair_*: between the labels of "
                     "the three jittered copies; seconds: the three fits"}
            for key, pairs, truth, seconds in results for name in pairs]


def battery_means(results, names):
    """{battery: {estimator: mean ARI of the first copy against labels0}}."""
    means = {}
    for battery in dict.fromkeys(key.split("/")[0] for key, *_ in results):
        means[battery] = {name: float(np.mean([truth[name] for key, _, truth, _ in results
                                               if key.startswith(battery + "/")
                                               and name in truth]))
                          for name in names}
    return means


def main():
    args = parse_args()
    names = args.estimators.split(",")
    if importlib.util.find_spec("torch") is None and "PRCut" in names:
        print("note: PRCut skipped, it needs PyTorch")
        names.remove("PRCut")
    keys = (args.datasets.split(",") if args.datasets
            else quality.suite_keys(args.batteries.split(","), args.max_n))
    start, load_start = time.perf_counter(), load_average()
    print(f"{len(keys)} datasets x {len(COPIES)} jittered copies, estimators: "
          f"{', '.join(names)}; {args.threads} thread(s) per fit, {args.jobs} job(s)")
    results = []
    for key, pairs, truth, seconds in run_all(keys, names, args.threads, args.jobs):
        results.append((key, pairs, truth, seconds))
        cells = ", ".join(f"{n} {min(pairs[n]):.3f}" for n in names if n in pairs)
        print(f"[{len(results)}/{len(keys)}] {key}: lowest pairwise ARI: {cells}", flush=True)

    rows = summary(results, names)
    table = [[name, f"{mean:.3f}", f"{low_mean:.2f} ({low_key})",
              f"{low_pair:.2f} ({pair_key})", f"{quality_ari:.3f}",
              f"{sum(s[name] for *_, s in results if name in s):.1f}"]
             for name, (mean, (low_key, low_mean), (pair_key, low_pair), quality_ari)
             in rows.items()]
    print(f"\nPairwise ARI between fits on {len(COPIES)} copies jittered by the loader "
          f"(random_state=0 for every fit), over {len(results)} datasets\n")
    print(quality.rst_table(["estimator", "mean ARI", "min ARI (dataset)",
                             "lowest pair (dataset)", "ARI vs labels0", "3 fits, s"],
                            table))
    print("\n(mean ARI: over the datasets, of the mean of each dataset's three pairwise "
          "ARIs; min ARI: the lowest of those means; lowest pair: the lowest single "
          "pairwise ARI)")
    print("\n(ARI vs labels0: the first copy's labels against the reference labels, "
          "the mean ARI of bench_quality.py)")
    print("\nARI vs labels0 per battery\n")
    means = battery_means(results, list(rows))
    print(quality.rst_table(["battery"] + list(rows),
                            [[battery] + [f"{v[name]:.3f}" for name in rows]
                             for battery, v in means.items()]))
    if args.csv:
        save_run(args.csv, result_rows(results), "bench_stability", load_start,
                 threads=args.jobs * args.threads)
    print()
    for name in CHECKED:
        if name in rows:
            mean, (_, lowest), *_ = rows[name]
            ok = mean >= TARGET_MEAN and lowest >= TARGET_MIN
            print(f"{name}: mean {mean:.3f} >= {TARGET_MEAN}, min {lowest:.3f} >= "
                  f"{TARGET_MIN}: {'yes' if ok else 'NO'}")
    print(f"total run time {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()

"""ClAM against scikit-learn's KMeans, in one process: UCI silhouettes, and speed on
100,000 points.

UCI datasets (standardised features, k = the number of reference classes):

* KMeans(n_init=10): silhouette and fit time, with the default threads and with
  one thread (on a small, busy machine OpenMP threads can make it 10-50x slower);
* ClAM for each beta of a small grid: silhouette, number of occupied clusters and
  fit time; the best silhouette over the grid is ClAM's score, as in the paper,
  which selects beta by silhouette. Two variants: the defaults (the grid includes
  ``beta='auto'``; dead prototypes are re-seeded, so every fit has k clusters or
  warns) and the paper's procedure (``init='random', gradient_clip=None,
  reseed=False, prune=False, learning_rate=0.1, n_init=3``: prototypes may end
  with no point, which raises the silhouette, since fewer clusters are then
  scored).

The ratio column is ClAM's fit time at the default beta (median over the seeds)
over KMeans' one-thread time, measured in the same process (ClAM's CPU kernels run
on one thread by default).

``--many``: many clusters in many features (2,000 points of 784 features in 10, 50
and 200 blobs, as a set of small images in many classes would be), ClAM at its
defaults against ``KMeans(n_init=10)``, one thread each: CPU seconds of each fit
and their ratio, and of ClAM's ``transform`` (its inference) alone.

``--blobs``: ``make_blobs(100_000, 32, centers=10, random_state=0)``,
standardised, k=10, ClAM at its defaults against ``KMeans(n_init=10)``, repeated;
prints both times (wall and CPU), their ratio, ClAM's epochs and both ARIs.

``--csv PATH`` writes each mode's rows to a result file
(``benchmarks/results/clam.csv``, which the pages quote): for each UCI dataset
k-means' silhouette and one-thread time, and for each ClAM variant the median over
the seeds of the best silhouette over the grid, the fewest and most occupied
clusters of those fits, how many seeds reach k-means' silhouette, and the fit time
at the default beta against k-means'; the medians of ``--blobs``; each k of
``--many``.

Usage::

    pip install ".[benchmark]"
    python benchmarks/bench_clam.py                 # the five UCI datasets
    python benchmarks/bench_clam.py --seeds 3       # best-of-grid over 3 seeds each
    python benchmarks/bench_clam.py --seeds 3 --csv benchmarks/results/clam.csv
    python benchmarks/bench_clam.py --ablation      # + unmasked (eq. 8) and weighted
    python benchmarks/bench_clam.py --blobs         # 100,000 x 32 against KMeans
    python benchmarks/bench_clam.py --many          # k up to 200 in 784 features
    python benchmarks/bench_clam.py --blobs --csv benchmarks/results/clam.csv
    python benchmarks/bench_clam.py --many --csv benchmarks/results/clam.csv
"""

import argparse
import os
import time
import warnings

import numpy as np
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score, silhouette_score
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from _data import suite_folder
from _results import load_average, save_run

from skdiffclust.clam import ClAM

DATA = suite_folder()  # the Clustering Benchmarks suite (_data.py)
DATASETS = ["ecoli", "glass", "wine", "yeast", "statlog"]
PAPER_BETAS = [0.1, 0.3, 1.0, 3.0]
# the paper's procedure: no re-seeding, every restart trained to the end, its rate;
# 3 random restarts (the paper trains 10)
PAPER = {"init": "random", "gradient_clip": None, "reseed": False, "prune": False,
         "learning_rate": 0.1, "n_init": 3}
PAPER_SC = {"ecoli": (0.262, 0.331)}  # k-means and ClAM silhouettes of the paper's table 1


def load(name):
    import clustbench

    # clustbench adds a tiny noise to break ties: fixed here, so that every run sees
    # the same data
    ds = clustbench.load_dataset("uci", name, path=str(DATA), random_state=0)
    keep = ds.labels[0] > 0
    return StandardScaler().fit_transform(ds.data[keep]), int(ds.n_clusters[0])


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def best_time(fn, repeats=3):
    return min(timed(fn)[0] for _ in range(repeats))


def silhouette(X, labels):
    return silhouette_score(X, labels) if len(np.unique(labels)) > 1 else -1.0


def run_kmeans(X, k):
    labels = KMeans(k, n_init=10, random_state=0).fit(X).labels_
    threaded = best_time(lambda: KMeans(k, n_init=10, random_state=0).fit(X))
    with threadpool_limits(1):
        single = best_time(lambda: KMeans(k, n_init=10, random_state=0).fit(X))
    return silhouette(X, labels), threaded, single


def run_clam(X, k, seeds, betas, **params):
    """Silhouette, occupied clusters and fit time for each seed and beta."""
    rows = []
    for seed in range(seeds):
        for beta in betas:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the paper's variant loses clusters
                seconds, clam = timed(lambda: ClAM(k, beta=beta, random_state=seed,
                                                   **params).fit(X))
            rows.append((seed, beta, silhouette(X, clam.labels_), clam.n_clusters_, seconds))
    return rows


def warm_up():
    """Compile the kernels (or load them from the cache) before anything is timed:
    one epoch on masked data, so that the masking kernel is ready too."""
    X, _ = make_blobs(2000, 8, centers=3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # one epoch: not converged
        ClAM(3, device="cpu", max_iter=1, random_state=0).fit(X)


def uci(args):
    warm_up()
    variants = {"ClAM": ({}, ["auto"] + PAPER_BETAS), "ClAM paper": (PAPER, PAPER_BETAS)}
    if args.ablation:
        variants.update({"ClAM w/ (8)": ({"mask_prob": 0.0}, ["auto"] + PAPER_BETAS),
                         "ClAM w/ (11)": ({"weighted": True}, ["auto"] + PAPER_BETAS)})
    wins = {name: 0 for name in variants}
    names = args.datasets.split(",")
    print(f"{'dataset':<9}{'n x d, k':>15} {'variant':<13}{'k-means SC':>11}"
          f"{'ClAM SC':>9} {'(beta, occupied)':<17}{'win':<5}"
          f"{'km s':>7}{'km 1t s':>8}{'ClAM s':>8}{'ratio':>8}")
    rows_out = []
    for name in names:
        X, k = load(name)
        km_sil, km_threaded, km_single = run_kmeans(X, k)
        rows_out.append({"dataset": name, "estimator": "KMeans", "silhouette": km_sil,
                         "seconds": km_single, "note": "n_init=10, one thread"})
        for variant, (params, betas) in variants.items():
            rows = run_clam(X, k, args.seeds, betas, **params)
            per_seed = [max((r for r in rows if r[0] == s), key=lambda r: r[2])
                        for s in range(args.seeds)]
            best = max(per_seed, key=lambda r: r[2])
            seed_wins = sum(r[2] >= km_sil for r in per_seed)
            default_time = np.median([r[4] for r in rows if r[1] == betas[0]])
            won = seed_wins * 2 > args.seeds
            wins[variant] += won
            rows_out.append(variant_row(name, variant, per_seed, seed_wins, default_time,
                                        km_single, betas))
            print(f"{name:<9}{f'{X.shape[0]}x{X.shape[1]}, {k}':>15} {variant:<13}"
                  f"{km_sil:>11.3f}{best[2]:>9.3f} {f'({best[1]}, {best[3]})':<17}"
                  f"{'yes' if won else 'no':<5}{km_threaded:>7.2f}{km_single:>8.3f}"
                  f"{default_time:>8.3f}{default_time / km_single:>7.1f}x")
            if args.seeds > 1:
                print(f"{'':<24}best-of-grid >= k-means for {seed_wins}/{args.seeds} seeds; "
                      f"per seed: {', '.join(f'{r[2]:.3f}' for r in per_seed)}")
            print("   grid:", "  ".join(
                f"beta={b}: " + "/".join(f"{r[2]:.3f} ({r[3]})" for r in rows if r[1] == b)
                for b in betas))
    for variant, count in wins.items():
        print(f"{variant}: silhouette >= k-means on {count}/{len(names)} datasets")
    if "ecoli" in names:
        print(f"paper (table 1), ecoli: k-means {PAPER_SC['ecoli'][0]}, "
              f"ClAM {PAPER_SC['ecoli'][1]}")
    return rows_out


def variant_row(name, variant, per_seed, seed_wins, default_time, km_single, betas):
    """The result file's row of a ClAM variant on a dataset: its seeds' best fits over
    the grid (seed, beta, silhouette, occupied clusters, seconds)."""
    occupied = [fit[3] for fit in per_seed]
    return {"dataset": name, "estimator": variant,
            "silhouette": float(np.median([fit[2] for fit in per_seed])),
            "occupied_min": min(occupied), "occupied_max": max(occupied),
            "seeds_at_least_kmeans": seed_wins, "seeds": len(per_seed),
            "seconds": default_time, "kmeans_ratio": default_time / km_single,
            "note": f"silhouette: median over the seeds of the best over beta in {betas}; "
                    f"seconds: the fit at beta={betas[0]}, median over the seeds; "
                    "kmeans_ratio: over KMeans(n_init=10) on one thread"}


def cpu_timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def blobs(args):
    """100,000 x 32 blobs, ClAM at its defaults against KMeans(n_init=10)."""
    X, y = make_blobs(100_000, 32, centers=10, random_state=0)
    X = StandardScaler().fit_transform(X)
    warm_up()
    with warnings.catch_warnings():  # the kernels of this size's batches too
        warnings.simplefilter("ignore")
        ClAM(10, device="cpu", max_iter=1, random_state=0).fit(X)
    print(f"make_blobs(100_000, 32, centers=10), standardised, k=10; {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}")
    ratios, fits = [], []
    for repeat in range(args.repeats):
        km_wall, km_cpu, km = cpu_timed(
            lambda: KMeans(10, n_init=10, random_state=0).fit(X))
        wall, cpu, clam = cpu_timed(lambda: ClAM(10, device="cpu", random_state=0).fit(X))
        ratios.append(wall / km_wall)
        fits.append((km_wall, km_cpu, wall, cpu, clam.n_iter_))
        print(f"[{repeat + 1}] KMeans(n_init=10) {km_wall:.2f} s wall, {km_cpu:.2f} s CPU, "
              f"ARI {adjusted_rand_score(y, km.labels_):.3f} | ClAM {wall:.2f} s wall, "
              f"{cpu:.2f} s CPU, {clam.n_iter_} epochs, ARI "
              f"{adjusted_rand_score(y, clam.labels_):.3f} | ratio {wall / km_wall:.2f}x wall, "
              f"{cpu / km_cpu:.2f}x CPU")
    print(f"median ratio ClAM / KMeans(n_init=10): {np.median(ratios):.2f}x")
    km_wall, km_cpu, wall, cpu, epochs = np.median(fits, axis=0)
    common = {"dataset": "blobs-100000x32", "note": f"median of {args.repeats} fits; "
              f"{os.cpu_count()} threads"}
    return [{**common, "estimator": "KMeans", "seconds": km_wall, "cpu_seconds": km_cpu,
             "ari": adjusted_rand_score(y, km.labels_)},
            {**common, "estimator": "ClAM", "seconds": wall, "cpu_seconds": cpu,
             "ari": adjusted_rand_score(y, clam.labels_), "epochs": epochs,
             "cpu_ratio": cpu / km_cpu}]


def many(args):
    """ClAM and KMeans(n_init=10) on one thread, k = 10, 50, 200 in 784 features."""
    warm_up()
    X, _ = make_blobs(2_000, 784, centers=10, random_state=0)
    with warnings.catch_warnings():  # the inference kernels too
        warnings.simplefilter("ignore")
        ClAM(10, random_state=0, max_iter=1).fit(X).transform(X)
    print(f"make_blobs(2_000, 784, centers=k, cluster_std=8), one thread each; "
          f"load average {os.getloadavg()[0]:.2f}")
    rows = []
    with threadpool_limits(1):
        for k in (10, 50, 200):
            X, y = make_blobs(2_000, 784, centers=k, cluster_std=8.0, random_state=0)
            _, km_cpu, km = cpu_timed(lambda: KMeans(k, n_init=10, random_state=0).fit(X))
            _, cpu, clam = cpu_timed(lambda: ClAM(k, random_state=0, n_jobs=1).fit(X))
            _, transform_cpu, _ = cpu_timed(lambda: clam.transform(X))
            print(f"k={k}: KMeans(n_init=10) {km_cpu:.2f} s CPU, ARI "
                  f"{adjusted_rand_score(y, km.labels_):.3f} | ClAM {cpu:.2f} s CPU "
                  f"({clam.n_iter_} epochs; transform {transform_cpu:.2f} s), ARI "
                  f"{adjusted_rand_score(y, clam.labels_):.3f} | ratio {cpu / km_cpu:.2f}x")
            common = {"dataset": f"many-2000x784-k{k}", "note": "one thread, CPU seconds"}
            rows += [{**common, "estimator": "KMeans", "cpu_seconds": km_cpu,
                      "ari": adjusted_rand_score(y, km.labels_)},
                     {**common, "estimator": "ClAM", "cpu_seconds": cpu,
                      "ari": adjusted_rand_score(y, clam.labels_), "epochs": clam.n_iter_,
                      "transform_seconds": transform_cpu, "cpu_ratio": cpu / km_cpu}]
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--ablation", action="store_true",
                        help="also the unmasked loss (eq. 8) and the weighted variant")
    parser.add_argument("--blobs", action="store_true",
                        help="only the 100,000 x 32 blobs against KMeans(n_init=10)")
    parser.add_argument("--repeats", type=int, default=3, help="repeats of --blobs")
    parser.add_argument("--many", action="store_true",
                        help="only k = 10, 50, 200 in 784 features against KMeans")
    parser.add_argument("--csv", help="the result file to write the run's rows to "
                        "(benchmarks/results/clam.csv, which the pages quote); a rerun "
                        "replaces the rows it measured")
    args = parser.parse_args()
    load_start = load_average()
    rows = blobs(args) if args.blobs else many(args) if args.many else uci(args)
    if args.csv:
        save_run(args.csv, [{"device": "cpu", **row} for row in rows], "bench_clam",
                 load_start)


if __name__ == "__main__":
    main()

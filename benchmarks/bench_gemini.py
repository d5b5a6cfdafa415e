"""SparseGEMINI against GemClus (the authors' package) on scenario 5, in one process.

For several draws of scenario 5 (Ohl et al., 2024, section 5.3: 300 samples, 5
informative variables among 100), runs the default ``path()`` of our SparseGEMINI
and of GemClus' ``SparseMLPMMD(ovo=True)``, both MMD one-vs-one with an MLP and a
skip connection, and prints time, ARI, correct variable rate (CVR: informative
variables kept) and variable selection error rate (VSER: variables wrongly kept or
dropped), and the speed ratio.

Usage::

    pip install ".[benchmark]"      # gemclus (GPL-3.0) is only used here, as a peer
    python benchmarks/bench_gemini.py --seeds 5
"""

import argparse
import time
import warnings

import numpy as np
from sklearn.metrics import adjusted_rand_score

from skdiffclust import SparseGEMINI
from skdiffclust.datasets import make_celeux_one


def selection_rates(support, informative):
    cvr = support[informative].mean()
    vser = np.mean(support != informative)
    return cvr, vser


def run_ours(X, seed):
    model = SparseGEMINI(n_clusters=3, gemini="mmd_ovo", random_state=seed)
    model.path(X)
    return model.labels_, model.get_support()


def run_gemclus(X, seed):
    from gemclus.sparse import SparseMLPMMD

    model = SparseMLPMMD(n_clusters=3, ovo=True, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.path(X)
    support = np.zeros(X.shape[1], dtype=bool)
    support[model.get_selection()] = True
    return model.predict(X), support


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--no-gemclus", action="store_true", help="time ours only")
    args = parser.parse_args()
    runners = {"skdiffclust": run_ours}
    if not args.no_gemclus:
        runners["gemclus"] = run_gemclus
    results = {name: [] for name in runners}
    for seed in range(args.seeds):
        X, y, informative = make_celeux_one(5, random_state=seed)
        for name, runner in runners.items():
            start = time.perf_counter()
            labels, support = runner(X, seed)
            seconds = time.perf_counter() - start
            cvr, vser = selection_rates(support, informative)
            exact = bool(np.array_equal(support, informative))
            results[name].append((seconds, adjusted_rand_score(y, labels), cvr, vser, exact))
            print(f"seed {seed} {name:12s} {seconds:7.2f} s  ARI {results[name][-1][1]:.2f}  "
                  f"CVR {cvr:.2f}  VSER {vser:.2f}  exactly the 5: {exact}", flush=True)
    print("\nmean over seeds")
    for name, rows in results.items():
        r = np.array(rows, dtype=float)
        print(f"  {name:12s} {r[:, 0].mean():7.2f} s  ARI {r[:, 1].mean():.2f}  CVR "
              f"{r[:, 2].mean():.2f}  VSER {r[:, 3].mean():.3f}  exact {r[:, 4].mean():.0%}")
    if "gemclus" in results:
        ours = np.mean([r[0] for r in results["skdiffclust"]])
        theirs = np.mean([r[0] for r in results["gemclus"]])
        print(f"  gemclus time / ours = {theirs / ours:.1f}x")


if __name__ == "__main__":
    main()

"""SparseGEMINI against GemClus (the authors' package) on scenario 5, and its memory.

Speed and selection (default mode). For several draws of scenario 5 (Ohl et al.,
2024, section 5.3: 300 samples, 5 informative variables among 100), runs the
``path()`` of our SparseGEMINI and of GemClus' ``SparseMLPMMD(ovo=True)`` in one
process, and prints time, ARI, correct variable rate (CVR: informative variables
kept) and variable selection error rate (VSER: variables wrongly kept or
dropped), and the speed ratio. Ours runs twice: at its defaults (rbf kernel,
k-means++ restarts) and with the paper's linear kernel (GemClus' too), for a
like-for-like time.

Memory (``--memory``). Peak memory of one ``fit`` on ``make_blobs`` data with
``--n-samples`` points (20,000 by default, 10 features, 5 clusters, 3 epochs:
the peak is reached in the first), each configuration in a fresh subprocess:
the growth of the resident set (``ru_maxrss``) over what the process held
before the fit, and the peak of the allocations traced by ``tracemalloc``
(NumPy's included). ``--with-full-matrix`` adds ``batch_size=None`` with an
exact rbf kernel: the single n x n matrix that ``batch_size='auto'`` avoids. Then
the peak of ``predict_proba`` of ``--predict-rows`` samples (50,000) through
hidden layers of 1,200 and 100 units, against the size of every row's hidden
activations at once.

Against k-means (``--csv PATH``): the part of the tour (``python -m skdiffclust
--dataset celeux``) on scenario 5, three draws of the data, ``random_state=0``: the
path's selected model, the dense model fitted again on the features it kept, and
``KMeans(n_init=10)`` on every feature and on the 5 informative ones; written with
the speed rows (mean over the seeds) to the CSV file (``_results.save_run``),
which the pages quote (``benchmarks/results/gemini.csv``); with ``--memory``, the
memory rows.

Usage::

    pip install ".[benchmark]"      # gemclus (GPL-3.0) is only used here, as a peer
    python benchmarks/bench_gemini.py --seeds 5
    python benchmarks/bench_gemini.py --seeds 3 --no-gemclus --csv benchmarks/results/gemini.csv
    python benchmarks/bench_gemini.py --memory
    python benchmarks/bench_gemini.py --memory --csv benchmarks/results/gemini.csv
"""

import argparse
import importlib.util
import json
import resource
import subprocess
import sys
import time
import tracemalloc
import warnings

import numpy as np
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

from _results import load_average, save_run

from skdiffclust import SparseGEMINI
from skdiffclust.datasets import make_celeux_one

OURS = {
    "ours (defaults)": {},
    "ours (linear)": {"kernel": "linear"},
}
# {what the line says: (the result file's estimator, SparseGEMINI's parameters)}
MEMORY_CASES = {
    "defaults (rbf, 100 Nystrom features)": ("SparseGEMINI", {}),
    "linear kernel (exact, from the features)": ("SparseGEMINI-linear", {"kernel": "linear"}),
    "exact rbf, batch_size='auto' (1024)": ("SparseGEMINI-exact-rbf",
                                            {"n_kernel_features": None}),
}
FULL_MATRIX_CASE = {
    "exact rbf, batch_size=None (n x n)": ("SparseGEMINI-full-matrix",
                                           {"n_kernel_features": None, "batch_size": None}),
}


def selection_rates(support, informative):
    cvr = support[informative].mean()
    vser = np.mean(support != informative)
    return cvr, vser


def run_ours(X, seed, params):
    model = SparseGEMINI(n_clusters=3, gemini="mmd_ovo", random_state=seed, **params)
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


def speed(args):
    runners = {name: (lambda X, seed, p=params: run_ours(X, seed, p))
               for name, params in OURS.items()}
    if not args.no_gemclus:
        if importlib.util.find_spec("gemclus") is None:
            print("gemclus (the authors' package) is not installed: pip install "
                  "'skdiffclust[benchmark]'; timing ours only")
        else:
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
            print(f"seed {seed} {name:16s} {seconds:7.2f} s  ARI {results[name][-1][1]:.2f}  "
                  f"CVR {cvr:.2f}  VSER {vser:.2f}  exactly the 5: {exact}", flush=True)
    print("\nmean over seeds")
    for name, rows in results.items():
        r = np.array(rows, dtype=float)
        print(f"  {name:16s} {r[:, 0].mean():7.2f} s  ARI {r[:, 1].mean():.2f}  CVR "
              f"{r[:, 2].mean():.2f}  VSER {r[:, 3].mean():.3f}  exact {r[:, 4].mean():.0%}")
    if "gemclus" in results:
        theirs = np.mean([r[0] for r in results["gemclus"]])
        for name in OURS:
            ours = np.mean([r[0] for r in results[name]])
            print(f"  gemclus time / {name} = {theirs / ours:.1f}x")
    return results


def against_kmeans():
    """The tour's scenario-5 section (its draws, its seed), and k-means on the
    informative features of the same draws: rows of the result file."""
    import io

    from skdiffclust.__main__ import TOUR, run_section

    out = io.StringIO()
    rows = run_section("celeux", 0.05, 0, out)
    print(out.getvalue())
    names = {"SparseGEMINI": "SparseGEMINI path",
             "SparseGEMINI on its features": "SparseGEMINI on its features",
             "KMeans (reference)": "KMeans, all features"}
    section = TOUR["celeux"]
    results = [{"dataset": "scenario 5", "estimator": names[row.name], "device": "cpu",
                "ari": row.ari, "nmi": row.nmi, "seconds": row.seconds,
                "note": f"the tour's section, {section.n_draws} draws, random_state=0; "
                        "scores: mean over the draws, seconds: total"}
               for row in rows if row.name in names]
    aris, nmis = [], []
    for draw in range(section.n_draws):
        data = section.load(draw)
        labels = KMeans(3, n_init=10, random_state=0).fit_predict(data.X[:, data.informative])
        aris.append(adjusted_rand_score(data.y, labels))
        nmis.append(normalized_mutual_info_score(data.y, labels))
    results.append({"dataset": "scenario 5", "estimator": "KMeans, the informative features",
                    "device": "cpu", "ari": np.mean(aris), "nmi": np.mean(nmis),
                    "note": f"{section.n_draws} draws, random_state=0"})
    print(f"KMeans on the 5 informative features: ARI {np.mean(aris):.3f}")
    return results


def speed_rows(results, n_seeds):
    """The mean over the seeds of each package's path: rows of the result file."""
    rows = []
    for name, runs in results.items():
        r = np.array(runs, dtype=float)
        rows.append({"dataset": "scenario 5 path", "estimator": name, "device": "cpu",
                     "ari": r[:, 1].mean(), "seconds": r[:, 0].mean(), "cvr": r[:, 2].mean(),
                     "vser": r[:, 3].mean(), "exact": r[:, 4].mean(),
                     "note": f"path(), mean over random_state 0 to {n_seeds - 1}"})
    return rows


def memory_case(params, n_samples):
    """One fit in this process; prints its peak memory as JSON (run in a subprocess)."""
    X, _ = make_blobs(n_samples, n_features=10, centers=5, random_state=0)
    model = SparseGEMINI(n_clusters=5, max_iter=3, random_state=0, **params)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X)
    seconds = time.perf_counter() - start
    _, traced = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"rss_growth_mb": (after - before) / 1024, "traced_peak_mb": traced / 2**20,
                      "seconds": seconds}))


def inference_memory(n_rows=50_000, hidden=(1200, 100)):
    """NumPy's peak while ``predict_proba`` reads ``n_rows`` samples through an MLP
    of ``hidden`` units (fitted for one epoch on 2,000), and what the hidden
    activations of every row would take at once: the result file's row."""
    X, _ = make_blobs(2_000 + n_rows, n_features=10, centers=5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # one epoch: not converged, on purpose
        model = SparseGEMINI(n_clusters=5, hidden_layer_sizes=hidden, max_iter=1,
                             random_state=0).fit(X[:2_000])
    X = X[2_000:]
    tracemalloc.start()
    start = time.perf_counter()
    model.predict_proba(X)
    seconds = time.perf_counter() - start
    _, traced = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    activations = n_rows * sum(hidden) * X.itemsize / 2**20
    units = " and ".join(f"{h:,}" for h in hidden)
    print(f"  predict_proba of {n_rows:,} samples, hidden layers of {units} units: "
          f"traced peak {traced / 2**20:8.1f} MB ({seconds:.2f} s); every row's hidden "
          f"activations at once: {activations:,.0f} MB")
    return {"dataset": f"predict-{n_rows}", "device": "cpu", "seconds": seconds,
            "estimator": "SparseGEMINI-" + "-".join(map(str, hidden)),
            "numpy_mib": traced / 2**20, "activations_mib": activations,
            "note": f"--memory: predict_proba of {n_rows:,} samples (10 features) through "
                    f"hidden layers of {units} units: NumPy's peak, and every row's "
                    "hidden activations (float64)"}


def memory(args):
    """The ``--memory`` mode; returns the result file's rows."""
    cases = dict(MEMORY_CASES, **(FULL_MATRIX_CASE if args.with_full_matrix else {}))
    print(f"peak memory of one fit, n_samples={args.n_samples}, 10 features, 5 clusters "
          f"(input: {args.n_samples * 10 * 8 / 2**20:.1f} MB)")
    rows = []
    for name, (estimator, params) in cases.items():
        out = subprocess.run(
            [sys.executable, __file__, "--memory-case", json.dumps(params),
             "--n-samples", str(args.n_samples)],
            capture_output=True, text=True, check=True)
        result = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"  {name:42s} RSS +{result['rss_growth_mb']:8.1f} MB   traced peak "
              f"{result['traced_peak_mb']:8.1f} MB   ({result['seconds']:.1f} s, 3 epochs)",
              flush=True)
        rows.append({"dataset": f"blobs-{args.n_samples}", "estimator": estimator,
                     "device": "cpu", "seconds": result["seconds"],
                     "peak_mib": result["rss_growth_mb"],
                     "numpy_mib": result["traced_peak_mb"],
                     "note": f"--memory: one fit of 3 epochs, {name}; resident set "
                             "(ru_maxrss) above the level before, NumPy's peak"})
    rows.append(inference_memory(args.predict_rows))
    return rows


def _positive(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=_positive, default=5,
                        help="number of seeds (random_state 0 .. SEEDS - 1)")
    parser.add_argument("--no-gemclus", action="store_true", help="time ours only")
    parser.add_argument("--memory", action="store_true", help="peak memory of one fit")
    parser.add_argument("--n-samples", type=int, default=20_000)
    parser.add_argument("--predict-rows", type=int, default=50_000,
                        help="samples of --memory's predict_proba")
    parser.add_argument("--with-full-matrix", action="store_true",
                        help="also the n x n kernel matrix (3.2 GB at 20,000 samples)")
    parser.add_argument("--csv", metavar="PATH",
                        help="also run the tour's comparison with k-means (with --memory: "
                             "the memory rows), and write the rows to this CSV file "
                             "(e.g. benchmarks/results/gemini.csv)")
    parser.add_argument("--memory-case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_case is not None:
        memory_case(json.loads(args.memory_case), args.n_samples)
    elif args.memory:
        load_start = load_average()
        rows = memory(args)
        if args.csv:
            save_run(args.csv, rows, "bench_gemini", load_start)
    else:
        load_start = load_average()
        results = speed(args)
        if args.csv:
            rows = speed_rows(results, args.seeds) + against_kmeans()
            save_run(args.csv, rows, "bench_gemini", load_start)


if __name__ == "__main__":
    main()

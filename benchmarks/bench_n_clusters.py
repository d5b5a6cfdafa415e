"""How many clusters: ``n_clusters='auto'`` against scikit-learn's ways of choosing it.

On every dataset of the Clustering Benchmarks suite (Gagolewski,
clustering-data-v1) with at most ``--max-n`` points, in the development
batteries (``sipu``, ``fcps``, ``uci``) and the evaluation batteries (``wut``,
``graves``, ``other``), and optionally on scikit-learn's digits, MNIST and
Fashion-MNIST (``--images``), this runs in one process:

* ``PRCut-auto``: ``PRCut(n_clusters='auto', random_state=0)``, its candidates
  2 to ``--max-clusters``;
* ``PRCut``: ``PRCut(n_clusters=k, random_state=0)`` at the reference number k
  (the first reference labelling's), for the time and quality of a fit given k;
* ``SpanningForest-auto``: ``SpanningForestClustering(n_clusters='auto')``, its
  candidates 2 to ``--max-clusters`` (the largest gap of the spanning tree's edges);
* ``SpanningForest``: ``SpanningForestClustering(n_clusters=k)`` at the reference
  number k (single linkage given k);
* ``Deep-auto`` and ``Deep`` (the image sets only):
  ``deep.DeepImageClustering(n_clusters='auto', random_state=0)``, and the same
  at the reference number k;
* ``SparseGEMINI-auto``: ``SparseGEMINI(n_clusters='auto', n_jobs=1, random_state=0)``, its
  candidates 2 to ``--max-clusters`` (a fit at each);
* ``SparseGEMINI``: ``SparseGEMINI(n_clusters=k, random_state=0)`` at the
  reference number k, at most ``--max-clusters``;
* ``HDBSCAN``: ``HDBSCAN(copy=True)`` at its defaults (clusters found; its noise
  points count as one more cluster in the scores);
* ``GMM-BIC``: ``GaussianMixture(n_components=k, random_state=0)`` for each
  candidate k, the one of lowest BIC;
* ``KMeans-silhouette``: ``KMeans(n_clusters=k, n_init=10, random_state=0)``
  for each candidate k, the one of highest silhouette (on at most 10,000 points);
* ``Spectral-eigengap``: the eigengap heuristic on the normalised Laplacian of
  the symmetric 10-NN graph (the largest gap between consecutive eigenvalues
  after the candidate number), then ``SpectralClustering(affinity=
  'nearest_neighbors', n_neighbors=10, assign_labels='cluster_qr')`` with it.

Data as in ``bench_quality.py``: ``clustbench.load_dataset(battery, name,
random_state=0)``, ``uci`` standardised per feature. A dataset may have several
reference labellings: a number found is right when it matches any of them, and
the ARI and NMI are those against the labelling that fits best, its noise points
(label 0) left out. Times are the process's CPU seconds of each fit, every fit
on ``--threads`` threads.

Usage::

    python benchmarks/bench_n_clusters.py --quick
    python benchmarks/bench_n_clusters.py                       # the six batteries
    python benchmarks/bench_n_clusters.py --batteries wut --estimators PRCut-auto,HDBSCAN
    python benchmarks/bench_n_clusters.py --estimators SpanningForest-auto,SpanningForest
    python benchmarks/bench_n_clusters.py --batteries none --images digits,mnist \
        --estimators Deep-auto,Deep,PRCut-auto
    python benchmarks/bench_n_clusters.py --images digits --batteries none
    python benchmarks/bench_n_clusters.py --csv benchmarks/results/n_clusters.csv
"""

import argparse
import sys
import time
import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy.sparse import csgraph
from scipy.sparse.linalg import eigsh
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score
from sklearn.neighbors import kneighbors_graph
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_quality, _results

from bench_quality import DATA, STANDARDISED, suite_keys  # noqa: E402

DEVELOPMENT = ("sipu", "fcps", "uci")
EVALUATION = ("wut", "graves", "other")
QUICK = ("fcps/hepta", "fcps/lsun", "fcps/tetra", "wut/x1", "wut/z3", "graves/dense",
         "other/iris")
SEED = 0
N_NEIGHBORS = 10
PEERS = ("HDBSCAN", "GMM-BIC", "KMeans-silhouette", "Spectral-eigengap")
OURS = ("PRCut-auto", "PRCut", "SpanningForest-auto", "SpanningForest",
        "SparseGEMINI-auto", "SparseGEMINI")
# fitted on the image sets only (--images)
IMAGES_ONLY = ("Deep-auto", "Deep")
SILHOUETTE_SAMPLE = 10_000


@dataclass
class Dataset:
    key: str
    group: str
    X: np.ndarray
    labellings: list
    n_clusters: list  # the reference numbers, one per labelling

    @property
    def k(self):
        return self.n_clusters[0]


@dataclass
class Fit:
    key: str
    name: str
    n_found: int = 0
    ari: float = float("nan")
    nmi: float = float("nan")
    cpu_seconds: float = float("nan")
    error: str = ""
    warnings: set = field(default_factory=set)

    def right(self, ds):
        return not self.error and self.n_found in ds.n_clusters


# ---------------------------------------------------------------- data


def load_battery(key):
    import clustbench

    battery, name = key.split("/")
    ds = clustbench.load_dataset(battery, name, path=str(DATA), random_state=SEED)
    X = ds.data.astype(np.float64)
    if battery in STANDARDISED:
        X = StandardScaler().fit_transform(X)
    group = "development" if battery in DEVELOPMENT else "evaluation"
    labellings = [np.asarray(labels) for labels in ds.labels]
    return Dataset(key, group, X, labellings, [int(labels.max()) for labels in labellings])


def load_images(name):
    """scikit-learn's digits, or MNIST's or Fashion-MNIST's 60,000 training images
    (``skdiffclust.datasets.load_mnist``: the data folder of SKDIFFCLUST_DATA_HOME),
    as rows of pixels in [0, 1]; their labels shifted to 1.. (0 is noise here)."""
    if name == "digits":
        from sklearn.datasets import load_digits

        X, y = load_digits(return_X_y=True)
        X = X / 16.0
    else:
        from skdiffclust.datasets import load_mnist

        X, y = load_mnist(kind="fashion-mnist" if name == "fashion" else "mnist",
                          return_X_y=True)
        X = X.reshape(len(X), -1) / 255.0
    y = np.asarray(y, dtype=np.int64) + 1
    return Dataset(f"images/{name}", "images", X.astype(np.float32), [y], [int(y.max())])


# ---------------------------------------------------------------- scores


def scores(ds, labels):
    """ARI and NMI against the reference labelling that fits best (noise left out)."""
    best_ari, best_nmi = -1.0, -1.0
    for reference in ds.labellings:
        keep = reference > 0
        best_ari = max(best_ari, adjusted_rand_score(reference[keep], labels[keep]))
        best_nmi = max(best_nmi, normalized_mutual_info_score(reference[keep], labels[keep]))
    return best_ari, best_nmi


def n_found(labels):
    return int(np.unique(labels[labels >= 0]).size)


# ---------------------------------------------------------------- the methods


def prcut_auto(X, k, max_clusters):
    from skdiffclust.prcut import PRCut

    return PRCut(n_clusters="auto", max_clusters=max_clusters, random_state=SEED).fit(X).labels_


def prcut_given(X, k, max_clusters):
    from skdiffclust.prcut import PRCut

    return PRCut(n_clusters=k, random_state=SEED).fit(X).labels_


def forest_auto(X, k, max_clusters):
    from skdiffclust.forest import SpanningForestClustering

    return SpanningForestClustering(n_clusters="auto", max_clusters=max_clusters).fit(X).labels_


def forest_given(X, k, max_clusters):
    from skdiffclust.forest import SpanningForestClustering

    return SpanningForestClustering(n_clusters=k).fit(X).labels_


def deep_auto(X, k, max_clusters):
    from skdiffclust.deep import DeepImageClustering

    return DeepImageClustering(n_clusters="auto", max_clusters=max_clusters,
                               random_state=SEED).fit(X).labels_


def deep_given(X, k, max_clusters):
    from skdiffclust.deep import DeepImageClustering

    return DeepImageClustering(n_clusters=k, random_state=SEED).fit(X).labels_


def gemini_auto(X, k, max_clusters):
    from skdiffclust import SparseGEMINI

    return SparseGEMINI(n_clusters="auto", max_clusters=max_clusters, n_jobs=1,
                        random_state=SEED).fit(X).labels_


def gemini_given(X, k, max_clusters):
    from skdiffclust import SparseGEMINI

    return SparseGEMINI(n_clusters=min(k, max_clusters), n_jobs=1,
                        random_state=SEED).fit(X).labels_


def hdbscan(X, k, max_clusters):
    from sklearn.cluster import HDBSCAN

    return HDBSCAN(copy=True).fit_predict(X)


def gmm_bic(X, k, max_clusters):
    from sklearn.mixture import GaussianMixture

    best = None
    for candidate in range(2, max_clusters + 1):
        model = GaussianMixture(n_components=candidate, random_state=SEED).fit(X)
        bic = model.bic(X)
        if best is None or bic < best[0]:
            best = (bic, model.predict(X))
    return best[1]


def kmeans_silhouette(X, k, max_clusters):
    from sklearn.cluster import KMeans
    from sklearn.metrics import silhouette_score

    best = None
    for candidate in range(2, max_clusters + 1):
        labels = KMeans(n_clusters=candidate, n_init=10, random_state=SEED).fit_predict(X)
        if np.unique(labels).size < 2:
            continue
        value = silhouette_score(X, labels, sample_size=min(len(X), SILHOUETTE_SAMPLE),
                                 random_state=SEED)
        if best is None or value > best[0]:
            best = (value, labels)
    return best[1]


def spectral_eigengap(X, k, max_clusters):
    from sklearn.cluster import SpectralClustering

    graph = kneighbors_graph(X, min(N_NEIGHBORS, len(X) - 1), include_self=False)
    graph = ((graph + graph.T) > 0).astype(np.float64)
    laplacian = csgraph.laplacian(graph, normed=True)
    n_values = min(max_clusters + 1, len(X) - 1)
    # the Laplacian's smallest eigenvalues: the largest of 2 I - L (spectrum in [0, 2])
    shifted = 2.0 * np.eye(len(X)) - laplacian.toarray() if len(X) <= 2000 else None
    if shifted is not None:
        values = 2.0 - np.linalg.eigvalsh(shifted)[::-1][:n_values]
    else:
        from scipy.sparse import identity

        values = 2.0 - eigsh(2.0 * identity(len(X)) - laplacian, k=n_values, which="LA",
                             v0=np.ones(len(X)), tol=1e-8)[0][::-1]
    values = np.sort(values)
    gaps = values[2:] - values[1:-1]  # the gap after candidate 2, 3, ...
    chosen = int(np.argmax(gaps)) + 2
    return SpectralClustering(n_clusters=chosen, affinity="nearest_neighbors",
                              n_neighbors=N_NEIGHBORS, assign_labels="cluster_qr",
                              random_state=SEED).fit_predict(X)


METHODS = {"PRCut-auto": prcut_auto, "PRCut": prcut_given,
           "SpanningForest-auto": forest_auto, "SpanningForest": forest_given,
           "SparseGEMINI-auto": gemini_auto, "SparseGEMINI": gemini_given,
           "Deep-auto": deep_auto, "Deep": deep_given,
           "HDBSCAN": hdbscan,
           "GMM-BIC": gmm_bic, "KMeans-silhouette": kmeans_silhouette,
           "Spectral-eigengap": spectral_eigengap}


def limit_threads(threads):
    import numba

    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(threads)


def fit_one(name, ds, max_clusters, threads):
    fit = Fit(ds.key, name)
    with warnings.catch_warnings(record=True) as caught, threadpool_limits(threads):
        warnings.simplefilter("always")
        try:
            start = time.process_time()
            labels = np.asarray(METHODS[name](ds.X, ds.k, max_clusters))
            fit.cpu_seconds = time.process_time() - start
        except Exception as exc:  # recorded and reported; the run goes on
            fit.error = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
    fit.warnings.update(w.category.__name__ for w in caught)
    if not fit.error:
        fit.n_found = n_found(labels)
        fit.ari, fit.nmi = scores(ds, labels)
    return fit


def warm_up(names, max_clusters, threads):
    """Fit each method once on small data: numba's compilation and torch's lazy
    initialisation are not counted in the first dataset's time."""
    from sklearn.datasets import make_blobs

    X, y = make_blobs(200, n_features=3, centers=3, random_state=SEED)
    tiny = Dataset("warm-up", "warm-up", X, [y + 1], [3])
    images = load_images("digits")
    images = Dataset("warm-up", "warm-up", images.X[:200], [images.labellings[0][:200]], [10])
    for name in names:
        fit_one(name, images if name in IMAGES_ONLY else tiny, max_clusters, threads)


# ---------------------------------------------------------------- report


def rst_table(header, rows):
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]
    rule = "  ".join("=" * width for width in widths)
    lines = [rule, "  ".join(str(c).ljust(w) for c, w in zip(header, widths)), rule]
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)) for row in rows]
    return "\n".join(lines + [rule])


def print_per_dataset(datasets, fits, names):
    header = ["dataset", "k"] + names
    rows = []
    for ds in datasets:
        cells = []
        for name in names:
            fit = fits[ds.key].get(name)
            cells.append("-" if fit is None else "error" if fit.error
                         else f"{fit.n_found}{'*' if fit.right(ds) else ''} {fit.ari:.2f}")
        rows.append([ds.key, "/".join(map(str, ds.n_clusters))] + cells)
    print("\nNumber found (* a reference number) and ARI:")
    print(rst_table(header, rows))


def summary_rows(datasets, fits, names):
    rows = []
    for name in names:
        done = [ds for ds in datasets if name in fits[ds.key] and not fits[ds.key][name].error]
        if not done:
            continue
        chosen = [fits[ds.key][name] for ds in done]
        rows.append([name, f"{sum(f.right(ds) for f, ds in zip(chosen, done))}/{len(done)}",
                     f"{np.mean([f.ari for f in chosen]):.3f}",
                     f"{np.mean([f.nmi for f in chosen]):.3f}",
                     f"{sum(f.cpu_seconds for f in chosen):.1f}"])
    return rows


def print_summary(datasets, fits, names):
    for group in ("development", "evaluation", "images"):
        members = [ds for ds in datasets if ds.group == group]
        if members:
            print(f"\n{group} ({len(members)} datasets):")
            print(rst_table(["method", "number right", "mean ARI", "mean NMI", "CPU s"],
                            summary_rows(members, fits, names)))


def write_csv(path, datasets, fits, names):
    from _results import write_results

    rows = []
    for ds in datasets:
        for name in names:
            fit = fits[ds.key].get(name)
            if fit is None or fit.error:
                continue
            rows.append(dict(dataset=ds.key, estimator=name, device="cpu", ari=fit.ari,
                             nmi=fit.nmi, seconds=fit.cpu_seconds,
                             note=f"found {fit.n_found} of {'/'.join(map(str, ds.n_clusters))}",
                             n_found=fit.n_found, right=int(fit.right(ds))))
    write_results(path, rows, "n_clusters")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batteries", default=",".join(DEVELOPMENT + EVALUATION),
                        help="comma-separated batteries, or 'none'")
    parser.add_argument("--datasets", default="", help="battery/name,... (overrides)")
    parser.add_argument("--images", default="", help="digits,mnist,fashion")
    parser.add_argument("--estimators", default=",".join(OURS + PEERS))
    parser.add_argument("--max-n", type=int, default=10_000)
    parser.add_argument("--max-clusters", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}")
    parser.add_argument("--csv", default="")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    names = args.estimators.split(",")
    unknown = sorted(set(names) - set(METHODS))
    if unknown:
        raise SystemExit(f"unknown estimators {unknown}; known: {sorted(METHODS)}")
    if args.quick:
        keys = list(QUICK)
    elif args.datasets:
        keys = args.datasets.split(",")
    elif args.batteries == "none":
        keys = []
    else:
        keys = suite_keys(args.batteries.split(","), args.max_n)
    datasets = [load_battery(key) for key in keys]
    datasets += [load_images(name) for name in filter(None, args.images.split(","))]
    limit_threads(args.threads)
    warm_up(names, args.max_clusters, args.threads)
    fits = defaultdict(dict)
    for ds in datasets:
        for name in names:
            if name in IMAGES_ONLY and ds.group != "images":
                continue
            fit = fits[ds.key][name] = fit_one(name, ds, args.max_clusters, args.threads)
            status = fit.error or f"found {fit.n_found} ARI {fit.ari:.3f} {fit.cpu_seconds:.1f} s"
            print(f"{ds.key:28s} k={'/'.join(map(str, ds.n_clusters)):9s} {name:18s} {status}",
                  flush=True)
    print_per_dataset(datasets, fits, names)
    print_summary(datasets, fits, names)
    if args.csv:
        write_csv(args.csv, datasets, fits, names)


if __name__ == "__main__":
    main()

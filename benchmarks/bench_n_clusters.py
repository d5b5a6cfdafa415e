"""How many clusters: ``n_clusters='auto'`` against scikit-learn's ways of choosing it.

On every dataset of the Clustering Benchmarks suite (Gagolewski,
clustering-data-v1) with at most ``--max-n`` points, in the development
batteries (``sipu``, ``fcps``, ``uci``) and the evaluation batteries (``wut``,
``graves``, ``other``), and on image sets (``--images``: the image battery of
``_image_battery.py``, its half ``tune`` or ``check``, MNIST's and
Fashion-MNIST's 60,000 training images ``mnist`` and ``fashion``, the 20-class
union ``mix-20``, scikit-learn's ``digits``), this runs in one process:

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
  at the reference number k (the NMI at the true number);
* ``SparseGEMINI-auto``: ``SparseGEMINI(n_clusters='auto', n_jobs=1, random_state=0)``, its
  candidates 2 to ``--max-clusters`` (a fit at each);
* ``SparseGEMINI``: ``SparseGEMINI(n_clusters=k, random_state=0)`` at the
  reference number k, at most ``--max-clusters``;
* ``HDBSCAN``: ``HDBSCAN(copy=True)`` at its defaults (clusters found; its noise
  points count as one more cluster in the scores);
* ``GMM-BIC``: ``GaussianMixture(n_components=k, random_state=0)`` for each
  candidate k, the one of lowest BIC (above 10,000 samples, fitted and scored on
  a sample of 10,000, then predicted on all);
* ``KMeans-silhouette``: ``KMeans(n_clusters=k, n_init=10, random_state=0)``
  for each candidate k, the one of highest silhouette (on at most 10,000 points);
* ``Spectral-eigengap``: the eigengap heuristic on the normalised Laplacian of
  the symmetric 10-NN graph (the largest gap between consecutive eigenvalues
  after the candidate number), then ``SpectralClustering(affinity=
  'nearest_neighbors', n_neighbors=10, assign_labels='cluster_qr')`` with it;
* on images, ``HDBSCAN-PCA``, ``GMM-BIC-PCA`` and ``KMeans-silhouette-PCA``: the
  same three on the 50 principal components of the pixels, and
  ``HDBSCAN-Deep``, ``GMM-BIC-Deep`` and ``KMeans-silhouette-Deep`` on
  ``Deep-auto``'s embedding (its ``transform``; the Deep fit's time not counted).

The candidates are 2 to 20 on the tables and 2 to 50 on images (the default of
``PRCut``'s and ``DeepImageClustering``'s ``max_clusters``), for every method.
Tables as in ``bench_quality.py``: ``clustbench.load_dataset(battery, name,
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
    python benchmarks/bench_n_clusters.py --batteries none --images check    # all methods
    python benchmarks/bench_n_clusters.py --batteries none --images mnist,fashion,mix-20 \
        --estimators Deep-auto,Deep,PRCut-auto
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
IMAGES_ONLY = ("Deep-auto", "Deep", "HDBSCAN-PCA", "GMM-BIC-PCA", "KMeans-silhouette-PCA",
               "HDBSCAN-Deep", "GMM-BIC-Deep", "KMeans-silhouette-Deep")
# the image sets' estimators and peers, by default
IMAGE_METHODS = ("Deep-auto", "Deep", "PRCut-auto", "PRCut", "KMeans-silhouette-PCA",
                 "GMM-BIC-PCA", "HDBSCAN-PCA", "KMeans-silhouette-Deep", "GMM-BIC-Deep",
                 "HDBSCAN-Deep")
SILHOUETTE_SAMPLE = 10_000
# the candidates of every method: 2 to these (on the tables the peers' usual range,
# where PRCut's numbers found are the same at its default of 50; on images the
# default of PRCut's and DeepImageClustering's max_clusters)
MAX_CLUSTERS, MAX_CLUSTERS_IMAGES = 20, 50
# GaussianMixture's fits by BIC on at most this many samples (then predicted on all)
PEER_SAMPLE = 10_000
PCA_COMPONENTS = 50
# beside --csv: Deep-auto's criterion of every candidate on each image set
SCORES_FILE = "n_clusters_scores.csv"


@dataclass
class Dataset:
    key: str
    group: str
    X: np.ndarray  # rows of features (of pixels, for images)
    labellings: list
    n_clusters: list  # the reference numbers, one per labelling
    images: np.ndarray = None  # (n, height, width), for the image sets
    # what several methods read: the 50 principal components, Deep-auto's embedding
    cache: dict = field(default_factory=dict)

    @property
    def k(self):
        return self.n_clusters[0]

    def principal_components(self):
        if "pca" not in self.cache:
            from sklearn.decomposition import PCA

            components = min(PCA_COMPONENTS, self.X.shape[1], self.X.shape[0] - 1)
            self.cache["pca"] = PCA(components, random_state=SEED).fit_transform(self.X)
        return self.cache["pca"]

    def deep_embedding(self, max_clusters):
        """The embedding (``transform``) of Deep-auto's fit (fitted here when the
        run has not fitted Deep-auto on this set before)."""
        if "deep" not in self.cache:
            deep_auto(self, max_clusters)
        return self.cache["deep"]


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


def image_names(spec):
    """The image sets of ``--images``: names of ``_image_battery`` (``BATTERY``,
    ``EXTRA``), or a half of the battery, ``tune`` or ``check``."""
    import _image_battery

    names = []
    for name in filter(None, spec.split(",")):
        names += _image_battery.names(name) if name in ("tune", "check") else [name]
    return names


def load_images(name):
    """An image set (``_image_battery.load``: scikit-learn's digits, MNIST's or
    Fashion-MNIST's 60,000 training images ``mnist`` and ``fashion``, the
    battery's sets, ``mix-20``), its pixels in [0, 1] as images and as rows;
    its labels shifted to 1.. (0 is noise here). Its group is the battery's
    half (``images-tune``, ``images-check``), or ``images``."""
    import _image_battery

    images, y = _image_battery.load(name)
    y = np.asarray(y, dtype=np.int64) + 1
    half = _image_battery.BATTERY.get(name, (None,))[0]
    group = f"images-{half}" if half else "images"
    return Dataset(f"images/{name}", group, images.reshape(len(images), -1), [y],
                   [int(y.max())], images=images)


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


def prcut_auto(ds, max_clusters):
    from skdiffclust.prcut import PRCut

    return PRCut(n_clusters="auto", max_clusters=max_clusters,
                 random_state=SEED).fit(ds.X).labels_


def prcut_given(ds, max_clusters):
    from skdiffclust.prcut import PRCut

    return PRCut(n_clusters=ds.k, random_state=SEED).fit(ds.X).labels_


def forest_auto(ds, max_clusters):
    from skdiffclust.forest import SpanningForestClustering

    return SpanningForestClustering(n_clusters="auto",
                                    max_clusters=max_clusters).fit(ds.X).labels_


def forest_given(ds, max_clusters):
    from skdiffclust.forest import SpanningForestClustering

    return SpanningForestClustering(n_clusters=ds.k).fit(ds.X).labels_


def deep_auto(ds, max_clusters):
    """DeepImageClustering(n_clusters='auto'); its embedding is kept for the peers
    that read it."""
    from skdiffclust.deep import DeepImageClustering

    model = DeepImageClustering(n_clusters="auto", max_clusters=max_clusters,
                                random_state=SEED).fit(ds.images)
    ds.cache["deep"] = model.transform(ds.images)
    ds.cache["deep-count"] = (model.n_clusters_candidates_, model.n_clusters_scores_,
                              model.n_clusters_)
    return model.labels_


def deep_given(ds, max_clusters):
    from skdiffclust.deep import DeepImageClustering

    return DeepImageClustering(n_clusters=ds.k, random_state=SEED).fit(ds.images).labels_


def gemini_auto(ds, max_clusters):
    from skdiffclust import SparseGEMINI

    return SparseGEMINI(n_clusters="auto", max_clusters=max_clusters, n_jobs=1,
                        random_state=SEED).fit(ds.X).labels_


def gemini_given(ds, max_clusters):
    from skdiffclust import SparseGEMINI

    return SparseGEMINI(n_clusters=min(ds.k, max_clusters), n_jobs=1,
                        random_state=SEED).fit(ds.X).labels_


def hdbscan(X, max_clusters):
    from sklearn.cluster import HDBSCAN

    return HDBSCAN(copy=True).fit_predict(X)


def gmm_bic(X, max_clusters):
    """The Gaussian mixture of lowest BIC among the candidates; above
    ``PEER_SAMPLE`` samples, fitted (and its BIC measured) on a sample of them. A
    candidate whose fit fails (collapsed components, in many dimensions) is left
    out."""
    from sklearn.mixture import GaussianMixture

    sample = _peer_sample(X)
    best = None
    for candidate in range(2, max_clusters + 1):
        try:
            model = GaussianMixture(n_components=candidate, random_state=SEED).fit(sample)
        except ValueError:  # ill-defined covariances
            continue
        bic = model.bic(sample)
        if best is None or bic < best[0]:
            best = (bic, model)
    return best[1].predict(X)


def kmeans_silhouette(X, max_clusters):
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


def _peer_sample(X):
    if len(X) <= PEER_SAMPLE:
        return X
    rows = np.random.default_rng(SEED).choice(len(X), PEER_SAMPLE, replace=False)
    return X[np.sort(rows)]


def spectral_eigengap(X, max_clusters):
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


def on_rows(peer):
    """A peer of the tables, on the rows as given."""
    return lambda ds, max_clusters: peer(ds.X, max_clusters)


def on_principal_components(peer):
    """A peer on the 50 principal components of the images' pixels."""
    return lambda ds, max_clusters: peer(ds.principal_components(), max_clusters)


def on_deep_embedding(peer):
    """A peer on the embedding of DeepImageClustering's 'auto' fit (the fit's own
    time not counted)."""
    def method(ds, max_clusters):
        embedding = ds.deep_embedding(max_clusters)
        return peer(embedding, max_clusters)

    return method


METHODS = {"PRCut-auto": prcut_auto, "PRCut": prcut_given,
           "SpanningForest-auto": forest_auto, "SpanningForest": forest_given,
           "SparseGEMINI-auto": gemini_auto, "SparseGEMINI": gemini_given,
           "Deep-auto": deep_auto, "Deep": deep_given,
           "HDBSCAN": on_rows(hdbscan), "GMM-BIC": on_rows(gmm_bic),
           "KMeans-silhouette": on_rows(kmeans_silhouette),
           "Spectral-eigengap": on_rows(spectral_eigengap),
           "HDBSCAN-PCA": on_principal_components(hdbscan),
           "GMM-BIC-PCA": on_principal_components(gmm_bic),
           "KMeans-silhouette-PCA": on_principal_components(kmeans_silhouette),
           "HDBSCAN-Deep": on_deep_embedding(hdbscan),
           "GMM-BIC-Deep": on_deep_embedding(gmm_bic),
           "KMeans-silhouette-Deep": on_deep_embedding(kmeans_silhouette)}


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
            labels = np.asarray(METHODS[name](ds, max_clusters))
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
    digits = load_images("digits")
    images = Dataset("warm-up", "images-warm-up", digits.X[:200],
                     [digits.labellings[0][:200]], [10], images=digits.images[:200])
    for name in names:
        fit_one(name, images if name in IMAGES_ONLY else tiny, min(max_clusters, 10),
                threads)


# ---------------------------------------------------------------- report


def rst_table(header, rows):
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]
    rule = "  ".join("=" * width for width in widths)
    lines = [rule, "  ".join(str(c).ljust(w) for c, w in zip(header, widths)), rule]
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)) for row in rows]
    return "\n".join(lines + [rule])


def print_per_dataset(datasets, fits, names):
    """Per dataset, the number each method found and its ARI (tables) or NMI
    (images: ``Deep``'s is the NMI at the reference number)."""
    for images in (False, True):
        members = [ds for ds in datasets if is_image_set(ds) == images]
        if not members:
            continue
        header = ["dataset", "k"] + names
        rows = []
        for ds in members:
            cells = []
            for name in names:
                fit = fits[ds.key].get(name)
                score = fit.nmi if images else fit.ari if fit else 0.0
                cells.append("-" if fit is None else "error" if fit.error
                             else f"{fit.n_found}{'*' if fit.right(ds) else ''} {score:.2f}")
            rows.append([ds.key, "/".join(map(str, ds.n_clusters))] + cells)
        print(f"\nNumber found (* a reference number) and {'NMI' if images else 'ARI'}:")
        print(rst_table(header, rows))


def is_image_set(ds):
    return ds.group.startswith("images")


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
    for group in ("development", "evaluation", "images-tune", "images-check", "images"):
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


def write_scores(path, datasets):
    """Deep-auto's criterion at every number of clusters on each image set (the
    strongest link between the clusters, as its merges passed through it, and the
    number found), in a CSV of its own: the rows of these sets replace the file's,
    the others are kept (``plot_benchmarks.py`` draws them)."""
    import csv

    header = ["dataset", "candidate", "link", "found"]
    rows = []
    if Path(path).exists():
        with open(path, newline="") as file:
            rows = [row for row in csv.DictReader(file) if row.get("link")]
    counted = {ds.key: ds.cache["deep-count"] for ds in datasets if "deep-count" in ds.cache}
    rows = [row for row in rows if row["dataset"] not in counted]
    for key, (candidates, links, found) in counted.items():
        rows += [dict(dataset=key, candidate=int(k), link=f"{link:.6g}", found=int(found))
                 for k, link in zip(candidates, links)]
    with open(path, "w", newline="") as file:
        writer = csv.DictWriter(file, header)
        writer.writeheader()
        writer.writerows(rows)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batteries", default=",".join(DEVELOPMENT + EVALUATION),
                        help="comma-separated batteries, or 'none'")
    parser.add_argument("--datasets", default="", help="battery/name,... (overrides)")
    parser.add_argument("--images", default="",
                        help="image sets: digits, mnist, fashion, mix-20, the battery's "
                        "sets or a half of it, tune or check")
    parser.add_argument("--estimators", default=None,
                        help=f"default: {','.join(OURS + PEERS)}; on images only, "
                        f"{','.join(IMAGE_METHODS)}")
    parser.add_argument("--max-n", type=int, default=10_000)
    parser.add_argument("--max-clusters", type=int, default=None,
                        help=f"the largest candidate (default {MAX_CLUSTERS} on the "
                        f"tables, {MAX_CLUSTERS_IMAGES} on images)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}")
    parser.add_argument("--csv", default="")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    tables = args.quick or args.datasets or args.batteries != "none"
    names = (args.estimators or ",".join(OURS + PEERS if tables else IMAGE_METHODS)).split(",")
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
    datasets += [load_images(name) for name in image_names(args.images)]
    limit_threads(args.threads)
    warm_up(names, MAX_CLUSTERS, args.threads)
    fits = defaultdict(dict)
    for ds in datasets:
        max_clusters = args.max_clusters or (MAX_CLUSTERS_IMAGES if is_image_set(ds)
                                             else MAX_CLUSTERS)
        for name in names:
            if name in IMAGES_ONLY and not is_image_set(ds):
                continue
            fit = fits[ds.key][name] = fit_one(name, ds, max_clusters, args.threads)
            status = fit.error or f"found {fit.n_found} ARI {fit.ari:.3f} {fit.cpu_seconds:.1f} s"
            print(f"{ds.key:28s} k={'/'.join(map(str, ds.n_clusters)):9s} {name:18s} {status}",
                  flush=True)
    print_per_dataset(datasets, fits, names)
    print_summary(datasets, fits, names)
    if args.csv:
        write_csv(args.csv, datasets, fits, names)
        write_scores(Path(args.csv).with_name(SCORES_FILE), datasets)


if __name__ == "__main__":
    main()

"""Quickstart: ``python -m skdiffclust`` runs each estimator on data that shows its strength.

Every dataset is bundled with scikit-learn or generated (nothing is downloaded).
Each estimator says what it is as it starts, then prints how well its clusters
match the true classes, next to scikit-learn's k-means on the same data.
"""

import argparse
import importlib.util
import sys
import time
from collections import namedtuple
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np
from sklearn.cluster import KMeans
from sklearn.datasets import load_digits, load_wine, make_moons
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from skdiffclust import ClAM, PRCut, SparseGEMINI, SpanningForestClustering
from skdiffclust.datasets import make_celeux_one

INTRO = """\
Each skdiffclust estimator on data where its strength shows, next to scikit-learn's
KMeans (the reference). The scores compare the clusters found with the true classes:
ARI (adjusted Rand index) and NMI (normalised mutual information) are 1 when the
clusters are exactly the classes and about 0 for a random partition (ARI can go
below 0); seconds are fit times. The first fit of an estimator compiles its numba
kernels (seconds to a minute, once: they are cached on disk)."""

Row = namedtuple("Row", ["name", "ari", "nmi", "seconds", "dataset", "estimator"])
Row.__doc__ = "One fitted estimator: scores against the true classes, fit time, data."


@dataclass
class Dataset:
    """Features, true classes and what the data is."""

    X: np.ndarray
    y: np.ndarray
    n_clusters: int
    title: str
    informative: np.ndarray = None


def load_moons():
    X, y = make_moons(n_samples=2000, noise=0.06, random_state=0)
    return Dataset(X, y, 2, "Two moons: 2000 points in 2-D, two interleaved half circles")


def load_digits_pixels():
    X, y = load_digits(return_X_y=True)
    return Dataset(X, y, 10, "Handwritten digits: 1797 images of 8 x 8 pixels, 10 digits")


def load_wine_standardised():
    X, y = load_wine(return_X_y=True)
    return Dataset(StandardScaler().fit_transform(X), y, 3,
                   "Wine: 178 wines, 13 chemical measurements (standardised), 3 cultivars")


def load_celeux():
    X, y, informative = make_celeux_one(scenario=5, random_state=0)
    return Dataset(X, y, 3, "Celeux et al., scenario 5: 300 samples, 3 Gaussian clusters, "
                   "5 informative and 95 noise features", informative=informative)


@dataclass
class Method:
    """An estimator of the tour: what it is, how to build and fit it."""

    name: str
    blurb: str
    make: callable
    uses_labels: bool = False
    needs_torch: bool = False
    fit_with_path: bool = False
    one_thread: bool = False


FOREST = Method(
    "SpanningForestClustering",
    "single linkage as a maximum spanning forest; follows clusters of any shape",
    lambda k, seed: SpanningForestClustering(n_clusters=k),
)
FOREST_LABELS = Method(
    "SpanningForestClustering + labels",
    "the forest constrained by known labels: same label, same tree",
    lambda k, seed: SpanningForestClustering(n_clusters=k),
    uses_labels=True,
)
CLAM = Method(
    "ClAM",
    "prototypes trained through associative-memory dynamics: a differentiable k-means",
    lambda k, seed: ClAM(n_clusters=k, random_state=seed),
)
PRCUT = Method(
    "PRCut",
    "a model trained by SGD on the ratio cut of a neighbour graph (torch)",
    lambda k, seed: PRCut(n_clusters=k, random_state=seed),
    needs_torch=True,
)
GEMINI = Method(
    "SparseGEMINI",
    "discriminative clustering whose penalty path selects the features",
    lambda k, seed: SparseGEMINI(n_clusters=k, random_state=seed),
    fit_with_path=True,
)
KMEANS = Method(
    "KMeans (reference)",
    "scikit-learn's k-means, round clusters around centroids",
    lambda k, seed: KMeans(n_clusters=k, n_init=10, random_state=seed),
    # on data this small one thread is as fast, and idle OpenMP threads spinning
    # against other processes made it up to 50 times slower on a busy machine
    one_thread=True,
)

Section = namedtuple("Section", ["load", "methods", "point"])

TOUR = {
    "moons": Section(load_moons, [FOREST],
                     "Shapes: centroid methods cut the moons, a spanning forest follows them."),
    "digits": Section(
        load_digits_pixels, [FOREST, FOREST_LABELS, PRCUT],
        "Single linkage alone chains the digits together; a few labels constrain the "
        "forest;\n  PRCut cuts the 10-nearest-neighbour graph of the images."),
    "wine": Section(load_wine_standardised, [CLAM],
                    "Compact clusters in standardised features, k-means' home ground."),
    "celeux": Section(load_celeux, [GEMINI],
                      "Only 5 of 100 features carry the clusters: which ones?"),
}


def torch_available():
    return importlib.util.find_spec("torch") is not None


def hide_labels(y, fraction, seed):
    """Partial labels: keep ``fraction`` of them at random, -1 elsewhere."""
    rng = np.random.default_rng(seed)
    partial = np.full_like(y, -1)
    keep = rng.random(y.shape[0]) < fraction
    partial[keep] = y[keep]
    return partial


def fit_one(method, data, partial, seed):
    """Fit; returns the estimator and the seconds the fit took."""
    estimator = method.make(data.n_clusters, seed)
    threads = threadpool_limits(1, user_api="openmp") if method.one_thread else nullcontext()
    start = time.perf_counter()
    with threads:
        if method.fit_with_path:
            estimator.path(data.X)
        else:
            estimator.fit(data.X, partial if method.uses_labels else None)
    return estimator, time.perf_counter() - start


def describe_fit(method, estimator, data):
    """What the scores do not say: the features SparseGEMINI kept."""
    if not method.fit_with_path:
        return ""
    kept = np.flatnonzero(estimator.get_support()).tolist()
    line = f"kept {len(kept)} of {data.X.shape[1]} features: {kept}"
    if data.informative is not None:
        line += f" (the informative ones: {np.flatnonzero(data.informative).tolist()})"
    return line


def run_section(name, label_fraction, seed, out):
    """One dataset of the tour: its estimators, then KMeans; returns the rows."""
    section = TOUR[name]
    data = section.load()
    partial = hide_labels(data.y, label_fraction, seed)
    print(f"\n{data.title}\n  {section.point}", file=out)
    rows = []
    for method in [*section.methods, KMEANS]:
        if method.needs_torch and not torch_available():
            print(f"  {method.name}: skipped, it needs PyTorch "
                  "(pip install \"skdiffclust[torch]\")", file=out)
            continue
        blurb = method.blurb
        if method.uses_labels:
            blurb += f" ({np.mean(partial >= 0):.0%} of the samples labelled)"
        print(f"  {method.name}: {blurb}", file=out, flush=True)
        estimator, seconds = fit_one(method, data, partial, seed)
        labels = estimator.labels_
        row = Row(method.name, adjusted_rand_score(data.y, labels),
                  normalized_mutual_info_score(data.y, labels), seconds, name, estimator)
        rows.append(row)
        print(f"      ARI {row.ari:6.3f}   NMI {row.nmi:6.3f}   {seconds:6.2f} s", file=out)
        note = describe_fit(method, estimator, data)
        if note:
            print(f"      {note}", file=out)
    return rows


def run(dataset=None, label_fraction=0.05, seed=0, out=sys.stdout):
    """Run the tour (every dataset, or only ``dataset``); returns one Row per fit."""
    print(INTRO, file=out)
    names = list(TOUR) if dataset is None else [dataset]
    return [row for name in names for row in run_section(name, label_fraction, seed, out)]


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m skdiffclust",
        description="A tour of skdiffclust: each estimator on a dataset where its strength "
        "shows (generated or bundled with scikit-learn), next to KMeans, with the ARI and "
        "NMI of its clusters against the true classes and its fit time. Datasets: "
        "moons (SpanningForestClustering), digits (SpanningForestClustering with and "
        "without a few labels, PRCut), wine (ClAM), celeux (SparseGEMINI and the "
        "features it selects).",
    )
    parser.add_argument("--dataset", choices=list(TOUR), default=None,
                        help="run only this dataset's part of the tour (default: all)")
    parser.add_argument("--label-fraction", type=float, default=0.05,
                        help="fraction of the digits' labels shown to "
                        "'SpanningForestClustering + labels' (default: 0.05)")
    parser.add_argument("--seed", type=int, default=0,
                        help="random_state of the estimators and choice of the labelled "
                        "samples (default: 0); the data are fixed")
    args = parser.parse_args(argv)
    if not 0.0 <= args.label_fraction <= 1.0:
        parser.error("--label-fraction must be between 0 and 1")
    run(args.dataset, args.label_fraction, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Quickstart: ``python -m skdiffclust`` runs each estimator on the data its paper claims it for.

Every dataset is bundled with scikit-learn or generated (nothing is downloaded).
Each estimator says what it is as it starts, then prints how well its clusters
match the true classes, next to scikit-learn's k-means on the same data.
"""

import argparse
import importlib.util
import sys
import textwrap
import time
from collections import namedtuple
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np
from sklearn.cluster import KMeans
from sklearn.datasets import load_digits, make_moons
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score
from threadpoolctl import threadpool_limits

from skdiffclust._registry import BY_NAME
from skdiffclust.datasets import make_celeux_one

INTRO = """\
Each skdiffclust estimator on the kind of data its paper claims it for, next to
scikit-learn's KMeans (the reference). The scores compare the clusters found with
the true classes: ARI (adjusted Rand index) and NMI (normalised mutual information)
are 1 when the clusters are exactly the classes and about 0 for a random partition
(ARI can go below 0); seconds are fit times. Generated data are drawn a few times
and the scores averaged, so that no single draw speaks for a method. The first fit
of an estimator compiles its numba kernels (seconds, once: they are cached on disk)."""

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


def load_elongated(draw=0):
    """Three long parallel clusters, as in figure 13 of Saha et al. (2023)."""
    rng = np.random.default_rng(draw)
    covariance = np.array([[6.0, 0.0], [0.0, 0.15]])
    X = np.vstack([rng.multivariate_normal([0.0, 2.0 * i], covariance, 200)
                   for i in range(3)])
    return Dataset(X, np.repeat([0, 1, 2], 200), 3,
                   "Elongated clusters: 3 long parallel Gaussian clusters of 200 points "
                   "in 2-D (the paper's figure 13)")


def load_celeux(draw=0):
    X, y, informative = make_celeux_one(scenario=5, random_state=draw)
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
    # fit on the features selected by the previous method's fit (SparseGEMINI's)
    on_selected_features: bool = False
    registered: str = None  # the registry's name of the estimator, if one of ours

    @classmethod
    def of(cls, registered, name=None, blurb=None, **options):
        """A registered estimator (``skdiffclust._registry``): its class, its summary
        (unless ``blurb``) and whether it needs torch; defaults but ``n_clusters``
        and ``random_state``."""
        entry = BY_NAME[registered]
        return cls(name or entry.name, blurb or entry.summary,
                   lambda k, seed: entry.estimator(n_clusters=k, random_state=seed),
                   needs_torch=entry.fit_needs_torch, registered=registered, **options)


FOREST = Method.of("SpanningForestClustering")
FOREST_LABELS = Method.of(
    "SpanningForestClustering", "SpanningForestClustering + labels",
    "the forest constrained by known labels: same label, same tree", uses_labels=True)
CLAM = Method.of("ClAM")
PRCUT = Method.of("PRCut")
DEEP = Method.of("DeepImageClustering")
GEMINI = Method.of("SparseGEMINI", fit_with_path=True)
GEMINI_SELECTED = Method.of(
    "SparseGEMINI", "SparseGEMINI on its features",
    "the dense GEMINI fitted again on the features the path kept", on_selected_features=True)
KMEANS = Method(
    "KMeans (reference)",
    "scikit-learn's k-means, round clusters around centroids",
    lambda k, seed: KMeans(n_clusters=k, n_init=10, random_state=seed),
    # on data this small one thread is as fast, and idle OpenMP threads spinning
    # against other processes made it up to 50 times slower on a busy machine
    one_thread=True,
)


@dataclass
class Section:
    """A dataset of the tour, the methods run on it, what it shows, and the claim
    the numbers are checked against (a method against the reference)."""

    load: callable
    methods: list
    point: str
    n_draws: int = 1
    claim: tuple = None  # (method name, what the paper claims it does)
    # why the claim does not hold here: explain(datasets, fits, seed) -> str, where
    # fits maps each method's name to its fits (one per draw)
    explain: callable = None


def clam_prefers_the_cut(datasets, fits, seed):
    """Why ClAM cuts the long clusters: its own loss is lower for the cut than for
    the classes (ClAM started from their means, which it keeps)."""
    found, classes, kept = [], [], []
    for data, fit in zip(datasets, fits[CLAM.name]):
        means = np.stack([data.X[data.y == c].mean(axis=0) for c in np.unique(data.y)])
        from_classes = BY_NAME[CLAM.registered].estimator(
            n_clusters=data.n_clusters, init=means, random_state=seed).fit(data.X)
        found.append(fit.loss_)
        classes.append(from_classes.loss_)
        kept.append(adjusted_rand_score(data.y, from_classes.labels_))
    return (f"Why: ClAM minimises its completion loss, which is lower for the clusters it "
            f"finds ({np.mean(found):.2f}, mean over the draws) than for the long clusters "
            f"({np.mean(classes):.2f}: ClAM started from the classes' means, which it keeps, "
            f"ARI {np.mean(kept):.2f}). Like k-means', ClAM's objective prefers cutting "
            "across them: the paper's figure is not a minimum of its loss.")


TOUR = {
    "moons": Section(load_moons, [FOREST],
                     "Shapes: centroid methods cut the moons, a spanning forest follows them."),
    "digits": Section(
        load_digits_pixels, [FOREST, FOREST_LABELS, PRCUT, DEEP],
        "Single linkage alone chains the digits together; a few labels constrain the "
        "forest;\n  PRCut cuts the 10-nearest-neighbour graph of the images; "
        "DeepImageClustering\n  trains a convolutional network on the images "
        "themselves (8 x 8 pixels)."),
    "elongated": Section(
        load_elongated, [CLAM],
        "The paper's claim: k-means cuts across long clusters, ClAM's attractor "
        "dynamics follow them.", n_draws=3,
        claim=("ClAM", "separate the long clusters that k-means cuts across"),
        explain=clam_prefers_the_cut),
    "celeux": Section(
        load_celeux, [GEMINI, GEMINI_SELECTED],
        "Only 5 of 100 features carry the clusters: which ones, and what does "
        "clustering on them give?", n_draws=3,
        claim=("SparseGEMINI on its features",
               "cluster better on the features it selects than k-means on all of them")),
}
# a method beats (trails) the reference when its mean ARI is higher (lower) by more
CLEAR_MARGIN = 0.02


def torch_available():
    return importlib.util.find_spec("torch") is not None


def hide_labels(y, fraction, seed):
    """Partial labels: keep ``fraction`` of them at random, -1 elsewhere."""
    rng = np.random.default_rng(seed)
    partial = np.full_like(y, -1)
    keep = rng.random(y.shape[0]) < fraction
    partial[keep] = y[keep]
    return partial


def fit_one(method, data, partial, seed, selected=None):
    """Fit; returns the estimator and the seconds the fit took."""
    estimator = method.make(data.n_clusters, seed)
    X = data.X if selected is None else data.X[:, selected]
    threads = threadpool_limits(1, user_api="openmp") if method.one_thread else nullcontext()
    start = time.perf_counter()
    with threads:
        if method.fit_with_path:
            estimator.path(X)
        elif method.uses_labels:
            estimator.fit(X, partial_labels=partial)
        else:
            estimator.fit(X)
    return estimator, time.perf_counter() - start


def describe_fits(method, estimators, datasets):
    """What the scores do not say: the features SparseGEMINI kept."""
    if not method.fit_with_path:
        return ""
    kept = [np.flatnonzero(e.get_support()).tolist() for e in estimators]
    line = f"kept {len(kept[0])} of {datasets[0].X.shape[1]} features: {kept[0]}"
    informative = datasets[0].informative
    if informative is not None:
        line += f" (the informative ones: {np.flatnonzero(informative).tolist()})"
        if len(kept) > 1:
            exact = sum(k == np.flatnonzero(d.informative).tolist()
                        for k, d in zip(kept, datasets))
            line += f"; exactly the informative ones in {exact} of {len(kept)} draws"
    return line


def fit_draws(method, datasets, partials, seed, previous):
    """One fit per draw of the data; the mean scores, total seconds, the fits."""
    estimators, aris, nmis, seconds = [], [], [], 0.0
    for draw, (data, partial) in enumerate(zip(datasets, partials)):
        selected = previous[draw].get_support() if method.on_selected_features else None
        estimator, elapsed = fit_one(method, data, partial, seed, selected)
        estimators.append(estimator)
        aris.append(adjusted_rand_score(data.y, estimator.labels_))
        nmis.append(normalized_mutual_info_score(data.y, estimator.labels_))
        seconds += elapsed
    return float(np.mean(aris)), float(np.mean(nmis)), seconds, estimators


def verdict(section, rows):
    """The claim of the section, checked by the numbers (no seed was chosen)."""
    name, claim = section.claim
    scores = {row.name: row.ari for row in rows}
    if name not in scores or KMEANS.name not in scores:
        return ""
    gap = scores[name] - scores[KMEANS.name]
    if gap > CLEAR_MARGIN:
        outcome = f"It does here: ARI {gap:+.3f} against k-means"
    elif gap < -CLEAR_MARGIN:
        outcome = f"It does not here: ARI {gap:+.3f} against k-means"
    else:
        outcome = (f"Not here: within {CLEAR_MARGIN} of k-means' ARI ({gap:+.3f}); "
                   "both methods give about the same clusters")
    return f"Claim: {name} should {claim}. {outcome}."


def run_section(name, label_fraction, seed, out):
    """One dataset of the tour: its estimators, then KMeans; returns the rows."""
    section = TOUR[name]
    datasets = [section.load(draw) if section.n_draws > 1 else section.load()
                for draw in range(section.n_draws)]
    partials = [hide_labels(data.y, label_fraction, seed) for data in datasets]
    draws = (f" ({section.n_draws} draws of the data, mean scores, total time)"
             if section.n_draws > 1 else "")
    print(f"\n{datasets[0].title}{draws}\n  {section.point}", file=out)
    rows, previous, fits = [], None, {}
    for method in [*section.methods, KMEANS]:
        if method.needs_torch and not torch_available():
            print(f"  {method.name}: skipped, it needs PyTorch "
                  "(pip install \"skdiffclust[torch]\")", file=out)
            continue
        blurb = method.blurb
        if method.uses_labels:
            blurb += f" ({np.mean(partials[0] >= 0):.0%} of the samples labelled)"
        print(f"  {method.name}: {blurb}", file=out, flush=True)
        ari, nmi, seconds, estimators = fit_draws(method, datasets, partials, seed, previous)
        previous = fits[method.name] = estimators
        rows.append(Row(method.name, ari, nmi, seconds, name, estimators[0]))
        print(f"      ARI {ari:6.3f}   NMI {nmi:6.3f}   {seconds:6.2f} s", file=out)
        note = describe_fits(method, estimators, datasets)
        if note:
            print(f"      {note}", file=out)
    if section.claim is not None:
        claim = verdict(section, rows)
        print(f"  {claim}", file=out)
        if section.explain is not None and "It does here" not in claim:
            print(textwrap.fill(section.explain(datasets, fits, seed), width=88,
                                initial_indent="  ", subsequent_indent="  "), file=out)
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
        "without a few labels, PRCut, DeepImageClustering), elongated (ClAM, the paper's "
        "figure 13), celeux "
        "(SparseGEMINI, the features it selects, and the clustering on them).",
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
    if not 0 <= args.seed < 2**32:  # what a random_state may be
        parser.error("--seed must be between 0 and 2**32 - 1")
    run(args.dataset, args.label_fraction, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())

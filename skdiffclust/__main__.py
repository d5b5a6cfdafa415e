"""Quickstart: ``python -m skdiffclust`` runs every available estimator on a default dataset."""

import argparse
import importlib.util
import sys
import time

import numpy as np
from sklearn.cluster import KMeans
from sklearn.datasets import load_digits, make_moons
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score
from sklearn.preprocessing import StandardScaler

from skdiffclust import ClAM, PRCut, SparseGEMINI, SpanningForestClustering


def load(name):
    """A dataset bundled with scikit-learn: features, labels, number of clusters."""
    if name == "moons":
        X, y = make_moons(n_samples=2000, noise=0.06, random_state=0)
        return X, y, 2
    X, y = load_digits(return_X_y=True)
    return StandardScaler().fit_transform(X), y, 10


def hide_labels(y, fraction, seed):
    """Partial labels: keep ``fraction`` of them, -1 elsewhere."""
    rng = np.random.default_rng(seed)
    partial = np.full_like(y, -1)
    keep = rng.random(y.shape[0]) < fraction
    partial[keep] = y[keep]
    return partial


def estimators(n_clusters, seed):
    """(name, estimator, uses partial labels) for every available estimator."""
    rows = [
        ("SpanningForestClustering", SpanningForestClustering(n_clusters=n_clusters), False),
        ("SpanningForestClustering + labels",
         SpanningForestClustering(n_clusters=n_clusters), True),
    ]
    rows.append(("SparseGEMINI (MMD one-vs-one)",
                 SparseGEMINI(n_clusters=n_clusters, random_state=seed), False))
    rows.append(("ClAM (beta=0.1)",
                 ClAM(n_clusters=n_clusters, beta=0.1, random_state=seed), False))
    if importlib.util.find_spec("torch") is not None:
        rows.append(("PRCut", PRCut(n_clusters=n_clusters, random_state=seed), False))
        rows.append((
            "SpanningForestClustering mlp + labels",
            SpanningForestClustering(n_clusters=n_clusters, embedding="mlp", n_components=8,
                                     max_iter=10, learning_rate=3e-3, random_state=seed),
            True,
        ))
    rows.append(("KMeans (scikit-learn, reference)",
                 KMeans(n_clusters=n_clusters, n_init=10, random_state=seed), False))
    return rows


def run(dataset="moons", label_fraction=0.05, seed=0, out=sys.stdout):
    X, y, n_clusters = load(dataset)
    partial = hide_labels(y, label_fraction, seed)
    print(
        f"dataset={dataset}: {X.shape[0]} samples, {X.shape[1]} features, "
        f"{n_clusters} clusters; '+ labels' rows see {np.mean(partial >= 0):.0%} of "
        "the labels (-1 elsewhere)\n", file=out,
    )
    header = f"{'estimator':<38} {'ARI':>6} {'NMI':>6} {'seconds':>8}"
    print(header, file=out)
    print("-" * len(header), file=out)
    rows = []
    for name, estimator, semi in estimators(n_clusters, seed):
        start = time.perf_counter()
        labels = estimator.fit(X, partial if semi else None).labels_
        seconds = time.perf_counter() - start
        ari = adjusted_rand_score(y, labels)
        nmi = normalized_mutual_info_score(y, labels)
        rows.append((name, ari, nmi, seconds))
        print(f"{name:<38} {ari:6.3f} {nmi:6.3f} {seconds:8.3f}", file=out)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m skdiffclust",
        description="Run every available skdiffclust estimator on a dataset bundled "
        "with scikit-learn and print ARI, NMI and fit time.",
    )
    parser.add_argument("--dataset", choices=["moons", "digits"], default="moons")
    parser.add_argument("--label-fraction", type=float, default=0.05,
                        help="fraction of labels shown to semi-supervised rows")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not 0.0 <= args.label_fraction <= 1.0:
        parser.error("--label-fraction must be between 0 and 1")
    run(args.dataset, args.label_fraction, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())

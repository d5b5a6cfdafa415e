"""The benchmark figures of the documentation, read from the benchmarks' result files.

One source of truth: every benchmark figure a page shows comes from a file
``benchmarks/results/*.csv`` that a benchmark wrote (``benchmarks/_results.py``:
one row per dataset, estimator and device, with the machine, the date and, for the
newer runs, the load average). A page quotes a figure as a substitution, e.g.
``|quality-prcut-ari|``, and the date and machine beside it as another, e.g.
``|quality-when|``; ``conf.py`` appends to each page the definitions of those
it quotes (:func:`definitions`). A table of results is a ``csv-table`` of a file that
:func:`write_tables` writes from the same rows into ``doc/_generated/`` at build
time. So a rerun of a benchmark with ``--csv`` changes every page that quotes it,
and no page can disagree with another.

``README.rst``, which GitHub renders without Sphinx, defines its few figures
itself, at its end; ``tests/test_figures.py`` checks them against
:func:`substitutions`, and that no page holds a timing, a speed-up or a score
typed by hand where it should quote one.

Names: ``<file>-<dataset>-<estimator>[-<device>]-<column>`` for a row's cell
(the newest row of each dataset, estimator and device; ``mnist.csv``'s without
the ``mnist-`` prefix of the file: ``|mnist-deep-acc|``,
``|fashion-mnist-deep-seconds|``, ``|digits-prcut-defaults-nmi|``), ``...-when``
for its machine and date, and the aggregates of :func:`quality_figures`,
:func:`n_clusters_figures` and :func:`first_fit_figures`. ``python
doc/_figures.py`` prints them all; ``python doc/_figures.py --readme`` rewrites
README.rst's definitions after a rerun.
"""

import csv
import math
import re
from collections import defaultdict
from pathlib import Path

from _figure_formats import (
    MARGIN, RESULTS, dates, mean_of, mebibytes, newest, number, ratio, read, score,
    seconds, short_machine, significant, slug, times, times_of, times_range, versus, when)
from _image_count import check_half_figures, plateau_figures
from _summaries import (
    clam_figures, first_fit_figures, first_fit_table, forest_table, gemini_figures,
    neighbors_table, quality_seeds_figures, stability_figures, stability_table,
    torch_api_figures, torch_digits_table)

ROOT = Path(__file__).resolve().parents[1]
TABLES = Path(__file__).resolve().parent / "_generated"

QUALITY_OURS = ["SpanningForest", "ClAM", "PRCut", "SparseGEMINI"]
QUALITY_PEERS = ["KMeans", "GMM", "Ward", "Spectral", "HDBSCAN", "Genie"]
# the package of a peer that is not scikit-learn's
PEER_PACKAGES = {"Genie": "genieclust"}
QUALITY_NAMES = {
    "SpanningForest": "SpanningForestClustering",
    "ClAM": "ClAM",
    "PRCut": "PRCut",
    "SparseGEMINI": "SparseGEMINI",
    "KMeans": "KMeans (``n_init=10``)",
    "GMM": "GaussianMixture",
    "Ward": "AgglomerativeClustering (Ward)",
    "Spectral": "SpectralClustering (10-NN)",
    "HDBSCAN": "HDBSCAN",
    "Genie": "Genie (genieclust)",
}
# the class each name stands for, for the pages' cross-references
QUALITY_CLASSES = {
    "SpanningForest": ":class:`~skdiffclust.SpanningForestClustering`",
    "ClAM": ":class:`~skdiffclust.ClAM`",
    "PRCut": ":class:`~skdiffclust.PRCut`",
    "SparseGEMINI": ":class:`~skdiffclust.SparseGEMINI`",
    "KMeans": ":class:`~sklearn.cluster.KMeans`",
    "GMM": ":class:`~sklearn.mixture.GaussianMixture`",
    "Ward": ":class:`~sklearn.cluster.AgglomerativeClustering`",
    "Spectral": ":class:`~sklearn.cluster.SpectralClustering`",
    "HDBSCAN": ":class:`~sklearn.cluster.HDBSCAN`",
    "Genie": "``genieclust.Genie``",
}
# each of ours and scikit-learn's nearest estimator
QUALITY_PAIRS = [("PRCut", "Spectral"), ("PRCut", "Genie"), ("SparseGEMINI", "GMM"),
                 ("ClAM", "KMeans"), ("SparseGEMINI", "KMeans")]

# bench_mnist.py's cases, as the pages name them
MNIST_CASES = {
    "deep": "``DeepImageClustering(10)``, 3 seeds' mean",
    "prcut-defaults": "``PRCut(10)`` at its defaults",
    "prcut": "PRCut, the paper's protocol",
    "prcut-mlp-pca": "PRCut, built-in MLP on the PCA-50 graph",
    "prcut-cnn": "PRCut, a small CNN on the PCA-50 graph",
    "spectral": "SpectralClustering, PCA-50 10-NN graph",
    "kmeans": "``KMeans(10, n_init=3)``, pixels",
    "n2d": "N2D (8 epochs), 3 seeds' mean",
    "dec": "DEC (ClustPy, 10 + 10 epochs)",
    "idec": "IDEC (ClustPy, 10 + 10 epochs)",
}

N_CLUSTERS_GROUPS = {"development": ("sipu", "fcps", "uci"),
                     "evaluation": ("wut", "graves", "other")}
N_CLUSTERS_NAMES = {
    "PRCut-auto": "PRCut, ``n_clusters='auto'``",
    "SparseGEMINI-auto": "SparseGEMINI, ``n_clusters='auto'``",
    "SpanningForest-auto": "SpanningForestClustering, ``n_clusters='auto'``",
    "HDBSCAN": "HDBSCAN",
    "GMM-BIC": "GaussianMixture by BIC",
    "KMeans-silhouette": "KMeans by silhouette",
    "Spectral-eigengap": "Spectral clustering, eigengap",
    "PRCut": "PRCut given the reference number",
}


# columns quoted by name, and how each is written
# the result files' columns that are not figures
BASE_COLUMNS = {"benchmark", "dataset", "estimator", "device", "machine", "date", "load",
                "note"}
ROW_FORMATS = {
    "ari": score, "acc": score, "nmi": score, "test_acc": score,
    "seconds": seconds, "seconds_per_epoch": seconds, "cold_cpu": seconds,
    "warm_cpu": seconds, "cold_wall": seconds, "warm_wall": seconds,
    "peak_gb": lambda v: f"{v:.2f} GB", "peak_mib": mebibytes, "exact": lambda v: f"{v:.0%}",
    "n_found": lambda v: f"{v:.0f}",
    # bench_mnist.py's papers' cases: the forest's batch-wise test precision and
    # training steps, the pixel path's selected pixels, steps and epochs
    "precision": score, "precision_4992": score, "val_precision": score,
    "k_means_acc": score, "ari_before_relax": score,
    "steps": lambda v: f"{v:,.0f}", "pixels": lambda v: f"{v:.0f}",
    "path_steps": lambda v: f"{v:.0f}", "epochs": lambda v: f"{v:.0f}",
    # its graph-neighbours case: the share of an image's nearest neighbours in its class
    "neighbours_in_class": lambda v: f"{v:.1%}",
    "pixels_neighbours_in_class": lambda v: f"{v:.1%}",
    # bench_prcut.py --memory: the input's size and the peaks above it in its units
    "input_mib": mebibytes, "peak_ratio": times_of, "numpy_ratio": times_of,
    # and its cases against SpectralClustering: the ratio cut on the kNN graph
    "ratio_cut": lambda v: f"{v:.2f}",
    "ari_min": score,
    # bench_scale.py: NumPy's peak, and the mapped file's pages of the out-of-core runs
    "numpy_mib": mebibytes, "file_mib": mebibytes,
    # bench_forest.py: a list of cannot-linked pairs; predict's first call
    "pairs_mib": mebibytes, "first_seconds": seconds,
    # bench_gemini.py --memory: every row's hidden activations at once
    "activations_mib": mebibytes,
    # bench_clam.py: silhouettes, occupied clusters, CPU times and their ratios
    "silhouette": score, "occupied_min": lambda v: f"{v:.0f}",
    "occupied_max": lambda v: f"{v:.0f}", "cpu_seconds": seconds,
    "transform_seconds": seconds, "cpu_ratio": times, "kmeans_ratio": times,
    # bench_torch_api.py --only checks: a step with the checks on, the share inside them
    "checked_seconds": seconds, "in_checks_share": lambda v: f"{v:.1%}",
    # bench_neighbors.py: a search's recall@k
    "recall": lambda v: f"{v:.3f}",
}
# bench_mnist.py's cases' own columns, by their words ('clam_nmi_10k',
# 'cpu_ratio_raw_60k', 'spectral_s'), where ROW_FORMATS does not name them
CASE_COLUMN_FORMATS = [(re.compile(r"(^|_)(nmi|acc|ari|sc)(_|$)"), score),
                       (re.compile(r"(^|_)ratio(_|$)"), times),
                       (re.compile(r"(^|_)s(_|$)"), seconds),
                       (re.compile(r"(^|_)beta(_|$)"), significant)]
PREFIXES = {"mnist": "", "n_clusters": "n-clusters-"}


def _form(stem, column):
    """How a column of ``stem``'s rows is written, or None if it is not quoted."""
    if column in ROW_FORMATS:
        return ROW_FORMATS[column]
    if stem == "mnist":
        return next((form for pattern, form in CASE_COLUMN_FORMATS
                     if pattern.search(column)), None)
    return None


def row_figures(stem, rows):
    """``<stem>-<dataset>-<estimator>[-<device>]-<column>`` of every cell of
    :data:`ROW_FORMATS` (and of ``mnist.csv``'s cases' own columns,
    :data:`CASE_COLUMN_FORMATS`), and ``...-when``, of the newest rows."""
    figures = {}
    prefix = PREFIXES.get(stem, f"{slug(stem)}-")
    for (dataset, estimator, device), row in newest(rows).items():
        name = f"{prefix}{slug(dataset)}-{slug(estimator)}"
        if device and device != "cpu":
            name += f"-{slug(device)}"
        for column in row:
            form = _form(stem, column) if column not in BASE_COLUMNS else None
            value = number(row, column) if form else None
            if value is not None and math.isfinite(value):
                figures[f"{name}-{slug(column)}"] = form(value)
        figures[f"{name}-when"] = when([row])
    return figures


def speedup_figures(stem, rows):
    """``<stem>-<dataset>-<estimator>-speedup``: the CPU seconds over the CUDA seconds
    of the newest CUDA row that has a CPU row of the same machine."""
    figures = {}
    cases = defaultdict(lambda: defaultdict(list))
    for row in rows:
        cases[row["dataset"], row["estimator"]][row.get("device", "cpu")].append(row)
    for (dataset, estimator), by_device in cases.items():
        paired = [(cpu, cuda) for cuda in by_device["cuda"] for cpu in by_device["cpu"]
                  if cpu["machine"] == cuda["machine"]]
        for column in ("seconds", "seconds_per_epoch"):
            usable = [(cpu, cuda) for cpu, cuda in paired
                      if number(cpu, column) and number(cuda, column)]
            if usable:
                cpu, cuda = max(usable, key=lambda pair: pair[1]["date"])
                name = f"{PREFIXES.get(stem, slug(stem) + '-')}{slug(dataset)}-{slug(estimator)}"
                figures[f"{name}-speedup"] = ratio(number(cpu, column) / number(cuda, column))
                break
    return figures


# ------------------------------------------------------------ the quality datasets


def quality_summary(rows):
    """Per estimator of ``bench_quality.py``'s rows: mean ARI, NMI and rank over the
    datasets on which every estimator ran, mean ARI over those whose 10-NN graph is
    disconnected, fits that returned fewer clusters than asked, total fit seconds
    (wall and CPU). As ``bench_quality.py`` prints them. Returns (summary, common
    datasets, disconnected datasets)."""
    rows = [row for row in rows if row.get("benchmark", "bench_quality") == "bench_quality"]
    by_dataset = defaultdict(dict)
    for row in rows:
        by_dataset[row["dataset"]][row["estimator"]] = row
    names = [n for n in QUALITY_OURS + QUALITY_PEERS
             if any(n in fits for fits in by_dataset.values())]

    def ran(row):
        return row is not None and number(row, "ari") is not None

    common = sorted(key for key, fits in by_dataset.items()
                    if all(ran(fits.get(n)) for n in names))
    disconnected = [key for key in common
                    if (number(by_dataset[key][names[0]], "components") or 1) > 1]
    ranks = defaultdict(list)
    for key in common:
        aris = [number(by_dataset[key][n], "ari") for n in names]
        for n, rank in zip(names, _ranks([-a for a in aris])):
            ranks[n].append(rank)
    summary = {}
    for n in names:
        fits = [fits[n] for fits in by_dataset.values() if ran(fits.get(n))]
        summary[n] = {
            "ran": len(fits),
            "ari": mean_of([number(by_dataset[k][n], "ari") for k in common]),
            "nmi": mean_of([number(by_dataset[k][n], "nmi") for k in common]),
            "rank": mean_of(ranks[n]),
            "disconnected": mean_of([number(by_dataset[k][n], "ari") for k in disconnected]),
            "fewer": sum((number(r, "n_clusters_found") or 0) < (number(r, "k") or 0)
                         for r in fits) if n != "HDBSCAN" else None,
            "wall": sum(number(r, "seconds") or 0.0 for r in fits),
            "cpu": sum(number(r, "cpu_seconds") or 0.0 for r in fits),
        }
    return summary, common, disconnected


def _ranks(values):
    """Ranks, 1 for the lowest value, ties averaged (``scipy.stats.rankdata``)."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for position in order[i:j + 1]:
            ranks[position] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def quality_figures(rows):
    """``|quality-<estimator>-ari|`` (and ``-nmi``, ``-rank``, ``-disconnected``,
    ``-cpu``, ``-wall``), ``|quality-n|``, ``|quality-when|``, the pairs of
    :data:`QUALITY_PAIRS` (``|quality-prcut-vs-spectral|``: above, level with or
    below; ``|quality-prcut-spectral-cpu-times|``: how many times the CPU time),
    and the advice of the first row of the choosing page
    (``|quality-use|``, ``|quality-verdict|``)."""
    if not rows:
        return {}
    summary, common, disconnected = quality_summary(rows)
    figures = {"quality-n": str(len(common)), "quality-disconnected-n": str(len(disconnected)),
               "quality-when": when(rows), "quality-date": dates(rows)}
    for n, s in summary.items():
        name = f"quality-{slug(n)}"
        figures[f"{name}-ari"] = score(s["ari"], 2)
        figures[f"{name}-nmi"] = score(s["nmi"], 2)
        figures[f"{name}-rank"] = f"{s['rank']:.1f}"
        figures[f"{name}-disconnected"] = score(s["disconnected"], 2)
        figures[f"{name}-cpu"] = seconds(s["cpu"])
        figures[f"{name}-wall"] = seconds(s["wall"])
    for a, b in QUALITY_PAIRS:
        if a in summary and b in summary:
            figures[f"quality-{slug(a)}-vs-{slug(b)}"] = versus(
                summary[a]["ari"], summary[b]["ari"], QUALITY_NAMES[b].split(" (")[0])
            figures[f"quality-{slug(a)}-{slug(b)}-cpu-times"] = times(
                summary[a]["cpu"] / summary[b]["cpu"])
    for battery in sorted({key.split("/")[0] for key in common}):
        keys = [key for key in common if key.startswith(battery + "/")]
        for n in summary:
            mine = [number(row, "ari") for row in rows
                    if row["estimator"] == n and row["dataset"] in keys]
            figures[f"quality-{slug(n)}-{battery}-ari"] = score(mean_of(mine), 3)
    figures.update(quality_advice(summary))
    return figures


def quality_advice(summary):
    """The first row of the choosing page, from the results whichever way they go:
    the estimator of the best mean ARI, ours or scikit-learn's; where the two best
    are level (within :data:`MARGIN`), the faster of the two."""
    ours = [n for n in QUALITY_OURS if n in summary]
    peers = [n for n in QUALITY_PEERS if n in summary]
    if not ours or not peers:
        return {}
    best_ours = max(ours, key=lambda n: summary[n]["ari"])
    best_peer = max(peers, key=lambda n: summary[n]["ari"])
    a, b = summary[best_ours]["ari"], summary[best_peer]["ari"]
    ta, tb = summary[best_ours]["cpu"], summary[best_peer]["cpu"]
    if abs(a - b) <= MARGIN:
        winner = best_ours if ta < tb else best_peer
        why = (f"{QUALITY_NAMES[best_ours]} and {QUALITY_NAMES[best_peer]} have the best "
               f"mean ARI, level ({a:.2f} and {b:.2f}); "
               f"{QUALITY_NAMES[winner].split(' (')[0]} fits "
               f"{times(max(ta, tb) / min(ta, tb))} times faster")
    else:
        winner = best_ours if a > b else best_peer
        loser = best_peer if winner == best_ours else best_ours
        why = (f"{QUALITY_NAMES[winner].split(' (')[0]} has the best mean ARI, "
               f"{summary[winner]['ari']:.2f} against {summary[loser]['ari']:.2f} for "
               f"{QUALITY_NAMES[loser].split(' (')[0]}, in "
               f"{times(summary[winner]['cpu'] / summary[loser]['cpu'])} times its CPU time")
    side = PEER_PACKAGES.get(winner, "scikit-learn") if winner in QUALITY_PEERS \
        else "skdiffclust"
    return {"quality-use": f"**{side}**: {QUALITY_CLASSES[winner]}",
            "quality-use-name": QUALITY_NAMES[winner].split(" (")[0],
            "quality-use-side": side,
            "quality-verdict": why}


def quality_table(rows):
    """The summary table of the benchmarks page: one row per estimator."""
    summary, _, disconnected = quality_summary(rows)
    header = ["estimator", "mean ARI", "mean NMI", "mean rank",
              f"ARI, disconnected ({len(disconnected)})", "fewer clusters",
              "fit CPU s", "fit wall s"]
    body = [[QUALITY_NAMES[n], score(s["ari"], 3), score(s["nmi"], 3), f"{s['rank']:.1f}",
             score(s["disconnected"], 2), "--" if s["fewer"] is None else str(s["fewer"]),
             seconds(s["cpu"])[:-2], seconds(s["wall"])[:-2]] for n, s in summary.items()]
    return [header] + body


def quality_pairs_table(rows):
    """Ours beside scikit-learn's nearest (the choosing page)."""
    summary, _, _ = quality_summary(rows)
    header = ["ours", "mean ARI", "fit CPU time", "scikit-learn's nearest", "mean ARI",
              "fit CPU time"]
    body = []
    for a, b in [("PRCut", "Spectral"), ("SparseGEMINI", "GMM"), ("ClAM", "KMeans")]:
        if a in summary and b in summary:
            body.append([QUALITY_NAMES[a], score(summary[a]["ari"], 2),
                         seconds(summary[a]["cpu"]), QUALITY_NAMES[b],
                         score(summary[b]["ari"], 2), seconds(summary[b]["cpu"])])
    return [header] + body


# ---------------------------------------------------------------- MNIST


def mnist_table(rows, datasets=("mnist", "fashion-mnist"), cases=tuple(MNIST_CASES)):
    """bench_mnist.py's ``cases`` on the CPU: ACC / NMI, test ACC and fit seconds of
    each image set, and the dates."""
    best = newest([row for row in rows if row.get("device", "cpu") == "cpu"])
    header = ["method (``--only``)"]
    for dataset in datasets:
        title = "MNIST" if dataset.startswith("mnist") else "Fashion-MNIST"
        title += ", unbalanced" if "unbalanced" in dataset else ""
        header += [f"{title} ACC / NMI", "test ACC", "fit"]
    header.append("measured")
    body = []
    for case in cases:
        label = MNIST_CASES[case]
        found = [best.get((dataset, case, "cpu")) for dataset in datasets]
        if not any(found):
            continue
        line = [f"{label} (``{case}``)"]
        for row in found:
            if row is None:
                line += ["--", "--", "--"]
                continue
            line += [f"{score(number(row, 'acc'))} / {score(number(row, 'nmi'))}",
                     score(number(row, "test_acc")), seconds(number(row, "seconds"))]
        line.append(dates([row for row in found if row]))
        body.append(line)
    return [header] + body


IMAGE_CASES = ("deep", "kmeans", "spectral")


def mnist_figures(rows):
    """``|mnist-table-when|``: the machines and dates of the CPU rows of MNIST and
    Fashion-MNIST; ``|images-when|`` those of :data:`IMAGE_CASES`;
    ``|digits-verdict|``: our two on the digits, and ``|digits-when|``."""
    cpu = [row for row in rows if row.get("device", "cpu") == "cpu"]
    figures = {}
    both = [row for row in cpu if row["dataset"] in ("mnist", "fashion-mnist")]
    if both:
        figures["mnist-table-when"] = when(both)
        figures["images-when"] = when([row for row in both if row["estimator"] in IMAGE_CASES])
    digits = [row for row in newest(cpu).values() if row["dataset"] == "digits"
              and row["estimator"] in MNIST_CASES and number(row, "acc") is not None]
    if digits:
        figures["digits-when"] = when(digits)
        ours = sorted((row for row in digits if row["estimator"] in ("deep", "prcut-defaults")),
                      key=lambda row: -number(row, "acc"))
        if len(ours) == 2:
            figures["digits-verdict"] = digits_verdict(*ours)
    figures.update(against_kmeans_figures(cpu))
    return figures


# the groups of bench_mnist.py's datasets whose settings against_kmeans_figures counts
AGAINST_KMEANS_GROUPS = {
    "mnist": ("mnist", "fashion-mnist"),
    "mnist-unbalanced-10": ("mnist (unbalanced 10)",),
    "fashion-mnist-unbalanced-10": ("fashion-mnist (unbalanced 10)",)}


def against_kmeans_figures(rows):
    """``|mnist-clam-nmi-wins|`` of ``|mnist-clam-nmi-settings|``: the settings of the
    ``clam`` and ``clam-raw`` cases (MNIST and Fashion-MNIST, PCA-50 of 10,000 and
    60,000 images, the pixels) where ClAM's NMI is at least k-means';
    ``|mnist-clam-sc-wins|`` likewise for the silhouette, ``|mnist-clam-sc-gap|``
    the largest difference from k-means' silhouette (and ``-nmi-gap``), and
    ``|mnist-clam-cpu-ratio-range|`` its CPU time over k-means'; the same for
    SparseGEMINI's case (``|mnist-gemini-nmi-wins|``), and for each unbalanced set
    apart (``|mnist-unbalanced-10-clam-nmi-wins|``)."""
    figures = {}
    for group, datasets in AGAINST_KMEANS_GROUPS.items():
        for name, cases in (("clam", ("clam", "clam-raw")), ("gemini", ("gemini",))):
            found = [row for row in newest(rows).values()
                     if row["estimator"] in cases and row["dataset"] in datasets]
            figures.update(_against_kmeans(f"{group}-{name}", name, found))
    return figures


def _against_kmeans(figure, name, found):
    figures = {}
    for measure in ("nmi", "sc"):
        prefix = f"{name}_{measure}_"
        pairs = [(number(row, column), number(row, f"kmeans_{column[len(name) + 1:]}"))
                 for row in found for column in row if column.startswith(prefix)]
        pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
        if pairs:
            figures[f"{figure}-{measure}-wins"] = str(sum(a >= b for a, b in pairs))
            figures[f"{figure}-{measure}-settings"] = str(len(pairs))
            figures[f"{figure}-{measure}-gap"] = score(max(abs(a - b) for a, b in pairs))
    ratios = [number(row, column) for row in found for column in row
              if column.startswith("cpu_ratio_") and number(row, column)]
    if ratios:
        figures[f"{figure}-cpu-ratio-range"] = times_range(ratios)
    return figures


def digits_verdict(first, second):
    """Our two on the digits, the better ACC first: level within 0.01, or ahead;
    with their fit times."""
    name = {row["estimator"]: MNIST_CASES[row["estimator"]].split(",")[0]
            for row in (first, second)}
    a, b = number(first, "acc"), number(second, "acc")
    times = (f"{name[first['estimator']]} fits in {seconds(number(first, 'seconds'))}, "
             f"{name[second['estimator']]} in {seconds(number(second, 'seconds'))}")
    if a - b <= 0.01:
        return (f"{name[first['estimator']]} and {name[second['estimator']]} are level in "
                f"ACC ({a:.3f} and {b:.3f}); {times}")
    return (f"{name[first['estimator']]} has the better ACC ({a:.3f} against {b:.3f} for "
            f"{name[second['estimator']]}); {times}")


def digits_table(rows):
    best = newest([row for row in rows if row.get("device", "cpu") == "cpu"])
    header = ["method (``--only``)", "ACC / NMI", "fit"]
    body = []
    for case, label in MNIST_CASES.items():
        row = best.get(("digits", case, "cpu"))
        if row is not None:
            body.append([f"{label} (``{case}``)",
                         f"{score(number(row, 'acc'))} / {score(number(row, 'nmi'))}",
                         seconds(number(row, "seconds"))])
    return [header] + body


# ---------------------------------------------------------------- GPU


GPU_CASES = {
    ("clam", "ClAM"): "ClAM 200,000 x 32, k=20, defaults (the fused kernel)",
    ("clam-batch-1024", "ClAM"): "ClAM, the same at ``batch_size=1024`` (torch)",
    ("prcut", "PRCut"): "PRCut 1,000,000 x 32, k=10, graph included",
    ("mnist/prcut", "prcut"): "PRCut, MNIST, the paper's protocol (k=150)",
    ("mnist/prcut-defaults", "prcut-defaults"): "PRCut(10), MNIST",
    ("forest", "SpanningForestClustering"): "forests, ``embedding='mlp'``, digits, batch 256",
    ("deep", "DeepImageClustering"): "``DeepImageClustering(10)``, digits",
    ("digits, batch 64", "SpanningForestClustering"):
        "forests, ``embedding='mlp'``, digits, an epoch at batch 64",
    ("digits, batch 1024", "SpanningForestClustering"):
        "forests, ``embedding='mlp'``, digits, an epoch at batch 1024",
}


def gpu_table(rows):
    """Each case of ``bench_gpu.py`` measured on both devices of one machine, the
    newest: host CPU and CUDA seconds, their ratio, the quality on each, the GPU
    and the date."""
    header = ["case", "host CPU", "CUDA", "CPU / CUDA", "quality, CPU / CUDA", "GPU, date"]
    body = []
    for (dataset, estimator), label in GPU_CASES.items():
        column = "seconds_per_epoch" if dataset.startswith("digits, batch") else "seconds"
        mine = [row for row in rows if row["dataset"] == dataset
                and row["estimator"] == estimator and number(row, column)]
        pairs = [(cpu, cuda) for cuda in mine if cuda["device"] == "cuda"
                 for cpu in mine if cpu["device"] == "cpu" and cpu["machine"] == cuda["machine"]]
        if not pairs:
            continue
        cpu, cuda = max(pairs, key=lambda pair: pair[1]["date"])
        metric = "acc" if number(cpu, "acc") is not None else "ari"
        digits = 3 if metric == "acc" else 2
        quality = (f"{metric.upper()} {score(number(cpu, metric), digits)} / "
                   f"{score(number(cuda, metric), digits)}"
                   if number(cpu, metric) is not None else "--")
        body.append([label, seconds(number(cpu, column)), seconds(number(cuda, column)),
                     ratio(number(cpu, column) / number(cuda, column)), quality,
                     f"{short_machine(cuda['machine']).split()[1]}, {cuda['date']}"])
    return [header] + body


# ---------------------------------------------------------------- the number of clusters


def n_clusters_summary(rows, batteries):
    """Per method over the datasets of ``batteries``: numbers right, mean ARI and NMI,
    CPU seconds, the number of datasets."""
    mine = [row for row in rows if row["dataset"].split("/")[0] in batteries]
    by_method = defaultdict(list)
    for row in mine:
        by_method[row["estimator"]].append(row)
    summary = {}
    for method, fits in by_method.items():
        scored = [row for row in fits if number(row, "ari") is not None]
        summary[method] = {
            "n": len(fits),
            "right": sum(int(number(row, "right") or 0) for row in fits),
            "ari": mean_of([number(row, "ari") for row in scored]),
            "nmi": mean_of([number(row, "nmi") for row in scored]),
            "seconds": sum(number(row, "seconds") or 0.0 for row in fits),
        }
    return summary, mine


def n_clusters_figures(rows):
    """``|n-clusters-<group>-<method>-right|`` (and ``-ari``, ``-nmi``, ``-seconds``),
    ``|n-clusters-<group>-n|`` and ``|n-clusters-<group>-when|`` of the development and
    evaluation batteries."""
    figures = {}
    for group, batteries in N_CLUSTERS_GROUPS.items():
        summary, mine = n_clusters_summary(rows, batteries)
        if not summary:
            continue
        figures[f"n-clusters-{group}-n"] = str(max(s["n"] for s in summary.values()))
        figures[f"n-clusters-{group}-when"] = when(mine)
        for method, s in summary.items():
            name = f"n-clusters-{group}-{slug(method)}"
            figures[f"{name}-right"] = str(s["right"])
            figures[f"{name}-ari"] = score(s["ari"])
            figures[f"{name}-nmi"] = score(s["nmi"])
            figures[f"{name}-seconds"] = seconds(s["seconds"])
    return figures


def n_clusters_table(rows, group):
    summary, _ = n_clusters_summary(rows, N_CLUSTERS_GROUPS[group])
    header = ["method", "numbers right", "mean ARI", "mean NMI", "CPU s"]
    body = []
    for method, label in N_CLUSTERS_NAMES.items():
        if method in summary:
            s = summary[method]
            right = f"({s['n']})" if method == "PRCut" else str(s["right"])
            body.append([label, right, score(s["ari"]), score(s["nmi"]),
                         seconds(s["seconds"])[:-2]])
    return [header] + body


# ---------------------------------------------------------------- all


def substitutions(folder=RESULTS):
    """{name: text} of every figure the pages may quote."""
    figures = {}
    for stem in ("mnist", "gpu", "perturbed", "first_fit", "gemini", "n_clusters", "prcut",
                 "scale", "forest", "clam", "torch_api", "neighbors"):
        rows = read(stem, folder)
        figures.update(row_figures(stem, rows))
        if stem in ("gpu", "mnist", "perturbed"):
            figures.update(speedup_figures(stem, rows))
        if rows:  # the file's machines and dates
            figures["mnist-results-when" if stem == "mnist" else f"{slug(stem)}-when"] = \
                when(rows)
    figures.update(mnist_figures(read("mnist", folder)))
    figures.update(quality_figures(read("quality", folder)))
    n_clusters, scores = read("n_clusters", folder), read("n_clusters_scores", folder)
    figures.update(n_clusters_figures(n_clusters))
    figures.update(check_half_figures(n_clusters, scores))
    figures.update(plateau_figures(scores))
    figures.update(first_fit_figures(read("first_fit", folder)))
    figures.update(gemini_figures(read("gemini", folder)))
    figures.update(clam_figures(read("clam", folder)))
    figures.update(torch_api_figures(read("torch_api", folder)))
    figures.update(quality_seeds_figures(read("quality_seeds", folder)))
    stability = read("stability", folder)
    figures.update(stability_figures(stability))
    if stability:
        figures["stability-when"] = when(stability)
    return figures


# the tables made each from one result file: {table: (result file's stem, builder)}
SINGLE_TABLES = {"gpu.csv": ("gpu", gpu_table), "first_fit.csv": ("first_fit", first_fit_table),
                 "forest.csv": ("forest", forest_table),
                 "stability.csv": ("stability", stability_table),
                 "neighbors.csv": ("neighbors", neighbors_table),
                 "torch_digits.csv": ("torch_api", torch_digits_table)}


def tables(folder=RESULTS):
    """{file name: rows} of the tables the pages include with ``csv-table``."""
    made = {}
    quality = read("quality", folder)
    if quality:
        made["quality.csv"] = quality_table(quality)
        made["quality_pairs.csv"] = quality_pairs_table(quality)
    mnist = read("mnist", folder)
    if mnist:
        made["mnist.csv"] = mnist_table(mnist)
        made["mnist_unbalanced.csv"] = mnist_table(
            mnist, ("mnist (unbalanced 10)", "fashion-mnist (unbalanced 10)"))
        made["digits.csv"] = digits_table(mnist)
        made["images.csv"] = mnist_table(mnist, cases=IMAGE_CASES)
    n_clusters = read("n_clusters", folder)
    if n_clusters:
        for group in N_CLUSTERS_GROUPS:
            made[f"n_clusters_{group}.csv"] = n_clusters_table(n_clusters, group)
    for name, (stem, table) in SINGLE_TABLES.items():
        rows = read(stem, folder)
        if rows:
            made[name] = table(rows)
    return made


def write_tables(out=TABLES, folder=RESULTS):
    """Write :func:`tables` as CSV files into ``out``; returns their paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, rows in tables(folder).items():
        path = out / name
        with open(path, "w", newline="") as file:
            csv.writer(file).writerows(rows)
        paths.append(path)
    return paths


def definitions(used, figures):
    """The substitution definitions of the figures named in ``used`` (the others
    are left out: every page defining every figure made the build ten times
    slower)."""
    return "".join(f"\n.. |{name}| replace:: {figures[name]}"
                   for name in sorted(set(used) & figures.keys()))


def update_readme(path=ROOT / "README.rst"):
    """Rewrite the substitution definitions at the end of README.rst with the result
    files' figures; returns the names whose text changed."""
    figures = substitutions()
    changed = []

    def definition(match):
        name, text = match.group(1), match.group(2)
        if name in figures and figures[name] != text:
            changed.append(name)
            return f".. |{name}| replace:: {figures[name]}"
        return match.group(0)

    text = Path(path).read_text(encoding="utf-8")
    new = re.sub(r"^\.\. \|([^|]+)\| replace:: (.*)$", definition, text, flags=re.M)
    Path(path).write_text(new, encoding="utf-8")
    return changed


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--readme"]:  # after a rerun: README.rst's figures
        print("README.rst: updated", ", ".join(update_readme()) or "nothing")
    else:
        for name, text in sorted(substitutions().items()):
            print(f"|{name}|  {text}")

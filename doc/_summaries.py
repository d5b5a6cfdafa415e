"""The pages' tables and aggregate figures of the benchmarks other than the quality
datasets, MNIST, the GPU and the number of clusters (``_figures.py``): the first
fit, single linkage, Sparse GEMINI's scenario 5, ClAM against k-means, the torch
objectives, the nearest-neighbour searches, the quality datasets over seeds and
their stability. ``_figures.py`` gathers them into the pages' substitutions and
tables.
"""

from collections import defaultdict

from _figure_formats import (
    mean_of, newest, number, ratio, score, seconds, slug, times_range, versus, when)

# bench_stability.py's estimators, as the pages name them
STABILITY_NAMES = {"GMM": "GaussianMixture", "Spectral": "SpectralClustering",
                   "ClAM-unclipped": "ClAM, gradient_clip=None",
                   "ClAM-unclipped-kmeans++": "ClAM, gradient_clip=None, init='k-means++'"}
# a dataset's copies agree where their mean pairwise ARI reaches this
COPIES_AGREE = 0.99


# ---------------------------------------------------------------- first fit


def first_fit_figures(rows):
    """``|first-fit-cold-range|``: the lowest and highest first-fit CPU seconds of the
    estimators' cases (not the torch operators'); ``|first-fit-when|``."""
    if not rows:
        return {}
    fits = [row for row in rows if row.get("kind") == "estimator"]
    colds = [number(row, "cold_cpu") for row in fits if number(row, "cold_cpu")]
    warms = [number(row, "warm_cpu") for row in fits if number(row, "warm_cpu")]
    figures = {"first-fit-when": when(rows)}
    if colds:
        figures["first-fit-cold-range"] = f"{seconds(min(colds))[:-2]} to {seconds(max(colds))}"
    if warms:
        figures["first-fit-warm-range"] = f"{seconds(min(warms))[:-2]} to {seconds(max(warms))}"
    return figures


def first_fit_table(rows):
    header = ["case", "cold (compiles)", "warm", "notice (cold / warm)"]
    body = [[row["dataset"], seconds(number(row, "cold_cpu")), seconds(number(row, "warm_cpu")),
             row.get("notice", "")] for row in rows]
    return [header] + body


# ---------------------------------------------------------------- single linkage


def forest_table(rows):
    """bench_forest.py's timings: each size's fit, the fastest single linkage of the
    peers that ran (the O(n^2) ones stop at 20,000 points) and the spanning tree
    alone."""
    timed = defaultdict(dict)
    for row in rows:
        if not row["dataset"].startswith(("partial-labels", "predict-")):
            timed[row["dataset"]][row["estimator"]] = number(row, "seconds")
    header = ["data", "SpanningForestClustering", "fastest single linkage", "its fit",
              "peer / ours", "spanning tree alone"]
    body = []
    for dataset, fits in timed.items():
        ours = fits.pop("SpanningForestClustering", None)
        tree = next((fits.pop(name) for name in list(fits) if "tree only" in name), None)
        if not ours:
            continue
        peer = min(fits, key=fits.get) if fits else None
        body.append([dataset, seconds(ours), peer or "skipped: O(n^2)",
                     seconds(fits.get(peer)), ratio(fits[peer] / ours) if peer else "--",
                     seconds(tree)])
    return [header] + body


# ---------------------------------------------------------------- scenario 5


def gemini_figures(rows):
    """``|gemini-scenario-5-verdict|``: the path's model and the dense model on the
    features it kept, against k-means on every feature."""
    best = newest(rows)
    get = {estimator: row for (_, estimator, _), row in best.items()}
    kmeans = get.get("KMeans, all features")
    figures = {}
    if kmeans is None:
        return figures
    k = number(kmeans, "ari")
    for estimator, name in (("SparseGEMINI path", "path"),
                            ("SparseGEMINI on its features", "selected")):
        if estimator in get:
            figures[f"gemini-scenario-5-{name}-vs-kmeans"] = versus(
                number(get[estimator], "ari"), k, "k-means on all the features", False)
    figures["gemini-scenario-5-when"] = when(list(best.values()))
    return figures


# ---------------------------------------------------------------- ClAM, the torch objectives


def clam_figures(rows):
    """``|clam-uci-<variant>-wins|``: the UCI datasets on which most seeds of a ClAM
    variant reach k-means' silhouette; ``|clam-uci-<variant>-ratio-range|``: its fit
    time over k-means' one-thread time, lowest to highest; ``|clam-many-ratio-range|``
    likewise over the ``--many`` cases."""
    figures = {}
    fits = [row for row in newest(rows).values() if number(row, "seeds")]
    for variant in sorted({row["estimator"] for row in fits}):
        mine = [row for row in fits if row["estimator"] == variant]
        name = f"clam-uci-{slug(variant)}"
        figures[f"{name}-wins"] = str(sum(
            2 * number(row, "seeds_at_least_kmeans") > number(row, "seeds") for row in mine))
        figures[f"{name}-ratio-range"] = times_range([number(row, "kmeans_ratio") for row in mine])
    many = [number(row, "cpu_ratio") for row in newest(rows).values()
            if row["dataset"].startswith("many-") and number(row, "cpu_ratio")]
    if many:
        figures["clam-many-ratio-range"] = times_range(many)
    return figures


def torch_api_figures(rows):
    """``|torch-api-checks-<device>-max-share|``: the largest share of a step spent
    inside the blocks' input checks, over the blocks timed on that device."""
    figures = {}
    checks = [row for row in newest(rows).values() if row["dataset"] == "checks"]
    for device in sorted({row["device"] for row in checks}):
        shares = [number(row, "in_checks_share") for row in checks if row["device"] == device]
        figures[f"torch-api-checks-{device}-max-share"] = f"{max(shares):.1%}"
    return figures


def torch_digits_table(rows):
    """The digits example's methods (bench_torch_api.py --only digits): ACC, NMI, ARI
    and fit time."""
    header = ["method", "ACC", "NMI", "ARI", "fit time"]
    body = [[row["estimator"], score(number(row, "acc")), score(number(row, "nmi")),
             score(number(row, "ari")), seconds(number(row, "seconds"))]
            for row in rows if row["dataset"] == "digits"]
    return [header] + body


# ---------------------------------------------------------------- nearest neighbours


NEIGHBOR_SEARCHES = {"skdiffclust": "skdiffclust IVF", "exact": "exact",
                     "pynndescent": "pynndescent", "faiss-ivf": "FAISS IVF-Flat",
                     "faiss-hnsw16": "FAISS HNSW (M=16)"}


def neighbors_table(rows):
    """bench_neighbors.py's searches: each case's CPU seconds and recall@k, a
    column per search."""
    found = defaultdict(dict)
    for (dataset, estimator, _), row in newest(rows).items():
        found[dataset][estimator] = (f"{seconds(number(row, 'cpu_seconds'))}, recall "
                                     f"{number(row, 'recall'):.3f}")
    header = ["case"] + list(NEIGHBOR_SEARCHES.values())
    body = [[dataset] + [searches.get(search, "--") for search in NEIGHBOR_SEARCHES]
            for dataset, searches in found.items()]
    return [header] + body


# ---------------------------------------------------------------- seeds and stability


def quality_seeds_figures(rows):
    """``bench_quality.py --seeds-csv``: per group of batteries and estimator, the
    mean ARI over the seeds (``|quality-seeds-development-clam-ari|``), its spread
    (highest less lowest seed, ``...-spread``), and ClAM against KMeans
    (``|quality-seeds-development-clam-vs-kmeans|``)."""
    by = defaultdict(list)
    for row in newest(rows).values():
        group = row["dataset"].rsplit(" seed ", 1)[0]
        by[group, row["estimator"]].append(number(row, "ari"))
    figures = {}
    for (group, estimator), aris in by.items():
        name = f"quality-seeds-{slug(group)}-{slug(estimator)}"
        figures[f"{name}-ari"] = score(mean_of(aris))
        figures[f"{name}-spread"] = score(max(aris) - min(aris))
        figures[f"quality-seeds-{slug(group)}-seeds"] = str(len(aris))
        if estimator == "ClAM" and (group, "KMeans") in by:
            figures[f"quality-seeds-{slug(group)}-clam-vs-kmeans"] = versus(
                mean_of(aris), mean_of(by[group, "KMeans"]), "KMeans")
    if rows:
        figures["quality-seeds-when"] = when(rows)
    return figures


DEVELOPMENT_BATTERIES = ("sipu", "fcps", "uci")


def _stability_groups(rows):
    """{(group, estimator): [(dataset, mean pairwise ARI)]} of bench_stability.py's
    newest rows, the group 'development' or 'evaluation' by the dataset's battery."""
    groups = defaultdict(list)
    for (dataset, estimator, _), row in newest(rows).items():
        group = ("development" if dataset.split("/")[0] in DEVELOPMENT_BATTERIES
                 else "evaluation")
        groups[group, estimator].append((dataset, number(row, "pair_mean")))
    return groups


def stability_table(rows):
    """Per estimator and group of batteries: the mean over the datasets of their
    mean pairwise ARI between the jittered copies, and the lowest with its dataset."""
    groups = _stability_groups(rows)
    names = list(dict.fromkeys(estimator for _, estimator in groups))
    header = ["estimator"]
    for group in ("development", "evaluation"):
        header += [f"{group}: mean", f"{group}: lowest (dataset)"]
    body = []
    for name in names:
        line = [STABILITY_NAMES.get(name, name)]
        for group in ("development", "evaluation"):
            found = groups.get((group, name))
            if not found:
                line += ["--", "--"]
                continue
            dataset, low = min(found, key=lambda item: item[1])
            line += [f"{mean_of([ari for _, ari in found]):.3f}", f"{low:.3f} ({dataset})"]
        body.append(line)
    return [header] + body


def stability_figures(rows):
    """``|stability-<group>-<estimator>-mean|``, ``...-lowest`` and
    ``...-lowest-dataset`` of :func:`stability_table`, ``...-disagree``, the datasets
    whose mean pairwise ARI is below ``|stability-agree|`` (:data:`COPIES_AGREE`),
    and ``|stability-<group>-n|`` (datasets)."""
    figures = {"stability-agree": f"{COPIES_AGREE:g}"}
    for (group, estimator), found in _stability_groups(rows).items():
        name = f"stability-{group}-{slug(estimator)}"
        dataset, low = min(found, key=lambda item: item[1])
        figures[f"{name}-mean"] = f"{mean_of([ari for _, ari in found]):.3f}"
        figures[f"{name}-lowest"] = f"{low:.3f}"
        figures[f"{name}-lowest-dataset"] = dataset
        figures[f"{name}-disagree"] = str(sum(ari < COPIES_AGREE for _, ari in found))
        figures[f"stability-{group}-n"] = str(len(found))
    return figures

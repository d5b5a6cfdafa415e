"""The pages' figures of the count of images (``bench_n_clusters.py --images``,
its rows in ``n_clusters.csv`` and the merges' links in ``n_clusters_scores.csv``):
how DeepImageClustering's ``'auto'`` counted the battery's check half against the
classes and beside k-means by silhouette on its own embedding, what counting cost
against a fit given the number, where its fits warned, and the plateau of links
near the threshold on Fashion-MNIST. ``_figures.py`` gathers them into the pages'
substitutions.
"""

import importlib
import re
import statistics
import sys
from pathlib import Path

from _figure_formats import newest, number, times, times_range

from skdiffclust._graphcut._merge import MERGE_CLEAR, MERGE_LINK

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
PREFIX = "n-clusters-images-check-"
# a set of more classes than this is one of "many classes" (the check half's have
# 20 to 40; the others 2 to 12)
FEW_CLASSES = 12
# the whole sets of 60,000 images, benchmarked apart from the halves
WHOLE = ("images/mnist", "images/fashion")
# how far from the threshold the links of a plateau lie, a share of it
PLATEAU = 1 / 6


def check_half():
    """The names of the battery's check half, as ``benchmarks/_image_battery.py``
    writes them down."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return importlib.import_module("_image_battery").names("check")
    finally:
        sys.path.remove(str(BENCHMARKS))


def classes_of(row):
    """The reference number of a row's set, from its note (``'found 14 of 10'``)."""
    found = re.search(r"\bof (\d+)", row.get("note") or "")
    return int(found.group(1)) if found else None


def _found(rows, estimator):
    """{set: (number found, classes)} of ``estimator``'s newest rows on the check half."""
    check = {f"images/{name}" for name in check_half()}
    return {dataset: (int(number(row, "n_found")), classes_of(row))
            for (dataset, name, _), row in newest(rows).items()
            if name == estimator and dataset in check and number(row, "n_found") is not None}


def _words(sets):
    return ", ".join(f"``{name.removeprefix('images/')}``" for name in sorted(sets))


def check_half_figures(rows, scores):
    """``|n-clusters-images-check-exact|`` (and ``-exact-sets``, the sets by name):
    the check half's sets DeepImageClustering's ``'auto'`` counted exactly; of those
    of at most :data:`FEW_CLASSES` classes, how many it counted too high
    (``-few-over``, by ``-few-excess``) or too low (``-few-under``), and of the
    others ``-many-under``, ``-many-over``; ``-same-as-silhouette``: the sets where
    k-means by silhouette on its embedding found the same number; ``-cpu-ratio-range``
    and ``-cpu-ratio-median``: its CPU time over the fit's given the number (and
    ``-prcut-cpu-ratio-range`` PRCut's, also over the :data:`WHOLE` sets as
    ``n-clusters-images-whole-prcut-cpu-ratio-range``); and the warnings
    (:func:`warning_figures`)."""
    deep = _found(rows, "Deep-auto") if rows else {}
    if not deep:
        return {}
    figures = {f"{PREFIX}n": str(len(deep)),
               f"{PREFIX}exact-sets": _words(s for s, (k, c) in deep.items() if k == c)}
    figures[f"{PREFIX}exact"] = str(sum(k == c for k, c in deep.values()))
    few = [(k, c) for k, c in deep.values() if c <= FEW_CLASSES]
    many = [(k, c) for k, c in deep.values() if c > FEW_CLASSES]
    excess = [k - c for k, c in few if k > c]
    figures.update({f"{PREFIX}few": str(len(few)), f"{PREFIX}many": str(len(many)),
                    f"{PREFIX}few-over": str(len(excess)),
                    f"{PREFIX}few-under": str(sum(k < c for k, c in few)),
                    f"{PREFIX}many-over": str(sum(k > c for k, c in many)),
                    f"{PREFIX}many-under": str(sum(k < c for k, c in many))})
    if excess:
        figures[f"{PREFIX}few-excess"] = (f"{min(excess)} to {max(excess)}"
                                          if min(excess) < max(excess) else str(excess[0]))
    silhouette = _found(rows, "KMeans-silhouette-Deep")
    figures[f"{PREFIX}same-as-silhouette"] = str(sum(
        silhouette.get(s, (None,))[0] == k for s, (k, _) in deep.items()))
    ratios = _cpu_ratios(rows, deep, "Deep")
    if ratios:
        figures[f"{PREFIX}cpu-ratio-range"] = times_range(ratios)
        figures[f"{PREFIX}cpu-ratio-median"] = times(statistics.median(ratios))
    for sets, prefix in ((deep, PREFIX), (WHOLE, "n-clusters-images-whole-")):
        ratios = _cpu_ratios(rows, sets, "PRCut")
        if ratios:
            figures[f"{prefix}prcut-cpu-ratio-range"] = times_range(ratios)
    figures.update(warning_figures(scores, deep))
    return figures


def _cpu_ratios(rows, sets, estimator):
    """The CPU seconds of ``estimator``'s ``'auto'`` over those of its fit given the
    number, on each of ``sets`` where both ran."""
    seconds = {(dataset, name): number(row, "seconds")
               for (dataset, name, _), row in newest(rows).items()}
    pairs = [(seconds.get((s, f"{estimator}-auto")), seconds.get((s, estimator)))
             for s in sets]
    return [auto / given for auto, given in pairs if auto and given]


def merges_link(links):
    """The merges' number (the most clusters linked below :data:`MERGE_LINK`) and
    its strongest link, of {number: strongest link}; (None, None) where every
    number is linked above it."""
    below = [count for count, link in links.items() if link < MERGE_LINK]
    return (max(below), links[max(below)]) if below else (None, None)


def links_of(scores):
    """{set: {number: strongest link}} of ``n_clusters_scores.csv``'s rows."""
    found = {}
    for row in scores:
        found.setdefault(row["dataset"], {})[int(number(row, "candidate"))] = \
            number(row, "link")
    return found


def warning_figures(scores, deep):
    """``|n-clusters-images-check-warned|``: the check half's sets whose fit warned
    (the merges' number still linked above :data:`MERGE_CLEAR` times the threshold),
    ``-warned-exact`` of them counted exactly; ``-quiet`` and ``-quiet-exact`` those
    it did not warn on."""
    kept = {s: merges_link(links)[1] for s, links in links_of(scores).items() if s in deep}
    warned = {s: link > MERGE_CLEAR * MERGE_LINK for s, link in kept.items()
              if link is not None}
    if not warned:
        return {}
    exact = {s for s, (k, c) in deep.items() if k == c}
    return {f"{PREFIX}warned": str(sum(warned.values())),
            f"{PREFIX}warned-exact": str(sum(w and s in exact for s, w in warned.items())),
            f"{PREFIX}quiet": str(sum(not w for w in warned.values())),
            f"{PREFIX}quiet-exact": str(sum(not w and s in exact for s, w in warned.items()))}


def plateau_figures(scores, dataset="images/fashion"):
    """``|n-clusters-images-fashion-plateau|``: the numbers around the merges' whose
    strongest links all lie within :data:`PLATEAU` of the threshold (``'3 to 9'``),
    ``-plateau-next`` the number above them and ``-plateau-jump`` its link over the
    threshold."""
    links = links_of(scores).get(dataset)
    found, _ = merges_link(links or {})
    if found is None:
        return {}
    near = {count for count, link in links.items()
            if abs(link - MERGE_LINK) <= PLATEAU * MERGE_LINK}
    low = high = found
    while low - 1 in near:
        low -= 1
    while high + 1 in near:
        high += 1
    name = f"n-clusters-{dataset.replace('/', '-')}-plateau"
    figures = {name: f"{low} to {high}"}
    if high + 1 in links:
        figures[f"{name}-next"] = str(high + 1)
        figures[f"{name}-jump"] = times(links[high + 1] / MERGE_LINK)
    return figures

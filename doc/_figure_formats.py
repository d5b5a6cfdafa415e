"""How the documentation writes the benchmarks' figures: reading the result files
(:func:`read`, :func:`newest`) and formatting their cells (seconds, scores, memory,
ratios, and the machine, date and load of a run, :func:`when`). ``_figures.py``
builds the pages' substitutions and tables with them.
"""

import csv
import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
# a difference of mean ARI under this is "level": over seeds an estimator's mean
# ARI on the quality datasets moves by about 0.005 (bench_quality.py --seeds)
MARGIN = 0.02
# the load average above which a run on the CPU machine shared it with other jobs:
# the benchmark's own thread counts 1 (its further threads are taken off, other_load)
BUSY_LOAD = 1.5


# ---------------------------------------------------------------- reading


def read(stem, folder=RESULTS):
    """The rows of ``<folder>/<stem>.csv`` (dictionaries of strings); [] if absent."""
    path = Path(folder) / f"{stem}.csv"
    if not path.exists():
        return []
    with open(path, newline="") as file:
        return list(csv.DictReader(file))


def number(row, column):
    """The cell as a float; None where it is empty or missing."""
    text = (row.get(column) or "").strip()
    try:
        return float(text) if text else None
    except ValueError:
        return None


def slug(text):
    """``'mnist (unbalanced 10)'`` -> ``'mnist-unbalanced-10'``."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


# ---------------------------------------------------------------- formats


def score(value, digits=3):
    return "--" if value is None else f"{value:.{digits}f}"


def significant(value, digits=3):
    """A fitted parameter, three significant digits: ``'0.0123'``, ``'45.6'``."""
    return f"{value:.{digits}g}"


def mebibytes(value):
    """A memory peak given in MiB, two significant digits: ``'56 MB'``, ``'1.5 GB'``."""
    if value >= 1024:
        return f"{value / 1024:.1f} GB"
    return f"{value:.2g} MB" if value < 100 else f"{value:.0f} MB"


def seconds(value):
    """Three significant digits, in seconds: ``'0.240 s'``, ``'66.9 s'``, ``'531 s'``."""
    if value is None:
        return "--"
    if value >= 100:
        return f"{value:.0f} s"
    if value >= 10:
        return f"{value:.1f} s"
    if value >= 1:
        return f"{value:.2f} s"
    return f"{value:.3f} s"


def ratio(value):
    """A speed-up or a ratio of times: ``'4.0x'``, ``'34x'``."""
    return f"{value:.0f}x" if value >= 10 else f"{value:.1f}x"


def times(value):
    """A ratio of times in words' company: ``'34'`` (times), ``'1.6'``."""
    return f"{value:.0f}" if value >= 10 else f"{value:.1f}"


def times_range(values):
    """The lowest to the highest ratio of times: ``'3.1 to 7.4'`` (``'1.4'`` where
    they are written alike)."""
    low, high = times(min(values)), times(max(values))
    return low if low == high else f"{low} to {high}"


def times_of(value):
    """A multiple of a size, two decimals: ``'0.91 times'``."""
    return f"{value:.2f} times"


def loads(rows):
    """(lowest, highest) load average recorded over ``rows`` (None if none was)."""
    values = [float(x) for row in rows for x in _load_values(row)]
    return (min(values), max(values)) if values else None


def _load_values(row):
    return re.findall(r"\d+(?:\.\d+)?", row.get("load") or "")


def own_threads(row):
    """The threads the run of ``row`` kept busy itself (its ``threads`` cell; 1
    where it gives none)."""
    return int(number(row, "threads") or 1)


def other_load(row):
    """The load average ``row``'s run saw besides its own threads: the load at its
    start (before it ran), and that at its end less its threads but one (one busy
    thread is an idle machine's benchmark); None where no load was recorded."""
    values = [float(x) for x in _load_values(row)]
    if not values:
        return None
    start, end = values[0], values[-1]
    return max(start, end - (own_threads(row) - 1))


def short_machine(name):
    """``'2-core x86_64 CPU (AMD EPYC)'`` -> ``'2-core CPU'``; ``'NVIDIA H200, 16-core
    host'`` -> ``'NVIDIA H200'``."""
    if name.startswith("NVIDIA "):
        return name.split(",")[0]
    cores = re.match(r"(\d+)-core", name)
    return f"{cores.group(1)}-core CPU" if cores else name


def dates(rows):
    found = sorted({row["date"] for row in rows if row.get("date")})
    if not found:
        return ""
    return found[0] if len(found) == 1 else f"{found[0]} to {found[-1]}"


def when(rows):
    """The machine(s), the date(s) and, where recorded, the load of ``rows``:
    ``'2-core CPU, 2026-11-29, under load: load average 3.0 to 3.4'``; ``'idle'``
    where the load besides the runs' own threads (:func:`other_load`) stayed
    under :data:`BUSY_LOAD`, ``'... with 2 threads of its own'`` where a run kept
    more than one busy."""
    machines = sorted({short_machine(row["machine"]) for row in rows if row.get("machine")})
    text = ", ".join([" and ".join(machines), dates(rows)] if machines else [dates(rows)])
    span = loads(rows)
    if span is not None:
        others = [load for load in map(other_load, rows) if load is not None]
        state = "under load" if max(others) >= BUSY_LOAD else "idle"
        low, high = span
        text += f", {state}: load average {low:.1f} to {high:.1f}"
        own = max(own_threads(row) for row in rows if _load_values(row))
        if own > 1:
            text += f" with {own} threads of its own"
    return text


def versus(a, b, name_b, possess=True):
    """``'level with k-means' (0.63 against 0.63)'``, ``'above ...'``, ``'below ...'``:
    a mean ARI against another, level within :data:`MARGIN`."""
    where = "level with" if abs(a - b) <= MARGIN else "above" if a > b else "below"
    return f"{where} {possessive(name_b) if possess else name_b} ({a:.2f} against {b:.2f})"


def possessive(name):
    """``"KMeans'"``, ``"SpectralClustering's"``."""
    return f"{name}'" if name.endswith("s") else f"{name}'s"


# ---------------------------------------------------------------- rows


def mean_of(values):
    return sum(values) / len(values) if values else float("nan")


def newest(rows):
    """The newest row of each (dataset, estimator, device): the last of the newest
    date."""
    best = {}
    for row in rows:
        key = (row.get("dataset", ""), row.get("estimator", ""), row.get("device", "cpu"))
        if key not in best or row.get("date", "") >= best[key].get("date", ""):
            best[key] = row
    return best

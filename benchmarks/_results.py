"""The benchmarks' result files: one CSV per benchmark under ``benchmarks/results/``.

Every row has the columns of :data:`COLUMNS` (empty where they do not apply),
then any column of the benchmark's own. ``plot_benchmarks.py`` reads them and
draws the figures of ``doc/benchmarks.rst``.

``--csv PATH`` of ``bench_quality.py``, ``bench_gpu.py``, ``bench_mnist.py``,
``bench_first_fit.py``, ``bench_gemini.py``, ``bench_perturbed.py``,
``bench_n_clusters.py``, ``bench_prcut.py``, ``bench_scale.py``,
``bench_forest.py`` and ``bench_clam.py`` calls :func:`write_results` (or
:func:`save_run`): the run's rows replace the file's rows of the same benchmark,
dataset, estimator, device and machine; the file's other rows are kept, so that
runs of different cases, or on different machines, add up in one file
(``bench_quality.py`` replaces the rows of every machine: its comparison is one
run). Each row records the machine, the date and the load average over the run.

The documentation quotes these files (``doc/_figures.py``): its figures change
with them.
"""

import csv
import datetime
import os
import platform
from pathlib import Path

COLUMNS = ["benchmark", "dataset", "estimator", "device", "ari", "acc", "nmi",
           "seconds", "machine", "date", "load", "note"]
KEY = ("benchmark", "dataset", "estimator", "device", "machine")
RESULTS = Path(__file__).resolve().parent / "results"


def cpu_model():
    """The CPU's model name (``/proc/cpuinfo``), else the platform's processor."""
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine(gpu=None):
    """``'2-core x86_64 CPU (AMD EPYC)'``, or ``'NVIDIA H200, 16-core host'`` for
    the rows of a machine with a GPU."""
    cores = f"{os.cpu_count()}-core"
    if gpu:
        return f"{gpu}, {cores} host"
    return f"{cores} {platform.machine()} CPU ({cpu_model()})"


def today():
    return datetime.date.today().isoformat()


def load_average():
    """The 1-minute load average (processes running or waiting for a core), or None
    where the platform has none."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def load_span(start, end):
    """``'0.68 to 4.10'``: the load average at a run's start and end, for the
    ``load`` column (empty where unknown)."""
    if start is None or end is None:
        return None
    return f"{start:.2f} to {end:.2f}"


def _cell(value):
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if value != value else f"{value:.10g}"  # NaN: empty
    return str(value)


def read_results(path):
    """The rows of a result file, as dictionaries of strings."""
    with open(path, newline="") as file:
        return list(csv.DictReader(file))


def write_results(path, rows, benchmark, machine_name=None, load=None, key=KEY):
    """Write ``rows`` (dictionaries) to the CSV file ``path`` for ``benchmark``.

    Missing ``machine`` and ``date`` cells are filled with this machine
    (:func:`machine`) and today, and the ``load`` cells with ``load`` (the load
    average during the run, :func:`load_span`) when given: the pages that quote
    the figures show the date, the machine and whether it was shared.

    Rows already in the file with the same values in the columns ``key`` as a
    new row (by default its benchmark, dataset, estimator, device and machine)
    are replaced; the others are kept. Without ``'machine'`` in ``key`` a run
    replaces the rows of every machine: a comparison measured in one run.
    Returns the number of rows written by this run.
    """
    stamp = {"benchmark": benchmark, "machine": machine_name or machine(), "date": today()}
    if load is not None:
        stamp["load"] = load
    new = [{**stamp, **{k: v for k, v in row.items() if v is not None}} for row in rows]
    new = [{column: _cell(value) for column, value in row.items()} for row in new]
    path = Path(path)
    keys = {tuple(row.get(k, "") for k in key) for row in new}
    kept = []
    if path.exists():
        kept = [row for row in read_results(path)
                if tuple(row.get(k, "") for k in key) not in keys]
    columns = list(COLUMNS)
    for row in kept + new:
        columns += [key for key in row if key not in columns]
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as file:
        writer = csv.DictWriter(file, columns, restval="")
        writer.writeheader()
        writer.writerows(kept + new)
    return len(new)


def save_run(path, rows, benchmark, load_start, threads=None):
    """:func:`write_results` of a run that began at the load average ``load_start``
    (:func:`load_average`), its load span taken now; says where it wrote.

    ``threads``: how many threads (processes times threads each) the run kept
    busy, written to the ``threads`` cells of rows that do not give their own.
    The load average at the run's end counts them, so the pages judge the
    machine's other load from the load less the run's own threads."""
    if threads is not None:
        rows = [{"threads": threads, **row} for row in rows]
    write_results(path, rows, benchmark, load=load_span(load_start, load_average()))
    print(f"results written to {path}")

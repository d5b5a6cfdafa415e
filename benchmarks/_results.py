"""The benchmarks' result files: one CSV per benchmark under ``benchmarks/results/``.

Every row has the columns of :data:`COLUMNS` (empty where they do not apply),
then any column of the benchmark's own. ``plot_benchmarks.py`` reads them and
draws the figures of ``doc/benchmarks.rst``.

``--csv PATH`` of ``bench_quality.py``, ``bench_gpu.py`` and ``bench_mnist.py``
calls :func:`write_results`: the run's rows replace the file's rows of the same
benchmark, dataset, estimator, device and machine; the file's other rows are kept,
so that runs of different cases, or on different machines, add up in one file.
"""

import csv
import datetime
import os
import platform
from pathlib import Path

COLUMNS = ["benchmark", "dataset", "estimator", "device", "ari", "acc", "nmi",
           "seconds", "machine", "date", "note"]
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


def write_results(path, rows, benchmark, machine_name=None):
    """Write ``rows`` (dictionaries) to the CSV file ``path`` for ``benchmark``.

    Missing ``machine`` and ``date`` cells are filled with this machine
    (:func:`machine`) and today. Rows already in the file with the same
    benchmark, dataset, estimator, device and machine are replaced; the others
    are kept.
    Returns the number of rows written by this run.
    """
    stamp = {"benchmark": benchmark, "machine": machine_name or machine(), "date": today()}
    new = [{**stamp, **{k: v for k, v in row.items() if v is not None}} for row in rows]
    new = [{key: _cell(value) for key, value in row.items()} for row in new]
    path = Path(path)
    keys = {tuple(row.get(k, "") for k in KEY) for row in new}
    kept = []
    if path.exists():
        kept = [row for row in read_results(path)
                if tuple(row.get(k, "") for k in KEY) not in keys]
    columns = list(COLUMNS)
    for row in kept + new:
        columns += [key for key in row if key not in columns]
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as file:
        writer = csv.DictWriter(file, columns, restval="")
        writer.writeheader()
        writer.writerows(kept + new)
    return len(new)

"""First fit of each estimator in a fresh process: CPU and wall seconds, cold and warm.

Each case runs in a new Python process (its CPU seconds count the interpreter's
start and the imports, its wall seconds the fit), first with an
empty numba cache (``NUMBA_CACHE_DIR`` set to a new directory: every kernel the case
needs is compiled), then again in another process with the cache that run left
(kernels load from disk). The difference is the compilation. The last column says
whether the compilation notice was printed on stderr (it should be, cold, for the
cases that compile for more than two seconds, and never warm).

``--csv PATH`` writes one row per case (``_results.write_results``): the cold and
warm CPU and wall seconds, whether the notice was printed, the machine, the date
and the load average over the run; ``doc/user_guide/faq.rst`` and
``doc/benchmarks.rst`` show the file ``benchmarks/results/first_fit.csv``.

Usage::

    pip install ".[torch]"
    python benchmarks/bench_first_fit.py                  # every case
    python benchmarks/bench_first_fit.py --cases ClAM     # cases whose name contains it
    python benchmarks/bench_first_fit.py --csv benchmarks/results/first_fit.csv
"""

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap

from _results import load_average, load_span, write_results

BLOBS = "X, y = make_blobs(200, centers=3, random_state=0)\n"
CASES = {
    "SpanningForestClustering": BLOBS + "SpanningForestClustering(3).fit(X)",
    "SpanningForestClustering float32": BLOBS + (
        "SpanningForestClustering(3).fit(X.astype('float32'))"),
    "SpanningForestClustering 10 features (Prim)": (
        "X, y = make_blobs(300, n_features=10, centers=3, random_state=0)\n"
        "SpanningForestClustering(3).fit(X)"),
    "SpanningForestClustering + labels": BLOBS + (
        "y[10:] = -1\nSpanningForestClustering(3).fit(X, partial_labels=y)"),
    "SpanningForestClustering(embedding='mlp')": BLOBS + (
        "y[30:] = -1\n"
        "SpanningForestClustering(3, embedding='mlp', max_iter=2, random_state=0)"
        ".fit(X, partial_labels=y)"),
    "spanning_forest (precomputed)": BLOBS + (
        "S = -((X[:, None] - X[None]) ** 2).sum(-1)\nspanning_forest(S, 3)"),
    "partial_fenchel_young_loss": BLOBS + (
        "import torch\n"
        "from skdiffclust.torch import constraints_from_labels, partial_fenchel_young_loss\n"
        "Z = torch.tensor(X, dtype=torch.float32, requires_grad=True)\n"
        "labels = torch.tensor(y)\nlabels[30:] = -1\n"
        "S = -torch.cdist(Z, Z) ** 2\n"
        "partial_fenchel_young_loss(S, constraints_from_labels(labels), 3).backward()"),
    "perturbed_spanning_forest": BLOBS + (
        "import torch\nfrom skdiffclust.torch import perturbed_spanning_forest\n"
        "Z = torch.tensor(X, dtype=torch.float32, requires_grad=True)\n"
        "A, F, M = perturbed_spanning_forest(-torch.cdist(Z, Z) ** 2, 3)\n"
        "(A.sum() + M.sum()).backward()"),
    "ClAM": BLOBS + "ClAM(3, random_state=0).fit(X)",
    "ClAM(device='cpu') (no torch import)": BLOBS + (
        "ClAM(3, random_state=0, device='cpu').fit(X)"),
    "ClAM float32": BLOBS + "ClAM(3, random_state=0).fit(X.astype('float32'))",
    "ClAM, 20,000 points (vectorised kernel)": (
        "X, y = make_blobs(20_000, centers=3, random_state=0)\n"
        "ClAM(3, random_state=0).fit(X)"),
    "PRCut": BLOBS + "PRCut(3, random_state=0, max_iter=50).fit(X)",
    "SparseGEMINI": BLOBS + "SparseGEMINI(3, random_state=0).fit(X)",
    "DeepImageClustering": (
        "from sklearn.datasets import load_digits\n"
        "X = load_digits().data[:200].reshape(-1, 8, 8) / 16\n"
        "DeepImageClustering(10, random_state=0).fit(X)"),
}
SCRIPT = textwrap.dedent("""
    import resource, time, warnings
    from sklearn.datasets import make_blobs
    from skdiffclust import *
    warnings.simplefilter("ignore")

    def cpu():
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    wall_start = time.perf_counter()
    exec({code!r})
    # the process's CPU from its start: the interpreter and the imports included
    print(cpu(), time.perf_counter() - wall_start)
""")


def run(code, cache):
    """(CPU seconds, wall seconds, whether the notice was printed) of one process."""
    env = dict(os.environ, NUMBA_CACHE_DIR=cache)
    out = subprocess.run([sys.executable, "-c", SCRIPT.format(code=code)],
                         capture_output=True, text=True, env=env)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    cpu, wall = map(float, out.stdout.split()[-2:])
    return cpu, wall, "skdiffclust: compiling" in out.stderr


# the cases of a torch operator or a function rather than an estimator's fit
OPERATORS = {"spanning_forest (precomputed)", "partial_fenchel_young_loss",
             "perturbed_spanning_forest"}


def result_row(name, cold, warm):
    """The row of ``--csv`` for one case: (CPU, wall, notice) cold and warm."""
    return {"dataset": name, "estimator": name.split(" ")[0].split("(")[0].split(",")[0],
            "device": "cpu", "seconds": cold[0],
            "note": "CPU seconds of a fresh process, imports included",
            "kind": "operator" if name in OPERATORS else "estimator",
            "cold_cpu": cold[0], "cold_wall": cold[1], "warm_cpu": warm[0],
            "warm_wall": warm[1],
            "notice": f"{'yes' if cold[2] else 'no'} / {'yes' if warm[2] else 'no'}"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="", help="run the cases whose name contains this")
    parser.add_argument("--csv", metavar="PATH",
                        help="write each case's row to this CSV file (e.g. "
                             "benchmarks/results/first_fit.csv)")
    args = parser.parse_args()
    load_start, rows = load_average(), []
    print(f"{'case':<45}{'cold CPU':>9}{'wall':>7}{'warm CPU':>10}{'wall':>7}  notice")
    for name, code in CASES.items():
        if args.cases not in name:
            continue
        with tempfile.TemporaryDirectory() as cache:
            try:
                cold, warm = run(code, cache), run(code, cache)
            except RuntimeError as error:
                print(f"{name:<45} FAILED\n{error}")
                continue
        notice = f"{'yes' if cold[2] else 'no'} / {'yes' if warm[2] else 'no'}"
        print(f"{name:<45}{cold[0]:8.1f}s{cold[1]:6.1f}s{warm[0]:9.1f}s{warm[1]:6.1f}s  "
              f"{notice}", flush=True)
        rows.append(result_row(name, cold, warm))
    if args.csv and rows:
        write_results(args.csv, rows, "bench_first_fit",
                      load=load_span(load_start, load_average()))
        print(f"results written to {args.csv}")


if __name__ == "__main__":
    main()

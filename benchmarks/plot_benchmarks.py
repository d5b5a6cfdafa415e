"""Draw the figures of ``doc/benchmarks.rst`` from the benchmarks' result files.

Reads the CSV files under ``benchmarks/results/`` (written by the benchmark
scripts' ``--csv`` option, see ``_results.py``) and writes three PNG files to
``doc/images/benchmarks/``:

* ``quality_time.png``: quality against fit time, our estimators against
  scikit-learn's: mean ARI over the Clustering Benchmarks batteries
  (``quality.csv``), ACC on MNIST and Fashion-MNIST (``mnist.csv``);
* ``gpu_speedups.png``: CPU time over CUDA time of each case measured on both
  (``gpu.csv``, ``mnist.csv``, ``perturbed.csv``). For each case the newest
  CUDA row that has a CPU row of the same machine is compared with that row;
  a case measured on no machine with both is compared with the newest CPU row,
  and its bar names both machines;
* ``n_clusters_images.png``: DeepImageClustering's ``n_clusters='auto'`` on
  image sets, the strongest link between the clusters at each number its merges
  passed through, with the threshold, the number found and the number of
  classes (``n_clusters_scores.csv``, ``n_clusters.csv``).

Usage::

    python benchmarks/plot_benchmarks.py [--results DIR] [--out DIR]

It runs nothing but matplotlib (Agg backend; it reads the merges' threshold from
the package), in a few seconds.
"""

import argparse
import csv
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from skdiffclust._graphcut._merge import MERGE_LINK  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
OUT = ROOT / "doc" / "images" / "benchmarks"

OURS_COLOUR, SKLEARN_COLOUR, OTHER_COLOUR = "#c0392b", "#2471a3", "#999999"
OURS = {"SpanningForest", "ClAM", "PRCut", "SparseGEMINI",
        "deep", "prcut", "prcut-defaults", "prcut-mlp-pca", "prcut-cnn"}
SKLEARN = {"KMeans", "GMM", "Ward", "Spectral", "HDBSCAN", "kmeans", "spectral"}
# bench_mnist.py's cases, as the figure names them
CASE_LABELS = {
    "deep": "DeepImageClustering",
    "prcut-defaults": "PRCut(10)",
    "prcut": "PRCut, paper's protocol",
    "kmeans": "KMeans",
    "spectral": "SpectralClustering",
    "n2d": "N2D",
    "dec": "DEC",
    "idec": "IDEC",
}
# where a label would cover another: (x, y) offset in points and alignment
LABEL_OFFSETS = {"prcut": (-6, -11, "right"), "prcut-defaults": (-6, 4, "right"),
                 "ClAM": (-7, -3, "right")}
IMAGE_SETS = [("mnist", "MNIST, 60,000 images"),
              ("fashion-mnist", "Fashion-MNIST, 60,000 images")]
GPU_LABELS = {
    ("clam", "ClAM"): "ClAM, 200,000 x 32, defaults (fit)",
    ("clam-batch-1024", "ClAM"): "ClAM, 200,000 x 32, batch 1,024 (fit)",
    ("prcut", "PRCut"): "PRCut, 1,000,000 x 32, graph included (fit)",
    ("forest", "SpanningForestClustering"): "SpanningForestClustering, mlp, digits (fit)",
    ("deep", "DeepImageClustering"): "DeepImageClustering, digits (fit)",
    ("mnist/prcut", "prcut"): "PRCut, MNIST, paper's protocol (fit)",
    ("mnist/prcut-defaults", "prcut-defaults"): "PRCut(10), MNIST (fit)",
    ("mnist", "deep"): "DeepImageClustering, MNIST (fit)",
}


def read_folder(folder):
    """{file stem: rows} of every CSV file in ``folder``."""
    tables = {}
    for path in sorted(Path(folder).glob("*.csv")):
        with open(path, newline="") as file:
            tables[path.stem] = list(csv.DictReader(file))
    return tables


def number(row, column):
    """The cell as a float, or None where it is empty or missing."""
    text = (row.get(column) or "").strip()
    return float(text) if text else None


def colour(name):
    return OURS_COLOUR if name in OURS else SKLEARN_COLOUR if name in SKLEARN else OTHER_COLOUR


def dates(rows):
    found = sorted({row["date"] for row in rows if row.get("date")})
    return found[0] if len(found) == 1 else f"{found[0]} to {found[-1]}" if found else ""


def machines(rows):
    return "; ".join(sorted({row["machine"] for row in rows if row.get("machine")}))


def load_note(rows):
    """``', load average 3.0 to 3.9'`` where the rows record the run's load."""
    values = [float(x) for row in rows for x in (row.get("load") or "").split(" to ") if x]
    return f", load average {min(values):.1f} to {max(values):.1f}" if values else ""


def battery_points(rows):
    """(estimator, mean ARI, total CPU seconds) over the datasets on which every
    estimator ran; the CPU seconds where recorded (wall seconds otherwise)."""
    by_dataset = defaultdict(dict)
    for row in rows:
        if number(row, "ari") is not None and not row.get("error"):
            by_dataset[row["dataset"]][row["estimator"]] = row
    names = sorted({name for fits in by_dataset.values() for name in fits})
    common = [fits for fits in by_dataset.values() if all(n in fits for n in names)]
    points = []
    for name in names:
        aris = [number(fits[name], "ari") for fits in common]
        seconds = [number(fits[name], "cpu_seconds") or number(fits[name], "seconds") or 0.0
                   for fits in common]
        points.append((name, name, sum(aris) / len(aris), sum(seconds)))
    return points, len(common)


def scatter(ax, points, xlabel, ylabel, title):
    """``points``: (label, estimator, quality, seconds); the estimator's family
    gives the colour and the marker."""
    for label, estimator, quality, seconds in points:
        ax.scatter(seconds, quality, s=45, color=colour(estimator), zorder=3,
                   marker="o" if estimator in OURS else "s")
        dx, dy, align = LABEL_OFFSETS.get(estimator, (5, 3, "left"))
        ax.annotate(label, (seconds, quality), textcoords="offset points", xytext=(dx, dy),
                    ha=align, fontsize=7.5)
    ax.set_xscale("log")
    ax.set_xlabel(xlabel, fontsize=8.5)
    ax.set_ylabel(ylabel, fontsize=8.5)
    ax.set_title(title, fontsize=9)
    ax.tick_params(labelsize=8)
    ax.grid(True, which="major", alpha=0.3)
    ax.margins(x=0.25, y=0.12)


def plot_quality(tables, out):
    panels = []
    if "quality" in tables:
        panels.append("batteries")
    mnist = [row for row in tables.get("mnist", []) if row.get("device", "cpu") == "cpu"
             and number(row, "acc") is not None and number(row, "seconds") is not None
             and row["estimator"] in CASE_LABELS]
    panels += [key for key, _ in IMAGE_SETS if any(row["dataset"] == key for row in mnist)]
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.8), squeeze=False)
    footer = []
    for ax, panel in zip(axes[0], panels):
        if panel == "batteries":
            rows = tables["quality"]
            points, n_datasets = battery_points(rows)
            scatter(ax, points, "fit time, CPU seconds (sum over the datasets)",
                    "mean ARI", f"Clustering Benchmarks: {n_datasets} datasets")
            footer.append(f"batteries: {machines(rows)}, {dates(rows)}{load_note(rows)}")
        else:
            rows = [row for row in mnist if row["dataset"] == panel]
            points = [(CASE_LABELS[row["estimator"]], row["estimator"], number(row, "acc"),
                       number(row, "seconds")) for row in rows]
            scatter(ax, points, "fit time, seconds (graph included)", "ACC",
                    dict(IMAGE_SETS)[panel])
            footer.append(f"{dict(IMAGE_SETS)[panel].split(',')[0]}: {machines(rows)}, "
                          f"{dates(rows)}")
    handles = [plt.Line2D([], [], marker="o", ls="", color=OURS_COLOUR, label="skdiffclust"),
               plt.Line2D([], [], marker="s", ls="", color=SKLEARN_COLOUR,
                          label="scikit-learn"),
               plt.Line2D([], [], marker="s", ls="", color=OTHER_COLOUR, label="other peers")]
    fig.legend(handles=handles, loc="upper center", ncol=3, fontsize=8, frameon=False)
    fig.text(0.5, 0.01, "; ".join(footer), ha="center", fontsize=7, color="#444444")
    fig.tight_layout(rect=(0, 0.04, 1, 0.93))
    path = out / "quality_time.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def short_machine(name):
    """'NVIDIA H200, 16-core host' -> 'H200'; a CPU machine as it is named."""
    if name.startswith("NVIDIA "):
        return name.split(",")[0].split()[1]
    return name.split(" (")[0]


def speedups(tables):
    """[(label, CPU seconds / CUDA seconds, note)] of the cases measured on both."""
    cases = defaultdict(lambda: {"cpu": [], "cuda": []})
    for stem in ("gpu", "mnist", "perturbed"):
        for row in tables.get(stem, []):
            seconds = number(row, "seconds") or number(row, "seconds_per_epoch")
            if seconds is not None and row.get("device") in ("cpu", "cuda"):
                cases[stem, row["dataset"], row["estimator"]][row["device"]].append(row)
    bars = []
    for (stem, dataset, estimator), rows in cases.items():
        if not rows["cuda"] or not rows["cpu"]:
            continue
        paired = [row for row in rows["cuda"]
                  if any(cpu["machine"] == row["machine"] for cpu in rows["cpu"])]
        cuda = max(paired or rows["cuda"], key=lambda row: row["date"])
        same = [row for row in rows["cpu"] if row["machine"] == cuda["machine"]]
        cpu = max(same or rows["cpu"], key=lambda row: row["date"])
        column = "seconds" if number(cuda, "seconds") is not None else "seconds_per_epoch"
        ratio = number(cpu, column) / number(cuda, column)
        label = GPU_LABELS.get((dataset, estimator))
        if label is None:
            per = " (an epoch)" if column == "seconds_per_epoch" else ""
            label = f"{CASE_LABELS.get(estimator, estimator)}, {dataset}{per}"
        note = f"{short_machine(cuda['machine'])}, {cuda['date']}"
        if cpu["machine"] != cuda["machine"]:
            note += f"; CPU: {short_machine(cpu['machine'])}, {cpu['date']}"
        bars.append((label, ratio, note))
    return sorted(bars, key=lambda bar: bar[1])


def plot_gpu(tables, out):
    bars = speedups(tables)
    if not bars:
        return None
    fig, ax = plt.subplots(figsize=(10, 0.36 * len(bars) + 1.3))
    positions = range(len(bars))
    ratios = [ratio for _, ratio, _ in bars]
    ax.barh(positions, ratios, color=["#7d3c98" if r >= 1 else "#aaaaaa" for r in ratios])
    ax.set_yticks(list(positions), [label for label, _, _ in bars], fontsize=8)
    ax.set_xscale("log")
    ax.axvline(1, color="black", lw=0.8)
    for y, (_, ratio, note) in enumerate(bars):
        ax.text(ratio * 1.05, y, f"{ratio:.1f}x  ({note})", va="center", fontsize=7)
    ax.set_xlim(0.5, max(ratios) * 8)
    ax.set_xlabel("CPU seconds / CUDA seconds (log scale; above 1: faster on CUDA)",
                  fontsize=8.5)
    ax.tick_params(axis="x", labelsize=8)
    ax.set_title("CUDA against the CPU of the same machine (16-core host) unless said",
                 fontsize=9)
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    path = out / "gpu_speedups.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# the image sets of n_clusters_images.png, and their titles
COUNT_SETS = [("images/mnist", "MNIST, 60,000 images"),
              ("images/fashion", "Fashion-MNIST, 60,000 images"),
              ("images/mix-20", "MNIST and Fashion-MNIST, 20 classes"),
              ("images/pairs-36", "Pairs of digits, 36 classes")]


def plot_n_clusters(tables, out):
    """n_clusters_images.png: the strongest link between the clusters against
    their number, as DeepImageClustering's merges passed through it."""
    rows = tables.get("n_clusters_scores")
    if not rows:
        return None
    truth = {row["dataset"]: int(row["note"].split(" of ")[1].split("/")[0])
             for row in tables.get("n_clusters", []) if row["estimator"] == "Deep-auto"}
    shown = [(key, title) for key, title in COUNT_SETS
             if any(row["dataset"] == key for row in rows)]
    if not shown:
        return None
    fig, axes = plt.subplots(1, len(shown), figsize=(3.6 * len(shown), 3.2), squeeze=False)
    for ax, (key, title) in zip(axes[0], shown):
        mine = [row for row in rows if row["dataset"] == key]
        candidates = [int(row["candidate"]) for row in mine]
        ax.plot(candidates, [float(row["link"]) for row in mine], color=OURS_COLOUR,
                label="strongest link")
        ax.axhline(MERGE_LINK, color=OTHER_COLOUR, linestyle="--", linewidth=0.8,
                   label="threshold")
        found = int(mine[0]["found"])
        ax.axvline(found, color=OURS_COLOUR, linewidth=0.8)
        if key in truth:
            ax.axvline(truth[key], color=SKLEARN_COLOUR, linestyle=":", linewidth=1.2,
                       label="classes")
        ax.set_title(f"{title}\nfound {found}", fontsize=9)
        ax.set_xlabel("number of clusters", fontsize=8)
        ax.set_yscale("symlog", linthresh=0.01)
        ax.set_ylim(0, 1.0)
        ax.tick_params(labelsize=7)
    axes[0][0].legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    path = out / "n_clusters_images.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", default=str(RESULTS), help="folder of the CSV files")
    parser.add_argument("--out", default=str(OUT), help="folder of the PNG files")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tables = read_folder(args.results)
    if not tables:
        raise SystemExit(f"no result file (*.csv) in {args.results}")
    for path in (plot_quality(tables, out), plot_gpu(tables, out),
                 plot_n_clusters(tables, out)):
        if path is not None:
            print(f"wrote {path}")


if __name__ == "__main__":
    main()

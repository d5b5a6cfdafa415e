"""The benchmarks' own measuring code, on small sizes: a benchmark that breaks when
the package changes is found by the suite, not by the next GPU session.

``benchmarks/gpu_session.sh`` runs ``bench_torch_api.py --only checks`` on a lent
GPU, where a failure costs device time that cannot be had back; its timing of the
input checks wraps :class:`~skdiffclust._utils._torch_checks.ValueChecks`, whose
signature the blocks' checks extend.
"""

import contextlib
import importlib
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

pytestmark = pytest.mark.torch


def _benchmark(name):
    pytest.importorskip("torch", reason="the benchmark fits torch estimators")
    return _module(BENCHMARKS, name)


def _doc_figures():
    """``doc/_figures.py``, which turns the result files into the pages' figures."""
    return _module(BENCHMARKS.parent / "doc", "_figures")


def _module(folder, name):
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(folder))


@pytest.fixture(scope="module")
def bench_torch_api():
    return _benchmark("bench_torch_api")


def _small_check_cases(bench):
    graph = bench.prcut_graph(n_samples=600)
    return [bench.prcut_cases(graph, batch_size=64, n_clusters=5)[0],
            bench.gemini_case("mmd_ovo", 64), bench.gemini_case("wasserstein_ova", 16),
            bench.clam_case(batch_size=32, n_features=8, n_clusters=4, n_steps=2),
            bench.clam_inference_case(batch_size=32, n_features=8, n_clusters=4, n_steps=2)]


class _Clock:
    """A stand-in for ``time.perf_counter`` that moves only when told: the timings
    of the benchmark's code become exact."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        return self.now


def test_the_checks_section_times_every_blocks_checks(bench_torch_api, monkeypatch):
    """``time_in_checks`` is the time spent inside the value checks per step: each
    check call taking one second of a fake clock, the number of calls per step."""
    import torch

    from skdiffclust._utils._torch_checks import ValueChecks

    clock = _Clock()
    monkeypatch.setattr(bench_torch_api, "time", clock)
    checks, calls = ValueChecks.__call__, [0]

    def one_second(self, *args, **kwargs):  # a check that takes a second
        calls[0] += 1
        clock.now += 1.0
        return checks(self, *args, **kwargs)

    monkeypatch.setattr(ValueChecks, "__call__", one_second)
    cpu = torch.device("cpu")
    for name, make_step in _small_check_cases(bench_torch_api):
        step = make_step(cpu)
        with bench_torch_api.input_checks("auto"):  # the checks of one step, counted
            step()
            calls[0] = 0
            step()
        per_step = calls[0]
        assert per_step >= 1, name  # the step goes through the checks
        spent = bench_torch_api.time_in_checks(step, cpu, n_steps=3)
        assert spent == float(per_step), name
        assert ValueChecks.__call__ is one_second  # and the checks are restored after


def test_the_checks_section_times_each_mode(bench_torch_api, monkeypatch):
    """``interleaved_times``: a step costing 2 s of a fake clock without checks and 3 s
    with them is timed at exactly that, one step or several per block."""
    import torch

    from skdiffclust._utils import _torch_checks

    clock = _Clock()
    monkeypatch.setattr(bench_torch_api, "time", clock)
    cost = {"off": 2.0, "auto": 3.0}
    cpu = torch.device("cpu")
    name, make_step = bench_torch_api.gemini_case("mmd_ovo", 64)
    real_step = make_step(cpu)

    def step():  # the real step, under the mode the benchmark set
        real_step()
        clock.now += cost[_torch_checks._MODE["value"]]

    for block_seconds in (0.001, 10.0):  # 1 step per block, then 3
        times = bench_torch_api.interleaved_times(
            step, cpu, ("off", "auto"), repeats=2, block_seconds=block_seconds)
        assert times == cost


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # 5 epochs
def test_bench_prcut_compares_on_the_knn_graph_whatever_graph_prcut_trains_on(capsys):
    """On the digits PRCut's default start reads the shared-neighbour weights and
    trains on them; the case still scores every row on the kNN graph that
    SpectralClustering clusters (it asserted that PRCut trained on that graph)."""
    from sklearn.datasets import load_digits

    bench_prcut = _benchmark("bench_prcut")
    X, y = load_digits(return_X_y=True)
    rows = bench_prcut.run_case("digits", X[:600], y[:600], {"PRCut": dict(max_iter=5)},
                                True, "digits-600")
    printed = capsys.readouterr().out
    assert "shared neighbours" in printed and "SpectralClustering (+ graph)" in printed
    # the result file's rows (--csv): one per fit, scored on the same graph
    assert [r["estimator"] for r in rows] == ["PRCut", "SpectralClustering"]
    assert 1 <= rows[0]["epochs"] <= 5 and all(r["dataset"] == "digits-600" for r in rows)
    assert all(0.5 < r["ari"] <= 1 and r["ratio_cut"] > 0 and r["peak_mib"] >= 0 for r in rows)


def test_bench_prcut_small_writes_a_row_per_estimator_and_case(monkeypatch):
    """``--small --csv``: the rows the guide's table of small data quotes, PRCut's
    with its epochs, each with the mean and the lowest ARI over the seeds."""
    bench_prcut = _benchmark("bench_prcut")
    monkeypatch.setattr(bench_prcut, "SMALL", {
        name: bench_prcut.SMALL[name] for name in ("two moons", "iris")})
    rows = bench_prcut.run_small(repeats=2)
    assert [(r["dataset"], r["estimator"]) for r in rows] == [
        ("small-two moons", "PRCut"), ("small-two moons", "SpectralClustering"),
        ("small-iris", "PRCut"), ("small-iris", "SpectralClustering")]
    assert rows[0]["ari"] == 1.0 and rows[1]["ari"] == 1.0  # the moons, found by both
    assert all(0 < r["ari_min"] <= r["ari"] for r in rows)
    assert rows[0]["epochs"] >= 0 and rows[1]["epochs"] is None


def test_bench_mnist_unbalanced_copy_shrinks_the_classes_geometrically():
    """``--imbalance R``: class c keeps m * R ** (-c / 9) of its images (m the
    smallest class's count), in the training and the test images alike, and the
    images kept are the class's own."""
    import numpy as np

    bench_mnist = _benchmark("bench_mnist")
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(10), 50 + np.arange(10))  # the smallest class: 50
    images = rng.random((labels.size, 4, 4)).astype(np.float32)
    images[:, 0, 0] = labels  # each image says its class
    data = bench_mnist.Mnist(images, labels, images[::2], labels[::2])
    kept = bench_mnist.unbalanced(data, 10.0)
    assert np.bincount(kept.train_labels).tolist() == [50, 39, 30, 23, 18, 14, 11, 8, 6, 5]
    assert np.bincount(kept.test_labels).tolist() == [25, 19, 15, 12, 9, 7, 5, 4, 3, 2]
    for x, y in ((kept.train_images, kept.train_labels), (kept.test_images, kept.test_labels)):
        assert np.array_equal(x[:, 0, 0], y)
        assert len(np.unique(x.reshape(len(x), -1), axis=0)) == len(x)  # no image twice


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc and glibc")
def test_bench_mnist_counts_a_cases_peak_after_memory_freed_by_another():
    # glibc kept an earlier case's freed blocks, the next case reused them, and its
    # peak read low (1.5 MB where 56 MB were allocated)
    import numpy as np

    bench_mnist = _benchmark("bench_mnist")
    earlier = [np.ones(10_000) for _ in range(10_000)]  # 80 KB blocks: in the heap
    kept = np.ones(10_000)  # above them: the heap's top cannot shrink back
    del earlier
    with bench_mnist.PeakMemory() as memory:
        later = [np.ones(10_000) for _ in range(5_000)]  # 400 MB
        del later
    assert memory.above > 300 * 2**20  # 0.1 MB without returning the freed memory
    del kept


def test_bench_mnist_graph_neighbours_counts_the_neighbours_of_a_point_s_class():
    """The guide quotes the share of an image's nearest neighbours of its class
    (``graph-neighbours``): the point itself is not its own neighbour, and on the
    digits both graphs' neighbours are mostly of the class."""
    import numpy as np

    cases = _benchmark("_mnist_cases")
    points = np.array([[0.0], [1.0], [3.0], [10.0], [11.0], [13.0]])
    # nearest: 1, 0, 1 (another class), 11, 10, 11
    assert cases.share_of_own_class(points, np.array([0, 0, 1, 1, 1, 1]), 1) == 5 / 6
    fit = cases.graph_neighbours(_benchmark("_mnist_data").load_digits_images())
    assert fit.labels.shape == fit.truth.shape == (1797,)
    assert 0.9 < fit.extra["neighbours in class"] <= 1
    assert 0.9 < fit.extra["pixels neighbours in class"] <= 1


def test_the_memory_benchmarks_write_the_figures_the_guide_quotes(tmp_path, monkeypatch):
    """``--csv``: the result files the pages quote the peak memory from (the blobs,
    the dense affinity, SparseGEMINI's fit, the forest's partial labels), one row per
    fit, with its ARI and peak."""
    import csv

    bench_scale = _benchmark("bench_scale")
    path = tmp_path / "scale.csv"
    monkeypatch.setattr(sys, "argv", ["bench_scale.py", "--only", "prcut", "--sizes",
                                      "2000", "--exact-max-n", "0", "--csv", str(path)])
    monkeypatch.setattr(bench_scale, "RESULT_ROWS", [])
    bench_scale.main()
    (row,) = list(csv.DictReader(path.open()))
    assert (row["dataset"], row["estimator"], row["device"]) == ("blobs-2000", "PRCut", "cpu")
    assert float(row["ari"]) > 0.9 and float(row["peak_mib"]) >= 0

    # out of core: one row per stream, the file's pages apart, in a fresh process
    monkeypatch.setattr(sys, "argv", ["bench_scale.py", "--memmap", "--memmap-rows", "20000",
                                      "--chunk-rows", "5000", "--memmap-estimators",
                                      "MiniBatchKMeans", "--csv", str(path)])
    monkeypatch.setattr(bench_scale, "RESULT_ROWS", [])
    bench_scale.main()
    rows = {r["dataset"]: r for r in csv.DictReader(path.open())}
    assert set(rows) == {"blobs-2000", "memmap-20000-by-5000"}, "a rerun keeps the other rows"
    row = rows["memmap-20000-by-5000"]
    assert row["estimator"] == "MiniBatchKMeans.partial_fit" and float(row["ari"]) > 0.5
    assert 0 <= float(row["file_mib"]) <= float(row["peak_mib"]) + 1

    path = tmp_path / "prcut.csv"
    _benchmark("bench_prcut").run_memory([400], csv=str(path))
    (row,) = list(csv.DictReader(path.open()))
    assert row["dataset"] == "dense-affinity-400"
    assert float(row["input_mib"]) == 400 * 400 * 8 / 2**20
    assert float(row["peak_ratio"]) == pytest.approx(
        float(row["peak_mib"]) / float(row["input_mib"]), rel=1e-8)

    path = tmp_path / "gemini.csv"
    monkeypatch.setattr(sys, "argv", ["bench_gemini.py", "--memory", "--n-samples", "500",
                                      "--predict-rows", "5000", "--csv", str(path)])
    _benchmark("bench_gemini").main()
    rows = {r["estimator"]: r for r in csv.DictReader(path.open())}
    predict = rows.pop("SparseGEMINI-1200-100")
    assert set(rows) == {"SparseGEMINI", "SparseGEMINI-linear", "SparseGEMINI-exact-rbf"}
    assert all(r["dataset"] == "blobs-500" and float(r["numpy_mib"]) > 0 for r in rows.values())
    # predict_proba keeps a block's activations, not every row's (5,000 x 1,300 float64)
    assert float(predict["activations_mib"]) == pytest.approx(5000 * 1300 * 8 / 2**20)
    assert 0 < float(predict["numpy_mib"]) < float(predict["activations_mib"]) / 2

    bench_forest = _benchmark("bench_forest")
    row = bench_forest.memory_case(n=200, n_labels=100)
    # 100 labels of 2 samples: every pair but the 100 within a label, 16 bytes each
    assert row["pairs_mib"] == (200 * 199 // 2 - 100) * 16 / 2**20
    assert 0 < row["numpy_mib"] < row["pairs_mib"]
    row = bench_forest.predict_case(n=2_000, n_queries=10)
    assert row["dataset"] == "predict-10-of-2000" and row["first_seconds"] > 0


def test_bench_forest_writes_each_sizes_timings_and_the_page_tabulates_them():
    """The single-linkage table: ours equal to scikit-learn's single linkage (ARI 1),
    a row per peer that ran, and the page's row names the fastest of them."""
    import numpy as np

    bench_forest = _benchmark("bench_forest")
    X = np.random.default_rng(0).standard_normal((300, 3))
    est = bench_forest.SpanningForestClustering(n_clusters=5)
    rows = bench_forest.run_case(X, "300 x 3", "features", bench_forest.feature_peers(X, 5),
                                 lambda: est.fit(X).labels_, {"scipy": 100}, 1)
    ours, *peers = rows
    assert ours["estimator"] == "SpanningForestClustering" and ours["ari"] == 1.0
    assert "scipy" not in {row["estimator"] for row in peers}, "skipped above its limit"
    assert {"sklearn", "quitefastmst (tree only)"} <= {row["estimator"] for row in peers}

    figures = _doc_figures()
    text = [{k: str(v) for k, v in row.items()} for row in rows]
    other = {"dataset": "predict-1-of-2", "estimator": "x", "seconds": "1"}
    header, line = figures.forest_table(text + [other])
    tree = next(row for row in peers if row["estimator"] == "quitefastmst (tree only)")
    fastest = min((row for row in peers if row is not tree), key=lambda row: row["seconds"])
    assert line[:3] == ["300 x 3", figures.seconds(ours["seconds"]), fastest["estimator"]]
    assert line[4] == figures.ratio(fastest["seconds"] / ours["seconds"])
    assert line[5] == figures.seconds(tree["seconds"])


def test_bench_perturbed_small_problems_run_on_one_thread(monkeypatch):
    """``--small``: a row per size and one for an epoch, timed on one thread, the
    thread counts given back after."""
    import numba
    import numpy as np
    import torch
    from sklearn.utils import Bunch

    bench = _benchmark("bench_perturbed")
    images = np.random.default_rng(0).uniform(size=(128, 16))
    monkeypatch.setattr(bench, "load_digits",
                        lambda: Bunch(data=images * 16, target=np.arange(128) % 10))
    seen = []
    step = bench.loss_step
    monkeypatch.setattr(bench, "loss_step", lambda *args: (
        seen.append((torch.get_num_threads(), numba.get_num_threads())), step(*args)))
    before = torch.get_num_threads(), numba.get_num_threads()
    rows = bench.small_rows(sizes=(16, 32), n_samples=4, repeats=2)
    assert set(seen) == {(1, 1)}
    assert (torch.get_num_threads(), numba.get_num_threads()) == before
    assert [row["dataset"] for row in rows] == [
        "n = 16, 4 samples, one thread", "n = 32, 4 samples, one thread",
        "digits, an epoch, one thread"]
    assert all(row["seconds"] > 0 for row in rows)


def test_bench_clam_writes_each_variants_silhouettes_and_the_pages_count_its_wins(
        monkeypatch):
    """``bench_clam.py --csv``: k-means' row and each variant's, whose silhouette is
    the median of its seeds' best over the grid; the pages count the datasets where
    most seeds reach k-means'."""
    import argparse

    from sklearn.datasets import make_blobs

    bench = _benchmark("bench_clam")
    X, _ = make_blobs(120, 4, centers=3, random_state=0)
    monkeypatch.setattr(bench, "load", lambda name: (X, 3))
    monkeypatch.setattr(bench, "PAPER_BETAS", [1.0])
    args = argparse.Namespace(datasets="blobs", seeds=2, ablation=False)
    kmeans, *variants = bench.uci(args)
    assert kmeans["estimator"] == "KMeans" and kmeans["silhouette"] > 0.5
    assert [row["estimator"] for row in variants] == ["ClAM", "ClAM paper"]
    for row in variants:
        assert row["seeds"] == 2 and 1 <= row["occupied_min"] <= row["occupied_max"] <= 3
        assert row["kmeans_ratio"] == pytest.approx(row["seconds"] / kmeans["seconds"])

    figures = _doc_figures()
    text = [{k: str(v) for k, v in {**row, "date": "2026-01-01"}.items()}
            for row in [kmeans] + variants]
    found = figures.clam_figures(text)
    for row in variants:
        name = f"clam-uci-{figures.slug(row['estimator'])}"
        assert found[f"{name}-wins"] == str(int(2 * row["seeds_at_least_kmeans"] > 2))
        ratio = figures.times(row["kmeans_ratio"])
        assert found[f"{name}-ratio-range"] == ratio  # one dataset: one ratio


def test_bench_torch_api_writes_each_steps_time_and_each_blocks_checks(bench_torch_api):
    """``bench_torch_api.py --csv``: a row per step and per block's checks on the CPU,
    the share inside the checks a fraction of the step; the pages quote the largest
    share, and tabulate the digits example's rows."""
    import argparse

    args = argparse.Namespace(repeats=1, threads=1)
    steps = bench_torch_api.steps(args)
    assert [row["estimator"] for row in steps] == [
        "PRCutLoss", "PRCutBatchPairs", "gemini_loss mmd_ovo",
        "gemini_loss wasserstein_ova", "ClAMLayer + clam_loss"]
    assert all(row["device"] == "cpu" and row["seconds"] > 0 for row in steps)
    checks = bench_torch_api.checks(args)
    assert len(checks) == 5 and all(0 < row["in_checks_share"] < 1 for row in checks)

    figures = _doc_figures()
    digits = {"dataset": "digits", "estimator": "KMeans", "device": "cpu", "acc": 0.5,
              "nmi": 0.25, "ari": 0.125, "seconds": 2.0}
    text = [{k: str(v) for k, v in {**row, "date": "2026-01-01"}.items()}
            for row in steps + checks + [digits]]
    largest = max(row["in_checks_share"] for row in checks)
    assert figures.torch_api_figures(text) == {
        "torch-api-checks-cpu-max-share": f"{largest:.1%}"}
    assert figures.torch_digits_table(text)[1] == ["KMeans", "0.500", "0.250", "0.125",
                                                   "2.00 s"]


def test_bench_neighbors_writes_each_search_and_the_page_tabulates_them(monkeypatch):
    """``bench_neighbors.py --csv``: a row per case and search, the exact search's
    recall 1; the page's table has a column per search."""
    import numpy as np

    bench = _benchmark("bench_neighbors")
    monkeypatch.setattr(bench, "first_call_seconds", lambda library: [0.0, 0.0])
    Z = np.random.default_rng(0).standard_normal((3000, 8))
    rows = bench.run_libraries([("blobs 3,000 x 8", Z, 5)], 1, ["skdiffclust", "exact"])
    assert [(row["dataset"], row["estimator"]) for row in rows] == [
        ("blobs 3,000 x 8 k=5", "skdiffclust"), ("blobs 3,000 x 8 k=5", "exact")]
    assert rows[1]["recall"] == 1.0 and 0.5 < rows[0]["recall"] <= 1.0

    figures = _doc_figures()
    text = [{k: str(v) for k, v in {**row, "date": "2026-01-01"}.items()} for row in rows]
    header, line = figures.neighbors_table(text)
    assert header[:3] == ["case", "skdiffclust IVF", "exact"]
    assert line[2] == f"{figures.seconds(rows[1]['cpu_seconds'])}, recall 1.000"
    assert line[3:] == ["--"] * 3, "searches not run"


def test_bench_quality_writes_each_seeds_mean_and_the_pages_quote_their_spread(tmp_path):
    """``--seeds-csv``: a row per seed and estimator, named by the batteries' group;
    the pages quote the mean over the seeds, its spread and ClAM against KMeans."""
    import argparse
    import csv

    bench = _benchmark("bench_quality")
    path = tmp_path / "quality_seeds.csv"
    args = argparse.Namespace(batteries="sipu,fcps,uci", load_start=None)
    means = {0: {"ClAM": 0.50, "KMeans": 0.52}, 1: {"ClAM": 0.56, "KMeans": 0.52}}
    bench.write_seeds_csv(str(path), means, ["ClAM", "KMeans"], args, 33)
    rows = list(csv.DictReader(path.open()))
    assert [(row["dataset"], row["estimator"]) for row in rows] == [
        ("development seed 0", "ClAM"), ("development seed 0", "KMeans"),
        ("development seed 1", "ClAM"), ("development seed 1", "KMeans")]

    found = _doc_figures().quality_seeds_figures(rows)
    assert found["quality-seeds-development-clam-ari"] == "0.530"
    assert found["quality-seeds-development-clam-spread"] == "0.060"
    assert found["quality-seeds-development-kmeans-spread"] == "0.000"
    assert found["quality-seeds-development-seeds"] == "2"
    assert found["quality-seeds-development-clam-vs-kmeans"] == \
        "level with KMeans' (0.53 against 0.52)"


def test_bench_stability_writes_each_datasets_pairs_and_the_page_tabulates_them():
    """``bench_stability.py --csv``: a row per dataset and estimator with its pairwise
    ARIs; the page's table gives each group's mean and its lowest dataset."""
    bench = _benchmark("bench_stability")
    results = [("sipu/a", {"ClAM": [1.0, 1.0, 1.0], "GMM": [1.0, 0.5, 0.75]},
                {"ClAM": 0.9, "GMM": 0.8}, {"ClAM": 1.0, "GMM": 2.0}),
               ("wut/b", {"ClAM": [0.5, 0.5, 1.0]}, {"ClAM": 0.7}, {"ClAM": 1.0})]
    rows = bench.result_rows(results)
    assert [(row["dataset"], row["estimator"]) for row in rows] == [
        ("sipu/a", "ClAM"), ("sipu/a", "GMM"), ("wut/b", "ClAM")]
    assert rows[1]["pair_mean"] == 0.75 and rows[1]["pair_min"] == 0.5

    figures = _doc_figures()
    text = [{k: str(v) for k, v in {**row, "date": "2026-01-01"}.items()} for row in rows]
    header, clam, gmm = figures.stability_table(text)
    assert clam == ["ClAM", "1.000", "1.000 (sipu/a)", "0.667", "0.667 (wut/b)"]
    assert gmm == ["GaussianMixture", "0.750", "0.750 (sipu/a)", "--", "--"]
    found = figures.stability_figures(text)
    assert found["stability-evaluation-clam-lowest-dataset"] == "wut/b"
    assert found["stability-development-n"] == "1"
    # the datasets whose copies disagree: a mean pairwise ARI below 0.99
    assert found["stability-agree"] == "0.99"
    assert found["stability-evaluation-clam-disagree"] == "1"
    assert found["stability-development-clam-disagree"] == "0"
    assert found["stability-development-gmm-disagree"] == "1"


def test_bench_stability_fits_clam_without_its_clipping_too():
    """The variants the page compares ClAM with: the paper's plain gradient, from
    ClAM's starts and from k-means++ starts, at the defaults otherwise."""
    bench = _benchmark("bench_stability")
    assert {"ClAM-unclipped", "ClAM-unclipped-kmeans++"} <= set(bench.ESTIMATOR_NAMES)
    default = bench.make_estimator("ClAM", 3).get_params()
    plain = bench.make_estimator("ClAM-unclipped", 3).get_params()
    assert default["gradient_clip"] == 1.5 and plain["gradient_clip"] is None
    assert {k: v for k, v in plain.items() if v != default[k]} == {"gradient_clip": None}
    assert bench.make_estimator("ClAM-unclipped-kmeans++", 3).init == "k-means++"
    rows = bench.result_rows([("sipu/a", {"ClAM-unclipped": [1.0, 0.9, 0.8]},
                               {"ClAM-unclipped": 0.9}, {"ClAM-unclipped": 1.0})])
    text = [{k: str(v) for k, v in {**row, "date": "2026-01-01"}.items()} for row in rows]
    assert _doc_figures().stability_table(text)[1][0] == "ClAM, gradient_clip=None"


def test_the_mnist_pages_count_the_settings_where_clam_reaches_kmeans():
    """bench_mnist.py's ``clam`` and ``clam-raw`` rows: each setting's NMI and
    silhouette against k-means' counted, the largest difference, and each case's
    columns quotable (ClAM's ``beta_`` too)."""
    figures = _doc_figures()
    rows = [{"dataset": "mnist", "estimator": "clam", "device": "cpu", "date": "2026-01-01",
             "clam_nmi_10k": "0.5", "kmeans_nmi_10k": "0.4", "clam_sc_10k": "0.1",
             "kmeans_sc_10k": "0.2", "clam_nmi_60k": "0.5", "kmeans_nmi_60k": "0.5",
             "cpu_ratio_10k": "2.04", "clam_cpu_s_10k": "1.5", "clam_beta_10k": "0.01234"},
            {"dataset": "fashion-mnist", "estimator": "clam-raw", "device": "cpu",
             "date": "2026-01-01", "clam_nmi_raw_60k": "0.3", "kmeans_nmi_raw_60k": "0.31"}]
    found = figures.against_kmeans_figures(rows)
    assert (found["mnist-clam-nmi-wins"], found["mnist-clam-nmi-settings"]) == ("2", "3")
    assert (found["mnist-clam-sc-wins"], found["mnist-clam-sc-settings"]) == ("0", "1")
    assert found["mnist-clam-cpu-ratio-range"] == "2.0"
    assert (found["mnist-clam-nmi-gap"], found["mnist-clam-sc-gap"]) == ("0.100", "0.100")
    cells = figures.row_figures("mnist", rows)
    assert cells["mnist-clam-clam-beta-10k"] == "0.0123"
    assert cells["mnist-clam-cpu-ratio-10k"] == "2.0"
    assert cells["mnist-clam-clam-cpu-s-10k"] == "1.50 s"
    assert cells["fashion-mnist-clam-raw-kmeans-nmi-raw-60k"] == "0.310"


def _image_row(dataset, estimator, found, classes, seconds):
    return {"dataset": f"images/{dataset}", "estimator": estimator, "device": "cpu",
            "date": "2026-01-01", "n_found": str(found), "seconds": str(seconds),
            "note": f"found {found} of {classes}"}


def test_the_count_of_images_is_summarised_over_the_check_half_from_the_result_files():
    """The check half's sets (as the battery names them) counted exactly, too high
    or too low, beside k-means by silhouette; the CPU ratio to the fit given the
    number; the warnings read from the merges' links; sets of the tuning half and
    the whole sets left out."""
    figures = _doc_figures()
    rows = [_image_row("mnist-t-49", "Deep-auto", 3, 2, 30),
            _image_row("mnist-t-49", "Deep", 2, 2, 10),
            _image_row("mnist-test", "Deep-auto", 10, 10, 40),
            _image_row("mnist-test", "Deep", 10, 10, 20),
            _image_row("pairs-40-tiny", "Deep-auto", 27, 40, 8),
            _image_row("pairs-40-tiny", "KMeans-silhouette-Deep", 27, 40, 1),
            _image_row("mnist-test", "KMeans-silhouette-Deep", 12, 10, 1),
            _image_row("digits", "Deep-auto", 14, 10, 5),  # the tuning half
            _image_row("mnist", "Deep-auto", 11, 10, 500)]  # a whole set
    scores = [{"dataset": "images/mnist-test", "candidate": str(k), "link": str(link)}
              for k, link in ((9, 0.01), (10, 0.02), (11, 0.05))]
    scores += [{"dataset": "images/mnist-t-49", "candidate": str(k), "link": str(link)}
               for k, link in ((2, 0.001), (3, 0.012), (4, 0.04))]
    found = figures.check_half_figures(rows, scores)
    assert found["n-clusters-images-check-n"] == "3"
    assert found["n-clusters-images-check-exact"] == "1"
    assert found["n-clusters-images-check-exact-sets"] == "``mnist-test``"
    assert (found["n-clusters-images-check-few-over"],
            found["n-clusters-images-check-few-excess"]) == ("1", "1")
    assert found["n-clusters-images-check-many-under"] == "1"
    assert found["n-clusters-images-check-same-as-silhouette"] == "1"
    assert found["n-clusters-images-check-cpu-ratio-range"] == "2.0 to 3.0"
    assert (found["n-clusters-images-check-warned"],
            found["n-clusters-images-check-warned-exact"]) == ("1", "1")
    assert (found["n-clusters-images-check-quiet"],
            found["n-clusters-images-check-quiet-exact"]) == ("1", "0")


def test_the_plateau_of_links_near_the_threshold_is_read_from_the_merges():
    figures = _doc_figures()
    links = {2: 0.006, 3: 0.028, 4: 0.029, 5: 0.031, 6: 0.0295, 7: 0.034, 8: 0.083}
    scores = [{"dataset": "images/fashion", "candidate": str(k), "link": str(link)}
              for k, link in links.items()]
    found = figures.plateau_figures(scores)
    assert found == {"n-clusters-images-fashion-plateau": "3 to 7",
                     "n-clusters-images-fashion-plateau-next": "8",
                     "n-clusters-images-fashion-plateau-jump": "2.8"}


def _fake_mnist(bench_mnist):
    """Ten classes of 50 to 59 training images, 25 to 30 test images."""
    import numpy as np

    labels = np.repeat(np.arange(10), 50 + np.arange(10))
    images = np.zeros((labels.size, 2, 2), dtype=np.float32)
    return bench_mnist.Mnist(images, labels, images[::2], labels[::2])


@pytest.mark.parametrize("ratio", [float("nan"), float("inf"), -float("inf"), 0.5, 0.0])
def test_bench_mnist_refuses_an_imbalance_that_is_not_a_finite_ratio(ratio):
    bench_mnist = _benchmark("bench_mnist")
    with pytest.raises(ValueError, match="--imbalance must be a finite number at least 1"):
        bench_mnist.unbalanced(_fake_mnist(bench_mnist), ratio)


def test_bench_mnist_refuses_exactly_the_imbalances_that_empty_a_class(monkeypatch):
    """The last class keeps round(m / R) images: one while R < 2 m (m = 50 training
    images, 25 test images here). Over a grid of ratios, the check refuses exactly
    those for which the copy, made without it, has an empty class."""
    import numpy as np

    bench_mnist = _benchmark("bench_mnist")
    data = _fake_mnist(bench_mnist)
    assert np.bincount(data.test_labels).min() == 25
    for ratio, refused in ((49.99, False), (50.0, True), (99.99, True), (1e6, True)):
        with pytest.raises(ValueError) if refused else contextlib.nullcontext():
            bench_mnist.check_imbalance(ratio, data.train_labels, data.test_labels)
    # the training labels alone: refused from 2 m = 100 (round(0.5) = 0)
    bench_mnist.check_imbalance(99.99, data.train_labels)
    with pytest.raises(ValueError, match=r"--imbalance 100 leaves the last class without an "
                                         r"image.*m = 50.*must be below 2 m = 100"):
        bench_mnist.check_imbalance(100.0, data.train_labels)
    check = bench_mnist.check_imbalance
    # unbalanced looks the check up in the module that defines both
    monkeypatch.setattr(_benchmark("_mnist_data"), "check_imbalance", lambda *args: None)
    ratios = np.concatenate([np.linspace(1, 120, 239), [49.999999, 50.000001, 1e3, 1e300]])
    for ratio in ratios:
        copy = bench_mnist.unbalanced(data, float(ratio))
        empty = any(np.bincount(labels, minlength=10).min() == 0
                    for labels in (copy.train_labels, copy.test_labels))
        try:
            check(float(ratio), data.train_labels, data.test_labels)
        except ValueError:
            assert empty, ratio
        else:
            assert not empty, ratio


def test_bench_mnist_command_line_names_the_imbalance_it_refuses(monkeypatch, capsys):
    """``--imbalance nan`` stops at the arguments, ``--imbalance 1e6`` once the data's
    class counts are known: both with argparse's usage error, naming the option."""
    bench_mnist = _benchmark("bench_mnist")
    monkeypatch.setattr(bench_mnist, "load_mnist", lambda data_dir: _fake_mnist(bench_mnist))
    monkeypatch.setattr(bench_mnist, "run_case", _never_called)
    for value, message in (("nan", "argument --imbalance: must be a finite number at "
                                   "least 1, got nan"),
                           ("inf", "must be a finite number at least 1, got inf"),
                           ("ten", "argument --imbalance: not a number: 'ten'"),
                           ("1e6", "--imbalance 1e+06 leaves the last class without an "
                                   "image")):
        monkeypatch.setattr(sys, "argv", ["bench_mnist.py", "--only", "kmeans",
                                          "--imbalance", value])
        with pytest.raises(SystemExit) as stopped:
            bench_mnist.main()
        assert stopped.value.code == 2
        assert message in capsys.readouterr().err


def _never_called(*args):
    raise AssertionError("a case ran")


def test_result_files_replace_the_rows_a_run_measured_and_keep_the_others(tmp_path):
    """``_results.write_results``: the common columns first, the machine and the date
    filled in, a later run's rows replacing those of the same benchmark, dataset,
    estimator, device and machine, the file's other rows kept."""
    results = _benchmark("_results")
    path = tmp_path / "results" / "quality.csv"
    first = [{"dataset": "a", "estimator": "KMeans", "device": "cpu", "ari": 0.5,
              "seconds": 1.25, "k": 3},
             {"dataset": "b", "estimator": "KMeans", "device": "cpu", "ari": float("nan")}]
    assert results.write_results(path, first, "bench_x", "2-core CPU") == 2
    rows = results.read_results(path)
    assert list(rows[0])[:len(results.COLUMNS)] == results.COLUMNS
    assert rows[0]["k"] == "3" and rows[0]["machine"] == "2-core CPU"
    assert rows[0]["date"] == results.today() and rows[1]["ari"] == ""  # NaN: empty
    again = [{"dataset": "a", "estimator": "KMeans", "device": "cpu", "ari": 0.75}]
    results.write_results(path, again, "bench_x", "2-core CPU")
    results.write_results(path, again, "bench_x", "GPU host")  # another machine: kept apart
    rows = {(row["dataset"], row["machine"]): row for row in results.read_results(path)}
    assert sorted(rows) == [("a", "2-core CPU"), ("a", "GPU host"), ("b", "2-core CPU")]
    assert rows["a", "2-core CPU"]["ari"] == "0.75" and rows["a", "2-core CPU"]["k"] == ""


def test_result_files_record_the_load_and_a_comparison_replaces_every_machine(tmp_path):
    """The ``load`` column holds the run's load average; a run written without the
    machine in its key (``bench_quality.py``'s) replaces the rows of every
    machine, so that its comparison is one run."""
    results = _benchmark("_results")
    path = tmp_path / "quality.csv"
    row = {"dataset": "a", "estimator": "KMeans", "device": "cpu", "ari": 0.5}
    results.write_results(path, [row], "bench_x", "2-core CPU", load="0.50 to 3.00")
    results.write_results(path, [row], "bench_x", "GPU host")
    assert [r["load"] for r in results.read_results(path)] == ["0.50 to 3.00", ""]
    assert results.load_span(1.234, 4.5) == "1.23 to 4.50"
    assert results.load_span(None, 1.0) is None
    key = ("benchmark", "dataset", "estimator", "device")
    results.write_results(path, [dict(row, ari=0.75)], "bench_x", "idle CPU", key=key)
    (only,) = results.read_results(path)
    assert (only["machine"], only["ari"]) == ("idle CPU", "0.75")


def test_the_load_of_a_run_is_judged_without_its_own_threads(tmp_path, monkeypatch):
    """A run that keeps both cores busy itself ends at a load average of about 2: the
    pages call it idle (its threads named), and under load only where the load at
    its start, or at its end less its own threads, says another job shared the
    machine. ``save_run`` writes the run's threads to every row."""
    results, formats = _benchmark("_results"), _module(BENCHMARKS.parent / "doc",
                                                       "_figure_formats")
    monkeypatch.setattr(results, "load_average", lambda: 2.0)
    path = tmp_path / "neighbors.csv"
    results.save_run(path, [{"dataset": "a", "estimator": "x", "ari": 1.0},
                            {"dataset": "b", "estimator": "x", "threads": 1}], "bench_x",
                     0.2, threads=2)
    rows = results.read_results(path)
    assert [row["threads"] for row in rows] == ["2", "1"]

    def row(load, threads=""):
        return {"machine": "2-core x86_64 CPU", "date": "2026-12-01", "load": load,
                "threads": threads}
    assert formats.when([row("0.20 to 2.00", "2")]) == \
        "2-core CPU, 2026-12-01, idle: load average 0.2 to 2.0 with 2 threads of its own"
    assert "under load" in formats.when([row("0.20 to 2.00")])  # one thread: another job
    assert "under load" in formats.when([row("0.20 to 2.60", "2")])
    assert "under load" in formats.when([row("1.60 to 2.00", "2")])  # busy before it ran
    assert formats.when([row("0.20 to 1.10")]).endswith("idle: load average 0.2 to 1.1")


def test_bench_first_fit_rows_say_what_each_case_is():
    bench = _benchmark("bench_first_fit")
    row = bench.result_row("ClAM, 20,000 points (vectorised kernel)",
                           (14.0, 43.1, True), (2.9, 2.0, False))
    assert (row["estimator"], row["kind"], row["cold_cpu"], row["warm_cpu"]) == (
        "ClAM", "estimator", 14.0, 2.9)
    assert row["notice"] == "yes / no"
    assert bench.result_row("perturbed_spanning_forest", (1, 1, 0), (1, 1, 0))["kind"] == \
        "operator"
    assert set(bench.OPERATORS) <= set(bench.CASES)


def test_bench_mnist_reads_the_digits_as_images():
    bench_mnist = _benchmark("bench_mnist")
    data = bench_mnist.load_digits_images()
    assert data.train_images.shape == (1797, 8, 8) and data.X_train.shape == (1797, 64)
    assert 0 <= data.train_images.min() and data.train_images.max() <= 1


def test_bench_mnist_writes_its_rows_to_the_csv_file(monkeypatch, tmp_path, capsys):
    """``--csv PATH``: a row per case, ACC and NMI as printed, the data set's name."""
    bench_mnist = _benchmark("bench_mnist")
    results = _benchmark("_results")
    monkeypatch.setattr(bench_mnist, "load_mnist", lambda data_dir: _fake_mnist(bench_mnist))
    path = tmp_path / "mnist.csv"
    monkeypatch.setattr(sys, "argv", ["bench_mnist.py", "--only", "kmeans", "--data-dir",
                                      str(tmp_path / "fashion"), "--csv", str(path)])
    bench_mnist.main()
    assert f"results written to {path}" in capsys.readouterr().out
    (row,) = results.read_results(path)
    assert (row["benchmark"], row["dataset"], row["estimator"], row["device"]) == (
        "bench_mnist", "fashion", "kmeans", "cpu")
    assert 0 < float(row["acc"]) <= 1 and 0 <= float(row["nmi"]) <= 1
    assert float(row["seconds"]) > 0 and row["test_acc"] != ""


def test_bench_mnist_writes_a_cases_numeric_extras_as_columns_the_pages_quote():
    """The forest's test precision and the path's pixel count reach the result file
    (doc/user_guide/mnist.rst quotes them); text columns and flags do not."""
    bench_mnist = _benchmark("bench_mnist")
    row = {"case": "forest", "n": 10, "ACC": 0.9, "NMI": 0.8, "ARI": 0.7, "fit s": 1.0,
           "peak MiB": 5.0, "test ACC": None, "warnings": "", "precision": 0.995,
           "precision 4992": 0.996, "steps": 30000, "load 1/5 min": "1.0/1.1",
           "relaxed": True}
    (result,) = bench_mnist.result_rows([row], "mnist", "cpu")
    assert result["precision"] == 0.995 and result["precision_4992"] == 0.996
    assert result["steps"] == 30000
    assert "load_1_5_min" not in result and "relaxed" not in result
    assert result["acc"] == 0.9 and result["peak_mib"] == 5.0


def test_plot_benchmarks_draws_both_figures_from_the_result_files(tmp_path):
    """``plot_benchmarks.py`` reads ``benchmarks/results/*.csv`` and writes the two
    PNG files the benchmarks page includes; every CUDA case of the files that has
    a CPU row gets a bar."""
    pytest.importorskip("matplotlib")
    plot = _benchmark("plot_benchmarks")
    tables = plot.read_folder(plot.RESULTS)
    assert {"quality", "mnist", "gpu"} <= set(tables)
    assert plot.plot_quality(tables, tmp_path).name == "quality_time.png"
    assert plot.plot_gpu(tables, tmp_path).name == "gpu_speedups.png"
    labels = [label for label, ratio, note in plot.speedups(tables)]
    assert "ClAM, 200,000 x 32, defaults (fit)" in labels
    assert "DeepImageClustering, MNIST (fit)" in labels
    page = (plot.ROOT / "doc" / "benchmarks.rst").read_text()
    for name in ("quality_time.png", "gpu_speedups.png"):
        assert f"images/benchmarks/{name}" in page
        assert (plot.OUT / name).exists()


def test_bench_n_clusters_scores_against_the_best_labelling_and_counts_right():
    """A number found is right when it matches any reference labelling; ARI and NMI
    are against the labelling that fits best, its noise (0) left out."""
    import numpy as np
    from sklearn.datasets import make_blobs

    bench = _benchmark("bench_n_clusters")
    X, y = make_blobs(300, centers=[[0, 0], [10, 0], [0, 10]], random_state=0)
    coarse = np.where(y == 2, 1, y) + 1  # two groups
    ds = bench.Dataset("blobs", "evaluation", X, [coarse, y + 1], [2, 3])
    ari, nmi = bench.scores(ds, y)
    assert ari == nmi == 1.0
    # the largest difference of the first five eigenvalues: after the third
    fit = bench.fit_one("Spectral-eigengap", ds, max_clusters=4, threads=1)
    assert not fit.error and fit.n_found == 3 and fit.right(ds) and fit.ari == 1.0
    fit = bench.fit_one("PRCut-auto", ds, max_clusters=10, threads=1)
    assert fit.n_found == 3 and fit.right(ds)
    fit = bench.fit_one("SpanningForest-auto", ds, max_clusters=10, threads=1)
    assert not fit.error and fit.n_found == 3 and fit.ari == 1.0
    fit = bench.fit_one("SparseGEMINI-auto", ds, max_clusters=4, threads=1)
    assert fit.n_found == 3 and fit.right(ds)


def test_the_image_battery_has_two_halves_of_every_kind():
    """``_image_battery``: a tuning and a checking half, each with class subsets,
    unions, an imbalanced set and sets of 30 or more classes; the digits' sets
    load without MNIST's files, shuffled, labels 0 .. k - 1."""
    import numpy as np

    battery = _benchmark("_image_battery")
    tune, check = battery.names("tune"), battery.names("check")
    assert len(tune) >= 10 and len(check) >= 10 and not set(tune) & set(check)
    for half in (tune, check):
        assert any(name.startswith("union") for name in half)
        assert any("imb" in name for name in half)
        assert sum(name.startswith("pairs") for name in half) >= 2
    images, labels = battery.load("digits-500")
    assert images.shape == (500, 8, 8) and images.dtype == np.float32
    np.testing.assert_array_equal(np.bincount(labels), np.full(10, 50))
    assert not np.all(np.diff(labels) >= 0)  # shuffled
    again, same = battery.load("digits-500")
    np.testing.assert_array_equal(again, images)


def test_the_pairs_of_the_battery_are_two_images_side_by_side():
    import numpy as np

    battery = _benchmark("_image_battery")
    images, labels = battery.pairs("digits", "digits", 12, 5, seed=0)
    assert images.shape == (60, 8, 16) and np.bincount(labels).tolist() == [5] * 12
    digits, _ = battery.source("digits")
    left = {tuple(image.ravel()) for image in digits}
    assert all(tuple(image[:, :8].ravel()) in left for image in images)


def test_deep_auto_scores_are_written_and_drawn(tmp_path):
    """bench_n_clusters writes Deep-auto's criterion at every number of clusters
    (the strongest link), and plot_benchmarks draws it against them."""
    pytest.importorskip("matplotlib")
    import numpy as np

    bench = _benchmark("bench_n_clusters")
    ds = bench.Dataset("images/mnist", "images", np.zeros((4, 2)), [np.ones(4)], [10])
    ds.cache["deep-count"] = (np.arange(2, 6), np.array([0.0, 0.01, 0.2, 0.3]), 3)
    path = tmp_path / "n_clusters_scores.csv"
    bench.write_scores(path, [ds])
    bench.write_scores(path, [ds])  # the set's rows replaced, not repeated
    plot = _benchmark("plot_benchmarks")
    tables = plot.read_folder(tmp_path)
    assert len(tables["n_clusters_scores"]) == 4
    tables["n_clusters"] = [dict(dataset="images/mnist", estimator="Deep-auto",
                                 note="found 3 of 10")]
    assert plot.plot_n_clusters(tables, tmp_path).name == "n_clusters_images.png"

"""The benchmarks' own measuring code, on small sizes: a benchmark that breaks when
the package changes is found by the suite, not by the next GPU session.

``benchmarks/gpu_session.sh`` runs ``bench_torch_api.py --only checks`` on a lent
GPU, where a failure costs device time that cannot be had back; its timing of the
input checks wraps :class:`~skdiffclust._utils._torch_checks.ValueChecks`, whose
signature the blocks' checks extend.
"""

import importlib
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

pytestmark = pytest.mark.torch


def _benchmark(name):
    pytest.importorskip("torch", reason="the benchmark fits torch estimators")
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCHMARKS))


@pytest.fixture(scope="module")
def bench_torch_api():
    return _benchmark("bench_torch_api")


def _small_check_cases(bench):
    graph = bench.prcut_graph(n_samples=600)
    return [bench.prcut_cases(graph, batch_size=64, n_clusters=5)[0],
            bench.gemini_case("mmd_ovo", 64), bench.gemini_case("wasserstein_ova", 16),
            bench.clam_case(batch_size=32, n_features=8, n_clusters=4, n_steps=2),
            bench.clam_inference_case(batch_size=32, n_features=8, n_clusters=4, n_steps=2)]


def test_the_checks_section_times_every_blocks_checks(bench_torch_api):
    import torch

    from skdiffclust._utils._torch_checks import ValueChecks

    call = ValueChecks.__call__
    cpu = torch.device("cpu")
    for name, make_step in _small_check_cases(bench_torch_api):
        spent = bench_torch_api.time_in_checks(make_step(cpu), cpu, n_steps=2)
        assert spent > 0.0, name  # the step went through the timed checks
        assert ValueChecks.__call__ is call  # and the checks are restored after


def test_the_checks_section_times_each_mode(bench_torch_api):
    import torch

    cpu = torch.device("cpu")
    name, make_step = bench_torch_api.gemini_case("mmd_ovo", 64)
    times = bench_torch_api.interleaved_times(
        make_step(cpu), cpu, ("off", "auto"), repeats=2, block_seconds=0.001)
    assert set(times) == {"off", "auto"} and min(times.values()) > 0.0


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # 5 epochs
def test_bench_prcut_compares_on_the_knn_graph_whatever_graph_prcut_trains_on(capsys):
    """On the digits PRCut's default start reads the shared-neighbour weights and
    trains on them; the case still scores every row on the kNN graph that
    SpectralClustering clusters (it asserted that PRCut trained on that graph)."""
    from sklearn.datasets import load_digits

    bench_prcut = _benchmark("bench_prcut")
    X, y = load_digits(return_X_y=True)
    bench_prcut.run_case("digits", X[:600], y[:600], {"PRCut": dict(max_iter=5)}, True)
    printed = capsys.readouterr().out
    assert "shared neighbours" in printed and "SpectralClustering (+ graph)" in printed


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

"""PRCut against scikit-learn's SpectralClustering on the same graph, in one process.

Both cluster the same symmetric k-nearest-neighbour graph (``n_neighbors=10``):
PRCut builds it and trains on it; SpectralClustering gets it as a precomputed
affinity, and its time adds the graph's construction, timed apart. For each case
it prints the wall time, the peak memory (resident set size above the level before
the call, sampled every 10 ms), the ratio cut on the graph, the accuracy
(Hungarian matching), NMI and ARI against the true classes.

Cases: scikit-learn's digits (1,797 x 64, 10 classes), then 10 Gaussian blobs in
32 dimensions (``cluster_std=6``: overlapping enough for a connected graph) at
n = 10,000, 70,000 and 200,000. SpectralClustering is skipped above
``--sc-max-n`` samples (default 70,000); ``--full`` runs it everywhere.

Usage::

    python benchmarks/bench_prcut.py            # all cases
    python benchmarks/bench_prcut.py --quick    # digits and n = 10,000 only
"""

import argparse
import threading
import time

from scipy.optimize import linear_sum_assignment
from sklearn.cluster import SpectralClustering
from sklearn.datasets import load_digits, make_blobs
from sklearn.metrics import adjusted_rand_score, confusion_matrix
from sklearn.metrics import normalized_mutual_info_score

from skdiffclust.prcut import PRCut, ratio_cut
from skdiffclust.prcut._graph import knn_affinity

N_NEIGHBORS = 10
N_CLUSTERS = 10
BLOB_SIZES = [10_000, 70_000, 200_000]
# the paper's settings, then annealing with a small gamma (the lower ratio cut)
DIGITS_SETTINGS = {
    "PRCut": {},
    "PRCut MLP (256,)": {"hidden_layer_sizes": (256,)},
    "PRCut annealed, gamma=1": {"gamma": 1.0, "annealing": 0.8, "n_init": 10},
}


def hungarian_accuracy(y_true, y_pred):
    counts = confusion_matrix(y_true, y_pred)
    rows, cols = linear_sum_assignment(-counts)
    return counts[rows, cols].sum() / len(y_true)


def _rss_bytes():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


def measured(fn):
    """(seconds, peak RSS increase in bytes, result) of fn()."""
    baseline = _rss_bytes()
    peak = [baseline]
    done = threading.Event()

    def sample():
        while not done.wait(0.01):
            peak[0] = max(peak[0], _rss_bytes())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.perf_counter()
    try:
        result = fn()
    finally:
        seconds = time.perf_counter() - start
        done.set()
        sampler.join()
    peak[0] = max(peak[0], _rss_bytes())
    return seconds, peak[0] - baseline, result


def scores(W, y, labels):
    return dict(rc=ratio_cut(W, labels), acc=hungarian_accuracy(y, labels),
                nmi=normalized_mutual_info_score(y, labels),
                ari=adjusted_rand_score(y, labels))


def row(name, seconds, memory, s):
    print(f"  {name:<38} {seconds:8.1f} s {memory / 2**20:8.0f} MiB   "
          f"RC={s['rc']:8.3f}  ACC={s['acc']:.3f}  NMI={s['nmi']:.3f}  "
          f"ARI={s['ari']:.3f}")


def run_case(title, X, y, prcut_settings, run_spectral):
    """prcut_settings: {row name: PRCut parameters}, each run and printed."""
    print(f"\n{title}")
    W = first_seconds = None
    for name, params in prcut_settings.items():
        seconds, memory, model = measured(
            lambda: PRCut(n_clusters=N_CLUSTERS, n_neighbors=N_NEIGHBORS,
                          random_state=0, device="cpu", **params).fit(X))
        if W is None:
            W = model.affinity_matrix_
            graph_bytes = W.data.nbytes + W.indices.nbytes + W.indptr.nbytes
            print(f"  graph: {W.nnz:,} stored entries ({graph_bytes:,} bytes); a dense "
                  f"n x n float64 matrix would take {8 * X.shape[0] ** 2:,} bytes")
        row(f"{name} ({model.n_iter_} steps)", seconds, memory,
            scores(W, y, model.labels_))
        first_seconds = first_seconds or seconds
    if not run_spectral:
        print(f"  {'SpectralClustering':<38} skipped (--sc-max-n; --full to run it)")
        return
    graph_seconds, graph_memory, W_sc = measured(lambda: knn_affinity(X, N_NEIGHBORS))
    assert (W_sc != W).nnz == 0  # the very same graph
    sc_seconds, sc_memory, spectral = measured(
        lambda: SpectralClustering(N_CLUSTERS, affinity="precomputed",
                                   random_state=0).fit(W_sc))
    row("SpectralClustering (+ graph)", graph_seconds + sc_seconds,
        max(graph_memory, sc_memory), scores(W, y, spectral.labels_))
    ratio = (graph_seconds + sc_seconds) / first_seconds
    print(f"  time SpectralClustering / {next(iter(prcut_settings))} = {ratio:.2f}x")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="digits and n=10,000 only")
    parser.add_argument("--full", action="store_true",
                        help="SpectralClustering at all sizes")
    parser.add_argument("--sc-max-n", type=int, default=70_000)
    args = parser.parse_args()

    X, y = load_digits(return_X_y=True)
    # warm-up: torch's first call pays for its lazy initialisation
    PRCut(n_clusters=2, max_iter=5, device="cpu", random_state=0).fit(X[:100])
    run_case("digits: n=1,797, d=64", X, y, DIGITS_SETTINGS, True)
    for n in BLOB_SIZES[:1] if args.quick else BLOB_SIZES:
        X, y = make_blobs(n, 32, centers=N_CLUSTERS, cluster_std=6.0, random_state=0)
        run_case(f"blobs: n={n:,}, d=32", X, y, {"PRCut": {}},
                 args.full or n <= args.sc_max_n)


if __name__ == "__main__":
    main()

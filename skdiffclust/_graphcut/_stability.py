"""How reproducible the partitions of a graph are at each candidate number of
clusters: the measure of ``n_clusters='auto'`` on images (and wherever the graph's
degrees are skewed by hubs).

For a candidate k, the samples are embedded by the graph's top ``2 k``
eigenvectors (the spectral embedding ``D^-1/2 V`` of the normalised adjacency,
each row scaled to unit length, as in Ng, Jordan & Weiss, 2001), and k-means
from one k-means++ start partitions the embedding, :data:`STABILITY_RUNS` times
from different seeds. The candidate's **stability** is the mean adjusted Rand
index between the runs' partitions, over all pairs of runs (Ben-Hur, Elisseeff &
Guyon, 2002; von Luxburg, 2010, measure stability by such agreement). Where the
data hold k groups, k-means++ finds the same partition from nearly every start;
with fewer clusters which groups to join is arbitrary, with more which group to
cut, and the runs disagree. The embedding is twice as wide as the candidate:
with k eigenvectors, k-means on few clusters agrees with itself whatever the
data (a circle cut in two), and a fixed width favours the largest candidates.

The eigenvectors are those of the start's solver (``_spectral.top_eigenvectors``),
computed once for the widest candidate. Above :data:`STABILITY_SAMPLE` samples
the runs partition a sample of the rows, drawn once with the seed. The graph's
products go on ``n_threads`` threads; the runs on one (OpenMP and BLAS), so that
the measure does not depend on the count.
"""

import contextlib
import warnings
from typing import NamedTuple

import numpy as np
import torch
from sklearn.cluster import KMeans
from threadpoolctl import threadpool_limits

from skdiffclust._training._torch import one_thread
from skdiffclust._graphcut._graph import graph_measures
from skdiffclust._graphcut._spectral import NormalisedAdjacency, top_eigenvectors

# k-means runs per candidate (pairs of runs compared: RUNS * (RUNS - 1) / 2)
STABILITY_RUNS = 20
# the embedding's width, in multiples of the candidate
STABILITY_WIDTH = 2
# rows the runs partition, at most (a sample, drawn once)
STABILITY_SAMPLE = 6000


class CandidateMeasures(NamedTuple):
    """What :class:`PartitionStability` measures of each candidate number of
    clusters: the ``stability`` of its partitions, and the ``modularity`` and
    relative ``cut`` (:func:`graph_measures`) of its first run's partition of
    every sample."""

    stability: np.ndarray
    modularity: np.ndarray
    cut: np.ndarray


class PartitionStability:
    """The stability of the partitions of ``graph`` (a symmetric CSR affinity) at
    candidate numbers of clusters up to ``largest`` (see the module's docstring),
    and how well the graph separates them. The spectral embedding, the sample and
    the runs' seeds are drawn once, with ``seed``; the graph's products go on
    ``n_threads`` threads (the results do not depend on it)."""

    def __init__(self, graph, largest, *, device, seed, n_threads=1):
        self.graph, self.n_threads = graph, n_threads
        self.embedding = _spectral_embedding(graph, largest, device, seed, n_threads)
        rng = np.random.default_rng(seed)
        n_samples = self.embedding.shape[0]
        self.rows = (np.sort(rng.choice(n_samples, STABILITY_SAMPLE, replace=False))
                     if n_samples > STABILITY_SAMPLE else np.arange(n_samples))
        self.run_seeds = rng.integers(0, 2**31 - 1, size=STABILITY_RUNS)

    def directions(self, n_clusters, rows=None):
        """The unit rows of the embedding ``STABILITY_WIDTH`` times ``n_clusters``
        wide (the sample's, or ``rows``')."""
        width = min(STABILITY_WIDTH * n_clusters, self.embedding.shape[1])
        return _unit_rows(self.embedding[self.rows if rows is None else rows, :width])

    def __call__(self, candidates):
        """The :class:`CandidateMeasures` of the candidates."""
        measures = np.empty((len(candidates), 3))
        every_sample = np.arange(self.graph.shape[0])
        with _one_thread_each():
            for index, k in enumerate(int(k) for k in candidates):
                directions = self.directions(k)
                runs = [_kmeans(directions, k, seed) for seed in self.run_seeds]
                labels = runs[0].predict(self.directions(k, every_sample))
                measures[index] = (mean_pairwise_ari([run.labels_ for run in runs]),
                                   *graph_measures(self.graph, labels, k))
        return CandidateMeasures(*measures.T.copy())


def partition_stability(graph, candidates, *, device, seed, n_threads=1):
    """The stability of each candidate number of clusters of ``graph`` (a
    symmetric CSR affinity): the mean adjusted Rand index between the partitions
    of :data:`STABILITY_RUNS` k-means runs on its spectral embedding, each from
    one seeded k-means++ start (:class:`PartitionStability`).

    Parameters
    ----------
    graph : scipy.sparse.csr_matrix of shape (n_samples, n_samples)
    candidates : ndarray of int
        The numbers of clusters, increasing, at most ``n_samples - 1`` (the
        embedding is at most ``n_samples - 1`` wide).
    device : torch.device
        Where the eigenvectors are computed.
    seed : int
        Seeds the eigenvectors' solver, the sample and the runs.
    n_threads : int, default=1
        Threads of the graph's products (the result does not depend on it).

    Returns
    -------
    stability : ndarray of float64, shape (n_candidates,)
    """
    return PartitionStability(graph, int(candidates[-1]), device=device, seed=seed,
                              n_threads=n_threads)(candidates).stability


@contextlib.contextmanager
def _one_thread_each():
    """The k-means runs on one OpenMP and one BLAS thread: their sums do not
    depend on the count. (The limits hold in the calling thread only, so the runs
    stay in it.)"""
    with threadpool_limits(1, user_api="openmp"), threadpool_limits(1, user_api="blas"):
        yield


def _spectral_embedding(graph, largest, device, seed, n_threads):
    """``D^-1/2 V`` of the top ``STABILITY_WIDTH`` times ``largest`` eigenvectors
    (at most ``n_samples - 1``), float64 on the host."""
    device = torch.device(device)
    dtype = torch.float32 if device.type == "cuda" else torch.float64
    width = int(min(STABILITY_WIDTH * largest, graph.shape[0] - 1))
    with one_thread(device):
        operator = NormalisedAdjacency(graph, device, dtype, n_threads)
        vectors = top_eigenvectors(operator, width, seed)
        maps = operator.inverse_sqrt * vectors + operator.isolated * vectors
    return maps.detach().to("cpu", torch.float64).numpy()


def _unit_rows(maps):
    norms = np.linalg.norm(maps, axis=1, keepdims=True)
    return maps / np.maximum(norms, np.finfo(np.float64).tiny)


def _kmeans(directions, n_clusters, seed):
    """One k-means run from one k-means++ start: the fitted model."""
    with warnings.catch_warnings():
        # fewer distinct rows than clusters: the partition is what it is
        warnings.simplefilter("ignore")
        return KMeans(n_clusters, n_init=1, random_state=int(seed)).fit(directions)


def mean_pairwise_ari(partitions):
    """The mean adjusted Rand index (Hubert & Arabie, 1985) over all pairs of
    ``partitions`` (label arrays of one length, labels 0 .. k - 1)."""
    n = partitions[0].shape[0]
    pairs_total = n * (n - 1) / 2.0
    sizes = [np.bincount(labels) for labels in partitions]
    within = [_pairs(counts) for counts in sizes]
    values = []
    for i in range(len(partitions)):
        for j in range(i + 1, len(partitions)):
            width = sizes[j].size
            joint = np.bincount(partitions[i] * width + partitions[j])
            both = _pairs(joint)
            expected = within[i] * within[j] / pairs_total
            largest = (within[i] + within[j]) / 2.0
            values.append(1.0 if largest == expected else
                          (both - expected) / (largest - expected))
    return float(np.mean(values))


def _pairs(counts):
    counts = counts.astype(np.float64)
    return float(np.sum(counts * (counts - 1.0)) / 2.0)

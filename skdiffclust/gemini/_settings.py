"""How a SparseGEMINI fit trains: its settings record, built once per call, its
batches (:func:`fit_batch_size`, :func:`stream_batch_size`), where
``batch_size='auto'`` is decided, and its number of clusters, where
``n_clusters='auto'`` is decided (:meth:`GeminiSettings.candidates`, the numbers
fitted, and :meth:`GeminiSettings.counted`, the one kept)."""

from dataclasses import dataclass

import numpy as np

from skdiffclust._utils._count import ClusterCount, counts_clusters

# batch_size='auto': all samples while the GEMINI needs no n x n matrix (the linear
# kernel, 'mi') or while that matrix stays within 128 MiB (n <= 4096); above,
# batches of AUTO_BATCH_SIZE samples (an 8 MiB matrix).
AUTO_FULL_BATCH_MAX = 4096
AUTO_BATCH_SIZE = 1024

# n_clusters='auto': a fit at each candidate number (2 to max_clusters), the one
# whose partition has the highest silhouette (Rousseeuw, 1987) in the GEMINI's own
# geometry: the distances of the kernel's feature space for the MMD (the exact
# kernel), the metric's for Wasserstein, Euclidean for 'mi'; the first of equal
# scores. The silhouette is that of at most COUNT_SAMPLE samples, the same for
# every candidate, drawn with the estimator's random_state. Chosen on the
# development batteries (sipu, fcps, uci) among the Euclidean silhouette, this one
# and the elbow of the GEMINI's gains, alone and combined: mean ARI 0.616 against
# 0.584 and 0.521; samples of 2,000 and 5,000 points chose the same numbers there.
# On the evaluation batteries: ARI 0.470 (KMeans by silhouette 0.466), but 6
# numbers right of 40 (see the user guide)
COUNT_SAMPLE = 2000


def fit_batch_size(batch_size, n_samples, geometry):
    """The batches of ``fit`` and ``path`` for the ``batch_size`` parameter
    (``geometry``: the GEMINI's, whose ``needs_matrix`` says whether it reads an
    n x n matrix)."""
    if batch_size is None:
        return n_samples
    if batch_size == "auto":
        if not geometry.needs_matrix or n_samples <= AUTO_FULL_BATCH_MAX:
            return n_samples
        return AUTO_BATCH_SIZE
    return int(batch_size)


def stream_batch_size(batch_size, n_samples):
    """``partial_fit``'s batches: ``batch_size``, with 'auto' (and None) at most
    1,024 samples, so that a pass over a chunk takes several steps."""
    if batch_size in ("auto", None):
        return min(n_samples, AUTO_BATCH_SIZE)
    return int(batch_size)


@dataclass(frozen=True)
class GeminiSettings:
    """How a SparseGEMINI fit trains: the estimator's validated parameters, built once
    per call (``SparseGEMINI._settings``) and passed down whole."""

    learning_rate: float  # Adam's (dense fit) and SGD's (penalised steps) step size
    max_iter: int  # epochs of each training
    tol: float  # stopping rule of the dense fit
    path_tol: float  # stopping rule of the penalised trainings
    n_iter_no_change: int  # patience of both rules, in epochs
    dropout: float  # of the MLP's hidden units, in training steps only
    reseed: bool  # re-seed the clusters an epoch of the dense fit leaves empty
    alpha: float  # the fixed penalty of fit and partial_fit
    lambda_start: float  # the path's first penalty
    lambda_multiplier: float  # its growth between steps
    n_features_stop: int  # the path stops at this many features
    selection_threshold: float  # the path keeps the fewest features within this of the best
    relax: bool  # train the penalised model on without its penalty (relaxed lasso)
    n_clusters: object = 3  # an int, or 'auto' until counted
    max_clusters: int = 20  # the largest candidate of 'auto'

    @classmethod
    def of(cls, estimator):
        """A SparseGEMINI estimator's settings, from its validated parameters (as
        given, as the training always took them)."""
        e = estimator
        return cls(learning_rate=e.learning_rate, max_iter=e.max_iter, tol=e.tol,
                   path_tol=e.path_tol, n_iter_no_change=int(e.n_iter_no_change),
                   dropout=float(e.dropout), reseed=e.reseed_empty_clusters, alpha=e.alpha,
                   lambda_start=e.lambda_start, lambda_multiplier=e.lambda_multiplier,
                   n_features_stop=e.n_features_stop,
                   selection_threshold=e.selection_threshold, relax=bool(e.relax),
                   n_clusters=e.n_clusters, max_clusters=int(e.max_clusters))

    @property
    def optimizer(self):
        """Of fit's penalised phase and of partial_fit: SGD with a penalty, Adam without."""
        return "sgd" if self.alpha > 0 else "adam"

    def candidates(self, n_samples):
        """The numbers of clusters a fit on ``n_samples`` samples trains at: the
        given one, or for ``n_clusters='auto'`` 2 to ``max_clusters``, at most
        ``n_samples - 1`` (the silhouette needs a sample beside each cluster's;
        two samples: 2 alone)."""
        if not self.counts:
            return np.array([self.n_clusters])
        return np.arange(2, max(min(self.max_clusters, n_samples - 1), 2) + 1)

    @property
    def counts(self):
        """Whether the number of clusters is found (``n_clusters='auto'``)."""
        return counts_clusters(self.n_clusters)

    def counted(self, candidates, scores):
        """The :class:`ClusterCount` of fits at ``candidates`` whose partitions have
        these silhouettes (``n_clusters='auto'``: the first of the highest), or of
        the one given number."""
        if not self.counts:
            return ClusterCount(int(self.n_clusters))
        scores = np.asarray(scores, dtype=np.float64)
        chosen = int(candidates[int(np.argmax(scores))])
        return ClusterCount(chosen, np.asarray(candidates, dtype=np.int64), scores)

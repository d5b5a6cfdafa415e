"""The number of clusters of a fit, for every estimator that counts them.

``n_clusters='auto'`` is counted by each method's own criterion (PRCut's and
DeepImageClustering's in ``prcut/_settings.py``, SparseGEMINI's in
``gemini/_count.py``, the forests' in ``forest/_settings.py``); what they share
lives here, once: the record of a count (:class:`ClusterCount`), whether a value
of ``n_clusters`` asks for one (:func:`counts_clusters`), and the fitted
attributes that keep its evidence (:data:`COUNT_ATTRIBUTES`: written, and an
earlier fit's cleared, by :func:`set_count_attributes`; read back by
:func:`fitted_count`).
"""

from typing import NamedTuple

import numpy as np

# the fitted attributes of n_clusters='auto' (only then; the modularity and the
# silhouette only where the criterion measured them)
COUNT_ATTRIBUTES = ("n_clusters_candidates_", "n_clusters_scores_", "n_clusters_modularity_",
                    "n_clusters_silhouette_")


class ClusterCount(NamedTuple):
    """A fit's number of clusters: ``n_clusters`` as given (``candidates`` and
    ``scores`` None), or found among ``candidates`` by their ``scores`` (higher is
    better); ``clear``: whether the number found stands out (always, when given);
    ``modularity``: that of each candidate's partition, where the criterion
    measured it; ``silhouette``: each candidate's, where the count was refined by
    it (DeepImageClustering's)."""

    n_clusters: int
    candidates: object = None
    scores: object = None
    clear: bool = True
    modularity: object = None
    silhouette: object = None


def counts_clusters(n_clusters):
    """Whether the ``n_clusters`` parameter asks for the number to be found."""
    return isinstance(n_clusters, str) and n_clusters == "auto"


def count_attributes(count):
    """The fitted attributes (by name) of a ``count``: none for a given number."""
    if count.candidates is None:
        return {}
    values = (np.asarray(count.candidates, dtype=np.int64),
              np.asarray(count.scores, dtype=np.float64),
              *(None if optional is None else np.asarray(optional, dtype=np.float64)
                for optional in (count.modularity, count.silhouette)))
    return {name: value for name, value in zip(COUNT_ATTRIBUTES, values)
            if value is not None}


def set_count_attributes(estimator, count):
    """Write a fit's count attributes on ``estimator``, an earlier fit's removed."""
    for name in COUNT_ATTRIBUTES:
        vars(estimator).pop(name, None)
    vars(estimator).update(count_attributes(count))


def fitted_count(estimator, n_clusters):
    """The ``ClusterCount`` of a fitted estimator whose number of clusters is
    ``n_clusters`` (``partial_fit``'s later calls keep the first call's)."""
    candidates, scores, modularity, silhouette = (getattr(estimator, name, None)
                                                  for name in COUNT_ATTRIBUTES)
    return ClusterCount(n_clusters, candidates, scores, modularity=modularity,
                        silhouette=silhouette)

"""The functional form of the clustering operator, in the paper's notation."""

import numpy as np

from skdiffclust._utils._validation import (
    check_array,
    check_similarity_matrix,
    warn_if_looks_like_distances,
)
from skdiffclust.forest._constraints import Constraints
from skdiffclust.forest._solver import forest_from_similarity


def spanning_forest(S, n_clusters, constraints=None):
    """Maximum-weight k-spanning forest of a similarity matrix, and its clusters.

    Computes :math:`A_k^*(\\Sigma)` and :math:`M_k^*(\\Sigma)` of Stewart et al.
    (2023, definitions 2 and 3), or their constrained versions
    :math:`A_k^*(\\Sigma; M_\\Omega)` and :math:`M_k^*(\\Sigma; M_\\Omega)`
    (definition 5, by the greedy algorithm of section 9.1).

    Parameters
    ----------
    S : array-like of shape (n_samples, n_samples)
        Symmetric similarity matrix (larger means more similar, e.g. negative
        squared distances). The diagonal is ignored, but must be finite too.

    n_clusters : int
        Number of trees k of the forest.

    constraints : {array-like, sparse matrix} of shape (n_samples, n_samples), \
            default=None
        Partial connectivity :math:`M_\\Omega`: ``+1`` must-link, ``-1``
        cannot-link, ``0`` unknown (a sparse matrix's unstored entries). Build it
        from partial labels with
        :func:`constraints_from_labels`. Must-links are taken transitively.

    Returns
    -------
    A : ndarray of shape (n_samples, n_samples)
        Adjacency matrix of the forest (symmetric, zero diagonal,
        ``n_samples - n_clusters`` edges).

    M : ndarray of shape (n_samples, n_samples)
        Cluster connectivity matrix: ``M[i, j] = 1`` if and only if samples i and j
        are in the same tree (diagonal 1).

    See Also
    --------
    SpanningForestClustering : The estimator, for feature vectors or similarities.
    constraints_from_labels : Constraint matrix from partial labels.

    Notes
    -----
    The forest value is :math:`F_k(\\Sigma) = \\langle A, \\Sigma \\rangle`, and
    :math:`\\nabla_\\Sigma F_k = A` wherever the forest is unique. If the
    constraints do not allow ``n_clusters`` trees, an
    :class:`~skdiffclust.exceptions.InfeasibleConstraintsWarning` is issued and the
    forest reached is returned.

    Examples
    --------
    >>> import numpy as np
    >>> from skdiffclust import spanning_forest
    >>> x = np.array([0.0, 0.1, 1.0, 1.2])
    >>> S = -(x[:, None] - x[None, :]) ** 2
    >>> A, M = spanning_forest(S, n_clusters=2)
    >>> M.astype(int)
    array([[1, 1, 0, 0],
           [1, 1, 0, 0],
           [0, 0, 1, 1],
           [0, 0, 1, 1]])
    >>> int(A.sum()) // 2
    2
    """
    S = check_array(S, dtype=[np.float64, np.float32], input_name="S")
    check_similarity_matrix(S, name="S")
    warn_if_distances(S, "S")
    n = S.shape[0]
    parsed = None if constraints is None else Constraints.from_matrix(constraints, n)
    forest = forest_from_similarity(S, n_clusters, constraints=parsed)
    A = np.zeros((n, n), dtype=S.dtype)
    A[forest.edges[:, 0], forest.edges[:, 1]] = 1
    A[forest.edges[:, 1], forest.edges[:, 0]] = 1
    M = (forest.labels[:, None] == forest.labels[None, :]).astype(S.dtype)
    return A, M


def warn_if_distances(S, name):
    """Warn when a similarity matrix looks like a distance matrix: the forest would
    then join the most distant samples."""
    warn_if_looks_like_distances(
        S, name, kind="a similarity",
        consequence="the forest would join the most distant samples",
        fix="-D (or another similarity, such as np.exp(-D**2 / D.var()))")

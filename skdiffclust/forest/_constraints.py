"""Must-link / cannot-link information: parsing, closure, consistency checks.

Users give constraints as partial labels, as index pairs or, in the paper's
notation, as an n x n matrix with +1 (must-link), -1 (cannot-link) and 0 (unknown).
Internally they become a compact :class:`Constraints`: the must-link groups (the
transitive closure of the must-link pairs) and a cannot-link relation between
groups, so nothing of size n x n is kept.
"""

import numpy as np
from scipy.sparse import coo_array
from scipy.sparse.csgraph import connected_components
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import column_or_1d

UNLABELLED = -1


class Constraints:
    """Must-link groups and the cannot-link relation between them.

    Parameters
    ----------
    group : ndarray of shape (n_samples,), int64
        Must-link group of each sample, ``-1`` for samples without constraints.
        Groups are numbered 0 .. n_groups - 1.
    conflict : ndarray of shape (n_groups, n_groups), bool
        Symmetric cannot-link relation between groups.
    """

    def __init__(self, group, conflict):
        self.group = group
        self.conflict = conflict

    @property
    def n_samples(self):
        return self.group.shape[0]

    @property
    def n_groups(self):
        return self.conflict.shape[0]

    @property
    def is_empty(self):
        return self.n_groups == 0

    def members(self):
        """Samples of each group, as a list of arrays."""
        order = np.argsort(self.group, kind="stable")
        sorted_groups = self.group[order]
        starts = np.searchsorted(sorted_groups, np.arange(self.n_groups + 1))
        return [order[starts[g] : starts[g + 1]] for g in range(self.n_groups)]

    def rooted_samples(self):
        """Samples to tie to a virtual root, or ``None`` if that is not exact.

        When the groups that take part in cannot-links pairwise cannot link (as with
        partial labels), joining them all to one virtual root turns the constrained
        problem into an ordinary spanning-forest problem: the greedy algorithm is
        then exact and needs only the unconstrained spanning tree.
        """
        involved = np.flatnonzero(self.conflict.any(axis=1))
        block = self.conflict[np.ix_(involved, involved)]
        if not np.all(block | np.eye(involved.size, dtype=bool)):
            return None
        rooted = np.zeros(self.n_samples, dtype=bool)
        rooted[np.isin(self.group, involved)] = True
        return rooted

    def feasible_n_clusters(self):
        """Range (lo, hi) of feasible numbers of clusters, or ``None`` if unknown.

        Known exactly when the rooted solver applies: at least one cluster per
        group that cannot link, at most one per must-link group or free sample.
        """
        if self.rooted_samples() is None:
            return None
        n_apart = int(np.count_nonzero(self.conflict.any(axis=1)))
        n_nodes = int(np.count_nonzero(self.group < 0)) + self.n_groups
        return max(n_apart, 1), n_nodes

    def kernel_arrays(self):
        """The constraints as the plain arrays the numba solvers take."""
        members = self.members()
        group_ptr = np.zeros(self.n_groups + 1, dtype=np.int64)
        group_ptr[1:] = np.cumsum([m.size for m in members])
        group_members = (np.concatenate(members) if members else np.empty(0)).astype(np.int64)
        rooted = self.rooted_samples()
        general = rooted is None
        if general:
            rooted = np.zeros(self.n_samples, dtype=bool)
        return group_ptr, group_members, self.group, rooted, general, self.conflict

    @staticmethod
    def empty_kernel_arrays(n_samples):
        """Kernel arrays meaning "no constraints"."""
        return (np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.int64),
                np.full(n_samples, -1, dtype=np.int64), np.zeros(n_samples, dtype=bool),
                False, np.zeros((0, 0), dtype=bool))

    @classmethod
    def from_pairs(cls, n_samples, must_link=None, cannot_link=None):
        """Close must-links transitively, lift cannot-links to groups, check both."""
        must_link = _check_pairs(must_link, n_samples, "must_link")
        cannot_link = _check_pairs(cannot_link, n_samples, "cannot_link")
        self_cannot = cannot_link[:, 0] == cannot_link[:, 1]
        if self_cannot.any():
            i = int(cannot_link[self_cannot][0, 0])
            raise ValueError(
                f"Contradictory constraints: sample {i} is cannot-linked with itself."
            )
        graph = coo_array(
            (np.ones(must_link.shape[0]), (must_link[:, 0], must_link[:, 1])),
            shape=(n_samples, n_samples),
        )
        _, component = connected_components(graph, directed=False)
        component_size = np.bincount(component, minlength=n_samples)
        constrained = component_size[component] > 1
        constrained[cannot_link.ravel()] = True
        group = np.full(n_samples, -1, dtype=np.int64)
        _, group[constrained] = np.unique(component[constrained], return_inverse=True)
        n_groups = int(group.max()) + 1 if constrained.any() else 0
        ga = group[cannot_link[:, 0]]
        gb = group[cannot_link[:, 1]]
        same = ga == gb
        if same.any():
            i, j = (int(v) for v in cannot_link[same][0])
            raise ValueError(
                f"Contradictory constraints: samples {i} and {j} are cannot-linked "
                "but must-linked (directly or through other must-links)."
            )
        conflict = np.zeros((n_groups, n_groups), dtype=bool)
        conflict[ga, gb] = True
        conflict[gb, ga] = True
        return cls(group, conflict)

    @classmethod
    def from_labels(cls, y, n_samples, must_link=None, cannot_link=None):
        """Partial labels (``-1`` = unlabelled) plus optional extra pairs."""
        pairs_ml, pairs_cl = pairs_from_labels(y, n_samples)
        extra_ml = _check_pairs(must_link, n_samples, "must_link")
        extra_cl = _check_pairs(cannot_link, n_samples, "cannot_link")
        return cls.from_pairs(
            n_samples,
            np.concatenate([pairs_ml, extra_ml]),
            np.concatenate([pairs_cl, extra_cl]),
        )

    @classmethod
    def from_matrix(cls, constraints, n_samples):
        """The paper's n x n matrix: +1 must-link, -1 cannot-link, 0 unknown."""
        C = check_constraint_matrix(constraints, n_samples)
        must_link = np.argwhere(np.triu(C == 1, k=1))
        cannot_link = np.argwhere(np.triu(C == -1))
        return cls.from_pairs(n_samples, must_link, cannot_link)


def pairs_from_labels(y, n_samples):
    """Must-link and cannot-link pairs equivalent to partial labels.

    Each labelled sample is must-linked to the first sample of its class, and the
    first samples of distinct classes are cannot-linked: the closure gives back
    every pair, with O(n + n_classes^2) pairs instead of O(n^2).
    """
    y = check_partial_labels(y, n_samples)
    labelled = np.flatnonzero(y != UNLABELLED)
    _, first, inverse = np.unique(y[labelled], return_index=True, return_inverse=True)
    representative = labelled[first]
    must_link = np.column_stack([labelled, representative[inverse]])
    a, b = np.triu_indices(representative.size, k=1)
    cannot_link = np.column_stack([representative[a], representative[b]])
    return must_link.astype(np.int64), cannot_link.astype(np.int64)


def check_partial_labels(y, n_samples):
    """Validate partial labels: 1-D integers, ``-1`` for unlabelled samples."""
    y = column_or_1d(y, warn=True)
    if y.shape[0] != n_samples:
        raise ValueError(
            f"y has {y.shape[0]} entries but X has {n_samples} samples."
        )
    if np.issubdtype(y.dtype, np.floating) and not np.all(np.isfinite(y)):
        raise ValueError("y contains NaN or infinity; use -1 for unlabelled samples.")
    type_of_target(y, input_name="y", raise_unknown=True)
    if not (np.issubdtype(y.dtype, np.integer) or np.issubdtype(y.dtype, np.floating)):
        raise TypeError(
            "y must hold integer partial labels (-1 for unlabelled samples), "
            f"got dtype {y.dtype}."
        )
    if np.issubdtype(y.dtype, np.floating):
        if np.any(y != np.round(y)):
            raise ValueError(
                "y must hold integer partial labels (-1 for unlabelled samples), "
                "got non-integer values."
            )
        y = y.astype(np.int64)
    return y


def constraints_from_labels(y):
    """Constraint matrix of the paper from partial labels.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Integer labels, ``-1`` for unlabelled samples (scikit-learn's
        semi-supervised convention).

    Returns
    -------
    constraints : ndarray of shape (n_samples, n_samples), int8
        ``+1`` where both samples are labelled alike (must-link, including the
        diagonal of labelled samples), ``-1`` where both are labelled differently
        (cannot-link), ``0`` where either is unlabelled.

    Examples
    --------
    >>> from skdiffclust import constraints_from_labels
    >>> constraints_from_labels([0, 0, 1, -1])
    array([[ 1,  1, -1,  0],
           [ 1,  1, -1,  0],
           [-1, -1,  1,  0],
           [ 0,  0,  0,  0]], dtype=int8)
    """
    y = np.asarray(y)
    y = check_partial_labels(y, y.shape[0] if y.ndim else 1)
    labelled = y != UNLABELLED
    both = np.outer(labelled, labelled)
    same = y[:, None] == y[None, :]
    C = np.zeros((y.shape[0], y.shape[0]), dtype=np.int8)
    C[both & same] = 1
    C[both & ~same] = -1
    return C


def check_constraint_matrix(constraints, n_samples):
    """Validate an n x n matrix of +1 / -1 / 0 constraints."""
    C = np.asarray(constraints)
    if C.shape != (n_samples, n_samples):
        raise ValueError(
            f"constraints must have shape ({n_samples}, {n_samples}) like the "
            f"similarity matrix, got {C.shape}."
        )
    if not np.issubdtype(C.dtype, np.number) or not np.all(np.isin(C, (-1, 0, 1))):
        raise ValueError(
            "constraints must only contain +1 (must-link), -1 (cannot-link) and "
            "0 (unknown)."
        )
    if not np.array_equal(C, C.T):
        raise ValueError("constraints must be a symmetric matrix.")
    if np.any(np.diagonal(C) == -1):
        i = int(np.flatnonzero(np.diagonal(C) == -1)[0])
        raise ValueError(
            f"Contradictory constraints: sample {i} is cannot-linked with itself."
        )
    return C


def _check_pairs(pairs, n_samples, name):
    if pairs is None:
        return np.empty((0, 2), dtype=np.int64)
    arr = np.asarray(pairs)
    if arr.size == 0:
        return np.empty((0, 2), dtype=np.int64)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(
            f"{name} must be an array of index pairs of shape (n_pairs, 2), "
            f"got shape {arr.shape}."
        )
    if not np.issubdtype(arr.dtype, np.integer):
        if not (np.issubdtype(arr.dtype, np.number) and np.all(arr == np.round(arr))):
            raise TypeError(f"{name} must contain integer sample indices.")
    arr = arr.astype(np.int64)
    if arr.min() < 0 or arr.max() >= n_samples:
        raise ValueError(
            f"{name} contains sample indices outside [0, {n_samples - 1}]."
        )
    return arr

"""Must-link / cannot-link information: parsing, closure, consistency checks.

Users give constraints as partial labels, as index pairs or, in the paper's
notation, as an n x n matrix with +1 (must-link), -1 (cannot-link) and 0 (unknown).
Internally they become a compact :class:`Constraints` in O(n) memory: the must-link
groups (the transitive closure of the must-link pairs), the set of groups that
pairwise cannot link (every class of partial labels: no pair list is needed) and,
only for other cannot-link structures, the list of cannot-linked group pairs.
"""

import numpy as np
import scipy.sparse as sp
from scipy.sparse import coo_array
from scipy.sparse.csgraph import connected_components
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import column_or_1d

from skdiffclust._utils._validation import check_sparse_structure, real_array
from skdiffclust._utils._warn import warn_user

UNLABELLED = -1


class Constraints:
    """Must-link groups and the cannot-link relation between them.

    Parameters
    ----------
    group : ndarray of shape (n_samples,), int64
        Must-link group of each sample, ``-1`` for samples without constraints.
        Groups are numbered 0 .. n_groups - 1 in the order of their first sample.
    apart : ndarray of shape (n_groups,), bool
        Groups that pairwise cannot link (the classes of partial labels).
    pairs : ndarray of shape (n_pairs, 2), int64, default=None
        Further cannot-linked group pairs ``(a, b)`` with ``a < b``, distinct, not
        both in ``apart``.

    Notes
    -----
    When every cannot-link is between two groups of a set that pairwise cannot
    link (partial labels), the structure is *rooted* (:meth:`rooted_samples`), the
    exact solver applies and nothing beyond O(n) is stored. Pairs that complete
    such a set are folded into ``apart`` when the constraints are built.
    """

    def __init__(self, group, apart, pairs=None):
        self.group = group
        self.apart = apart
        self.pairs = np.empty((0, 2), dtype=np.int64) if pairs is None else pairs

    @property
    def n_samples(self):
        return self.group.shape[0]

    @property
    def n_groups(self):
        return self.apart.shape[0]

    @property
    def is_empty(self):
        return self.n_groups == 0

    @property
    def is_rooted(self):
        """Whether the groups that take part in cannot-links pairwise cannot link."""
        return self.pairs.shape[0] == 0

    @property
    def conflict(self):
        """The cannot-link relation as a dense (n_groups, n_groups) boolean matrix.

        O(n_groups^2) memory: only the greedy solver of general (not rooted)
        structures uses it, and it needs every pair of samples anyway.
        """
        conflict = np.zeros((self.n_groups, self.n_groups), dtype=bool)
        conflict[np.ix_(self.apart, self.apart)] = True
        np.fill_diagonal(conflict, False)
        conflict[self.pairs[:, 0], self.pairs[:, 1]] = True
        conflict[self.pairs[:, 1], self.pairs[:, 0]] = True
        return conflict

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
        if not self.is_rooted:
            return None
        rooted = np.zeros(self.n_samples, dtype=bool)
        grouped = self.group >= 0
        rooted[grouped] = self.apart[self.group[grouped]]
        return rooted

    def feasible_n_clusters(self):
        """Range (lo, hi) of feasible numbers of clusters, or ``None`` if unknown.

        Known exactly when the rooted solver applies: at least one cluster per
        group that cannot link, at most one per must-link group or free sample.
        """
        if not self.is_rooted:
            return None
        n_apart = int(np.count_nonzero(self.apart))
        n_nodes = int(np.count_nonzero(self.group < 0)) + self.n_groups
        return max(n_apart, 1), n_nodes

    def kernel_arrays(self):
        """The constraints as the plain arrays the numba solvers take.

        ``(group_ptr, group_members, group, rooted, general, conflict)``; the dense
        ``conflict`` matrix is built only for general structures (empty otherwise).
        """
        members = self.members()
        group_ptr = np.zeros(self.n_groups + 1, dtype=np.int64)
        group_ptr[1:] = np.cumsum([m.size for m in members])
        group_members = (np.concatenate(members) if members else np.empty(0)).astype(np.int64)
        general = not self.is_rooted
        if general:
            rooted, conflict = np.zeros(self.n_samples, dtype=bool), self.conflict
        else:
            rooted, conflict = self.rooted_samples(), np.zeros((0, 0), dtype=bool)
        return group_ptr, group_members, self.group, rooted, general, conflict

    @staticmethod
    def empty_kernel_arrays(n_samples):
        """Kernel arrays meaning "no constraints"."""
        return (np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.int64),
                np.full(n_samples, -1, dtype=np.int64), np.zeros(n_samples, dtype=bool),
                False, np.zeros((0, 0), dtype=bool))

    @classmethod
    def from_pairs(cls, n_samples, must_link=None, cannot_link=None):
        """Close must-links transitively, lift cannot-links to groups, check both."""
        must_link = check_pairs(must_link, n_samples, "must_link")
        cannot_link = check_pairs(cannot_link, n_samples, "cannot_link")
        return _build(n_samples, must_link, np.empty(0, dtype=np.int64), cannot_link)

    @classmethod
    def from_labels(cls, y, n_samples, must_link=None, cannot_link=None, name="y"):
        """Partial labels (``-1`` = unlabelled) plus optional extra pairs.

        Samples with the same label are must-linked, samples with different labels
        cannot link: the classes are groups that pairwise cannot link, stored as
        such, in O(n) memory whatever the number of classes. ``name`` is the
        labels' name in error messages.
        """
        y = check_partial_labels(y, n_samples, name)
        must_link = check_pairs(must_link, n_samples, "must_link")
        cannot_link = check_pairs(cannot_link, n_samples, "cannot_link")
        labelled = np.flatnonzero(y != UNLABELLED)
        _, first, inverse = np.unique(y[labelled], return_index=True, return_inverse=True)
        representative = labelled[first]
        # each labelled sample to the first sample of its class
        label_links = np.column_stack([labelled, representative[inverse]])
        label_links = label_links[label_links[:, 0] != label_links[:, 1]]
        apart = representative if representative.size >= 2 else np.empty(0, dtype=np.int64)
        return _build(n_samples, np.concatenate([label_links, must_link]), apart, cannot_link)

    @classmethod
    def from_checked_labels(cls, y):
        """:meth:`from_labels` of labels already checked (a training batch's), without
        the checks: the same groups, built directly.

        A step of learning through clustering builds one per batch, where the checks
        and the must-link graph took a quarter of the step on the CPU.
        """
        labelled = np.flatnonzero(y != UNLABELLED)
        _, first, inverse = np.unique(y[labelled], return_index=True, return_inverse=True)
        n_classes = first.size
        group = np.full(y.shape[0], -1, dtype=np.int64)
        if n_classes == 1 and labelled.size == 1:  # one labelled sample: no constraint
            return cls(group, np.zeros(0, dtype=bool))
        rank = np.empty(n_classes, dtype=np.int64)  # groups numbered by first sample
        rank[np.argsort(first, kind="stable")] = np.arange(n_classes)
        group[labelled] = rank[inverse.ravel()]
        return cls(group, np.full(n_classes, n_classes >= 2))

    @classmethod
    def from_matrix(cls, constraints, n_samples):
        """The paper's n x n matrix: +1 must-link, -1 cannot-link, 0 unknown."""
        C = check_constraint_matrix(constraints, n_samples)
        must_link = np.argwhere(np.triu(C == 1, k=1))
        cannot_link = np.argwhere(np.triu(C == -1))
        return cls.from_pairs(n_samples, must_link, cannot_link)


def _build(n_samples, must_link, apart_samples, cannot_link):
    """Constraints from must-link pairs, samples that pairwise cannot link and
    cannot-link pairs (all checked), in O(n + n_pairs) time and memory."""
    graph = coo_array(
        (np.ones(must_link.shape[0]), (must_link[:, 0], must_link[:, 1])),
        shape=(n_samples, n_samples),
    )
    _, component = connected_components(graph, directed=False)
    component_size = np.bincount(component, minlength=n_samples)
    constrained = component_size[component] > 1
    constrained[apart_samples] = True
    constrained[cannot_link.ravel()] = True
    group = _number_groups(component, constrained)
    n_groups = int(group.max()) + 1 if constrained.any() else 0
    _check_apart(apart_samples, group)
    ga, gb = group[cannot_link[:, 0]], group[cannot_link[:, 1]]
    same = ga == gb
    if same.any():
        i, j = (int(v) for v in cannot_link[same][0])
        raise ValueError(
            f"Contradictory constraints: samples {i} and {j} are cannot-linked "
            "but must-linked (directly or through other must-links)."
        )
    apart = np.zeros(n_groups, dtype=bool)
    apart[group[apart_samples]] = True
    pairs = np.unique(np.column_stack([np.minimum(ga, gb), np.maximum(ga, gb)]), axis=0)
    pairs = pairs[~(apart[pairs[:, 0]] & apart[pairs[:, 1]])].astype(np.int64)
    return Constraints(group, *_fold_complete_pairs(apart, pairs))


def _number_groups(component, constrained):
    """Group of each sample: its constrained component, numbered by first sample."""
    group = np.full(component.shape[0], -1, dtype=np.int64)
    samples = np.flatnonzero(constrained)
    components, first, inverse = np.unique(
        component[samples], return_index=True, return_inverse=True)
    rank = np.empty(components.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(components.size)
    group[samples] = rank[inverse]
    return group


def _check_apart(apart_samples, group):
    """Samples labelled differently must not be must-linked by extra pairs."""
    groups = group[apart_samples]
    order = np.argsort(groups, kind="stable")
    clash = np.flatnonzero(groups[order][1:] == groups[order][:-1])
    if clash.size:
        i, j = apart_samples[order[clash[0]]], apart_samples[order[clash[0] + 1]]
        raise ValueError(
            f"Contradictory constraints: samples {int(i)} and {int(j)} have different "
            "labels (cannot link) but are must-linked (through must_link pairs)."
        )


def _fold_complete_pairs(apart, pairs):
    """``(apart, pairs)`` in canonical form: pairs that make every group involved in
    a cannot-link conflict with every other one are folded into ``apart``.

    ``pairs`` are distinct and never both in ``apart``: the involved groups pairwise
    cannot link exactly when they count ``g (g - 1) / 2`` pairs in all.
    """
    if pairs.shape[0] == 0:
        return apart, pairs
    involved = apart.copy()
    involved[pairs.ravel()] = True
    g, a = int(np.count_nonzero(involved)), int(np.count_nonzero(apart))
    if a * (a - 1) // 2 + pairs.shape[0] == g * (g - 1) // 2:
        return involved, np.empty((0, 2), dtype=np.int64)
    return apart, pairs


def check_partial_labels(y, n_samples, name="y"):
    """Validate partial labels: 1-D integers, ``-1`` (only) for unlabelled samples
    (a column of them is read as 1-D)."""
    shape = np.shape(y)
    if len(shape) != 1 and not (len(shape) == 2 and shape[1] == 1):
        raise ValueError(f"{name} must be 1-D, one label per sample, got shape {shape}.")
    y = column_or_1d(y)
    if y.shape[0] != n_samples:
        raise ValueError(
            f"{name} has {y.shape[0]} entries but X has {n_samples} samples."
        )
    if np.issubdtype(y.dtype, np.floating) and not np.all(np.isfinite(y)):
        raise ValueError(f"{name} contains NaN or infinity; use -1 for unlabelled samples.")
    if np.issubdtype(y.dtype, np.floating) and np.any(np.abs(y) >= 2.0**63):
        # cast to int64 they became negative labels
        raise ValueError(f"{name} holds labels beyond the 64-bit integers (up to "
                         f"{np.abs(y).max():.4g}): number the classes 0, 1, 2, ...")
    type_of_target(y, input_name=name, raise_unknown=True)
    if not (np.issubdtype(y.dtype, np.integer) or np.issubdtype(y.dtype, np.floating)):
        raise TypeError(
            f"{name} must hold integer partial labels (-1 for unlabelled samples), "
            f"got dtype {y.dtype}."
        )
    if np.issubdtype(y.dtype, np.floating):
        if np.any(y != np.round(y)):
            raise ValueError(
                f"{name} must hold integer partial labels (-1 for unlabelled samples), "
                "got non-integer values."
            )
        y = y.astype(np.int64)
    wrong = y[(y < 0) & (y != UNLABELLED)]
    if wrong.size:
        raise ValueError(
            f"{name} contains the negative label {int(wrong[0])}: only -1 marks "
            "unlabelled samples, and labels must be non-negative integers."
        )
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
    """Validate an n x n matrix of +1 / -1 / 0 constraints (dense, or a SciPy sparse
    matrix, whose unstored entries are 0)."""
    check_sparse_structure(constraints, "constraints")  # SciPy reads indices unchecked
    # in their own dtype: an int8 matrix of n^2 entries is not copied to float64
    C = constraints.toarray() if sp.issparse(constraints) else \
        real_array(constraints, "constraints", dtype=None)
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


def check_pairs(pairs, n_samples, name):
    """Validate index pairs of shape (n_pairs, 2): integers in range, no self-pair."""
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
    self_pairs = arr[:, 0] == arr[:, 1]
    if self_pairs.any():
        i = int(arr[self_pairs][0, 0])
        if name == "cannot_link":
            raise ValueError(
                f"Contradictory constraints: sample {i} is cannot-linked with itself."
            )
        raise ValueError(
            f"{name} pairs sample {i} with itself; a pair needs two different samples."
        )
    return arr


def build_constraints(partial_labels, n_samples, must_link, cannot_link):
    """The Constraints of a fit's ``partial_labels`` and pairs (None: none given)."""
    if partial_labels is None and must_link is None and cannot_link is None:
        return None
    if partial_labels is None:
        return Constraints.from_pairs(n_samples, must_link, cannot_link)
    return Constraints.from_labels(partial_labels, n_samples, must_link, cannot_link,
                                   name="partial_labels")


def warn_if_partial_labels_in_y(y):
    """Say that ``y`` is ignored when it looks like the partial labels that ``fit``
    once took as ``y`` (it holds a ``-1``); ``y`` is read for nothing else, and
    a full labelling (what cross-validation passes) is ignored silently."""
    if y is None:
        return
    try:
        values = np.asarray(y)
    except (TypeError, ValueError, RuntimeError):  # ragged lists, tensors on a GPU
        return
    if values.dtype.kind in "iuf" and np.any(values == UNLABELLED):
        warn_user(
            "y is ignored: as every scikit-learn clusterer, SpanningForestClustering "
            "does not read y. It holds -1 entries, the former way to give partial "
            "labels: pass them as fit(X, partial_labels=...) instead.",
            UserWarning)

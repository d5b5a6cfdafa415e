"""Proximal operators of the group-lasso penalty, flat and hierarchical (LassoNet).

Groups are given as an integer array ``group`` (one group index per feature,
0 .. n_groups - 1). Both operators are vectorised over groups.
"""

import numpy as np

NORM_FLOOR = 1e-300


def group_norms(weights, group, n_groups):
    """Euclidean norm of the rows of ``weights`` belonging to each group."""
    squares = np.bincount(group, weights=(weights * weights).sum(axis=1), minlength=n_groups)
    return np.sqrt(squares)


def group_soft_threshold(weights, group, n_groups, threshold):
    """prox of ``threshold * sum_g ||W_g||``: shrink each group's norm, zero small ones."""
    norms = group_norms(weights, group, n_groups)
    scale = np.maximum(0.0, 1.0 - threshold / np.maximum(norms, NORM_FLOOR))
    return weights * scale[group][:, None]


def hierarchical_prox(skip, first_layer, group, n_groups, threshold, M):
    """LassoNet's Hier-Prox (Lemhadri et al., 2021, algorithm 2), per feature group.

    Solves, for each group g with skip block theta_g and first-layer block W_g,
    ``min 1/2 ||theta - theta_g||^2 + 1/2 ||W - W_g||^2 + threshold ||theta||``
    subject to ``||W||_inf <= M ||theta||``: a dropped group leaves the first layer too.

    Returns the new (skip, first_layer).
    """
    n_features, n_hidden = first_layer.shape
    theta_norm = group_norms(skip, group, n_groups)
    magnitudes = _group_magnitudes(np.abs(first_layer), group, n_groups)  # (G, L) descending
    n_entries = magnitudes.shape[1]
    m = np.arange(n_entries + 1)
    cumulative = np.concatenate([np.zeros((n_groups, 1)),
                                 np.cumsum(magnitudes, axis=1, dtype=np.float64)], axis=1)
    w = (M / (1.0 + m * M * M)) * np.maximum(
        0.0, theta_norm[:, None] + M * cumulative - threshold
    )
    upper = np.concatenate([np.full((n_groups, 1), np.inf), magnitudes], axis=1)
    lower = np.concatenate([magnitudes, np.zeros((n_groups, 1))], axis=1)
    feasible = (lower <= w) & (w <= upper)
    chosen = np.argmax(feasible, axis=1)  # the first feasible m (one always exists)
    w_star = w[np.arange(n_groups), chosen]
    # theta keeps its direction and gets norm w / M; a zero theta stays zero
    scale = np.where(theta_norm > 0, w_star / (M * np.maximum(theta_norm, NORM_FLOOR)), 0.0)
    new_skip = skip * scale[group][:, None]
    bound = w_star[group][:, None]
    new_first = np.sign(first_layer) * np.minimum(np.abs(first_layer), bound)
    return new_skip, new_first


def _group_magnitudes(abs_first_layer, group, n_groups):
    """|first-layer weights| of each group, sorted in decreasing order, zero-padded,
    in the weights' precision (float32 weights sort twice as fast; the values are
    the same)."""
    sizes = np.bincount(group, minlength=n_groups)
    n_hidden = abs_first_layer.shape[1]
    length = int(sizes.max()) * n_hidden if n_groups else 0
    out = np.zeros((n_groups, length), dtype=abs_first_layer.dtype)
    if np.all(sizes == 1):
        order = np.argsort(group)
        out[:] = -np.sort(-abs_first_layer[order], axis=1)
        return out
    for g in range(n_groups):
        values = abs_first_layer[group == g].ravel()
        out[g, : values.size] = -np.sort(-values)
    return out

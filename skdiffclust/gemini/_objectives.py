"""GEMINI objectives and their exact gradients with respect to the predictions, in NumPy.

Ohl et al. (2024), appendices B-D. With predictions T (n x K, rows on the simplex),
cluster proportions ``pi = T.mean(0)`` and importance weights ``alpha = T / pi``
(alpha[i, k] estimates p(x_i | y=k) / p(x_i)):

* MMD one-vs-all: ``sum_k pi_k MMD(p(x|k), p(x))`` with
  ``MMD_k^2 = (alpha_k' K alpha_k - 2 alpha_k' K 1 + 1' K 1) / n^2``;
* MMD one-vs-one: ``sum_{k != l} pi_k pi_l MMD(p(x|k), p(x|l))`` with
  ``MMD_kl^2 = (Q_kk + Q_ll - 2 Q_kl) / n^2``, ``Q = alpha' K alpha``;
* Wasserstein one-vs-all / one-vs-one: the same with exact optimal transport between
  the histograms ``alpha_k / n`` (and the uniform data histogram), whose gradients
  are the dual potentials;
* ``mi``: the classic mutual information (KL one-vs-all).

Every objective is maximised. Training evaluates R restarts at once: predictions
of shape (R, n, K) share one kernel (or distance) matrix and one product with it.
Both MMDs depend on alpha only through ``Q``, ``u = alpha' K 1`` and ``c = 1' K 1``,
computed by the kernel operator (``_data.LinearKernel``: O(n d K) through the
features, never an n x n matrix; ``_data.MatrixKernel``: O(n^2 K), never an n^3
product); the gradients w.r.t. alpha and pi are chained to T once, in
:func:`_chain_to_predictions`.
"""

import numpy as np
import scipy.sparse as sp

from skdiffclust._utils._validation import real_array
from skdiffclust.gemini._data import MatrixKernel, diagonal_and_mean

OBJECTIVES = ("mmd_ova", "mmd_ovo", "wasserstein_ova", "wasserstein_ovo", "mi")

# Floors that keep an emptying cluster (pi -> 0) and a vanishing distance
# (sqrt(0) has an infinite derivative) finite.
PROPORTION_FLOOR = 1e-12
SQUARED_DISTANCE_FLOOR = 1e-12
PROBABILITY_FLOOR = 1e-300
# how far from 1 gemini_value_and_grad's rows of proba may sum (float32 softmax rows)
SIMPLEX_TOLERANCE = 1e-3


def gemini_value_and_grad(proba, affinity, objective="mmd_ovo"):
    """Value of a GEMINI and its gradient with respect to the predicted probabilities.

    Parameters
    ----------
    proba : ndarray of shape (n_samples, n_clusters)
        Predicted cluster probabilities p(y=k | x_i); rows sum to 1.
    affinity : ndarray of shape (n_samples, n_samples) or None
        A kernel matrix for the MMD objectives, a distance matrix for the
        Wasserstein ones; ignored by ``'mi'``.
    objective : {'mmd_ova', 'mmd_ovo', 'wasserstein_ova', 'wasserstein_ovo', 'mi'}

    Returns
    -------
    value : float
        The GEMINI (to maximise).
    grad : ndarray of shape (n_samples, n_clusters)
        Its gradient with respect to ``proba``.

    Raises
    ------
    ValueError
        For an unknown objective, no samples, non-finite, complex or mis-shaped
        inputs, an ``affinity`` so large that sums over its entries overflow,
        ``proba`` whose rows are not probabilities (negative entries, such as
        logits, or sums other than 1), an MMD's ``affinity`` that is not a kernel
        or a Wasserstein's that holds negative values or is not a distance
        matrix, or a torch tensor that requires grad (the torch objective is
        ``skdiffclust.torch.gemini_loss``).
    TypeError
        For a sparse ``proba`` or ``affinity``, or a torch tensor of a dtype NumPy
        lacks (``torch.bfloat16``).

    Examples
    --------
    >>> import numpy as np
    >>> from skdiffclust.gemini import gemini_value_and_grad
    >>> X = np.array([[0.0], [0.1], [3.0], [3.1]])
    >>> proba = np.array([[0.9, 0.1], [0.8, 0.2], [0.1, 0.9], [0.2, 0.8]])
    >>> value, grad = gemini_value_and_grad(proba, X @ X.T, "mmd_ovo")
    >>> round(value, 3), grad.shape
    (1.05, (4, 2))
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}.")
    T = _dense_array(proba, "proba")
    if T.ndim != 2 or T.shape[0] == 0 or T.shape[1] == 0:
        raise ValueError(
            "proba must have shape (n_samples, n_clusters) with at least one sample "
            f"and one cluster, got shape {T.shape}."
        )
    _check_probabilities(T)
    if objective != "mi":
        affinity = _dense_array(affinity, "affinity")
        if affinity.shape != (T.shape[0], T.shape[0]):
            raise ValueError(
                f"affinity must have shape ({T.shape[0]}, {T.shape[0]}), "
                f"got {affinity.shape}."
            )
        _check_affinity(affinity, objective)
        if objective.startswith("mmd"):
            affinity = MatrixKernel(affinity)
    values, grad = batched_gemini(T[None], affinity, objective)
    return float(values[0]), grad[0]


def _dense_array(values, name):
    """``values`` as a float64 NumPy array, or a clear error: a sparse matrix, or a
    torch tensor NumPy cannot read (one that requires grad: the torch objective
    ``skdiffclust.torch.gemini_loss`` backpropagates)."""
    if sp.issparse(values):
        raise TypeError(f"{name} must be a dense array, got a sparse "
                        f"{type(values).__name__}: pass {name}.toarray().")
    return real_array(values, name)


def _check_probabilities(T):
    """Rows on the simplex: finite, non-negative, summing to 1 within 1e-3 (softmax
    rows of float32); logits or unnormalised scores gave values without meaning."""
    if not np.all(np.isfinite(T)):
        raise ValueError("proba contains NaN or infinity.")
    if T.min() < 0:
        raise ValueError(f"proba has negative entries (down to {T.min():.4g}): pass "
                         "probabilities, e.g. scipy.special.softmax(logits, axis=1), "
                         "not logits.")
    sums = T.sum(axis=1)
    worst = sums[np.argmax(np.abs(sums - 1.0))]
    if abs(worst - 1.0) > SIMPLEX_TOLERANCE:
        raise ValueError(f"proba must have rows summing to 1 (within "
                         f"{SIMPLEX_TOLERANCE:.0e}), got a row summing to {worst:.6g}.")


def _check_affinity(A, objective):
    """A finite kernel for the MMDs, finite non-negative distances for the
    Wasserstein GEMINIs, each told from the other as the torch objective tells
    them (``gemini._torch.matrix_kind``): a positive semi-definite kernel's mean
    diagonal entry is at least its mean entry, a distance matrix's zero diagonal
    is below its mean. Passed in each other's place, or negative "distances",
    they gave values without meaning."""
    kernel = objective.startswith("mmd")
    kind = "kernel" if kernel else "distance"
    if not np.all(np.isfinite(A)):
        raise ValueError(f"affinity (the {kind} matrix) contains NaN or infinity.")
    scale = float(np.abs(A).max()) if A.size else 0.0
    if scale * A.shape[0] > np.finfo(np.float64).max / A.shape[0]:
        # the GEMINI sums n^2 such values: a NaN value and gradient before
        raise ValueError(f"affinity (the {kind} matrix) holds values too large for "
                         f"float64 (up to {scale:.4g}: sums over its {A.shape[0]}^2 "
                         "entries overflow): rescale them.")
    if not kernel and A.min() < -np.sqrt(np.finfo(np.float64).eps) * scale:
        raise ValueError(f"affinity must hold non-negative distances for "
                         f"objective={objective!r}, got entries down to {A.min():.4g}.")
    mean_diagonal, mean_entry, slack = diagonal_and_mean(A)
    values = f"mean diagonal entry {mean_diagonal:.4g}, mean entry {mean_entry:.4g}"
    if kernel and mean_diagonal + slack < mean_entry:
        raise ValueError(
            f"affinity is not a kernel ({values}; a positive semi-definite kernel's "
            f"diagonal is at least its mean): a distance matrix? For distances use "
            f"objective='wasserstein_ovo' or 'wasserstein_ova'.")
    if not kernel and mean_diagonal - slack > mean_entry:
        raise ValueError(
            f"affinity is not a distance matrix ({values}; distances have a zero "
            f"diagonal under non-negative entries): a kernel? For a kernel use "
            f"objective='mmd_ovo' or 'mmd_ova'.")


def batched_gemini(T, affinity, objective):
    """GEMINI of R restarts at once: values (R,) and gradients (R, n, K).

    ``T`` has shape (R, n, K); ``affinity`` is a kernel operator
    (``_data.LinearKernel`` or ``MatrixKernel``) for the MMDs, an (n, n) distance
    matrix for Wasserstein, None for ``'mi'``.
    """
    if objective == "mi":
        return _mutual_information(T)
    if objective.startswith("mmd"):
        return _mmd(T, affinity, one_vs_one=objective == "mmd_ovo")
    one_vs_one = objective == "wasserstein_ovo"
    results = [_wasserstein(T_r, affinity, one_vs_one) for T_r in T]
    return np.array([value for value, _ in results]), np.stack([g for _, g in results])


def _weights(T):
    pi = np.maximum(T.mean(axis=-2), PROPORTION_FLOOR)
    return pi, T / pi[..., None, :]


def _chain_to_predictions(T, pi, alpha, grad_alpha, grad_pi):
    """d/dT from d/dalpha and d/dpi, through alpha = T / pi and pi = mean(T)."""
    n = T.shape[-2]
    column_term = (grad_alpha * alpha).sum(axis=-2) / (n * pi)
    return (grad_alpha / pi[..., None, :] - column_term[..., None, :]
            + grad_pi[..., None, :] / n)


def _mmd(T, kernel, one_vs_one):
    """Both MMD GEMINIs from the kernel statistics Q, u, c (module docstring)."""
    n = T.shape[1]
    pi, alpha = _weights(T)
    Q, u, c, cache = kernel.statistics(alpha)
    diag = np.diagonal(Q, axis1=1, axis2=2)
    if one_vs_one:
        squared = (diag[:, :, None] + diag[:, None, :] - 2.0 * Q) / n**2
        mmd = np.sqrt(np.maximum(squared, SQUARED_DISTANCE_FLOOR))
        pair_weight = pi[:, :, None] * pi[:, None, :] * (1.0 - np.eye(pi.shape[1]))
        values = (pair_weight * mmd).sum(axis=(1, 2))
        w = pair_weight / (2.0 * mmd)
        # d value / dQ, symmetrised: S = dQ + dQ'
        S = (4.0 / n**2) * (_diag_embed(w.sum(axis=2)) - w)
        grad_u = np.zeros_like(pi)
        grad_pi = 2.0 * np.einsum("rkl,rl->rk", mmd * (pair_weight > 0), pi)
    else:
        squared = (diag - 2.0 * u + c) / n**2
        mmd = np.sqrt(np.maximum(squared, SQUARED_DISTANCE_FLOOR))
        values = (pi * mmd).sum(axis=1)
        g = pi / (2.0 * mmd)
        S = (2.0 / n**2) * _diag_embed(g)
        grad_u = (-2.0 / n**2) * g
        grad_pi = mmd
    grad_alpha = kernel.backward(cache, S, grad_u)
    return values, _chain_to_predictions(T, pi, alpha, grad_alpha, grad_pi)


def _diag_embed(V):
    """(R, K) -> (R, K, K) diagonal matrices."""
    out = np.zeros(V.shape + V.shape[-1:])
    idx = np.arange(V.shape[-1])
    out[:, idx, idx] = V
    return out


def _transport(a, b, D):
    """Exact optimal transport between histograms a and b: cost, dual potentials, plan."""
    import ot

    plan, log = ot.emd(a, b, D, log=True)
    return float(log["cost"]), log["u"], log["v"], plan


def _histograms(alpha):
    # columns of alpha sum to n: alpha / n are histograms over the samples (one
    # contiguous row per cluster, as the transport solver wants)
    hist = np.ascontiguousarray(alpha.T / alpha.shape[0])
    mass = hist.sum(axis=1, keepdims=True)
    # an emptied cluster has no histogram; any one will do, its weight pi_k is ~0
    return np.where(mass > 0, hist / np.where(mass > 0, mass, 1.0), 1.0 / alpha.shape[0])


def transport_costs(alpha, D, one_vs_one, keep_plans=False):
    """Wasserstein distances between the clusters' histograms, and their gradients.

    Parameters
    ----------
    alpha : ndarray of shape (n, K)
        Importance weights ``T / pi``; column k over n is cluster k's histogram.
    D : ndarray of shape (n, n)
        Ground distances between the samples.
    one_vs_one : bool
        Distances between every pair of clusters, or from each cluster to the
        uniform histogram of the data.
    keep_plans : bool, default=False
        Also return the transport plans (the gradients with respect to ``D``).

    Returns
    -------
    costs : ndarray of shape (K,) or (K, K)
        ``W(alpha_k / n, 1 / n)``, or the symmetric ``W(alpha_k / n, alpha_m / n)``
        (zero diagonal).
    potentials : ndarray of shape (K, n) or (K, K, n)
        Centred dual potentials: ``potentials[k] / n`` (one-vs-all), or
        ``potentials[k, m] / n`` (one-vs-one), is the gradient of ``costs[k]``, or
        of ``costs[k, m]``, with respect to ``alpha[:, k]`` (see
        :func:`transport_gradient`).
    plans : ndarray of shape (K, n, n) or (K, K, n, n), or None
        The optimal plans, ``plans[k, m]`` filled for ``k < m`` only.
    """
    n, n_clusters = alpha.shape
    hist = _histograms(alpha)
    if not one_vs_one:
        uniform = np.full(n, 1.0 / n)
        costs, potentials = np.empty(n_clusters), np.empty((n_clusters, n))
        plans = np.empty((n_clusters, n, n)) if keep_plans else None
        for k in range(n_clusters):
            costs[k], u, _, plan = _transport(hist[k], uniform, D)
            potentials[k] = u - u.mean()
            if keep_plans:
                plans[k] = plan
        return costs, potentials, plans
    costs = np.zeros((n_clusters, n_clusters))
    potentials = np.zeros((n_clusters, n_clusters, n))
    plans = np.zeros((n_clusters, n_clusters, n, n)) if keep_plans else None
    for k in range(n_clusters):
        for m in range(k + 1, n_clusters):
            cost, u, v, plan = _transport(hist[k], hist[m], D)
            costs[k, m] = costs[m, k] = cost
            potentials[k, m], potentials[m, k] = u - u.mean(), v - v.mean()
            if keep_plans:
                plans[k, m] = plan
    return costs, potentials, plans


def transport_gradient(weights, potentials):
    """Gradient with respect to alpha (n, K) of ``sum weights * costs``.

    ``weights`` has the shape of :func:`transport_costs`'s costs; one-vs-one
    weights are symmetrised first (``costs[k, m]`` and ``costs[m, k]`` are one
    transport), the diagonal ignored.
    """
    n = potentials.shape[-1]
    if weights.ndim == 1:
        return (weights[:, None] * potentials).T / n
    weights = weights + weights.T
    n_clusters = weights.shape[0]
    grad = np.zeros((n, n_clusters))
    for k in range(n_clusters):
        for m in range(n_clusters):
            if m != k:
                grad[:, k] += weights[k, m] * potentials[k, m] / n
    return grad


def _wasserstein(T, D, one_vs_one):
    """Wasserstein GEMINI of one restart (T of shape (n, K)): value and gradient."""
    pi, alpha = _weights(T)
    costs, potentials, _ = transport_costs(alpha, D, one_vs_one)
    if not one_vs_one:
        grad_alpha = transport_gradient(pi, potentials)
        return float(pi @ costs), _chain_to_predictions(T, pi, alpha, grad_alpha, costs)
    # the pair appears as (k, m) and (m, k): twice pi_k pi_m W_km
    grad_alpha = transport_gradient(pi[:, None] * pi[None, :], potentials)
    value = float(pi @ costs @ pi)
    return value, _chain_to_predictions(T, pi, alpha, grad_alpha, 2.0 * costs @ pi)


def _mutual_information(T):
    n = T.shape[-2]
    pi = np.maximum(T.mean(axis=-2), PROPORTION_FLOOR)
    # 1e-300 underflows to 0 in float32 (log 0 times 0: NaN): the smallest normal there
    floor = T.dtype.type(max(PROBABILITY_FLOOR, float(np.finfo(T.dtype).tiny)))
    log_ratio = np.log(np.maximum(T, floor)) - np.log(pi)[..., None, :]
    return (T * log_ratio).sum(axis=(-2, -1)) / n, log_ratio / n

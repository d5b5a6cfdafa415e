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

Every objective is maximised. The gradients w.r.t. alpha and pi are chained to T
once, in :func:`_chain_to_predictions`. Costs: O(n^2 K) for the MMDs (K @ alpha,
never an n^3 product), one exact transport problem per cluster (OvA) or per pair
of clusters (OvO) for Wasserstein.
"""

import numpy as np

OBJECTIVES = ("mmd_ova", "mmd_ovo", "wasserstein_ova", "wasserstein_ovo", "mi")

# Floors that keep an emptying cluster (pi -> 0) and a vanishing distance
# (sqrt(0) has an infinite derivative) finite.
PROPORTION_FLOOR = 1e-12
SQUARED_DISTANCE_FLOOR = 1e-12
PROBABILITY_FLOOR = 1e-300


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
    T = np.asarray(proba, dtype=np.float64)
    if objective == "mi":
        return _mutual_information(T)
    affinity = np.asarray(affinity, dtype=np.float64)
    if affinity.shape != (T.shape[0], T.shape[0]):
        raise ValueError(
            f"affinity must have shape ({T.shape[0]}, {T.shape[0]}), got {affinity.shape}."
        )
    return _OBJECTIVE_FUNCTIONS[objective](T, affinity)


def _weights(T):
    pi = np.maximum(T.mean(axis=0), PROPORTION_FLOOR)
    return pi, T / pi


def _chain_to_predictions(T, pi, alpha, grad_alpha, grad_pi):
    """d/dT from d/dalpha and d/dpi, through alpha = T / pi and pi = mean(T)."""
    n = T.shape[0]
    column_term = (grad_alpha * alpha).sum(axis=0) / (n * pi)
    return grad_alpha / pi - column_term + grad_pi / n


def _mmd_ova(T, K):
    n = T.shape[0]
    pi, alpha = _weights(T)
    K_alpha = K @ alpha
    K_ones = K.sum(axis=1)
    squared = (np.einsum("ik,ik->k", alpha, K_alpha) - 2.0 * K_ones @ alpha + K_ones.sum()) / n**2
    squared = np.maximum(squared, SQUARED_DISTANCE_FLOOR)
    mmd = np.sqrt(squared)
    value = float(pi @ mmd)
    grad_squared = pi / (2.0 * mmd)
    grad_alpha = (2.0 / n**2) * (K_alpha - K_ones[:, None]) * grad_squared
    return value, _chain_to_predictions(T, pi, alpha, grad_alpha, mmd)


def _mmd_ovo(T, K):
    n, n_clusters = T.shape
    pi, alpha = _weights(T)
    K_alpha = K @ alpha
    Q = alpha.T @ K_alpha
    diag = np.diagonal(Q)
    squared = np.maximum((diag[:, None] + diag[None, :] - 2.0 * Q) / n**2, SQUARED_DISTANCE_FLOOR)
    mmd = np.sqrt(squared)
    off_diagonal = ~np.eye(n_clusters, dtype=bool)
    pair_weight = np.outer(pi, pi) * off_diagonal
    value = float((pair_weight * mmd).sum())
    w = pair_weight / (2.0 * mmd)
    B = (2.0 / n**2) * (np.diag(w.sum(axis=1)) - w)
    grad_alpha = 2.0 * K_alpha @ B
    grad_pi = 2.0 * (mmd * off_diagonal) @ pi
    return value, _chain_to_predictions(T, pi, alpha, grad_alpha, grad_pi)


def _transport(a, b, D):
    """Exact optimal transport cost between histograms a and b, with dual potentials."""
    import ot

    _, log = ot.emd(a, b, D, log=True)
    return float(log["cost"]), log["u"], log["v"]


def _histograms(alpha):
    # columns of alpha sum to n: alpha / n are histograms over the samples (one
    # contiguous row per cluster, as the transport solver wants)
    hist = np.ascontiguousarray(alpha.T / alpha.shape[0])
    mass = hist.sum(axis=1, keepdims=True)
    # an emptied cluster has no histogram; any one will do, its weight pi_k is ~0
    return np.where(mass > 0, hist / np.where(mass > 0, mass, 1.0), 1.0 / alpha.shape[0])


def _wasserstein_ova(T, D):
    n, n_clusters = T.shape
    pi, alpha = _weights(T)
    hist = _histograms(alpha)
    uniform = np.full(n, 1.0 / n)
    distances = np.empty(n_clusters)
    grad_alpha = np.empty_like(alpha)
    for k in range(n_clusters):
        distances[k], u, _ = _transport(hist[k], uniform, D)
        grad_alpha[:, k] = pi[k] * (u - u.mean()) / n
    value = float(pi @ distances)
    return value, _chain_to_predictions(T, pi, alpha, grad_alpha, distances)


def _wasserstein_ovo(T, D):
    n, n_clusters = T.shape
    pi, alpha = _weights(T)
    hist = _histograms(alpha)
    distances = np.zeros((n_clusters, n_clusters))
    grad_alpha = np.zeros_like(alpha)
    for k in range(n_clusters):
        for m in range(k + 1, n_clusters):
            cost, u, v = _transport(hist[k], hist[m], D)
            distances[k, m] = distances[m, k] = cost
            # the pair appears as (k, m) and (m, k): twice pi_k pi_m W_km
            grad_alpha[:, k] += 2.0 * pi[k] * pi[m] * (u - u.mean()) / n
            grad_alpha[:, m] += 2.0 * pi[k] * pi[m] * (v - v.mean()) / n
    value = float(pi @ distances @ pi)
    grad_pi = 2.0 * distances @ pi
    return value, _chain_to_predictions(T, pi, alpha, grad_alpha, grad_pi)


def _mutual_information(T):
    n = T.shape[0]
    pi = np.maximum(T.mean(axis=0), PROPORTION_FLOOR)
    log_ratio = np.log(np.maximum(T, PROBABILITY_FLOOR)) - np.log(pi)
    value = float((T * log_ratio).sum() / n)
    return value, log_ratio / n


_OBJECTIVE_FUNCTIONS = {
    "mmd_ova": _mmd_ova,
    "mmd_ovo": _mmd_ovo,
    "wasserstein_ova": _wasserstein_ova,
    "wasserstein_ovo": _wasserstein_ovo,
}

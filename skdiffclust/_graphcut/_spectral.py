"""PRCut's spectral initialisation: the partition spectral clustering reads off the graph.

Gradient descent on the ratio-cut bound only improves a partition locally (the
bound is concave in the hardness of the assignments), so from a random network it
settles on the first cut it meets, and misses the zero cuts of a disconnected
graph. The initial partition computed here is the one spectral clustering finds
on the same graph (Ng, Jordan & Weiss, 2001; Damle, Minden & Ying, 2019); PRCut's
training then starts from a network that reproduces it and lowers its ratio cut.

Everything is written in torch and runs where the training runs (CPU or CUDA);
the graph is only ever multiplied by a block of vectors, so the cost is
O(nnz(W) * block) per product and O(n * block) memory, never n x n:

* **connected components** (SciPy, on the host's CSR graph; blockwise for a dense
  precomputed affinity): with at least ``n_clusters`` components, the partition
  groups whole components (ratio cut 0), balancing their sizes;
* otherwise the **top eigenvectors of the normalised adjacency**
  ``D^-1/2 W D^-1/2`` (the bottom of the normalised Laplacian), by
  Chebyshev-filtered subspace iteration (Zhou & Saad, 2007): a block of vectors
  is filtered by a Chebyshev polynomial of the operator that damps the unwanted
  part of the spectrum, then orthonormalised and rotated by Rayleigh-Ritz, until
  the residuals are small or a budget of products is spent; small graphs are
  solved densely instead;
* the embedding ``D^-1/2 V`` is **discretised by column-pivoted QR**
  (``cluster_qr``, as scikit-learn's ``SpectralClustering(assign_labels=
  'cluster_qr')``): deterministic, no k-means restarts, and invariant to the
  rotation and the signs of the eigenvector basis.
"""

import contextlib
import warnings

import numpy as np
import scipy.sparse as sp
import torch

from skdiffclust._training._torch import one_thread, torch_threads
from skdiffclust._utils._torch import shared_tensor
from skdiffclust._graphcut._graph import connected_component_labels, group_components
from skdiffclust._graphcut._selection import clearly_better, partition_rank

# graphs with at most this many vertices get a dense eigendecomposition (exact,
# and cheaper than iterating at that size)
DENSE_EIGH_MAX_N = 600
# extra vectors in the iterated block: the filter separates the wanted
# eigenvalues from those beyond the block, so a wider block converges faster
MIN_BUFFER = 8
CHEBYSHEV_DEGREE = 12
# budget of products with W; the partition only needs the subspace roughly, and
# PRCut's training refines it
MAX_PRODUCTS = 1200
RESIDUAL_TOL = 1e-4
# k-means restarts on a wide embedding (n_eigenvectors > n_clusters)
SPECTRAL_KMEANS_INIT = 10
# above this many vertices, the k-means of a wide embedding finds its centres on a
# sample of this many rows (seeded), then assigns every row: ten restarts on
# 1,000,000 rows at five widths would cost more than the eigenvectors
SPECTRAL_KMEANS_SAMPLE = 100_000
# several widths (n_eigenvectors='auto', _settings.resolve_start): a wide partition
# replaces the narrowest (column-pivoted QR, deterministic)
# only when its objective is at most this fraction of the narrowest's: on MNIST's
# and Fashion-MNIST's graphs the wide start's objective is 0.28 and 0.40 of the
# narrow one's, on small sets of touching blobs 0.5 to 0.7, where the narrow
# partition is the one that matches the clusters (see the user guide)
AUTO_WIDE_RATIO = 0.5


class NormalisedAdjacency:
    """``x -> D^-1/2 W D^-1/2 x`` for a CSR or dense W on a torch device.

    The diagonal of W is ignored (W_ii = 0, as in the paper). A vertex without
    edges gets a self-loop of weight 1 instead, so that it is a component of its
    own (eigenvalue 1) rather than an eigenvalue 0.

    A CSR W is normalised once, on the host (its diagonal zeroed, its entries
    scaled, the self-loops added), and kept in float32: a product is then one
    sparse product, with no pass over the block of vectors before or after it,
    and it reads half the bytes (sparse products with a block of vectors are
    bound by memory traffic: at 1,000,000 samples, 0.98 s in float64, 0.56 s in
    float32). The block is cast to float32 for the product and back; the
    iteration itself (orthonormalisation, Rayleigh-Ritz, residuals) runs in
    ``dtype``, and the residuals it stops at (1e-4) are far above float32's
    rounding. A dense W is read as it is (it may be a user's matrix of n x n
    entries), and scaled at each product.

    ``product_threads``: the CPU threads of a CSR W's products (the rest of the
    iteration keeps the caller's). Each row of a product is summed by one thread,
    so the products, and the eigenvectors, do not depend on the count (tested);
    at 1,000,000 samples a product took 0.56 s on one thread, 0.26 s on two.
    """

    def __init__(self, W, device, dtype, product_threads=None):
        self.device, self.dtype = device, dtype
        self.dense = not sp.issparse(W)
        if self.dense:
            self.matrix = shared_tensor(W).to(device)
            self.diagonal = torch.diagonal(self.matrix).to(dtype)
            degrees = self.matrix.sum(1, dtype=torch.float64).cpu().numpy()
            degrees -= self.diagonal.double().cpu().numpy()
        else:
            W = sp.csr_matrix(W)
            degrees = np.asarray(W.sum(1), dtype=np.float64).ravel() - W.diagonal()
        isolated = degrees <= 0
        inverse_sqrt = np.zeros_like(degrees)
        inverse_sqrt[~isolated] = 1.0 / np.sqrt(degrees[~isolated])
        if not self.dense:
            self.matrix = _normalised_csr(W, inverse_sqrt, isolated, device)
        self.inverse_sqrt = torch.as_tensor(inverse_sqrt, dtype=dtype, device=device)[:, None]
        self.isolated = torch.as_tensor(isolated, dtype=dtype, device=device)[:, None]
        self.n = W.shape[0]
        self.product_threads = (product_threads if not self.dense
                                and torch.device(device).type == "cpu"
                                else None)

    def __call__(self, x):
        if not self.dense:
            with (contextlib.nullcontext() if self.product_threads is None
                  else torch_threads(self.product_threads)):  # the casts too
                return (self.matrix @ x.to(self.matrix.dtype)).to(self.dtype)
        scaled = self.inverse_sqrt * x
        product = (self.matrix @ scaled.to(self.matrix.dtype)).to(self.dtype)
        product = product - self.diagonal[:, None] * scaled
        return self.inverse_sqrt * product + self.isolated * x

    def to_dense(self):
        identity = torch.eye(self.n, dtype=self.dtype, device=self.device)
        return self(identity)


def _normalised_csr(W, inverse_sqrt, isolated, device):
    """``D^-1/2 (W - diag W) D^-1/2 + diag(isolated)`` as a float32 torch CSR tensor
    (scaled in float64); its indices in int32 on the CPU where they fit (a product
    then reads fewer bytes: 0.45 s instead of 0.56 s at 1,000,000 samples)."""
    rows = np.repeat(np.arange(W.shape[0]), np.diff(W.indptr))
    data = W.data * inverse_sqrt[rows] * inverse_sqrt[W.indices]
    data[rows == W.indices] = 0.0
    M = sp.csr_matrix((data, W.indices, W.indptr), shape=W.shape)
    if isolated.any():
        M = sp.csr_matrix(M + sp.diags(isolated.astype(np.float64)))
    with warnings.catch_warnings():
        # torch says that its sparse CSR support is in beta
        warnings.simplefilter("ignore", UserWarning)
        index = (np.int32 if torch.device(device).type == "cpu"
                 and max(M.nnz, M.shape[0]) < np.iinfo(np.int32).max else np.int64)
        return torch.sparse_csr_tensor(
            torch.as_tensor(M.indptr.astype(index, copy=False)),
            torch.as_tensor(M.indices.astype(index, copy=False)),
            torch.as_tensor(M.data), size=M.shape, dtype=torch.float32,
            check_invariants=False,
        ).to(device)


def spectral_partition(W, n_clusters, components=None, *, device, dtype, seed,
                       widths=None, gamma=0.0, eigenvectors=None, product_threads=None):
    """Spectral clustering's partition of the graph W into ``n_clusters`` groups.

    Parameters
    ----------
    W : scipy.sparse.csr_matrix or ndarray of shape (n_samples, n_samples)
        Symmetric non-negative affinity (its diagonal is ignored).
    n_clusters : int
    components : ndarray of int, default=None
        The connected component of each vertex, if known.
    device : torch.device
        Where the eigenvectors are computed.
    dtype : torch.dtype
        Precision of the eigenvector computation.
    seed : int
        Seeds the starting block of the subspace iteration (and the k-means of a
        wider embedding).
    widths : sequence of int, default=None
        Widths of the embeddings, increasing (``ResolvedStart.widths``); ``None``:
        ``n_clusters``. ``n_clusters`` eigenvectors are discretised by
        :func:`cluster_qr`; more: the row-normalised embedding is clustered by
        k-means (:func:`kmeans_of_directions`). Several: their partitions, of
        which the one :func:`lowest_objective` picks on W.
    gamma : float, default=0.0
        Weight of the balance term of the objective that picks the width
        (several widths only).
    eigenvectors : torch.Tensor, default=None
        W's top eigenvectors, already computed with this ``seed``: used when
        the widest width is theirs.
    product_threads : int, default=None
        CPU threads of W's products (:class:`NormalisedAdjacency`).

    Returns
    -------
    labels : ndarray of int64, shape (n_samples,)
    """
    if components is None:
        components = connected_component_labels(W)
    n_components = int(components.max()) + 1
    if n_components >= n_clusters:
        return group_components(components, n_clusters)
    operator = NormalisedAdjacency(W, device, dtype, product_threads)
    widths = [n_clusters] if widths is None else [int(width) for width in widths]
    vectors = (eigenvectors if eigenvectors is not None
               and eigenvectors.shape[1] == max(widths)
               else top_eigenvectors(operator, max(widths), seed))
    maps = operator.inverse_sqrt * vectors + operator.isolated * vectors
    candidates = (partition_of_width(maps[:, :width], n_clusters, seed) for width in widths)
    if len(widths) == 1:
        return next(candidates)
    return lowest_objective(candidates, W, n_clusters, gamma)


def laplacian_eigengap(values, n_clusters):
    """Eigenvalues ``n_clusters`` and ``n_clusters + 1`` of the normalised
    Laplacian (one minus ``values``, the normalised adjacency's, decreasing:
    ``top_eigenvectors(with_values=True)``), the first at least 1e-12, the second
    infinite where ``values`` has no more; ``_settings.clear_eigengap`` reads them.
    Eigenvalue ``n_clusters + 1`` is the block's Ritz value: converging it too
    would take long exactly where the gap is clear, inside the bulk of the
    spectrum."""
    if values.shape[0] <= n_clusters:
        return 0.0, float("inf")
    lowest = torch.clamp(1.0 - values[n_clusters - 1], min=1e-12)
    return float(lowest), float(1.0 - values[n_clusters])


def partition_of_width(maps, n_clusters, seed):
    """The partition read off an embedding: :func:`cluster_qr` when it has
    ``n_clusters`` columns, :func:`kmeans_of_directions` when it has more."""
    if maps.shape[1] > n_clusters:
        return kmeans_of_directions(maps, n_clusters, seed)
    return cluster_qr(maps).cpu().numpy().astype(np.int64)


def lowest_objective(candidates, W, n_clusters, gamma):
    """The narrowest partition, unless a wider one has at most ``AUTO_WIDE_RATIO``
    times its PRCut objective on W; then the first wide one of lowest objective
    (using the most clusters first; a later one wins only when lower by a
    margin, so that near-ties are decided by the order, not by the data's last
    bits)."""
    candidates = iter(candidates)
    narrow = next(candidates)
    narrow_rank = partition_rank(W, narrow, n_clusters, gamma)
    best = None
    for labels in candidates:
        rank = partition_rank(W, labels, n_clusters, gamma)
        if best is None or clearly_better(rank, best[0]):
            best = (rank, labels)
    threshold = (narrow_rank[0], AUTO_WIDE_RATIO * narrow_rank[1])
    if best is None or not (best[0][0], best[0][1]) <= threshold:
        return narrow
    return best[1]


def top_eigenvectors(operator, k, seed, with_values=False):
    """Orthonormal eigenvectors of the ``k`` largest eigenvalues of ``operator``.

    Its spectrum must lie in [-1, 1] (a normalised adjacency). Dense
    eigendecomposition for small graphs, else Chebyshev-filtered subspace
    iteration on a block of ``k + buffer`` vectors. ``with_values``: also the
    eigenvalues, decreasing, and at least one beyond the ``k`` (the block's
    Ritz values: the first ``k`` converged, the next estimated from below).
    """
    n = operator.n
    if n <= max(DENSE_EIGH_MAX_N, 3 * (k + MIN_BUFFER)):
        dense = operator.to_dense()
        values, vectors = torch.linalg.eigh((dense + dense.T) / 2)
        vectors = vectors[:, -k:].flip(1)
        return (vectors, values.flip(0)) if with_values else vectors
    block = min(n, k + max(MIN_BUFFER, k // 2))
    generator = torch.Generator(device="cpu").manual_seed(int(seed))
    start = torch.randn(n, block, generator=generator, dtype=torch.float64)
    basis, _ = torch.linalg.qr(start.to(device=operator.device, dtype=operator.dtype))
    values, basis, image = _rayleigh_ritz(basis, operator(basis))
    n_products = 1
    while n_products + CHEBYSHEV_DEGREE + 1 <= MAX_PRODUCTS:
        # damp the spectrum below the block's smallest Ritz value, down to -1
        filtered = _chebyshev_filter(operator, basis, CHEBYSHEV_DEGREE,
                                     cut=float(values[-1]))
        basis, _ = torch.linalg.qr(filtered)
        values, basis, image = _rayleigh_ritz(basis, operator(basis))
        n_products += CHEBYSHEV_DEGREE + 1
        residuals = torch.linalg.vector_norm(image[:, :k] - basis[:, :k] * values[:k], dim=0)
        if float(residuals.max()) < RESIDUAL_TOL:
            break
    return (basis[:, :k], values) if with_values else basis[:, :k]


def _rayleigh_ritz(basis, image):
    """Ritz values (decreasing), vectors and their images within span(basis)."""
    projected = basis.T @ image
    values, rotation = torch.linalg.eigh((projected + projected.T) / 2)
    values, rotation = values.flip(0), rotation.flip(1)
    return values, basis @ rotation, image @ rotation


def _chebyshev_filter(operator, x, degree, cut):
    """``T_degree`` of the operator mapped so that [-1, cut] becomes [-1, 1].

    Eigenvalues in [-1, cut] are kept below 1 in magnitude, those above ``cut``
    grow like ``cosh(degree * acosh(t))``. The scaled three-term recurrence of
    Zhou & Saad (2007) keeps the largest eigenvalue's factor at 1 (no overflow).
    """
    cut = min(max(cut, -0.9), 0.999)
    half_width = (cut + 1.0) / 2.0
    centre = (cut - 1.0) / 2.0
    sigma = half_width / (1.0 - centre)
    tau = 2.0 / sigma
    previous = x
    current = operator(x).sub_(x, alpha=centre).mul_(sigma / half_width)
    for _ in range(2, degree + 1):
        sigma_next = 1.0 / (tau - sigma)
        # in place on the product's fresh tensor: no temporaries of the block's size
        following = (operator(current).sub_(current, alpha=centre)
                     .mul_(2.0 * sigma_next / half_width)
                     .sub_(previous, alpha=sigma * sigma_next))
        previous, current, sigma = current, following, sigma_next
    return current


def kmeans_of_directions(maps, n_clusters, seed):
    """Labels of the rows of a wide embedding: k-means (``SPECTRAL_KMEANS_INIT``
    restarts, seeded by ``seed``, the lowest inertia kept) of their directions
    (Ng, Jordan & Weiss, 2001: each row scaled to unit length, which also undoes
    the degree scaling of ``maps``). On the host, in float64; the embedding is
    n x width, small next to the graph."""
    from sklearn.cluster import KMeans

    directions = maps.detach().to("cpu", torch.float64).numpy()
    norms = np.linalg.norm(directions, axis=1, keepdims=True)
    directions = directions / np.maximum(norms, np.finfo(np.float64).tiny)
    seed = int(seed) % 2**32
    kmeans = KMeans(n_clusters, n_init=SPECTRAL_KMEANS_INIT, random_state=seed)
    if directions.shape[0] <= SPECTRAL_KMEANS_SAMPLE:
        return kmeans.fit_predict(directions).astype(np.int64)
    # large graphs: the centres from a sample, every row assigned to the nearest
    sample = np.random.default_rng(seed).choice(directions.shape[0], SPECTRAL_KMEANS_SAMPLE,
                                                replace=False)
    return kmeans.fit(directions[np.sort(sample)]).predict(directions).astype(np.int64)


def cluster_qr(maps):
    """Labels of the rows of an embedding by column-pivoted QR (Damle et al., 2019).

    Picks k well-separated rows greedily (the pivots of a QR factorisation of
    ``maps.T`` with column pivoting), rotates the embedding so that they align with
    the coordinate axes (the polar factor of their block), and gives each sample
    the axis along which it is largest. Torch, on the embedding's device; no
    randomness.
    """
    k = maps.shape[1]
    residual = maps.clone()
    pivots = []
    for _ in range(k):
        pivot = torch.argmax((residual * residual).sum(1))
        direction = residual[pivot]
        direction = direction / torch.linalg.vector_norm(direction).clamp_min(
            torch.finfo(maps.dtype).tiny)
        residual = residual - (residual @ direction)[:, None] * direction[None, :]
        pivots.append(pivot)
    chosen = maps[torch.stack(pivots)]
    u, _, vh = torch.linalg.svd(chosen.T)
    return torch.argmax((maps @ (u @ vh)).abs(), dim=1)


def narrow_eigengap(graph, n_clusters, *, device, seed, product_threads=None):
    """The Laplacian's eigenvalues ``n_clusters`` and ``n_clusters + 1`` of the graph
    (:func:`laplacian_eigengap`), and the top ``n_clusters`` eigenvectors they were
    read from (``initial_partition``'s ``eigenvectors``, with the same seed), on
    ``device``; the graph's products on ``product_threads`` CPU threads (their
    results do not depend on them)."""
    device = torch.device(device)
    dtype = torch.float32 if device.type == "cuda" else torch.float64
    with one_thread(device):
        operator = NormalisedAdjacency(graph, device, dtype, product_threads)
        vectors, values = top_eigenvectors(operator, n_clusters, seed, with_values=True)
        return laplacian_eigengap(values, n_clusters), vectors


def initial_partition(graph, n_clusters, components=None, *, device, seed,
                      widths=None, gamma=0.0, eigenvectors=None, product_threads=None):
    """Spectral clustering's partition of the graph (:func:`spectral_partition`),
    on ``device``.

    In float64 on the CPU, float32 on CUDA; on one torch thread on the CPU, and
    one OpenMP thread for the k-means of a wide embedding (``widths``), whose
    sums would otherwise depend on the count
    (:func:`~skdiffclust._utils._torch.one_thread`); the graph's products on
    ``product_threads``.
    """
    from threadpoolctl import threadpool_limits

    device = torch.device(device)
    dtype = torch.float32 if device.type == "cuda" else torch.float64
    with one_thread(device), threadpool_limits(1, user_api="openmp"):
        return spectral_partition(graph, n_clusters, components, device=device, dtype=dtype,
                                  seed=seed, widths=widths, gamma=gamma,
                                  eigenvectors=eigenvectors, product_threads=product_threads)


def laplacian_spectrum(graph, n_values, *, device, seed, product_threads=None):
    """The ``n_values`` smallest eigenvalues of the graph's normalised Laplacian,
    increasing, as float64 (``n_clusters='auto'``'s spectrum,
    ``_settings.PRCutSettings.counted``); computed as :func:`narrow_eigengap`'s."""
    device = torch.device(device)
    dtype = torch.float32 if device.type == "cuda" else torch.float64
    with one_thread(device):
        operator = NormalisedAdjacency(graph, device, dtype, product_threads)
        _, values = top_eigenvectors(operator, n_values, seed, with_values=True)
    return np.sort(1.0 - values.double().cpu().numpy())[:n_values]

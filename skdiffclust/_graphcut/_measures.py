"""One graph of a fit, and everything ``n_clusters='auto'`` and the spectral start
read of it, each measured once: its connected components, its hubs, its
neighbourhoods, its shared-neighbour weights, the spectrum of its normalised
Laplacian, the stability of its partitions and the start's eigengap.

PRCut and DeepImageClustering build one :class:`GraphMeasures` per fit and hand it
to the count (``_count.count_clusters``) and then to :func:`spectral_start`: the
shared-neighbour weights the count reads are those the start reads, not computed
again. Imports no torch at its top (the eigenproblems are imported when asked).
"""

from skdiffclust._graphcut._graph import (
    connected_component_labels,
    degree_skewness,
    mean_neighbourhood,
    shared_neighbor_graph,
)
from skdiffclust._graphcut._start import isolates_a_handful


class GraphMeasures:
    """A fit's graph and its measures (the ``_start.StartGraph`` protocol's, and
    the count's), each taken when first asked, with one seed and device.

    Parameters
    ----------
    graph : scipy.sparse.csr_matrix or ndarray
        The symmetric affinity graph.
    components : ndarray of int, default=None
        Each vertex's connected component, if known (counted on the graph when
        first asked, otherwise; its shared-neighbour weights have the same).
    device : torch.device or str
        Where the eigenproblems run.
    seed : int
        The eigenproblems' and the partitions' seed.
    n_threads : int, default=1
        CPU threads of the shared-neighbour counts and of the graph's products
        (their results do not depend on them).
    """

    def __init__(self, graph, components=None, *, device, seed, n_threads=1):
        self.graph, self._components = graph, components
        self.device, self.seed, self.n_threads = device, seed, n_threads
        self.n_samples = graph.shape[0]
        self.n_clusters = None  # the start's number (spectral_start sets it)
        self._shared, self._narrow = None, {}

    @property
    def components(self):
        """Each vertex's connected component."""
        if self._components is None:
            self._components = connected_component_labels(self.graph)
        return self._components

    def n_components(self):
        """The graph's connected components."""
        return int(self.components.max()) + 1

    def degree_skewness(self):
        """The skewness of the graph's weighted degrees (``_graph.degree_skewness``)."""
        return degree_skewness(self.graph)

    def mean_neighbourhood(self):
        """The graph's mean closed neighbourhood (``_graph.mean_neighbourhood``)."""
        return mean_neighbourhood(self.graph)

    def weights(self, shared_neighbours):
        """The graph, or its shared-neighbour weights (computed once)."""
        if not shared_neighbours:
            return self.graph
        if self._shared is None:
            self._shared = shared_neighbor_graph(self.graph, self.n_threads)
        return self._shared

    def spectrum(self, n_values, shared_neighbours):
        """The ``n_values`` smallest eigenvalues of the normalised Laplacian of
        :meth:`weights`, increasing."""
        from skdiffclust._graphcut._spectral import laplacian_spectrum  # needs torch

        return laplacian_spectrum(self.weights(shared_neighbours), n_values,
                                  device=self.device, seed=self.seed,
                                  product_threads=self.n_threads)

    def stability(self, candidates, shared_neighbours):
        """The stability, modularity and relative cut of each candidate's
        partitions of :meth:`weights` (a ``_stability.CandidateMeasures``)."""
        from skdiffclust._graphcut._stability import PartitionStability  # needs torch

        return PartitionStability(self.weights(shared_neighbours), int(candidates[-1]),
                                  device=self.device, seed=self.seed,
                                  n_threads=self.n_threads)(candidates)

    def eigengap(self, shared_neighbours):
        """The Laplacian's eigenvalues ``n_clusters`` and ``n_clusters + 1`` of
        :meth:`weights` (``_spectral.narrow_eigengap``), the eigenvectors kept
        for the start's partition."""
        from skdiffclust._graphcut._spectral import narrow_eigengap  # needs torch

        gap, self._narrow[shared_neighbours] = narrow_eigengap(
            self.weights(shared_neighbours), self.n_clusters, device=self.device,
            seed=self.seed, product_threads=self.n_threads)
        return gap

    def partition(self, resolved, gamma=0.0):
        """The graph the start reads and its partition into ``n_clusters``
        (``_spectral.initial_partition``) for ``resolved`` (a ``_start.ResolvedStart``;
        its ``fallback`` widths where the partition isolates a handful of samples)."""
        from skdiffclust._graphcut._spectral import initial_partition  # needs torch

        graph = self.weights(resolved.shared_neighbours)

        def partition(widths):
            return initial_partition(
                graph, self.n_clusters, self.components, device=self.device,
                seed=self.seed, widths=widths, gamma=gamma,
                eigenvectors=self._narrow.get(resolved.shared_neighbours),
                product_threads=self.n_threads)

        labels = partition(resolved.widths)
        if resolved.fallback and isolates_a_handful(labels, self.n_clusters):
            labels = partition(resolved.fallback)
        return graph, labels


def spectral_start(measures, n_clusters, *, start, gamma=0.0):
    """The graph a spectral start reads and its partition into ``n_clusters``:
    ``start`` (the estimator's settings record) resolves the start's ``'auto'``
    values once, by its ``resolved_start(n_clusters, measures)``, from the
    measures of ``measures`` (a :class:`GraphMeasures`; an eigengap it asks for is
    solved once, its eigenvectors kept for the partition). The graph's integer
    counts and its products with the eigenvectors run on the measures'
    ``n_threads`` (neither depends on the count), the rest on one thread.

    Returns
    -------
    start_graph : scipy.sparse.csr_matrix
        The graph or its shared-neighbour weights.
    labels : ndarray of int64, shape (n_samples,)
    """
    measures.n_clusters, measures._narrow = n_clusters, {}
    return measures.partition(start.resolved_start(n_clusters, measures), gamma)

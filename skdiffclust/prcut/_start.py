"""Where PRCut's training starts, for ``fit`` and ``partial_fit``'s first call:
the seeds, how the network reads X, the graph and the initial partition."""

from skdiffclust._utils._random import derive_seeds
from skdiffclust.prcut._graph import (
    connected_component_labels,
    group_components,
    shared_neighbor_graph,
    warn_on_degenerate_graph,
)
from skdiffclust.prcut._inputs import graph_source_and_input
from skdiffclust.prcut._scaling import FeatureScaling
from skdiffclust.prcut._settings import n_threads


def training_start(estimator, X, device, training, n_seeds, graph_input=None, stream=False):
    """What ``fit`` and ``partial_fit``'s first call start from: ``n_seeds``
    seeds (the spectral start's is ``seeds[2 * n_init]``), how the network reads
    X (``scaling``; for a ``stream``, the scaling of X's features, which the
    later chunks' graphs use, with a module too), the graph (of X, or of
    ``graph_input``), the initial partition (``None`` for ``init='random'``) and
    whether it is the graph's whole components (``keep_components``); warns
    about a degenerate graph."""
    if (estimator.n_eigenvectors not in (None, "auto")
            and estimator.n_eigenvectors < estimator.n_clusters):
        raise ValueError(
            f"n_eigenvectors={estimator.n_eigenvectors} is smaller than n_clusters="
            f"{estimator.n_clusters}: the spectral start needs at least one eigenvector "
            "per cluster (None uses n_clusters).")
    if estimator.module is not None:  # before any work: the graph may take long
        from skdiffclust.prcut._module import check_is_module

        check_is_module(estimator.module)
    seeds = derive_seeds(estimator.random_state, n_seeds)
    source, scaling = graph_source_and_input(
        X, graph_input, precomputed=estimator.affinity == "precomputed",
        builtin=estimator.module is None or stream)
    graph = source
    if isinstance(source, FeatureScaling):
        graph = estimator._build_graph(source, device, stacklevel=6)
    components = connected_component_labels(graph)
    whole = bool(estimator.keep_components and components.max() + 1 >= estimator.n_clusters)
    warn_on_degenerate_graph(components, getattr(source, "identical", False),
                             estimator.n_clusters, estimator.keep_components, stacklevel=6)
    initial_labels = None
    if whole:  # zero cuts: whole components, which training could only cut
        initial_labels = group_components(components, estimator.n_clusters)
    elif estimator.init != "random":
        initial_labels = training.initial_partition(
            graph if estimator.init == "spectral"
            else shared_neighbor_graph(graph, n_threads(estimator.n_jobs)),
            estimator.n_clusters, components, device=device,
            seed=seeds[2 * estimator.n_init], n_threads=n_threads(estimator.n_jobs),
            n_eigenvectors=estimator.n_eigenvectors, gamma=estimator.gamma)
    return seeds, scaling, graph, initial_labels, whole


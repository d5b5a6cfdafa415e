"""Where PRCut's training starts, for ``fit`` and ``partial_fit``'s first call:
the seeds, how the network reads X, the graph and the initial partition.

Plain values in, plain values out: the data, the ``PRCutSettings`` of the
training and the ``StartSettings`` of the graph and the start; the estimator
sets its fitted attributes from what these functions return.
"""

from typing import NamedTuple

from skdiffclust._utils._random import derive_seeds
from skdiffclust._utils._threads import host_threads
from skdiffclust._graphcut._graph import (
    build_graph,
    connected_component_labels,
    group_components,
    warn_on_degenerate_graph,
)
from skdiffclust._graphcut._measures import GraphMeasures, spectral_start
from skdiffclust.prcut._inputs import graph_source_and_input
from skdiffclust.prcut._scaling import AffinityRows, FeatureScaling


class TrainingStart(NamedTuple):
    """Where a training starts (:func:`training_start`): the seeds, how the
    network reads X (``scaling``), the graph PRCut trains on (of X, or of
    ``graph_input``; for ``fit``, its shared-neighbour weights where the start
    read those), the initial partition (``None`` for
    ``init='random'``), whether it is the graph's whole components, the
    training's ``settings`` with ``n_clusters`` counted, and how it was
    (``count``, a ``_settings.ClusterCount``)."""

    seeds: list
    scaling: object
    graph: object
    initial_labels: object
    whole: bool
    settings: object
    count: object


def training_start(X, settings, start, *, n_seeds, graph_input=None,
                   stream=False):
    """What ``fit`` and ``partial_fit``'s first call start from.

    Parameters
    ----------
    X : ndarray or sparse matrix
        The validated samples (or a precomputed affinity).
    settings : PRCutSettings
        The training's (``n_clusters``, ``gamma``, ``module``, ``device``).
    start : StartSettings
        The graph's and the start's (whose ``resolved_start`` resolves the
        spectral start's ``'auto'`` values).
    n_seeds : int
        Seeds to derive from ``start.random_state`` (the spectral start's is
        ``seeds[2 * start.n_init]``).
    graph_input : ndarray or sparse matrix, default=None
        What the graph is built from in place of X (validated).
    stream : bool, default=False
        For ``partial_fit``: ``scaling`` is then the scaling of X's features,
        which the later chunks' graphs use, with a module too.

    Returns
    -------
    TrainingStart
        Warns about a degenerate graph.
    """
    if settings.module is not None:  # before any work: the graph may take long
        from skdiffclust.prcut._module import check_is_module

        check_is_module(settings.module)
    seeds = derive_seeds(start.random_state, n_seeds)
    source, scaling = graph_source_and_input(
        X, graph_input, precomputed=start.affinity == "precomputed",
        builtin=settings.module is None or stream)
    graph = source
    if isinstance(source, FeatureScaling):
        graph = build_graph(source, start, settings.device)
    components = connected_component_labels(graph)
    measures = GraphMeasures(graph, components, device=settings.device,
                             seed=seeds[2 * start.n_init], n_threads=host_threads(start.n_jobs))
    settings, count = settings.counted(measures)
    n_clusters = settings.n_clusters
    whole = bool(start.keep_components and components.max() + 1 >= n_clusters)
    warn_on_degenerate_graph(components, getattr(source, "identical", False),
                             n_clusters, start.keep_components)
    initial_labels = None
    if whole:  # zero cuts: whole components, which training could only cut
        initial_labels = group_components(components, n_clusters)
    elif start.init != "random":
        reweighted, initial_labels = spectral_start(measures, n_clusters, start=start,
                                                    gamma=settings.gamma)
        if reweighted is not graph and not stream:
            graph = reweighted  # train on the graph the start read (see the user guide)
    return TrainingStart(seeds, scaling, graph, initial_labels, whole, settings, count)


def network_input(X, scaling, settings):
    """What the network reads, and ``settings`` for it: the scaled features
    (built-in network; their centring, when sparse, is ``input_offset``) or the
    rows of X (``module``); the rows of a precomputed affinity are read in place
    (``share_inputs``). Call it after the graph is built: it standardises the
    scaled features in place."""
    builtin = settings.module is None
    rows = isinstance(scaling, AffinityRows)
    settings = settings.but(share_inputs=rows,
                            input_offset=scaling.offset if builtin else None,
                            input_scale=scaling.scale if builtin and rows else 1.0)
    return (scaling.network_input() if builtin else X), settings


def training_device(device):
    """The torch device ``device`` names (``'auto'`` resolved), after checking that
    torch, which PRCut's training needs, is installed (``fit`` and ``partial_fit``
    ask it first; ``import skdiffclust`` imports no torch)."""
    from skdiffclust._utils._optional import import_optional

    import_optional("torch", "PRCut")
    from skdiffclust._utils._torch import resolve_device

    return resolve_device(device)

"""The graph of the data and the ratio cut on it: a floor below the methods, shared
by PRCut and DeepImageClustering (ARCHITECTURE.md).

``_graph`` (the kNN graph, its shared-neighbour weights, the ratio cut and the
objective), ``_duplicates``, ``_spectral`` (the spectral start's eigenproblem and
partition), ``_stability`` (the stability of the graph's partitions),
``_selection``, ``_loss`` (the ratio-cut bound, torch), ``_measures`` (one graph of a
fit and everything the count and the start read of it, measured once), ``_count``
(``n_clusters='auto'`` on a graph), ``_start`` (the start's ``'auto'`` rules),
``_tree`` (the graph's spanning tree cut by Genie's rule), ``_descent`` (the
objective descended by single-sample moves) and ``_merge`` (clusters merged along
the graph while they are linked).
"""

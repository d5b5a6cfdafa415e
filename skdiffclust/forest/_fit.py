"""What ``SpanningForestClustering.fit`` runs once the input is validated: the
count of ``n_clusters='auto'`` (decided by ``_settings.counted``), the embedding's
training (torch, imported on first use) and the forest of the chosen number."""

import numpy as np

from skdiffclust._utils._count import counts_clusters
from skdiffclust._utils._optional import import_optional
from skdiffclust._utils._random import derive_seeds
from skdiffclust._utils._threads import host_threads
from skdiffclust._utils._validation import check_hidden_layer_sizes
from skdiffclust._utils._warn import warn_user
from skdiffclust.forest._constraints import UNLABELLED, check_partial_labels
from skdiffclust.forest._inference import embed
from skdiffclust.forest._settings import (
    EmbeddingSettings,
    counted,
    hold_out,
    training_device,
)
from skdiffclust.forest._solver import (
    FeatureForests,
    SimilarityForests,
    resolved_metric_params,
)


def fit_forest(estimator, X, partial_labels, constraints, *, params, sample_shape):
    """The forest of a fit, its count and the embedding's fitted attributes.

    ``X``: the validated (rescaled) features, or similarities; ``partial_labels``:
    fit's (None: none given); ``params``: the clustering metric's resolved
    parameters. The number of clusters is counted on ``X`` as given, with the
    estimator's metric and the constraints, before an embedding is trained (its
    training needs the number); the embedded samples are then cut at that number.

    Returns
    -------
    forest : SpanningForest
    count : ClusterCount
    fitted : dict
        The embedding's fitted attributes (empty without one).
    X : ndarray
        The samples the forest was built on (embedded, with an embedding).
    """
    if estimator.metric == "precomputed":
        forests = SimilarityForests(X, constraints=constraints)
    else:
        if estimator.embedding is not None and counts_clusters(estimator.n_clusters):
            # the input's metric (the embedding's forest ignores it)
            params = resolved_metric_params(estimator.metric, estimator.metric_params, X)
        forests = FeatureForests(X, metric=estimator.metric, metric_params=params,
                                 algorithm=estimator.algorithm, constraints=constraints)
    count = counted(estimator.n_clusters, estimator.max_clusters, forests)
    fitted = {}
    if estimator.embedding is not None:
        fitted = train_embedding(estimator, X, partial_labels, sample_shape,
                                 count.n_clusters)
        X = embed(X, fitted["embedding_state_"], fitted["_embedding_template"],
                  sample_shape)
        fitted["_n_features_out"] = X.shape[1]
        # embeddings are trained for (squared) Euclidean similarities
        forests = FeatureForests(X, metric="euclidean", algorithm=estimator.algorithm,
                                 constraints=constraints)
    return forests.forest(count.n_clusters), count, fitted, X


def train_embedding(estimator, X, partial_labels, sample_shape, n_clusters):
    """Train the embedding for ``n_clusters`` clusters; returns its fitted attributes."""
    if estimator.metric == "precomputed":
        raise ValueError(
            "embedding needs feature vectors; it cannot be used with "
            "metric='precomputed'."
        )
    import_optional("torch", "SpanningForestClustering(embedding=...)")
    from skdiffclust.forest._embedding import fit_embedding, make_embedding

    labels = (np.full(X.shape[0], UNLABELLED) if partial_labels is None
              else check_partial_labels(partial_labels, X.shape[0], "partial_labels"))
    init_seed, train_seed, split_seed = derive_seeds(estimator.random_state, 3)
    module = make_embedding(
        estimator.embedding, X, estimator.n_components,
        check_hidden_layer_sizes(estimator.hidden_layer_sizes), init_seed, sample_shape)
    validation_data = None
    if estimator.early_stopping and np.count_nonzero(labels != UNLABELLED) >= 2:
        X, labels, validation_data = hold_out(X, labels, estimator.validation_fraction,
                                              split_seed)
    if np.count_nonzero(labels != UNLABELLED) < 2:
        warn_user(
            "Fewer than two labelled samples in partial_labels: nothing to learn from, the "
            "embedding keeps its initial weights. The labels are read from partial_labels "
            "only, as fit(X, partial_labels=labels): fit does not read y, as no "
            "scikit-learn clusterer does.", UserWarning,
        )
    # 'linear' and 'mlp' embed with NumPy (no torch object is kept, so that the
    # fitted model loads without torch); a user module is kept as a CPU template
    device = training_device(estimator.device, estimator.embedding, estimator.batch_size)
    return fit_embedding(
        module, X, labels, embedding_settings(estimator, n_clusters, device, train_seed),
        validation_data=validation_data, sample_shape=sample_shape,
        keep_template=not isinstance(estimator.embedding, str))


def embedding_settings(estimator, n_clusters, device, seed):
    """A fit's training settings: the estimator's parameters, the number of
    clusters (counted with ``'auto'``), ``device`` and ``seed``."""
    return EmbeddingSettings(  # values as given, as the training always took them
        n_clusters=n_clusters, epsilon=estimator.epsilon,
        n_perturbations=estimator.n_perturbations, batch_size=estimator.batch_size,
        max_iter=estimator.max_iter, learning_rate=estimator.learning_rate,
        tol=estimator.tol, n_iter_no_change=estimator.n_iter_no_change, device=device,
        seed=seed, verbose=estimator.verbose, weight_decay=estimator.weight_decay,
        learning_rate_schedule=estimator.learning_rate_schedule,
        steps_per_epoch=estimator.steps_per_epoch,
        solver_threads=host_threads(estimator.n_jobs))

"""DeepImageClustering: images clustered by a network that learns its own representation."""

import contextlib
from numbers import Integral, Real

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    ClusterMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted

from skdiffclust._training._loop import TrainingSession
from skdiffclust._utils._count import ClusterCount, set_count_attributes
from skdiffclust._utils._optional import import_optional
from skdiffclust._utils._random import derive_seeds
from skdiffclust._utils._state import keeps_state_on_failure
from skdiffclust._utils._threads import device_type, host_threads
from skdiffclust._utils._validation import (N_JOBS, NumberInterval, RenamedParameters,
                                            refusing_former_names,
                                            check_n_clusters, warn_empty_clusters,
                                            warn_unclear_merge)
from skdiffclust._utils._warn import warn_user
from skdiffclust.deep._centres import nearest_centre_head, silhouette_refined
from skdiffclust.deep._images import (
    PixelScale, check_images, float32_precision, reduced_side)
from skdiffclust.deep._inference import forward, head_probabilities
from skdiffclust.deep._merge import merge_columns, merged_outputs, occupied_first
from skdiffclust.deep._settings import DeepSettings

# seeds: the networks' (graph features, spectral start, network, warm-up, clustering and
# self-labelling batches, the merge's views), then the count's: the silhouette's sample, starts
N_SEEDS = 8


class DeepImageClustering(RenamedParameters, ClassNamePrefixFeaturesOutMixin,
                          TransformerMixin, ClusterMixin, BaseEstimator):
    """Clustering of images by a convolutional network trained without labels.

    A small convolutional network learns to assign images to clusters from the
    images alone: it starts from spectral clustering of a nearest-neighbour graph
    of the images' gradient histograms, then learns a partition that keeps each
    image with its neighbours and with randomly moved views of itself (PRCut's
    bound of the ratio cut, :class:`skdiffclust.torch.PRCutLoss`, on the pairs),
    on several heads of which it keeps the one of lowest objective; optionally,
    it then teaches the confident images' clusters from strongly distorted views
    of them (self-labelling). Needs PyTorch; a fitted estimator's ``predict`` runs the
    trained network on the CPU. Read more in the :ref:`User Guide
    <deep_clustering>`.

    Parameters
    ----------
    n_clusters : int or 'auto', default=8
        Number of clusters. ``'auto'``: the network is trained on ``max_clusters`` clusters,
        those it does not keep apart are merged (while the mean of two links, the
        embedding's nearest-neighbour edges and the images' random views that move between
        two clusters, is at least 0.03), a network is trained again from the merged
        partition, and the number of highest silhouette of k-means near the merges' count in
        its embedding is the number found, its clusters the nearest centres
        (:ref:`n_clusters_auto_deep`). Where the clusters the merges kept are still linked
        almost as much, a ``ClusterCountWarning`` says that no number stands out.

    max_clusters : int, default=50
        The number of clusters ``n_clusters='auto'`` trains on (at most the
        images less one, and an integer ``n_eigenvectors``), so the most it can
        find. Its first network costs at most what a fit given ``max_clusters``
        costs (see ``max_iter``), the merges one nearest-neighbour search of
        the embedding and four forward passes over the images, and the network
        trained on the merged clusters about a fit given their number, less its
        graph and start.

    image_shape : tuple of int, default=None
        ``(height, width)``, ``(channels, height, width)`` or ``(height, width,
        channels)`` (read as ``channels`` says) of each image when X holds rows
        of pixels. ``None``: X of shape ``(n, height, width)``, ``(n, channels,
        height, width)`` or ``(n, height, width, channels)``, or rows of a
        square number of pixels (grey images: 784 values are 28 x 28).

    channels : {'auto', 'first', 'last'}, default='auto'
        Where the channels are in X of four axes (and in an ``image_shape`` of
        three values): ``'first'`` (``(n, channels, height, width)``),
        ``'last'`` (``(n, height, width, channels)``, as PIL, imageio and
        matplotlib give images), or ``'auto'``: last when the last axis has 1,
        3 or 4 values and the second does not, or when the images are square
        read channels last only (``(n, 8, 8, 5)``); first in the mirror cases
        and where neither sign speaks; a shape both could describe, such as
        ``(n, 3, 8, 3)``, ``(n, 4, 4, 4)`` or ``(n, 28, 20, 6)``, is refused with
        a message naming both readings. The same images give the same labels in either layout;
        new images must come in the training images' layout (``channels_``).

    n_neighbors : int, default=10
        Neighbours of each image in the graph. With ``n_clusters='auto'`` also
        those of the embedding's graph the clusters merge along, at most half
        the mean size of the clusters trained on.

    n_eigenvectors : int or 'auto', default='auto'
        Eigenvectors of the spectral start (PRCut's wide start, on the graph's
        shared-neighbour weights), at least ``n_clusters``. ``'auto'``: the
        width of lowest objective among 1 to 3 times ``n_clusters``, as
        :class:`~skdiffclust.PRCut`'s (the narrowest unless a wider one
        halves it).

    n_heads : int, default=5
        Clustering heads trained together on the shared network; the one of
        lowest objective is kept.

    balance : float, default=1.0
        Weight of the KL divergence of the cluster proportions from uniform (the
        ``balance`` of :class:`~skdiffclust.PRCut`).

    self_labelling : int, default=0
        Epochs of self-labelling after the clustering phase (0: none); its network
        is kept only when its partition's objective on the graph (PRCut's, at
        hard assignments) is no higher than before (``self_labelled_``). Off by
        default: it lowered the NMI on MNIST and Fashion-MNIST
        (:ref:`deep_clustering`).

    confidence : float in (0, 1), default=0.99
        Probability above which self-labelling trusts an image's cluster.

    max_rotation : float, default=15.0
        Largest rotation of a weak random view, in degrees (the strong view's is
        twice this). Wider views (the three ranges) make ``'auto'`` count fewer clusters.

    max_scale : float, default=0.1
        Largest relative change of size of a weak view.

    max_shift : float, default=0.1
        Largest translation of a weak view, as a fraction of the image's side.

    max_side : int or None, default=32
        Images larger than this on a side are reduced to it on their longer side
        (area averaging, the aspect kept) by the network's first layer, so that
        large images cost what small ones do; the graph is built from the full
        images. ``None``: the network reads them at full size (about 20 times the
        time at 128 x 128).

    batch_size : int, default=256
        Images per step (each paired with a partner in the clustering phase).

    learning_rate : float, default=1e-3
        Adam's step size.

    max_iter : int or 'auto', default='auto'
        Maximum number of epochs of the clustering phase (``ConvergenceWarning``
        when they run out before ``tol`` and ``n_iter_no_change`` stop it).
        ``'auto'``: a schedule of about 1,000 steps, at least 3 epochs, which
        the stopping rule may shorten; running it to its end is not warned
        about. With ``n_clusters='auto'``, the network trained on
        ``max_clusters`` clusters runs at most 300 of these steps (at least 15
        epochs), the network on the clusters found the whole schedule.

    tol : float, default=1e-3
        The clustering phase stops when its objective has not decreased by
        ``tol`` times its scale for ``n_iter_no_change`` epochs.

    n_iter_no_change : int, default=5
        Patience of the stopping rule, in epochs.

    device : {'auto', 'cpu', 'cuda'}, default='auto'
        Where the network is trained; ``'auto'`` picks CUDA when available.

    n_jobs : int, default=None
        CPU threads of the graph's features, the neighbour search, the start's
        graph products and the network's NumPy forward pass (chunks of images,
        each computed alike on any thread), whose results do not depend on it.
        ``None`` means 1 unless in a ``joblib.parallel_config`` context, ``-1``
        every core (:term:`n_jobs`); the same beside a CUDA training. The network
        trains on one CPU thread (torch splits a convolution's weight gradient
        across its threads in an order that depends on their count), so the
        labels do not depend on ``n_jobs``.

    random_state : int, RandomState instance or None, default=None
        Seeds every random draw (features, start, network, batches, views): the
        same seed and data give the same labels on the CPU, with any ``n_jobs``.

    verbose : bool, default=False
        Show a progress bar (tqdm) over the clustering phase's epochs.

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        Cluster of each training image (what ``predict`` gives for it).

    n_clusters_ : int
        Number of clusters with at least one training image (at most
        ``n_clusters``, or the number ``'auto'`` found).

    n_clusters_candidates_ : ndarray of shape (n_candidates,)
        The numbers of clusters the merges of ``n_clusters='auto'`` passed
        through, from 2 to the clusters the network used. Only then.

    n_clusters_scores_ : ndarray of shape (n_candidates,)
        The strongest link between the clusters at each of these numbers (0:
        no edge joins them); the merges' number is the largest whose link is
        below the threshold. Only with ``'auto'``.

    n_clusters_silhouette_ : ndarray of shape (n_candidates,)
        The silhouette of k-means at each number in the last network's embedding, NaN
        beyond half the merges' number from it (at least 3); the number found is the
        highest. Only with ``'auto'``.

    output_clusters_ : ndarray of shape (n_outputs,)
        The cluster of each of the head's outputs: a cluster's probability is
        the sum of its outputs'. Each output is its own cluster (with
        ``'auto'`` too: its last network has one output per cluster found).

    network_state_ : dict of str to ndarray
        The trained network's weights and normalisation statistics (its torch
        ``state_dict`` as NumPy arrays, the kept head only), which ``predict``,
        ``predict_proba`` and ``transform`` read in NumPy: they, and pickles, need
        no torch.

    module_ : torch.nn.Module
        The trained network rebuilt in torch from ``network_state_`` (on the CPU,
        in evaluation mode; needs torch), mapping float32 images of shape (batch,
        C, H, W), scaled by ``pixel_mean_`` and ``pixel_scale_``, to the kept
        head's logits (one per output: ``output_clusters_`` groups them);
        ``module_.embed`` maps them to the embedding.

    input_side_ : tuple of int
        ``(height, width)`` of the images the convolutions read: the images',
        or reduced to ``max_side`` on the longer side.

    start_labels_ : ndarray of shape (n_samples,)
        The spectral start's partition of the training images (with ``'auto'``,
        that of the clusters first trained on).

    affinity_matrix_ : scipy.sparse.csr_matrix of shape (n_samples, n_samples)
        The kNN graph of the images' gradient histograms.

    head_ : int
        The kept head (with ``'auto'``, ``head_``, ``self_labelled_``,
        ``loss_curve_`` and ``n_iter_`` are those of the network trained on
        the merged clusters).

    self_labelled_ : bool
        Whether the self-labelled network was kept (its partition's objective on
        the graph no higher than the clustering phase's).

    loss_curve_ : ndarray of shape (`n_iter_`,)
        The kept head's mean objective in each epoch of the clustering phase.

    n_iter_ : int
        Epochs of the clustering phase.

    device_ : str
        Where the fit trained: ``'cpu'`` or ``'cuda'`` (what ``device='auto'``
        chose).

    pixel_mean_, pixel_scale_ : float
        The centring and scale of the pixels (their mean and standard deviation
        over the training images, outliers clipped).

    pixel_range_ : ndarray of shape (3,)
        The 0.1th and 99.9th percentiles of the training images' pixels, and the
        1st percentile of the images' own ranges (largest minus smallest pixel).
        Pixels farther beyond the first two than 3 times their difference are
        outliers: clipped to that bound, with a warning, in ``fit`` and
        ``predict`` alike.

    image_shape_ : tuple of int
        ``(channels, height, width)`` of the images.

    channels_ : {'first', 'last'}
        Where the training images held their channels (the layout ``predict``,
        ``predict_proba``, ``transform`` and ``score`` read).

    n_features_in_ : int
        Values per image.

    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during ``fit``, when X is a DataFrame of pixels
        whose columns are all strings.

    See Also
    --------
    skdiffclust.PRCut : The ratio cut of a graph, with the user's network.

    Notes
    -----
    The network reads the pixels centred and scaled by the training images'
    ``pixel_mean_`` and ``pixel_scale_``: a fit does not depend on the images'
    units (a rescaled and shifted copy of the images gives the same labels, up to
    the rounding of its pixels), but ``predict``, ``predict_proba`` and
    ``transform`` read new images in the training images' units, and warn when
    their pixels are on another scale (their range beyond the outliers' bounds,
    more than 4 times wider than the training pixels', or 4 times narrower than
    most training images'; see ``pixel_range_``). The pixels are rounded to
    float32's precision first: float32 and float64 copies of the same images
    give the same labels.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from skdiffclust.deep import DeepImageClustering
    >>> X, y = load_digits(return_X_y=True)
    >>> model = DeepImageClustering(n_clusters=10, max_iter=5, random_state=0)
    >>> labels = model.fit_predict(X[:400] / 16)  # doctest: +SKIP
    """

    _renamed_parameters = {"gamma": "balance"}

    _parameter_constraints: dict = {
        "n_clusters": [NumberInterval(Integral, 1, None, closed="left"),
                       StrOptions({"auto"})],
        "max_clusters": [NumberInterval(Integral, 2, None, closed="left")],
        "image_shape": ["array-like", None],
        "channels": [StrOptions({"auto", "first", "last"})],
        "n_neighbors": [NumberInterval(Integral, 1, None, closed="left")],
        "n_eigenvectors": [NumberInterval(Integral, 1, None, closed="left"),
                           StrOptions({"auto"})],
        "n_heads": [NumberInterval(Integral, 1, None, closed="left")],
        "balance": [NumberInterval(Real, 0, None, closed="left")],
        "self_labelling": [NumberInterval(Integral, 0, None, closed="left")],
        "confidence": [NumberInterval(Real, 0, 1, closed="neither")],
        "max_rotation": [NumberInterval(Real, 0, 180, closed="both")],
        "max_scale": [NumberInterval(Real, 0, 1, closed="left")],
        "max_shift": [NumberInterval(Real, 0, 1, closed="both")],
        "max_side": [NumberInterval(Integral, 4, None, closed="left"), None],
        "batch_size": [NumberInterval(Integral, 2, None, closed="left")],
        "learning_rate": [NumberInterval(Real, 0, None, closed="neither")],
        "max_iter": [NumberInterval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "tol": [NumberInterval(Real, 0, None, closed="left")],
        "n_iter_no_change": [NumberInterval(Integral, 1, None, closed="left")],
        "device": [StrOptions({"auto", "cpu", "cuda"})],
        "n_jobs": N_JOBS,
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    @refusing_former_names
    def __init__(self, n_clusters=8, *, max_clusters=50, image_shape=None, channels="auto",
                 n_neighbors=10, n_eigenvectors="auto", n_heads=5, balance=1.0, self_labelling=0,
                 confidence=0.99, max_rotation=15.0, max_scale=0.1, max_shift=0.1,
                 max_side=32, batch_size=256, learning_rate=1e-3, max_iter="auto", tol=1e-3,
                 n_iter_no_change=5, device="auto", n_jobs=None, random_state=None,
                 verbose=False):
        self.n_clusters = n_clusters
        self.max_clusters = max_clusters
        self.image_shape = image_shape
        self.channels = channels
        self.n_neighbors = n_neighbors
        self.n_eigenvectors = n_eigenvectors
        self.n_heads = n_heads
        self.balance = balance
        self.self_labelling = self_labelling
        self.confidence = confidence
        self.max_rotation = max_rotation
        self.max_scale = max_scale
        self.max_shift = max_shift
        self.max_side = max_side
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.max_iter = max_iter
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.device = device
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    @_fit_context(prefer_skip_nested_validation=True)
    @keeps_state_on_failure
    def fit(self, X, y=None):
        """Learn the clusters of the images X.

        Parameters
        ----------
        X : array-like of shape (n_samples, height, width), (n_samples, channels, \
                height, width), (n_samples, height, width, channels) or \
                (n_samples, n_pixels)
            Training images (rows of pixels need ``image_shape`` unless they are
            square grey images; ``channels`` says where the channels are).

        y : Ignored
            Not used, present for API consistency by convention.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        images = check_images(self, X, reset=True, ensure_min_samples=2)
        n_samples = images.shape[0]
        check_n_clusters(self.n_clusters, n_samples, auto=True)
        if self.n_neighbors >= n_samples:  # as PRCut says it
            warn_user(
                f"n_neighbors={self.n_neighbors} >= n_samples={n_samples}; using "
                f"n_neighbors={n_samples - 1} (every other image).", UserWarning)
        settings = self._settings(n_samples)
        _require_torch()
        from skdiffclust._utils._torch import state_to_numpy
        from skdiffclust.deep._fit import fit_network, refit_network

        pixels = float32_precision(images)  # float32 and float64 copies read alike
        scale = PixelScale(pixels)
        scaled = scale(pixels)
        del pixels
        *seeds, count_seed = derive_seeds(self.random_state, N_SEEDS)
        name = type(self).__name__
        input_side = reduced_side(self.image_shape_, settings.max_side)
        # 'auto': both networks' clustering phases on one bar, with one warning
        session = (TrainingSession(name, verbose=settings.verbose,
                                   total=settings.max_iter + settings.refit_max_iter,
                                   warn=not settings.scheduled) if settings.merge else None)
        with session or contextlib.nullcontext():
            fitted = fit_network(scaled, settings, seeds, name, session)
            start = fitted.start
            state = state_to_numpy(fitted.network)  # predict and pickles need no torch
            embedding, proba = forward(state, scaled, input_side, settings.n_threads)
            count, labels = ClusterCount(settings.n_clusters), None
            if settings.merge:
                output_clusters, count = merged_outputs(
                    embedding, proba, n_neighbors=settings.merge_neighbors,
                    moved=fitted.moved, device=settings.device, n_threads=settings.n_threads)
                labels = merge_columns(proba, output_clusters).argmax(1)
                if labels.max() >= 1:  # a network trained again on the merged clusters
                    fitted = refit_network(scaled, settings, seeds, name, fitted, labels,
                                           session)
                    state = state_to_numpy(fitted.network)
                    embedding, proba = forward(state, scaled, input_side, settings.n_threads)
                    labels, count = silhouette_refined(embedding, proba.argmax(1), count,
                                                       count_seed)
                    state = nearest_centre_head(state, embedding, labels)
                    proba = head_probabilities(state, embedding)  # the body is unchanged
                    labels = None
        if labels is None:
            labels = occupied_first(state, proba.argmax(1))
            output_clusters = np.arange(proba.shape[1])
        self.network_state_, self.input_side_ = state, input_side
        self.output_clusters_ = output_clusters
        self.pixel_mean_, self.pixel_scale_ = scale.mean, scale.scale
        self.pixel_range_ = scale.range
        self.labels_ = labels.astype(np.int64)
        self.n_clusters_ = int(np.unique(self.labels_).size)
        self._n_features_out = embedding.shape[1]  # get_feature_names_out, set_output
        self.start_labels_ = np.asarray(start, dtype=np.int64)
        self.affinity_matrix_ = fitted.graph
        self.head_ = fitted.kept
        self.self_labelled_ = bool(fitted.self_labelled)
        self._feature_seed = seeds[0]  # score's graph features: the fit's
        result = fitted.result
        curve = np.atleast_2d(result.loss_curve.T).T if result.loss_curve.size else \
            np.empty((0, settings.n_heads))
        self.loss_curve_ = np.asarray(curve[:, fitted.kept], dtype=np.float64)
        self.n_iter_ = int(result.n_iter)
        self.device_ = device_type(settings.device)
        set_count_attributes(self, count)
        if not count.clear:
            warn_unclear_merge("DeepImageClustering", count)
        # 'auto' counts 2 or more: a network that put every image in one output
        # (identical images) left the others empty
        expected = max(count.n_clusters, 2) if settings.merge else count.n_clusters
        if self.n_clusters_ < expected:
            identical = np.ptp(images.reshape(n_samples, -1), axis=0).max() == 0
            warn_empty_clusters(
                "DeepImageClustering", self.n_clusters_, expected,
                cause=("the images are all identical" if identical else
                       "the network assigns no training image to the others"),
                remedy=None if identical else "A larger balance (balanced clusters)",
                counted=count.candidates is not None)
        return self

    def _settings(self, n_samples):
        """The training's settings for ``n_samples`` images, every ``'auto'``
        resolved (:meth:`DeepSettings.of`)."""
        return DeepSettings.of(self, n_samples)

    def _scaled(self, X):
        """Images X as the network reads them: in the training images' units (a
        warning when they are on another scale)."""
        return self._read(X)[0]

    def _read(self, X):
        """Images X as the network reads them, and the dtype of the outputs:
        float32 for float32 images, float64 for any other (integer images are read
        in float32 all the same)."""
        check_is_fitted(self)
        images = check_images(self, X, reset=False)
        pixels = float32_precision(images)
        scale = PixelScale.fitted(self.pixel_mean_, self.pixel_scale_, self.pixel_range_)
        scale.check(pixels, type(self).__name__)
        float32_in = images.dtype == np.float32 and getattr(X, "dtype", None) == np.float32
        return scale(pixels), np.dtype(np.float32 if float32_in else np.float64)

    def _forward(self, X):
        """The embeddings and probabilities of images X (the network, in NumPy)
        and the dtype of the outputs (:meth:`_read`)."""
        images, dtype = self._read(X)  # checks that the model is fitted
        embedding, proba = forward(self.network_state_, images, self.input_side_,
                                   host_threads(self.n_jobs))
        return embedding, merge_columns(proba, self.output_clusters_), dtype

    def predict_proba(self, X):
        """Cluster probabilities of images, from the trained network.

        Parameters
        ----------
        X : array-like of shape (n_queries, ...)
            Images, shaped as in ``fit``.

        Returns
        -------
        proba : ndarray of shape (n_queries, n_clusters)
            Each row sums to 1. In float64.
        """
        return self._forward(X)[1]

    def predict(self, X):
        """Cluster of each image.

        Parameters
        ----------
        X : array-like of shape (n_queries, ...)
            Images, shaped as in ``fit``.

        Returns
        -------
        labels : ndarray of shape (n_queries,)
            Cluster of each sample.
        """
        return self._forward(X)[1].argmax(1).astype(np.int64)

    def transform(self, X):
        """The network's embedding of images (its layer before the heads).

        Parameters
        ----------
        X : array-like of shape (n_queries, ...)
            Images, shaped as in ``fit``.

        Returns
        -------
        embedding : ndarray of shape (n_queries, 128)
            In float32 for float32 images, float64 otherwise.
        """
        embedding, _, dtype = self._forward(X)
        return embedding.astype(dtype, copy=False)

    def score(self, X, y=None):
        """Silhouette of the partition ``predict`` gives X (higher is better).

        The mean silhouette of X's clusters in the images' graph features (the
        principal components of their gradient histograms, computed on the CPU
        as a CPU ``fit`` computes them: a space that does not depend on the
        number of clusters), in [-1, 1], -1 where it is undefined (one cluster); above
        4,000 images, that of a fixed sample. Unlike the objective fit
        minimises, it compares fits with different numbers of clusters:
        ``GridSearchCV`` over ``n_clusters`` without a scorer chooses by it
        (:ref:`n_clusters_auto`). Needs PyTorch (the gradient histograms).

        Parameters
        ----------
        X : array-like of shape (n_queries, ...)
            At least two images, shaped as in ``fit``.

        y : Ignored
            Not used, present for API consistency by convention.

        Returns
        -------
        score : float
        """
        images = self._scaled(X)  # checks that the model is fitted
        if images.shape[0] < 2:
            raise ValueError(f"score needs at least 2 samples, got {images.shape[0]}.")
        n_threads = host_threads(self.n_jobs)
        proba = forward(self.network_state_, images, self.input_side_, n_threads)[1]
        labels = merge_columns(proba, self.output_clusters_)
        _require_torch()
        from skdiffclust.deep._fit import feature_silhouette

        return feature_silhouette(images, labels.argmax(1), n_threads=n_threads,
                                  feature_seed=self._feature_seed)

    @property
    def module_(self):
        """The trained network in torch, rebuilt from ``network_state_``."""
        check_is_fitted(self)
        _require_torch()
        from skdiffclust.deep._network import network_from_state

        return network_from_state(self.network_state_, self.image_shape_, self.input_side_)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.three_d_array = True
        tags.non_deterministic = False
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


def _require_torch():
    """torch, or an ImportError that names the estimator and the fix."""
    import_optional("torch", "DeepImageClustering")

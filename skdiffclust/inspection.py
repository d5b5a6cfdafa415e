"""Plots of fitted estimators, after scikit-learn's Display objects.

Like :class:`sklearn.inspection.DecisionBoundaryDisplay`, each display holds the
data to draw, is built by ``from_estimator`` (or from the fitted object itself),
and draws with ``plot``, which returns the display with the matplotlib artists as
attributes. matplotlib is imported only when drawing.
"""

import numpy as np
from sklearn.utils.validation import check_array, check_is_fitted

from skdiffclust.forest import SpanningForestClustering
from skdiffclust.gemini._path import GeminiPath

__all__ = ["FeatureMaskDisplay", "GeminiPathDisplay", "SpanningForestDisplay"]


def _import_pyplot(caller):
    """``matplotlib.pyplot``, or an ImportError that says what needs it."""
    from skdiffclust._utils._optional import import_optional

    return import_optional("matplotlib.pyplot", caller)


def _kwargs(defaults, given):
    """The defaults, overridden by what the caller passed."""
    return {**defaults, **(given or {})}


def _scatter_kwargs(defaults, given):
    """Like ``_kwargs``, but the caller's colours replace all the default colouring."""
    given = given or {}
    dropped = set()
    if {"c", "color"} & set(given):
        dropped = {"c", "color", "cmap", "vmin", "vmax"}
    elif "cmap" in given:
        dropped = {"vmin", "vmax"}  # the limits fit the default colour map only
    return _kwargs({key: value for key, value in defaults.items() if key not in dropped},
                   given)


def _cluster_colours(labels):
    """One distinct colour per cluster: tab10's first colours for up to ten clusters."""
    if labels.size and labels.min() >= 0 and labels.max() < 10:
        # without fixed limits, two clusters would get tab10's first and last colours
        return {"cmap": "tab10", "vmin": 0, "vmax": 9}
    return {"cmap": "viridis"}


class SpanningForestDisplay:
    """A spanning forest over 2-D data: its edges, and points coloured by cluster.

    Build it with :meth:`from_estimator`; the forest comes from
    :class:`~skdiffclust.SpanningForestClustering`'s ``forest_edges_``.

    Parameters
    ----------
    X : ndarray of shape (n_samples, 2)
        Coordinates of the samples.

    edges : ndarray of shape (n_edges, 2)
        Forest edges, as pairs of row indices of ``X``.

    labels : ndarray of shape (n_samples,)
        Cluster of each sample.

    partial_labels : ndarray of shape (n_samples,), default=None
        Known labels, ``-1`` for unlabelled samples; the labelled samples are
        highlighted.

    Attributes
    ----------
    ax_ : matplotlib Axes
        Axes the forest is drawn on.

    figure_ : matplotlib Figure
        Figure holding ``ax_``.

    edges_ : matplotlib LineCollection
        The forest's edges, one segment each.

    points_ : matplotlib PathCollection
        The samples, coloured by cluster.

    labeled_ : matplotlib PathCollection or None
        The labelled samples, when ``partial_labels`` has any.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from sklearn.datasets import make_moons
    >>> from skdiffclust import SpanningForestClustering
    >>> from skdiffclust.inspection import SpanningForestDisplay
    >>> X, _ = make_moons(100, noise=0.05, random_state=0)
    >>> forest = SpanningForestClustering(n_clusters=2).fit(X)
    >>> display = SpanningForestDisplay.from_estimator(forest, X)
    >>> len(display.edges_.get_segments())
    98
    """

    def __init__(self, X, edges, labels, *, partial_labels=None):
        self.X = X
        self.edges = edges
        self.labels = labels
        self.partial_labels = partial_labels

    @classmethod
    def from_estimator(cls, estimator, X, partial_labels=None, *, ax=None,
                       scatter_kwargs=None, edge_kwargs=None, labeled_kwargs=None):
        """Draw the forest of a fitted :class:`~skdiffclust.SpanningForestClustering`.

        Parameters
        ----------
        estimator : SpanningForestClustering
            A fitted estimator.

        X : array-like of shape (n_samples, 2)
            The training samples, in the order given to ``fit``: the training
            data itself when it has two features, or any 2-D coordinates of the
            same samples (a PCA projection, say) otherwise.

        partial_labels : array-like of shape (n_samples,), default=None
            Partial labels (``-1`` for unlabelled samples) to highlight, such as
            those given to ``fit(X, partial_labels=...)``.

        ax : matplotlib Axes, default=None
            Axes to draw on; a new figure by default.

        scatter_kwargs, edge_kwargs, labeled_kwargs : dict, default=None
            Keyword arguments of the samples' ``scatter``, of the edges'
            ``LineCollection`` and of the labelled samples' ``scatter``.

        Returns
        -------
        display : SpanningForestDisplay
        """
        if not isinstance(estimator, SpanningForestClustering):  # KMeans: "not fitted"
            raise TypeError("estimator must be a fitted SpanningForestClustering, got "
                            f"{type(estimator).__name__}.")
        check_is_fitted(estimator, ["forest_edges_", "labels_"])
        X = check_array(X, dtype=np.float64)
        n_samples = estimator.labels_.shape[0]
        if X.shape != (n_samples, 2):
            raise ValueError(
                f"SpanningForestDisplay draws 2-D data: X must have shape "
                f"({n_samples}, 2), one row per training sample and two columns, "
                f"got {X.shape}; project higher-dimensional data first (e.g. with PCA)."
            )
        if partial_labels is not None:
            partial_labels = np.asarray(partial_labels)
            if partial_labels.shape != (n_samples,):
                raise ValueError(
                    f"partial_labels must give one partial label per training sample: shape "
                    f"({n_samples},), got {partial_labels.shape}."
                )
        display = cls(X, np.asarray(estimator.forest_edges_), estimator.labels_,
                      partial_labels=partial_labels)
        return display.plot(ax=ax, scatter_kwargs=scatter_kwargs, edge_kwargs=edge_kwargs,
                            labeled_kwargs=labeled_kwargs)

    def plot(self, ax=None, *, scatter_kwargs=None, edge_kwargs=None, labeled_kwargs=None):
        """Draw the forest.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Axes to draw on; a new figure by default.

        scatter_kwargs, edge_kwargs, labeled_kwargs : dict, default=None
            Keyword arguments of the samples' ``scatter``, of the edges'
            ``LineCollection`` and of the labelled samples' ``scatter``.

        Returns
        -------
        display : SpanningForestDisplay
            The display, with the artists set.
        """
        plt = _import_pyplot("SpanningForestDisplay.plot")
        from matplotlib.collections import LineCollection

        if ax is None:
            _, ax = plt.subplots()
        segments = self.X[np.asarray(self.edges, dtype=np.intp).reshape(-1, 2)]
        self.edges_ = LineCollection(
            segments, **_kwargs({"colors": "0.7", "linewidths": 0.6, "zorder": 1},
                                edge_kwargs))
        ax.add_collection(self.edges_)
        points = {"c": self.labels, "s": 8, "zorder": 2,
                  **_cluster_colours(np.asarray(self.labels))}
        self.points_ = ax.scatter(self.X[:, 0], self.X[:, 1],
                                  **_scatter_kwargs(points, scatter_kwargs))
        self.labeled_ = None
        if self.partial_labels is not None and np.any(self.partial_labels != -1):
            known = self.partial_labels != -1
            self.labeled_ = ax.scatter(
                self.X[known, 0], self.X[known, 1],
                **_scatter_kwargs({"marker": "*", "s": 150, "color": "k", "zorder": 3,
                                   "label": "labeled"}, labeled_kwargs))
        ax.autoscale_view()
        self.ax_ = ax
        self.figure_ = ax.figure
        return self


class GeminiPathDisplay:
    """SparseGEMINI's regularisation path: features kept and GEMINI against lambda.

    Two panels share a logarithmic penalty axis: the number of selected features
    after each step of the path, and the GEMINI of the model (computed with all
    features). The selected model is marked on both. The dense fit (lambda = 0)
    cannot sit on a logarithmic axis: its GEMINI is drawn as a horizontal dotted
    line, and a selected dense model is marked at the smallest penalty.

    Build it with :meth:`from_estimator` (a :class:`~skdiffclust.SparseGEMINI`
    fitted by :meth:`~skdiffclust.SparseGEMINI.path`) or :meth:`from_path`.

    Parameters
    ----------
    lambdas : ndarray of shape (n_steps,)
        Penalty of each step (0 for the dense fit).

    n_features : ndarray of shape (n_steps,)
        Number of selected features after each step.

    gemini : ndarray of shape (n_steps,)
        GEMINI after each step.

    selected_lambda, selected_n_features, selected_gemini : float
        Penalty, number of features and GEMINI of the selected model.

    gemini_threshold : float, default=None
        GEMINI the selection asks for (``selection_threshold`` times the best),
        drawn as a dashed line when given.

    Attributes
    ----------
    axes_ : ndarray of matplotlib Axes, shape (2,)
        The features panel and the GEMINI panel.

    figure_ : matplotlib Figure
        Figure holding ``axes_``.

    n_features_line_, gemini_line_ : matplotlib Line2D
        The path's penalised steps (lambda > 0) on each panel.

    selected_markers_ : list of matplotlib Line2D
        The selected model, on each panel.

    dense_line_ : matplotlib Line2D or None
        GEMINI of the dense fit, when the path records one.

    threshold_line_ : matplotlib Line2D or None
        The selection threshold, when ``gemini_threshold`` is given.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from skdiffclust import SparseGEMINI
    >>> from skdiffclust.datasets import make_celeux_one
    >>> from skdiffclust.inspection import GeminiPathDisplay
    >>> X, y, _ = make_celeux_one(scenario=4, random_state=0)
    >>> model = SparseGEMINI(n_clusters=3, random_state=0)
    >>> path = model.path(X)
    >>> display = GeminiPathDisplay.from_estimator(model)
    >>> display.selected_n_features, int(model.get_support().sum())
    (5, 5)
    """

    def __init__(self, lambdas, n_features, gemini, *, selected_lambda, selected_n_features,
                 selected_gemini, gemini_threshold=None):
        self.lambdas = lambdas
        self.n_features = n_features
        self.gemini = gemini
        self.selected_lambda = selected_lambda
        self.selected_n_features = selected_n_features
        self.selected_gemini = selected_gemini
        self.gemini_threshold = gemini_threshold

    @classmethod
    def from_estimator(cls, estimator, *, ax=None, line_kwargs=None, selected_kwargs=None):
        """Draw the path of a :class:`~skdiffclust.SparseGEMINI` fitted by ``path``.

        Parameters
        ----------
        estimator : SparseGEMINI
            Fitted by :meth:`~skdiffclust.SparseGEMINI.path` (``fit`` records
            no path).

        ax : array-like of two matplotlib Axes, default=None
            The features panel and the GEMINI panel; a new figure by default.

        line_kwargs, selected_kwargs : dict, default=None
            Keyword arguments of the path lines' and the selected markers'
            ``plot``.

        Returns
        -------
        display : GeminiPathDisplay
        """
        if not hasattr(estimator, "path"):  # KMeans: "fit it with path(X)" before
            raise TypeError("estimator must be a SparseGEMINI fitted by path(X), got "
                            f"{type(estimator).__name__}.")
        check_is_fitted(estimator)
        if not isinstance(getattr(estimator, "path_", None), GeminiPath):
            raise ValueError(
                f"{type(estimator).__name__} has no regularisation path: fit it with "
                "path(X), which records one, not fit(X)."
            )
        display = cls._from_gemini_path(estimator.path_, estimator.selection_threshold)
        return display.plot(ax=ax, line_kwargs=line_kwargs, selected_kwargs=selected_kwargs)

    @classmethod
    def from_path(cls, path, *, selection_threshold=None, ax=None, line_kwargs=None,
                  selected_kwargs=None):
        """Draw a path returned by :meth:`~skdiffclust.SparseGEMINI.path`.

        Parameters
        ----------
        path : GeminiPath
            The path.

        selection_threshold : float, default=None
            The estimator's ``selection_threshold``, to draw the GEMINI the
            selection asks for.

        ax : array-like of two matplotlib Axes, default=None
            The features panel and the GEMINI panel; a new figure by default.

        line_kwargs, selected_kwargs : dict, default=None
            Keyword arguments of the path lines' and the selected markers'
            ``plot``.

        Returns
        -------
        display : GeminiPathDisplay
        """
        if not isinstance(path, GeminiPath):
            raise TypeError(
                f"path must be the GeminiPath returned by SparseGEMINI.path, got "
                f"{type(path).__name__}."
            )
        display = cls._from_gemini_path(path, selection_threshold)
        return display.plot(ax=ax, line_kwargs=line_kwargs, selected_kwargs=selected_kwargs)

    @classmethod
    def _from_gemini_path(cls, path, selection_threshold):
        selected = path.models[path.selected]
        threshold = None
        if selection_threshold is not None:
            # the selection compares the kept models with the best of them
            best = max(entry["gemini"] for entry in path.models.values())
            threshold = selection_threshold * best
        return cls(path.lambdas, path.n_features, path.gemini,
                   selected_lambda=selected["lambda"], selected_n_features=path.selected,
                   selected_gemini=selected["gemini"], gemini_threshold=threshold)

    def plot(self, ax=None, *, line_kwargs=None, selected_kwargs=None):
        """Draw the path.

        Parameters
        ----------
        ax : array-like of two matplotlib Axes, default=None
            The features panel and the GEMINI panel; a new figure (two panels
            sharing the penalty axis) by default.

        line_kwargs, selected_kwargs : dict, default=None
            Keyword arguments of the path lines' and the selected markers'
            ``plot``.

        Returns
        -------
        display : GeminiPathDisplay
            The display, with the artists set.
        """
        plt = _import_pyplot("GeminiPathDisplay.plot")
        if ax is None:
            _, ax = plt.subplots(2, 1, sharex=True, figsize=(6, 5))
        axes = np.asarray(ax, dtype=object).ravel()
        if axes.shape != (2,):
            raise ValueError(
                f"ax must hold two Axes (features, GEMINI), got {axes.shape[0]}."
            )
        lambdas = np.asarray(self.lambdas, dtype=float)
        penalised = lambdas > 0
        line = _kwargs({"marker": ".", "color": "tab:blue"}, line_kwargs)
        (self.n_features_line_,) = axes[0].plot(
            lambdas[penalised], np.asarray(self.n_features)[penalised], **line)
        (self.gemini_line_,) = axes[1].plot(
            lambdas[penalised], np.asarray(self.gemini)[penalised], **line)

        self.dense_line_ = None
        if np.any(~penalised):
            self.dense_line_ = axes[1].axhline(
                np.asarray(self.gemini)[~penalised][0], color="gray", linestyle=":",
                label="dense fit (lambda = 0)")
        self.threshold_line_ = None
        if self.gemini_threshold is not None:
            self.threshold_line_ = axes[1].axhline(
                self.gemini_threshold, color="gray", linestyle="--",
                label="selection threshold")

        x = self.selected_lambda if self.selected_lambda > 0 else lambdas[penalised].min(
            initial=1.0)
        marker = _kwargs({"marker": "o", "markersize": 9, "color": "tab:red",
                          "linestyle": "none",
                          "label": f"selected: {self.selected_n_features} features"},
                         selected_kwargs)
        self.selected_markers_ = [
            axes[0].plot([x], [self.selected_n_features], **marker)[0],
            axes[1].plot([x], [self.selected_gemini], **marker)[0],
        ]

        axes[0].set(xscale="log", ylabel="features kept")
        axes[1].set(xscale="log", xlabel="penalty lambda", ylabel="GEMINI")
        axes[0].legend()
        axes[1].legend()
        self.axes_ = axes
        self.figure_ = axes[0].figure
        return self


class FeatureMaskDisplay:
    """The features a selector kept, drawn as an image: pixels of images, say.

    Each feature is a cell of an image of ``image_shape`` (row-major, as
    ``reshape`` lays it out): kept features are coloured by their importance,
    the others left blank, over an optional background (e.g. the mean image,
    in grey). For :class:`~skdiffclust.SparseGEMINI` fitted on flattened images,
    this shows which pixels the clustering uses (Ohl et al., 2024, figure 3).

    Build it with :meth:`from_estimator`.

    Parameters
    ----------
    importances : ndarray of shape (n_features,)
        Importance of each feature (e.g. ``feature_importances_``).

    support : ndarray of bool, shape (n_features,)
        Whether each feature is kept (e.g. ``get_support()``).

    image_shape : tuple of int
        The image's (height, width), whose product is ``n_features``.

    background : ndarray of shape (n_features,), default=None
        Values drawn in grey under the mask.

    Attributes
    ----------
    ax_ : matplotlib Axes
    figure_ : matplotlib Figure
    mask_image_ : matplotlib AxesImage
        The kept features, coloured by importance.
    background_image_ : matplotlib AxesImage or None
    colorbar_ : matplotlib Colorbar

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from sklearn.datasets import load_digits
    >>> from skdiffclust import SparseGEMINI
    >>> from skdiffclust.inspection import FeatureMaskDisplay
    >>> X, _ = load_digits(return_X_y=True)
    >>> model = SparseGEMINI(n_clusters=10, alpha=0.5, random_state=0).fit(X[:300])
    >>> display = FeatureMaskDisplay.from_estimator(model, (8, 8), background=X.mean(0))
    >>> display.mask_image_.get_array().shape
    (8, 8)
    """

    def __init__(self, importances, support, image_shape, *, background=None):
        self.importances = importances
        self.support = support
        self.image_shape = image_shape
        self.background = background

    @classmethod
    def from_estimator(cls, estimator, image_shape, *, background=None, ax=None,
                       imshow_kwargs=None):
        """Draw the features a fitted selector kept, as an image.

        Parameters
        ----------
        estimator : fitted selector
            An estimator with ``get_support()`` and ``feature_importances_`` (such
            as :class:`~skdiffclust.SparseGEMINI`); without importances, kept
            features are drawn alike.

        image_shape : tuple of int
            The image's (height, width); its product must be the number of features.

        background : array-like of shape (n_features,), default=None
            Values drawn in grey under the mask, e.g. the mean image.

        ax : matplotlib Axes, default=None
            Where to draw; a new figure by default.

        imshow_kwargs : dict, default=None
            Keyword arguments of the mask's ``imshow``.

        Returns
        -------
        display : FeatureMaskDisplay
        """
        if not hasattr(estimator, "get_support"):
            raise TypeError("estimator must be a fitted feature selector (with "
                            f"get_support, such as SparseGEMINI), got "
                            f"{type(estimator).__name__}.")
        check_is_fitted(estimator)
        support = np.asarray(estimator.get_support(), dtype=bool)
        importances = np.asarray(getattr(estimator, "feature_importances_",
                                         support.astype(float)), dtype=float)
        display = cls(importances, support, _image_shape(image_shape),
                      background=background)
        return display.plot(ax=ax, imshow_kwargs=imshow_kwargs)

    def plot(self, ax=None, *, imshow_kwargs=None):
        """Draw the mask.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Where to draw; a new figure by default.

        imshow_kwargs : dict, default=None
            Keyword arguments of the mask's ``imshow``.

        Returns
        -------
        display : FeatureMaskDisplay
            The display, with the artists set.
        """
        plt = _import_pyplot("FeatureMaskDisplay.plot")
        shape = _image_shape(self.image_shape)
        support = np.asarray(self.support, dtype=bool).ravel()
        if int(np.prod(shape)) != support.size:
            raise ValueError(
                f"image_shape {shape} holds {int(np.prod(shape))} features, but the "
                f"selector has {support.size}.")
        if self.background is not None and np.size(self.background) != support.size:
            raise ValueError(f"background must hold one value per feature ({support.size}),"
                             f" got {np.size(self.background)}.")
        if ax is None:
            _, ax = plt.subplots(figsize=(4, 4))
        self.background_image_ = None
        if self.background is not None:
            background = check_array(np.asarray(self.background, dtype=float).reshape(1, -1))
            self.background_image_ = ax.imshow(background.reshape(shape), cmap="gray_r",
                                               alpha=0.35)
        importances = np.asarray(self.importances, dtype=float).ravel()
        masked = np.ma.masked_array(importances, mask=~support).reshape(shape)
        self.mask_image_ = ax.imshow(masked, **_kwargs({"cmap": "viridis"}, imshow_kwargs))
        self.colorbar_ = ax.figure.colorbar(self.mask_image_, ax=ax, shrink=0.8,
                                            label="importance")
        ax.set(xticks=[], yticks=[], title=f"{int(support.sum())} features kept")
        self.ax_ = ax
        self.figure_ = ax.figure
        return self


def _image_shape(image_shape):
    """``image_shape`` as (height, width), or a clear error."""
    try:
        shape = (image_shape,) if np.isscalar(image_shape) else tuple(image_shape)
    except TypeError:  # None, or another object that is not a sequence
        shape = ()
    if len(shape) != 2 or not all(isinstance(d, (int, np.integer))
                                  and not isinstance(d, (bool, np.bool_)) and d > 0
                                  for d in shape):
        raise ValueError(f"image_shape must be (height, width), two positive integers "
                         f"such as (28, 28), got {image_shape!r}.")
    return tuple(int(d) for d in shape)

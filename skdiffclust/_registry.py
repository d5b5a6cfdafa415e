"""The estimators of the package, one entry each.

The quickstart (``python -m skdiffclust``) and the test suite read this list, so
that adding a method means adding its entry here, with what the tests need to fit
it quickly and reproducibly (as scikit-learn's ``_test_common.instance_generator``
holds the parameters its common checks use): the tests that run over every
estimator (training contract, bad input, conventions, scikit-learn's checks,
streaming, stability) then cover it, and the quickstart fails its test until the
tour shows it.

Not imported by ``import skdiffclust``.
"""

import math
from dataclasses import dataclass, field, replace

import numpy as np

from skdiffclust.clam import ClAM
from skdiffclust.deep import DeepImageClustering
from skdiffclust.forest import SpanningForestClustering
from skdiffclust.gemini import SparseGEMINI
from skdiffclust.prcut import PRCut

# the smallest image a test's row of features becomes: DeepImageClustering's
# network reads images of at least 4 x 4 pixels
MIN_IMAGE_PIXELS = 16


def rows_as_images(X):
    """The tests' rows of features as rows of pixels of square grey images.

    Rows of ``d`` features become rows of ``(d + 3) ** 2`` pixels (5 x 5 for 2
    features, 7 x 7 for 4), each row's features repeated in their order, so that
    rows of other widths stay images of other sizes (what a test of "other
    features" needs); rows that already hold a square number of at least 16
    values (scikit-learn's 8 x 8 digits) are images as they are. What makes
    an input bad passes unchanged: NaN, infinity, the dtype (complex, strings),
    the container (NumPy, pandas, torch tensors on any device or with a
    gradient, SciPy sparse matrices with their index dtypes); input that is not
    2-D is returned as it is.
    """
    shape = getattr(X, "shape", None)
    if shape is None:
        X = np.asarray(X)
        shape = X.shape
    if len(shape) != 2:
        return X
    n_features = int(shape[1])
    side = math.isqrt(n_features)
    if side * side == n_features and n_features >= MIN_IMAGE_PIXELS:
        return X
    columns = np.arange((n_features + 3) ** 2) % max(n_features, 1)
    if n_features == 0:  # no value to repeat: rows of no pixels
        columns = columns[:0]
    if hasattr(X, "iloc"):  # pandas: string names stay strings, one per pixel
        images = X.iloc[:, columns]
        images.columns = [f"{X.columns[j]}_{i}" for i, j in enumerate(columns)]
        return images
    if hasattr(X, "tocsr"):  # SciPy: the index arrays keep their dtype
        images = X.tocsr()[:, columns]
        images.indices = images.indices.astype(X.tocsr().indices.dtype)
        images.indptr = images.indptr.astype(X.tocsr().indptr.dtype)
        return images
    if type(X).__module__.startswith("torch"):  # a tensor, on its device
        import torch

        return X[:, torch.as_tensor(columns, device=X.device)]
    return X[:, columns]


@dataclass(frozen=True)
class Entry:
    """One estimator: what the quickstart says of it and how the tests fit it.

    Attributes
    ----------
    name : str
        The class name, used as the tests' id.
    estimator : type
        The scikit-learn estimator class.
    summary : str
        One line on what it does (the quickstart prints it before the fit).
    params : dict
        Parameters of a reproducible fit on the CPU, which every test starts from
        (each test adds its own: ``n_clusters``, a short ``max_iter``...).
    training : dict
        Parameters under which ``fit`` trains by epochs (``max_iter``, ``tol``,
        ``n_iter_no_change``, ``loss_curve_``); ``{}``: it always does.
    training_needs_labels : bool
        Whether that training learns from partial labels, which ``fit`` takes as
        ``partial_labels`` (``-1``: unlabelled; ``y`` is ignored, as everywhere).
    fit_needs_torch : bool
        Whether every ``fit`` needs PyTorch.
    torch_parameters : tuple of str
        Parameters that, when not None, make ``fit`` need PyTorch.
    checks : tuple of dict
        Parameter sets (on top of ``params``) of the instances scikit-learn's
        estimator checks run on (``tests/test_common.py``,
        ``tests/test_torch_common.py`` for those needing torch).
    images : bool
        Whether ``fit`` reads images: the tests' rows of features reach it as
        images (:meth:`as_input`), and the tests whose premise is a row of
        features (sparse rows, scikit-learn's checks on their own data) say so.
    stability_cases : tuple of (str, str)
        Development datasets of the Clustering Benchmarks suite, (battery, name),
        on which fits on jittered copies must agree (``tests/test_stability.py``):
        every estimator whose fit draws random numbers and reads rows of features
        has some.
    deterministic : bool
        Whether ``fit`` draws no random numbers (then it needs no stability cases).
    auto : dict or None
        Parameters (on top of ``params``) of its ``n_clusters='auto'`` instance,
        where it counts clusters: scikit-learn's checks, the bad-input and the
        training-contract tests run it too (:meth:`counting`).
    pinned : dict
        Parameters every instance keeps, whatever a test asks for (the
        ``'auto'`` instance's ``n_clusters``).
    """

    name: str
    estimator: type
    summary: str
    params: dict
    training: dict = field(default_factory=dict)
    training_needs_labels: bool = False
    fit_needs_torch: bool = False
    torch_parameters: tuple = ()
    checks: tuple = ({},)
    images: bool = False
    stability_cases: tuple = ()
    deterministic: bool = False
    auto: dict = None
    pinned: dict = field(default_factory=dict)

    def as_input(self, X):
        """The tests' rows of features ``X`` as ``fit`` reads them: ``X`` itself, or
        each row as an image (:func:`rows_as_images`) when the estimator reads images."""
        return rows_as_images(X) if self.images else X

    def make(self, **params):
        """An instance with the tests' parameters, updated by ``params`` (but
        :attr:`pinned`)."""
        return self.estimator(**{**self.params, **params, **self.pinned})

    def counting(self):
        """The entry of its ``n_clusters='auto'`` instance (named ``<name>-auto``),
        or None where it does not count clusters."""
        if self.auto is None:
            return None
        return replace(self, name=f"{self.name}-auto", params={**self.params, **self.auto},
                       checks=({},), pinned={"n_clusters": "auto", **self.pinned},
                       stability_cases=(), auto=None)

    def make_trained(self, **params):
        """An instance whose ``fit`` trains by epochs (:attr:`training`)."""
        return self.make(**{**self.training, **params})

    def label_params(self, partial_labels):
        """``fit``'s keyword arguments that give it ``partial_labels``: none for an
        estimator whose training does not learn from them."""
        return {"partial_labels": partial_labels} if self.training_needs_labels else {}

    def needs_torch(self, **params):
        """Whether a fit with these parameters (on top of :attr:`params`) needs torch."""
        return self.fit_needs_torch or any(
            params.get(name) is not None for name in self.torch_parameters)

    @property
    def has_partial_fit(self):
        return hasattr(self.estimator, "partial_fit")


# short trainings for scikit-learn's checks
_CLAM_CHECKS = dict(max_iter=3, n_init=1)
_FOREST_EMBEDDING_CHECKS = dict(max_iter=2, n_perturbations=5, batch_size=16)
_PRCUT_CHECKS = dict(max_iter=60, batch_size=32, learning_rate=0.05, n_iter_no_change=20)

ESTIMATORS = (
    Entry(
        "SpanningForestClustering", SpanningForestClustering,
        "single linkage as a maximum spanning forest; follows clusters of any shape",
        params=dict(device="cpu", random_state=0),
        training=dict(embedding="linear"), training_needs_labels=True,
        torch_parameters=("embedding",),
        checks=({}, dict(metric="manhattan", algorithm="prim"), dict(metric="cosine"),
                dict(metric="precomputed"),
                dict(embedding="linear", **_FOREST_EMBEDDING_CHECKS),
                dict(embedding="mlp", hidden_layer_sizes=(8,), **_FOREST_EMBEDDING_CHECKS)),
        deterministic=True, auto=dict(max_clusters=4),
    ),
    Entry(
        "ClAM", ClAM,
        "prototypes trained through associative-memory dynamics: a differentiable k-means",
        params=dict(device="cpu", random_state=0),
        checks=(_CLAM_CHECKS, dict(metric="cosine", weighted=True, **_CLAM_CHECKS),
                dict(init="random", mask_prob=0.0, n_init=2, max_iter=3)),
        stability_cases=(("uci", "yeast"), ("fcps", "atom"), ("uci", "glass"),
                         ("wut", "graph"), ("wut", "trapped_lovers")),
    ),
    Entry(
        "PRCut", PRCut,
        "a model trained by SGD on the ratio cut of a neighbour graph (torch)",
        params=dict(device="cpu", random_state=0), fit_needs_torch=True,
        # up to 20,000 samples its default fit has no network: the training
        # contract is the network's, as the paper trains it
        training=dict(solver="network"),
        checks=(_PRCUT_CHECKS, dict(hidden_layer_sizes=(8,), solver="network", **_PRCUT_CHECKS),
                dict(affinity="rbf", **_PRCUT_CHECKS)),
        stability_cases=(("fcps", "engytime"), ("uci", "ecoli"), ("uci", "glass")),
        # keep_components=False: its fit trains even where the count is the graph's
        # components (the training contract's blobs: two components)
        auto=dict(max_clusters=4, keep_components=False, **_PRCUT_CHECKS),
    ),
    Entry(
        "SparseGEMINI", SparseGEMINI,
        "discriminative clustering whose penalty path selects the features",
        params=dict(random_state=0),
        checks=(dict(max_iter=20),
                dict(gemini="wasserstein_ovo", hidden_layer_sizes=(), max_iter=5),
                dict(gemini="mmd_ova", alpha=1.0, relax=True, max_iter=10)),
        stability_cases=(("uci", "statlog"), ("uci", "glass"), ("sipu", "d31")),
        auto=dict(max_clusters=4, max_iter=20),
    ),
    Entry(
        "DeepImageClustering", DeepImageClustering,
        "a convolutional network that learns the images' clusters from their "
        "neighbours and moved views of them (torch)",
        # a short clustering phase, two heads: a fit of the tests' 60 to 300
        # small images takes a few tenths of a second
        params=dict(max_iter=5, n_heads=2, device="cpu", random_state=0),
        fit_needs_torch=True, images=True,
        checks=(dict(max_iter=2, n_heads=1),),
        auto=dict(max_clusters=4, max_iter=2, n_heads=1),
    ),
)

BY_NAME = {entry.name: entry for entry in ESTIMATORS}
# the n_clusters='auto' instances of the estimators that count clusters
COUNTING = tuple(entry.counting() for entry in ESTIMATORS if entry.auto is not None)

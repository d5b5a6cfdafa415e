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

from dataclasses import dataclass, field

from skdiffclust.clam import ClAM
from skdiffclust.forest import SpanningForestClustering
from skdiffclust.gemini import SparseGEMINI
from skdiffclust.prcut import PRCut


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
        Whether that training learns from partial labels ``y`` (``-1``: unlabelled).
    fit_needs_torch : bool
        Whether every ``fit`` needs PyTorch.
    torch_parameters : tuple of str
        Parameters that, when not None, make ``fit`` need PyTorch.
    checks : tuple of dict
        Parameter sets (on top of ``params``) of the instances scikit-learn's
        estimator checks run on (``tests/test_common.py``,
        ``tests/test_torch_common.py`` for those needing torch).
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

    def make(self, **params):
        """An instance with the tests' parameters, updated by ``params``."""
        return self.estimator(**{**self.params, **params})

    def make_trained(self, **params):
        """An instance whose ``fit`` trains by epochs (:attr:`training`)."""
        return self.make(**{**self.training, **params})

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
    ),
    Entry(
        "ClAM", ClAM,
        "prototypes trained through associative-memory dynamics: a differentiable k-means",
        params=dict(device="cpu", random_state=0),
        checks=(_CLAM_CHECKS, dict(metric="cosine", weighted=True, **_CLAM_CHECKS),
                dict(init="random", mask_prob=0.0, n_init=2, max_iter=3)),
    ),
    Entry(
        "PRCut", PRCut,
        "a model trained by SGD on the ratio cut of a neighbour graph (torch)",
        params=dict(device="cpu", random_state=0), fit_needs_torch=True,
        checks=(_PRCUT_CHECKS, dict(hidden_layer_sizes=(8,), **_PRCUT_CHECKS),
                dict(affinity="rbf", **_PRCUT_CHECKS)),
    ),
    Entry(
        "SparseGEMINI", SparseGEMINI,
        "discriminative clustering whose penalty path selects the features",
        params=dict(random_state=0),
        checks=(dict(max_iter=20),
                dict(gemini="wasserstein_ovo", hidden_layer_sizes=(), max_iter=5),
                dict(gemini="mmd_ova", alpha=1.0, relax=True, max_iter=10)),
    ),
)

BY_NAME = {entry.name: entry for entry in ESTIMATORS}

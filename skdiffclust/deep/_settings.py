"""How DeepImageClustering trains: one frozen record, built once by ``fit`` from the
parameters and passed down whole to the training (``_fit``). Imports no torch."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Augmentation:
    """The ranges of the weak random view of an image (``_augment``); the strong
    view doubles them.

    Attributes
    ----------
    rotation : float
        Largest rotation, in degrees (uniform in [-rotation, rotation]).
    scale : float
        Largest relative change of size (a factor uniform in [1 - scale, 1 + scale]).
    shift : float
        Largest translation, as a fraction of the image's side.
    """

    rotation: float = 15.0
    scale: float = 0.1
    shift: float = 0.1


@dataclass(frozen=True)
class DeepSettings:
    """The training's settings (every ``'auto'`` resolved)."""

    n_clusters: int
    n_neighbors: int
    n_eigenvectors: object  # int or 'auto'
    n_heads: int
    gamma: float
    batch_size: int
    learning_rate: float
    max_iter: int
    # max_iter='auto' is a schedule (a fixed number of steps, as IIC's and SCAN's
    # epochs), not a cap on a training expected to converge: no ConvergenceWarning
    scheduled: bool
    tol: float
    n_iter_no_change: int
    self_labelling: int
    confidence: float
    augmentation: Augmentation
    max_side: object = 32  # int or None: the network reduces larger images
    device: object = "cpu"
    n_threads: int = 1
    verbose: bool = False

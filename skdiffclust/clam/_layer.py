"""ClAM as a torch layer: the unrolled associative-memory recursion, in any model.

:class:`ClAMLayer` holds the prototypes (and optional log-weights) as parameters
and runs the recursion of :mod:`skdiffclust.clam._dynamics` (``Memories``,
``recursion``): the same formula as the estimator's training on CUDA, which the
tests check against the numba kernels of its CPU training and inference.
:func:`clam_loss` is the masked pattern-completion loss of algorithm 1
(``_dynamics.completion_loss`` with ``_dynamics.draw_masks``).

The layer works in the units of its input. The estimator works on its data
centred and divided by one scale; :meth:`ClAMLayer.from_estimator` carries its
prototypes, beta and fill value back to the input's units (the recursion is
equivariant to a shift and a global rescale, beta scaling as one over the squared
units), so that the layer assigns raw inputs as the estimator's ``predict`` does.
"""

import numpy as np
import torch
from sklearn.utils.validation import check_is_fitted
from torch import nn

from skdiffclust._utils._torch_checks import (
    ValueChecks,
    as_real,
    check_flag,
    check_float_dtype,
    check_generator,
    check_matrix,
    check_positive_int,
    check_tensor,
    checked_device,
    finite,
    same_device,
)
from skdiffclust.clam._dynamics import (
    Memories,
    completion_loss,
    draw_masks,
    recursion,
    unit_rows,
)
from skdiffclust.clam._kernels import COSINE, EUCLIDEAN

__all__ = ["ClAMLayer", "clam_loss"]


class ClAMLayer(nn.Module):
    """Associative-memory clustering layer (ClAM, Saha et al., ICML 2023).

    Moves each input point for ``n_steps`` steps along the attractor dynamics of
    a dense associative memory whose memories are ``n_clusters`` learnable
    prototypes, and returns where the points end (the completed patterns). A
    point belongs to the prototype nearest to where it ends (:meth:`predict`);
    :meth:`predict_proba` gives the soft assignments of the same dynamics.
    Every step is differentiable, with respect to the inputs and to the
    prototypes (and the log-weights): train it with :func:`clam_loss` on the
    output of an encoder, or on its own.

    Parameters
    ----------
    n_clusters : int
        Number of prototypes k.
    n_features : int
        Dimension d of the points.
    beta : float, default=1.0
        Inverse temperature of the energy ``E(v) = -1/beta log sum_mu w_mu
        exp(-beta ||rho_mu - v||^2)`` (eq. 1 and 10, as written in the paper), in
        one over the squared units of the input: on standardised features, the
        paper's (0.1 to 3 on its UCI sets). With ``metric='cosine'``, the energy
        is ``-1/beta log sum_mu w_mu exp(beta <rho_mu / ||rho_mu||, v>)`` (eq. 12).
    n_steps : int, default=10
        Number of recursion steps T.
    step_size : float in (0, 1], default=None
        ``dt / tau``, the fraction of the way each step moves a point toward the
        attraction-weighted prototypes; ``None`` means ``1 / n_steps``.
    metric : {'euclidean', 'cosine'}, default='euclidean'
        ``'cosine'``: the spherical variant; inputs are scaled to unit norm and
        the dynamics stay on the unit sphere.
    weighted : bool, default=False
        Learn one log-weight per prototype (eq. 10-11).
    device, dtype : default=None
        Of the parameters (torch's defaults when None).
    generator : torch.Generator, default=None
        Draws the initial prototypes (standard normal); torch's default
        generator when None.

    Attributes
    ----------
    prototypes : torch.nn.Parameter of shape (n_clusters, n_features)
        The memories rho_mu.
    log_weights : torch.nn.Parameter of shape (n_clusters,) or None
        ``log w_mu``, when ``weighted``.
    fill : torch.Tensor of shape (n_features,)
        Buffer: the value hidden coordinates start from in :meth:`forward` with a
        mask and in :func:`clam_loss` (zeros; the training data's mean in a layer
        copied from a ClAM with the default ``mask_value='mean'``). Set it to your
        data's column means, e.g. ``layer.fill.copy_(x.mean(0))``.

    See Also
    --------
    skdiffclust.ClAM : the estimator, which trains this model on fixed features.
    clam_loss : the masked pattern-completion loss.

    Examples
    --------
    >>> import torch
    >>> from skdiffclust.torch import ClAMLayer
    >>> x = torch.tensor([[0.0, 0.0], [0.2, 0.1], [4.0, 4.0], [4.1, 3.9]])
    >>> layer = ClAMLayer(2, 2, beta=2.0)
    >>> with torch.no_grad():
    ...     _ = layer.prototypes.copy_(torch.tensor([[0.5, 0.5], [3.5, 3.5]]))
    >>> layer.predict(x)
    tensor([0, 0, 1, 1])
    >>> layer(x).shape
    torch.Size([4, 2])
    >>> layer.predict_proba(x).argmax(1)
    tensor([0, 0, 1, 1])
    """

    def __init__(self, n_clusters, n_features, *, beta=1.0, n_steps=10, step_size=None,
                 metric="euclidean", weighted=False, device=None, dtype=None,
                 generator=None):
        super().__init__()
        for value, name in ((n_clusters, "n_clusters"), (n_features, "n_features"),
                            (n_steps, "n_steps")):
            check_positive_int(value, name)
        beta_value = as_real(beta, "beta")
        if beta_value is None or not 0 < beta_value < np.inf:
            raise ValueError(f"beta must be a positive finite number, got {beta!r}.")
        step_value = None if step_size is None else as_real(step_size, "step_size")
        if step_size is not None and (step_value is None or not 0 < step_value <= 1):
            raise ValueError(f"step_size must be in (0, 1] or None, got {step_size!r}.")
        beta, step_size = beta_value, step_value
        if metric not in (EUCLIDEAN, COSINE):
            raise ValueError(f"metric must be 'euclidean' or 'cosine', got {metric!r}.")
        check_float_dtype(dtype)
        check_generator(generator)
        device = checked_device(device)
        self._value_checks = ValueChecks("ClAMLayer", "x")
        self.n_clusters, self.n_features = int(n_clusters), int(n_features)
        self.beta, self.n_steps = float(beta), int(n_steps)
        self.step_size, self.metric = step_size, metric
        self.weighted = check_flag(weighted, "weighted")
        factory = {"device": device, "dtype": dtype}
        self.prototypes = nn.Parameter(torch.empty((n_clusters, n_features), **factory))
        with torch.no_grad():
            self.prototypes.normal_(generator=generator)
        self.log_weights = (nn.Parameter(torch.zeros(n_clusters, **factory)) if weighted
                            else None)
        self.register_buffer("fill", torch.zeros(n_features, **factory))

    @property
    def alpha(self):
        """The step size dt / tau actually used."""
        return 1.0 / self.n_steps if self.step_size is None else float(self.step_size)

    def memories(self):
        """The prototypes prepared for the recursion.

        Returns
        -------
        Memories
            The prototypes, ``beta``, the metric and the log-weights, as the
            recursion of ``clam._dynamics`` reads them.
        """
        return Memories(self.prototypes, self.beta, self.metric, self.log_weights)

    def forward(self, x, mask=None):
        """Run the unrolled recursion; return the completed patterns.

        Parameters
        ----------
        x : torch.Tensor of shape (batch_size, n_features)
            Points, in the layer's dtype and on its device (scaled to unit norm
            first for ``metric='cosine'``).
        mask : torch.Tensor of bool, shape (batch_size, n_features), default=None
            True where a coordinate is hidden: hidden coordinates start at
            ``fill`` and are the only ones that evolve (the visible ones stay
            as they are, up to the common rescaling back to the sphere for
            ``metric='cosine'``). ``None``: every coordinate starts at the point
            and evolves (the inference of the estimator).

        Returns
        -------
        x_final : torch.Tensor of shape (batch_size, n_features)
            The points after ``n_steps`` steps, differentiable with respect to
            ``x`` and to the parameters.

        Raises
        ------
        ValueError
            For a mis-shaped ``x``, or one holding NaN or infinity (on
            CUDA after the first call, a device-side assertion instead: see
            :func:`set_input_checks`).
        """
        x = self._prepared(x, "x", allow_empty=True)
        if mask is None:
            return recursion(self.memories(), x, self.n_steps, self.alpha)
        mask = _checked_mask(mask, x)
        start = torch.where(mask, self.fill, x)
        return recursion(self.memories(), start, self.n_steps, self.alpha,
                         free=mask.to(x.dtype))

    @torch.no_grad()
    def predict(self, x):
        """Hard assignments: the prototype nearest to where each point's dynamics end.

        Parameters
        ----------
        x : torch.Tensor of shape (batch_size, n_features)

        Returns
        -------
        labels : torch.Tensor of int64, shape (batch_size,)
            Index of the prototype (row of ``prototypes``) of each point.
        """
        return self.memories().nearest(self(x))

    def predict_proba(self, x):
        """Soft assignments by the attractor dynamics (differentiable).

        Each point runs the ``n_steps`` steps of :meth:`forward`; its probability
        of prototype mu is the attraction mu exerts where the point ends, eq. 13 of
        the paper at :math:`x^T`: ``softmax_mu(-beta ||rho_mu - x^T||^2)``, or
        ``softmax_mu(beta <rho_mu / ||rho_mu||, x^T>)`` for ``metric='cosine'``.
        Points deep in a basin get nearly one-hot rows, points near a boundary
        between basins spread theirs. The log-weights of ``weighted=True`` move
        the points but are left out here, so that the most probable prototype is
        always :meth:`predict`'s nearest one.

        Parameters
        ----------
        x : torch.Tensor of shape (batch_size, n_features)

        Returns
        -------
        proba : torch.Tensor of shape (batch_size, n_clusters)
            Rows on the simplex, differentiable with respect to ``x`` and the
            parameters (wrap the call in ``torch.no_grad()`` to only infer), so
            that they can feed another objective (:func:`gemini_loss`,
            :class:`PRCutLoss`).
        """
        return self.memories().assignment_proba(self(x))

    @classmethod
    def from_estimator(cls, estimator, *, dtype=torch.float64, device=None):
        """A layer with the fitted parameters of a :class:`~skdiffclust.ClAM`.

        The estimator works on its data centred and divided by one scale; the
        layer gets its prototypes, beta and fill value in the units of the input,
        so that ``layer.predict(x)`` equals ``estimator.predict(X)`` on the same
        (float64) points, and the layer can be trained further on raw inputs.

        Parameters
        ----------
        estimator : ClAM
            A fitted ClAM.
        dtype : torch.dtype, default=torch.float64
            Of the parameters (the estimator's inference runs in float64).
        device : torch.device or str, default=None

        Returns
        -------
        layer : ClAMLayer

        Examples
        --------
        >>> import torch
        >>> from sklearn.datasets import make_blobs
        >>> from skdiffclust import ClAM
        >>> from skdiffclust.torch import ClAMLayer
        >>> X, _ = make_blobs(60, centers=3, random_state=0)
        >>> clam = ClAM(n_clusters=3, beta=1.0, random_state=0).fit(X)
        >>> layer = ClAMLayer.from_estimator(clam)
        >>> bool((layer.predict(torch.as_tensor(X)).numpy() == clam.predict(X)).all())
        True
        """
        from skdiffclust.clam import ClAM

        if not isinstance(estimator, ClAM):
            raise TypeError(
                f"estimator must be a fitted skdiffclust.ClAM, got {type(estimator).__name__}.")
        check_is_fitted(estimator)
        dynamics = estimator._fit_dynamics  # the fit's, whatever set_params did since
        layer = cls(estimator._prototypes.shape[0], estimator.n_features_in_,
                    beta=estimator.beta_, n_steps=dynamics.n_steps, step_size=dynamics.alpha,
                    metric=dynamics.metric, weighted=estimator._weighted, device=device,
                    dtype=dtype)
        # float64 prototypes and fill in the input's units (cluster_centers_ is in
        # the input's dtype, which may be float32)
        fitted = {"prototypes": estimator._in_input_units(estimator._prototypes),
                  "fill": estimator._in_input_units(estimator._mask_fill)}
        if estimator._weighted:
            fitted["log_weights"] = np.log(estimator.cluster_weights_)
        with torch.no_grad():
            for name, value in fitted.items():
                getattr(layer, name).copy_(torch.as_tensor(value, dtype=torch.float64))
        return layer

    def _prepared(self, x, name, allow_empty=False):
        """``x`` checked against the layer; unit rows for the cosine metric.
        ``allow_empty``: a batch of no points passes (the layer's calls, as torch's
        layers; not a loss, a mean over the points)."""
        check_tensor(x, name, floating=False)
        check_matrix(x, name, n_cols=self.n_features, labels=("batch_size", "n_features"),
                     allow_no_rows=allow_empty)
        parameters = self.prototypes
        if x.dtype != parameters.dtype or x.device != parameters.device:
            raise TypeError(
                f"{name} is {x.dtype} on {x.device} but the layer's parameters are "
                f"{parameters.dtype} on {parameters.device}: move one with .to().")
        if x.shape[0]:
            self._value_checks(x.device, lambda: finite(x, name))
        return unit_rows(x) if self.metric == COSINE else x

    def extra_repr(self):
        return (f"n_clusters={self.n_clusters}, n_features={self.n_features}, "
                f"beta={self.beta:g}, n_steps={self.n_steps}, step_size={self.step_size}, "
                f"metric={self.metric!r}, weighted={self.weighted}")


def clam_loss(layer, x, mask_prob=0.15, *, generator=None):
    """Masked pattern-completion loss of ClAM (algorithm 1 of Saha et al., 2023).

    Each point hides exactly ``round(mask_prob * n_features)`` distinct features,
    drawn uniformly; the hidden coordinates start at ``layer.fill``, only they
    evolve for the layer's ``n_steps`` steps, and the loss is the squared error on
    them, summed over the hidden features and averaged over the points (eq. 9).
    When no feature is hidden (``mask_prob=0``, or too few features), it is the
    unmasked loss ``||x - x^T||^2`` of eq. 8, the points starting as they are.

    Parameters
    ----------
    layer : ClAMLayer
    x : torch.Tensor of shape (batch_size, n_features)
        Points (e.g. an encoder's output), in the layer's dtype and on its device.
    mask_prob : float in [0, 1), default=0.15
        Fraction of features hidden per point, as ClAM's ``mask_prob``.
    generator : torch.Generator, default=None
        Draws the masks (on ``x``'s device); torch's default generator when None.

    Returns
    -------
    loss : torch.Tensor of shape ()
        Differentiable with respect to ``x`` and the layer's parameters.

    Notes
    -----
    The loss shrinks with the scale of ``x``: an encoder trained on it alone
    learns to shrink its code. Normalise the code and add a reconstruction term
    (the user guide's recipe, "ClAM after an encoder").

    Examples
    --------
    >>> import torch
    >>> from skdiffclust.torch import ClAMLayer, clam_loss
    >>> g = torch.Generator().manual_seed(0)
    >>> x = torch.randn(64, 8, generator=g)
    >>> layer = ClAMLayer(3, 8, beta=0.5, generator=g)
    >>> loss = clam_loss(layer, x, mask_prob=0.25, generator=g)
    >>> loss.backward()
    >>> layer.prototypes.grad.shape
    torch.Size([3, 8])
    """
    if not isinstance(layer, ClAMLayer):
        raise TypeError(f"layer must be a ClAMLayer, got {type(layer).__name__}.")
    mask_value = as_real(mask_prob, "mask_prob")
    if mask_value is None or not 0 <= mask_value < 1:
        raise ValueError(f"mask_prob must be in [0, 1), got {mask_prob!r}.")
    mask_prob = mask_value
    check_generator(generator)
    x = layer._prepared(x, "x")
    if generator is not None and not same_device(generator.device, x.device):
        raise ValueError(
            f"generator is on {generator.device} but x on {x.device}: the masks are "
            "drawn on x's device.")
    masks = draw_masks(x.shape, mask_prob, generator, x.device)
    per_point = completion_loss(layer.memories(), x, masks, layer.fill, layer.n_steps,
                                layer.alpha)
    return per_point.mean()


def _checked_mask(mask, x):
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        raise TypeError("mask must be a boolean torch.Tensor (True where hidden).")
    if mask.shape != x.shape or mask.device != x.device:
        raise ValueError(
            f"mask must have x's shape {tuple(x.shape)} and device {x.device}, got "
            f"{tuple(mask.shape)} on {mask.device}.")
    return mask

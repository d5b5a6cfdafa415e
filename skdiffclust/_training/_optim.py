"""The optimisers of the NumPy / numba backend (the torch backend uses torch.optim).

* :func:`adam_update`: Adam's update of one array, a numba kernel, so that training
  loops written in numba (ClAM's epoch) call it per step without leaving numba;
* :class:`Adam`: the same update for NumPy arrays held in a dict (SparseGEMINI);
* :class:`SGDMomentum`: SGD with heavy-ball momentum, the optimiser of Sparse
  GEMINI's proximal path (Ohl et al., 2024);
* :class:`ReduceOnPlateau`: torch's ``ReduceLROnPlateau(mode='min',
  threshold_mode='rel')`` for these optimisers, an :class:`~._loop.EpochHook` of the
  epoch loop.

Every update is torch.optim.Adam's: ``m <- b1 m + (1 - b1) g``,
``v <- b2 v + (1 - b2) g^2``, ``p <- p - (lr / c1) m / (sqrt(v / c2) + eps)`` with
the bias corrections ``c_i = 1 - b_i^t``.
"""

import math

import numpy as np

from skdiffclust._training._loop import EpochHook
from skdiffclust._utils._numba import compile_for_size, jit

ADAM_BETA1 = 0.9
ADAM_BETA2 = 0.999
ADAM_EPS = 1e-8


@jit(error_model="numpy", _nrt=False)
def adam_update(param, grad, m, v, step_size, correction2, for_size=None):
    """One Adam step on ``param`` in place (1-D arrays of one length: the flat
    views of C-contiguous arrays; a reshape inside the kernel would cost its
    compilation about 0.2 s).

    ``step_size`` is ``lr / (1 - beta1^t)`` and ``correction2`` is
    ``1 - beta2^t``; ``m`` and ``v`` are updated in place. ``for_size``: True
    where the caller is a small fit's kernel (:func:`~skdiffclust._utils._numba.compile_for_size`).
    """
    compile_for_size(for_size)
    for i in range(param.shape[0]):
        g = grad[i]
        m[i] = ADAM_BETA1 * m[i] + (1.0 - ADAM_BETA1) * g
        v[i] = ADAM_BETA2 * v[i] + (1.0 - ADAM_BETA2) * g * g
        param[i] -= step_size * m[i] / (math.sqrt(v[i] / correction2) + ADAM_EPS)


@jit(inline="always")
def integer_power(base, exponent):
    """``base ** exponent`` for a float ``base`` and an integer ``exponent >= 0``,
    with the operations of numba's ``**`` (squarings; ``math.pow`` above 2^16),
    which compiles a subroutine of its own (about 0.2 s) where this inlines."""
    if exponent > 0x10000:
        return math.pow(base, float(exponent))
    result = 1.0
    while exponent != 0:
        if exponent & 1:
            result *= base
        exponent >>= 1
        base *= base
    return result


def bias_corrections(step):
    """``(1 - beta1^t, 1 - beta2^t)`` at Adam step ``t`` (counted from 1)."""
    return 1.0 - ADAM_BETA1**step, 1.0 - ADAM_BETA2**step


class Adam:
    """Adam on a dict of NumPy arrays, updated in place.

    Parameters
    ----------
    params : dict of str to ndarray
        The parameters (float64 or float32, C-contiguous); their moments are kept
        per name, in the same precision.
    learning_rate : float
    maximize : bool, default=False
        Ascend the objective (its gradient is given) instead of descending.
    """

    def __init__(self, params, learning_rate, maximize=False):
        self.learning_rate = float(learning_rate)
        self.maximize = maximize
        self.m = {name: np.zeros_like(value) for name, value in params.items()}
        self.v = {name: np.zeros_like(value) for name, value in params.items()}
        self.t = 0

    def step(self, params, grads):
        """Update ``params[name]`` from ``grads[name]`` for every name in ``grads``."""
        for name, grad in grads.items():  # the kernel reads one index per entry
            if np.shape(grad) != params[name].shape:
                raise ValueError(f"the gradient of {name!r} has shape {np.shape(grad)}, "
                                 f"its parameter {params[name].shape}.")
        self.t += 1
        correction1, correction2 = bias_corrections(self.t)
        step_size = self.learning_rate / correction1
        for name, grad in grads.items():
            grad = np.ascontiguousarray(-grad if self.maximize else grad,
                                        dtype=params[name].dtype)
            adam_update(params[name].reshape(-1), grad.reshape(-1),
                        self.m[name].reshape(-1), self.v[name].reshape(-1), step_size,
                        correction2)


class SGDMomentum:
    """SGD with heavy-ball momentum on a dict of NumPy arrays.

    ``velocity <- momentum * velocity + g``, ``p <- p - lr * velocity`` (ascending
    when ``maximize``). Its step size is the learning rate itself, which is what a
    proximal step after it must use as the threshold scale (Adam's adaptive steps
    are not).
    """

    def __init__(self, params, learning_rate, momentum=0.9, maximize=False):
        self.learning_rate = float(learning_rate)
        self.momentum = momentum
        self.maximize = maximize
        self.velocity = {name: np.zeros_like(value) for name, value in params.items()}

    def step(self, params, grads):
        sign = 1.0 if self.maximize else -1.0
        for name, grad in grads.items():
            self.velocity[name] = self.momentum * self.velocity[name] + grad
            params[name] += sign * self.learning_rate * self.velocity[name]


class ReduceOnPlateau(EpochHook):
    """Multiply a learning rate by ``factor`` after a plateau of the epoch objective.

    An epoch improves when its objective is below ``best * (1 - threshold)``
    (torch's relative threshold mode); after more than ``patience`` epochs without
    improvement the rate is multiplied by ``factor``, down to ``min_lr``. The rate
    lives in ``holder.learning_rate`` (any object with that attribute).
    """

    def __init__(self, holder, *, factor, patience, threshold, min_lr):
        self.holder = holder
        self.factor, self.patience = factor, patience
        self.threshold, self.min_lr = threshold, min_lr
        self.best = math.inf
        self.n_bad = 0

    def step(self, objective):
        if objective < self.best * (1.0 - self.threshold):
            self.best, self.n_bad = objective, 0
        else:
            self.n_bad += 1
        if self.n_bad > self.patience:
            self.holder.learning_rate = max(self.holder.learning_rate * self.factor,
                                            self.min_lr)
            self.n_bad = 0

    def on_epoch_end(self, objective):  # as the engine's hook: a step per epoch
        self.step(objective)

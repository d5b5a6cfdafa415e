"""Checks of what a user hands the public torch blocks (``skdiffclust.torch``).

Facts the host knows (type, dtype, shape, device) are checked at every call: they
read nothing from the device. Values (finite, non-negative, rows on the simplex)
need a reduction over a tensor: each block computes one flag per condition, on the
tensor's device, and

* for CPU tensors reads them at once (there is no device to wait for) and raises
  a ValueError naming the argument, the problem and what to pass instead;
* on CUDA does the same on the block's first call on that device (one
  synchronisation, where a mistake is most likely: logits for probabilities, a
  distance matrix for a kernel), then asserts the flags on the device with
  ``torch._assert_async``, which never waits for it, at one call in
  :data:`CUDA_CHECK_EVERY` (and at every call captured in a CUDA graph, whose
  replays pay nothing). A bad input met later stops the program with a
  device-side assertion naming the block and its arguments, as torch itself does
  (class indices out of range in ``cross_entropy``); the same call with
  ``set_input_checks("eager")``, or on CPU tensors, gives the full message.

Why one call in 16: a step of a small batch on CUDA is the host's time to launch
its kernels, and the checks are about ten launches more (a large share of
``gemini_loss('mmd_ovo')``'s step at batch 1,024). The mistakes met
after a first call that passed are values gone non-finite in training, which
stay so (NaN propagates to the parameters), so a later checked call meets them.

:func:`set_input_checks` chooses between these (``"auto"``), device assertions at
every call (``"async"``), a read back at every call (``"eager"``) and no value
checks (``"off"``, which the benchmarks use to measure what the checks cost).
"""

from numbers import Integral, Real

import numpy as np
import torch

MODES = ("auto", "async", "eager", "off")
# 'auto' on CUDA: after the first call, the calls asserted on the device, one in
# this many (module docstring)
CUDA_CHECK_EVERY = 16
_MODE = {"value": "auto"}
# torch._assert_async refuses messages of 255 characters or more (torch 2.11, on CUDA)
ASYNC_MESSAGE_LIMIT = 254
_CUDA_UNAVAILABLE = "device='cuda' was requested but CUDA is not available."


def set_input_checks(mode):
    """Choose how the torch blocks check the values of their inputs.

    Parameters
    ----------
    mode : {'auto', 'async', 'eager', 'off'}
        ``'auto'`` (the default): on CPU tensors at every call; on CUDA at a
        block's first call on the device, then by assertions on the device that
        never synchronise it (a failure is a device-side assertion) at one call
        in 16 and at every call captured in a CUDA graph. ``'async'``: the same,
        with the device assertions at every call. ``'eager'``: at every call,
        with one read back from the device (clear messages on CUDA, at the cost
        of a synchronisation per call). ``'off'``: no value checks (types,
        shapes and devices are always checked).

    Returns
    -------
    previous : str
        The mode before the call, to restore it.

    Examples
    --------
    >>> from skdiffclust.torch import set_input_checks
    >>> previous = set_input_checks("eager")
    >>> set_input_checks(previous)
    'eager'
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}.")
    previous, _MODE["value"] = _MODE["value"], mode
    return previous


def same_device(a, b):
    """Whether devices ``a`` and ``b`` are one: ``'cuda'`` without a number (a
    ``torch.Generator('cuda')``'s device) is the current CUDA device, which a
    tensor's device always names (``'cuda:0'``)."""
    a, b = torch.device(a), torch.device(b)
    if a.type != b.type:
        return False
    if a.index is None or b.index is None:
        current = torch.cuda.current_device() if a.type == "cuda" and \
            torch.cuda.is_available() else 0
        return (current if a.index is None else a.index) == \
            (current if b.index is None else b.index)
    return a.index == b.index


def checked_device(device, name="device"):
    """``device`` as a ``torch.device`` (None stays None), or a clear ValueError:
    an unknown name, or a CUDA device this machine does not have."""
    if device is None:
        return None
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(
            f"{name} must be a torch.device or a device name such as 'cpu' or 'cuda', "
            f"got {device!r}.") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(_CUDA_UNAVAILABLE.replace("device=", f"{name}="))
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(
                f"{name}={str(device)!r} was requested but this machine has "
                f"{torch.cuda.device_count()} CUDA device(s).")
    return device


def check_generator(generator, name="generator"):
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(
            f"{name} must be a torch.Generator or None, got {type(generator).__name__}.")


def as_real(value, name):
    """``value`` as a float, or None when it is no real number: a real number (not
    a bool, which Python counts as one) or a 0-d real tensor on the CPU (a
    schedule computed with torch ops). A tensor on another device is a
    TypeError: reading it would make the call wait for the device."""
    if isinstance(value, torch.Tensor):
        if value.ndim != 0 or value.is_complex() or value.dtype == torch.bool:
            return None
        if value.device.type != "cpu":
            raise TypeError(
                f"{name} must be a number or a CPU tensor, got a tensor on {value.device}: "
                "reading it would wait for the device at every call; pass "
                f"float({name}) once.")
        return float(value)
    if isinstance(value, Real) and not isinstance(value, bool):
        return float(value)
    return None


def check_flag(value, name):
    """A bool (Python's or NumPy's), or a TypeError: a string such as ``"no"`` read
    by its truth was True."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}.")
    return bool(value)


def check_positive_int(value, name):
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}.")


def check_float_dtype(dtype, name="dtype"):
    """A floating point ``torch.dtype`` (None: torch's default), or a TypeError."""
    if dtype is not None and (not isinstance(dtype, torch.dtype)
                              or not dtype.is_floating_point):
        why = ""
        if not isinstance(dtype, torch.dtype):
            why = " (not a torch.dtype)"
        elif not dtype.is_complex and dtype != torch.bool:
            why = " (an integer dtype would truncate the values)"
        raise TypeError(f"{name} must be a floating point torch.dtype such as "
                        f"torch.float32, got {dtype!r}{why}.")


def check_tensor(value, name, floating=True):
    """A dense torch.Tensor (of floating point dtype when ``floating``), or a TypeError."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}.")
    check_dense(value, name)
    if floating and not torch.is_floating_point(value):
        raise TypeError(
            f"{name} must be a floating point tensor (such as float32), got dtype "
            f"{value.dtype}.")


def check_dense(value, name):
    """A strided (dense) tensor, or a TypeError: torch's sparse layouts lack the
    operations of the blocks, whose errors named a backend ("SparseCPU")."""
    if value.layout != torch.strided:
        raise TypeError(f"{name} must be a dense tensor, got layout {value.layout}: pass "
                        f"{name}.to_dense().")


def check_full_precision(value, name, why):
    """A float32 or float64 tensor, or a TypeError saying ``why`` half precision is
    refused (for blocks whose sums over a batch overflow or lose their digits in it)."""
    if value.dtype not in (torch.float32, torch.float64):
        raise TypeError(
            f"{name} must be float32 or float64, got {value.dtype}: {why}. Cast it "
            "with .float() (under torch.autocast, compute the loss on .float() tensors).")


def check_matrix(value, name, n_rows=None, n_cols=None, labels=("n_samples", "n_features"),
                 allow_no_rows=False):
    """A non-empty 2-d tensor with ``n_rows`` rows and ``n_cols`` columns (None: any);
    ``allow_no_rows``: a batch of no rows passes (a layer's input, as torch's layers)."""
    rows = labels[0] if n_rows is None else f"{labels[0]}={n_rows}"
    cols = labels[1] if n_cols is None else f"{labels[1]}={n_cols}"
    shape = tuple(value.shape)
    if value.ndim != 2 or n_rows not in (None, shape[0]) or n_cols not in (None, shape[1]):
        raise ValueError(f"{name} must have shape ({rows}, {cols}), got {shape}.")
    if value.numel() == 0 and not (allow_no_rows and shape[0] == 0 and shape[1] > 0):
        missing = "one sample (row)" if shape[0] == 0 else f"one column ({labels[1]})"
        raise ValueError(f"{name} is empty (shape {shape}): it needs at least {missing}.")


# ---------------------------------------------------------------- value checks
class Condition:
    """What a check asks of an input: scalars reduced from it (0-d tensors on its
    device), each to satisfy ``sign * scalar >= bound`` (NaN never does), and the
    message should one fail (computed on failure only).

    Bounds of this one form let a block's conditions be tested on the device in
    five kernels however many there are (stack, multiply, compare, all, assert),
    or on the scalars' Python values after one read back.
    """

    __slots__ = ("scalars", "signs", "bounds", "describe")

    def __init__(self, scalars, signs, bounds, describe):
        self.scalars, self.signs, self.bounds = tuple(scalars), signs, bounds
        self.describe = describe

    def holds(self, values):
        return all(sign * value >= bound
                   for value, sign, bound in zip(values, self.signs, self.bounds))


def simplex_tolerance(proba):
    """How far from 1 a row of probabilities may sum: softmax rows of float32
    sum to 1 within a few ulps per column."""
    eps = torch.finfo(proba.dtype).eps
    return max(1e-3, 4.0 * eps * proba.shape[-1])


def probabilities(proba, name, parts=None):
    """Rows on the probability simplex: finite, non-negative, summing to one.

    ``parts``: ``(name, rows)`` pairs of the arguments ``proba`` concatenates,
    checked in one pass and named apart in the message.
    """
    proba = proba.detach()
    tolerance = simplex_tolerance(proba)
    lowest_sum, highest_sum = torch.aminmax(proba.sum(-1))
    parts = ((name, proba),) if parts is None else parts
    return Condition((lowest_sum, highest_sum, proba.amin()), (1.0, -1.0, 1.0),
                     (1.0 - tolerance, -1.0 - tolerance, 0.0),
                     lambda: _probability_problem(parts, tolerance))


def _probability_problem(parts, tolerance):
    """The message of the first part that is not on the simplex."""
    for name, proba in parts:
        proba = proba.detach()
        if proba.numel() and not _on_simplex(proba, tolerance):
            return _part_problem(proba, name, tolerance)
    return _part_problem(parts[0][1].detach(), parts[0][0], tolerance)


def _on_simplex(proba, tolerance):
    sums = proba.sum(-1)
    return bool(((sums - 1.0).abs() <= tolerance).all() and (proba >= 0).all())


def _part_problem(proba, name, tolerance):
    if not torch.isfinite(proba).all():
        return f"{name} contains NaN or infinity."
    low = float(proba.amin())
    if low < 0:
        return (f"{name} has negative entries (down to {low:.4g}): pass probabilities, "
                "e.g. torch.softmax(logits, dim=1), not logits.")
    sums = proba.sum(-1)
    worst = float(sums[(sums - 1.0).abs().argmax()])
    return (f"{name} must have rows summing to 1 (within {tolerance:.1e}), got a row "
            f"summing to {worst:.6g}: apply torch.softmax(logits, dim=1) to the logits "
            "first.")


def non_negative(values, name, what):
    """Finite and non-negative (weights, distances), up to rounding: entries down
    to minus sqrt(machine epsilon) times the largest pass (squared distances
    computed by matrix products can round below zero)."""
    values = values.detach()
    finfo = torch.finfo(values.dtype)
    low, high = torch.aminmax(values)
    margin = torch.add(low, high, alpha=finfo.eps ** 0.5)  # low + rounding * high
    return Condition((margin, high), (1.0, -1.0), (0.0, -finfo.max),
                     lambda: _sign_problem(values, name, what))


def _sign_problem(values, name, what):
    if not torch.isfinite(values).all():
        return f"{name} contains NaN or infinity."
    return (f"{name} must hold non-negative {what}, got a value of "
            f"{float(values.amin()):.4g}.")


def finite(values, name, through=None):
    """Finite values, read from their sum (20 times cheaper than ``isfinite``
    on a CPU; a sum that overflows flags values too large to compute with), or
    from ``through``, a result computed from every value, which is non-finite
    when one of them is (no pass over ``values`` at all)."""
    values = values.detach()
    total = (values if through is None else through.detach()).sum()
    largest = torch.finfo(total.dtype).max
    return Condition((total, total), (1.0, -1.0), (-largest, -largest),
                     lambda: _finiteness_problem(values, name))


def _finiteness_problem(values, name):
    if not torch.isfinite(values).all():
        return f"{name} contains NaN or infinity."
    return (f"{name} holds values too large for {values.dtype} (their sum "
            "overflows): rescale them.")


class ValueChecks:
    """The value checks of one block (see the module docstring): the devices on
    which its first call was checked eagerly, and how to check a call."""

    def __init__(self, block, arguments):
        self.block, self.arguments = block, arguments
        self.checked_on = set()
        self._coefficients = {}  # the signs and bounds, on a device, made once
        self._calls = {}  # 'auto' on CUDA: the calls since the first, per device

    def __call__(self, device, *conditions, eager_only=()):
        """Check ``conditions`` (functions returning a :class:`Condition`) for a
        call on ``device``; nothing is computed when the checks are off.
        ``eager_only``: conditions checked only where a flag is read back (every
        call on the CPU, the first on CUDA): mistakes a user makes at every call
        or at none, such as passing the wrong kind of matrix."""
        mode = _MODE["value"]
        if mode == "off" or device.type == "meta":
            return
        eager = self._eager(mode, device)
        if not eager and mode == "auto" and not self._due(device):
            return
        built = [condition() for condition in conditions + (eager_only if eager else ())]
        scalars = [scalar for condition in built for scalar in condition.scalars]
        if eager:
            if device.type == "cpu":  # nothing to wait for: no op more than needed
                values = [scalar.item() for scalar in scalars]
            else:  # one read back; the later calls' signs and bounds, copied now
                values = torch.stack([scalar.double() for scalar in scalars]).tolist()
                self._signs_and_bounds(built[:len(conditions)], scalars[0])
            start = 0
            for condition in built:
                stop = start + len(condition.scalars)
                if not condition.holds(values[start:stop]):
                    raise ValueError(condition.describe())
                start = stop
            self.checked_on.add(str(device))
            return
        dtype = scalars[0].dtype
        stacked = torch.stack([scalar if scalar.dtype == dtype else scalar.to(dtype)
                               for scalar in scalars])
        signs, bounds = self._signs_and_bounds(built, stacked)
        torch._assert_async((stacked * signs >= bounds).all(), self._async_message())

    def _async_message(self):
        """The device assertion's message: torch (2.11 and later) refuses one of 255
        characters or more, so the block's name and arguments come first and the
        advice is cut to fit."""
        message = (f"skdiffclust.torch.{self.block}: invalid {self.arguments} (NaN, inf, "
                   "negative, or rows not summing to 1); set_input_checks('eager') or "
                   "CPU tensors give the full message")
        return message[:ASYNC_MESSAGE_LIMIT]

    def _signs_and_bounds(self, built, like):
        """The conditions' signs and bounds as tensors like ``like``: copied to
        the device at the first call of each kind only."""
        signs = tuple(sign for condition in built for sign in condition.signs)
        bounds = tuple(bound for condition in built for bound in condition.bounds)
        key = (str(like.device), like.dtype, signs, bounds)
        if key not in self._coefficients:
            self._coefficients[key] = (like.new_tensor(signs), like.new_tensor(bounds))
        return self._coefficients[key]

    def _due(self, device):
        """Whether this call on CUDA, after the first, is one to assert on the
        device: one in ``CUDA_CHECK_EVERY``, counted per device, and every call
        captured in a CUDA graph (its replays then check at no host cost)."""
        count = self._calls.get(device, 0)
        self._calls[device] = count + 1
        return count % CUDA_CHECK_EVERY == 0 or (
            device.type == "cuda" and torch.cuda.is_current_stream_capturing())

    def _eager(self, mode, device):
        if mode == "eager" or device.type != "cuda":
            return True
        if str(device) in self.checked_on:
            return False
        # a read back is illegal while a CUDA graph is being captured
        return not torch.cuda.is_current_stream_capturing()

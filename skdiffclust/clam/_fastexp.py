"""A vectorisable exp for ClAM's attraction weights (numba).

There is no vector exp for LLVM without SVML, and a scalar call per attraction
weight costs more than the rest of a recursion step of :mod:`._kernels`. These
compute exp(x) for ``_kernels.LOGIT_FLOOR <= x <= 0`` in plain arithmetic that vectorises:
x = n ln2 + r with |r| <= ln2 / 2, a Taylor polynomial for exp(r), and 2^n written
as exponent bits (n is between -67 and 0, a normal number in both precisions).
Rounding ``x log2(e)`` to n is done by adding and subtracting 1.5 * 2^(mantissa
bits), which leaves n in the low bits of the sum: no float-to-int conversion.
"""

import math

import numpy as np
from numba import types
from numba.extending import overload

from skdiffclust._utils._numba import jit

# float64: degree 13, remainder below 2e-16 relative; Cody-Waite split of ln2
F64_SHIFT = 6755399441055744.0  # 1.5 * 2^52
F64_SHIFT_BITS = 0x4338000000000000
F64_LN2_HI = 6.93147180369123816490e-01
F64_LN2_LO = 1.90821492927058770002e-10
F64_LOG2E = 1.0 / math.log(2.0)
# float32: degree 7, remainder below 6e-9 relative; n ln2_hi is exact for |n| < 2^15
F32_SHIFT = np.float32(12582912.0)  # 1.5 * 2^23
F32_SHIFT_BITS = np.int32(0x4B400000)
F32_LN2_HI = np.float32(0.693359375)
F32_LN2_LO = np.float32(-2.12194440e-4)
F32_LOG2E = np.float32(1.0 / math.log(2.0))
F32_TERMS = tuple(np.float32(1.0 / math.factorial(i)) for i in range(8))


# fastmath "contract" only: mul + add may fuse into FMA (fewer, more accurate
# operations); no reassociation, which would undo the Cody-Waite reduction
OPTIONS = {"error_model": "numpy", "fastmath": {"contract"}}


@jit(**OPTIONS)
def exp_weights_double(logits, largest, floor, n_lanes, p, total, shifted):
    """``p = exp(max(logits - largest, floor))`` and ``total += p``, in float64;
    ``shifted`` is float64 scratch of the shape of ``p``."""
    for row in range(p.shape[0]):
        for lane in range(n_lanes):
            value = max(logits[row, lane] - largest[lane], floor)
            shifted[row, lane] = value * F64_LOG2E + F64_SHIFT
            n = shifted[row, lane] - F64_SHIFT
            r = (value - n * F64_LN2_HI) - n * F64_LN2_LO
            poly = r * (1.0 / 6227020800.0) + 1.0 / 479001600.0
            poly = poly * r + 1.0 / 39916800.0
            poly = poly * r + 1.0 / 3628800.0
            poly = poly * r + 1.0 / 362880.0
            poly = poly * r + 1.0 / 40320.0
            poly = poly * r + 1.0 / 5040.0
            poly = poly * r + 1.0 / 720.0
            poly = poly * r + 1.0 / 120.0
            poly = poly * r + 1.0 / 24.0
            poly = poly * r + 1.0 / 6.0
            poly = poly * r + 0.5
            poly = poly * r + 1.0
            p[row, lane] = poly * r + 1.0
        for lane in range(n_lanes):  # 2^n (scalar views: an array view compiles more)
            bits = np.float64(shifted[row, lane]).view(np.int64)
            shifted[row, lane] = np.int64((bits - F64_SHIFT_BITS + 1023) << 52).view(
                np.float64)
        for lane in range(n_lanes):
            p[row, lane] *= shifted[row, lane]
            total[lane] += p[row, lane]


@jit(**OPTIONS)
def exp_weights_single(logits, largest, floor, n_lanes, p, total, shifted):
    """``p = exp(max(logits - largest, floor))`` and ``total += p``, in float32;
    ``shifted`` is float32 scratch of the shape of ``p``."""
    c0, c1, c2, c3, c4, c5, c6, c7 = F32_TERMS
    for row in range(p.shape[0]):
        for lane in range(n_lanes):
            value = max(logits[row, lane] - largest[lane], floor)
            shifted[row, lane] = value * F32_LOG2E + F32_SHIFT
            n = shifted[row, lane] - F32_SHIFT
            r = (value - n * F32_LN2_HI) - n * F32_LN2_LO
            p[row, lane] = (((((((c7 * r + c6) * r + c5) * r + c4) * r + c3) * r + c2) * r
                             + c1) * r + c0)
        for lane in range(n_lanes):
            bits = np.float32(shifted[row, lane]).view(np.int32)
            shifted[row, lane] = np.int32(
                (bits - F32_SHIFT_BITS + np.int32(127)) << np.int32(23)).view(np.float32)
        for lane in range(n_lanes):
            p[row, lane] *= shifted[row, lane]
            total[lane] += p[row, lane]


def exp_weights(logits, largest, floor, n_lanes, p, total, shifted):
    """``p = exp(max(logits - largest, floor))`` and ``total += p``, by the code of
    p's precision, chosen when compiling (a branch on the dtype would compile both)."""


# The overload compiles the chosen kernel's Python function itself, with the
# kernels' options, for the calling kernel: returning a function that calls the
# kernel would compile that trampoline besides the kernel (about 0.3 s).
@overload(exp_weights, jit_options=OPTIONS)
def _exp_weights_of_precision(logits, largest, floor, n_lanes, p, total, shifted):
    kernel = exp_weights_single if p.dtype == types.float32 else exp_weights_double
    return kernel.py_func

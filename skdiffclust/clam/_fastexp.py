"""A vectorisable exp for ClAM's attraction weights (numba).

There is no vector exp for LLVM without SVML, and a scalar call per attraction
weight costs more than the rest of a recursion step of :mod:`._kernels`. These
compute exp(x) for ``_kernels.LOGIT_FLOOR <= x <= 0`` in plain arithmetic that vectorises:
x = n ln2 + r with |r| <= ln2 / 2, a Taylor polynomial for exp(r), and 2^n written
as exponent bits (n is between -67 and 0, a normal number in both precisions).
Rounding ``x log2(e)`` to n is done by adding and subtracting 1.5 * 2^(mantissa
bits), which leaves n in the low bits of the sum: no float-to-int conversion.

The float32 kernel trains: its products and sums may fuse into FMA instructions.
The float64 kernel infers, and :func:`exp_weights_numpy` computes the same bits
in NumPy (inference on small data, ``_inference``, compiles nothing), so neither
fuses: each operation rounds on its own, on every CPU.
"""

import math

import numpy as np
from numba import types
from numba.extending import overload

from skdiffclust._utils._numba import bits_as, compile_for_size, jit

# float64: degree 13, remainder below 2e-16 relative; Cody-Waite split of ln2
F64_SHIFT = 6755399441055744.0  # 1.5 * 2^52
F64_SHIFT_BITS = 0x4338000000000000
F64_LN2_HI = 6.93147180369123816490e-01
F64_LN2_LO = 1.90821492927058770002e-10
F64_LOG2E = 1.0 / math.log(2.0)
# Horner's coefficients of the kernel after its first two, 1 / 11! ... 1 / 2!, 1
F64_TERMS = (1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0, 1.0 / 40320.0,
             1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0)
# float32: degree 7, remainder below 6e-9 relative; n ln2_hi is exact for |n| < 2^15
F32_SHIFT = np.float32(12582912.0)  # 1.5 * 2^23
F32_SHIFT_BITS = np.int32(0x4B400000)
F32_LN2_HI = np.float32(0.693359375)
F32_LN2_LO = np.float32(-2.12194440e-4)
F32_LOG2E = np.float32(1.0 / math.log(2.0))
F32_TERMS = tuple(np.float32(1.0 / math.factorial(i)) for i in range(8))


# fastmath "contract" only: mul + add may fuse into FMA (fewer, more accurate
# operations); no reassociation, which would undo the Cody-Waite reduction. The
# kernels allocate nothing: no reference counting (as ``_kernels.INTERNAL``)
OPTIONS = {"error_model": "numpy", "fastmath": {"contract"}, "_nrt": False}
# float64: no fusion, so that NumPy computes the same bits. Said explicitly: a kernel
# that leaves fastmath unset inherits it from the kernel that first compiles it (here
# the overload below, with OPTIONS), and keeps that compilation for every caller.
DOUBLE_OPTIONS = {"error_model": "numpy", "fastmath": False, "_nrt": False}


@jit(**DOUBLE_OPTIONS)
def exp_weights_double(logits, largest, floor, n_lanes, p, total, shifted):
    """``p = exp(max(logits - largest, floor))`` and ``total += p``, in float64;
    ``shifted`` is float64 scratch of the shape of ``p``. :func:`exp_weights_numpy`
    computes the same bits."""
    for row in range(p.shape[0]):
        for lane in range(n_lanes):
            value = logits[row, lane] - largest[lane]
            value = floor if floor > value else value  # max(): compiles a function
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
        for lane in range(n_lanes):  # 2^n, as exponent bits
            bits = bits_as(np.float64(shifted[row, lane]), np.int64)
            shifted[row, lane] = bits_as(np.int64((bits - F64_SHIFT_BITS + 1023) << 52),
                                         np.float64)
        for lane in range(n_lanes):
            p[row, lane] *= shifted[row, lane]
            total[lane] += p[row, lane]


@jit(**OPTIONS)
def exp_weights_single(logits, largest, floor, n_lanes, p, total, shifted, for_size=None):
    """``p = exp(max(logits - largest, floor))`` and ``total += p``, in float32;
    ``shifted`` is float32 scratch of the shape of ``p``. ``for_size``: True in the
    compact kernel (:func:`~skdiffclust._utils._numba.compile_for_size`)."""
    compile_for_size(for_size)
    c0, c1, c2, c3, c4, c5, c6, c7 = F32_TERMS
    for row in range(p.shape[0]):
        for lane in range(n_lanes):
            value = logits[row, lane] - largest[lane]
            value = floor if floor > value else value  # max(): compiles a function
            shifted[row, lane] = value * F32_LOG2E + F32_SHIFT
            n = shifted[row, lane] - F32_SHIFT
            r = (value - n * F32_LN2_HI) - n * F32_LN2_LO
            p[row, lane] = (((((((c7 * r + c6) * r + c5) * r + c4) * r + c3) * r + c2) * r
                             + c1) * r + c0)
        for lane in range(n_lanes):
            bits = bits_as(np.float32(shifted[row, lane]), np.int32)
            shifted[row, lane] = bits_as(
                np.int32((bits - F32_SHIFT_BITS + np.int32(127)) << np.int32(23)), np.float32)
        for lane in range(n_lanes):
            p[row, lane] *= shifted[row, lane]
            total[lane] += p[row, lane]


def exp_weights_numpy(logits, largest, floor, p, total):
    """:func:`exp_weights_double` in NumPy, the same bits: ``p = exp(max(logits -
    largest, floor))`` (k, ...) and ``total += p`` (...), row by row. In-place
    operations round as the kernel's expressions do, one operation at a time."""
    value = np.subtract(logits, largest)
    np.maximum(value, floor, out=value)
    shifted = value * F64_LOG2E
    shifted += F64_SHIFT
    n = shifted - F64_SHIFT
    r = n * F64_LN2_HI
    np.subtract(value, r, out=r)
    n *= F64_LN2_LO
    r -= n
    poly = r * (1.0 / 6227020800.0)
    poly += 1.0 / 479001600.0
    for coefficient in F64_TERMS:
        poly *= r
        poly += coefficient
    np.multiply(poly, r, out=p)
    p += 1.0
    bits = shifted.view(np.int64)  # 2^n, as exponent bits
    bits -= F64_SHIFT_BITS - 1023
    bits <<= 52
    p *= shifted
    for row in p:
        total += row


def exp_weights(logits, largest, floor, n_lanes, p, total, shifted, for_size=None):
    """``p = exp(max(logits - largest, floor))`` and ``total += p``, by the code of
    p's precision, chosen when compiling (a branch on the dtype would compile both)."""


# For float32, the overload compiles the kernel's Python function itself, with the
# kernels' options, for the calling kernel: returning a function that calls the
# kernel would compile that trampoline besides the kernel (about 0.3 s). The float64
# kernel is called, as it compiles with other options (no fusion); only inference on
# large data compiles that call. Called from kernels only, it needs no entry point
# from Python or C.
@overload(exp_weights, jit_options={**OPTIONS, "no_cpython_wrapper": True,
                                    "no_cfunc_wrapper": True})
def _exp_weights_of_precision(logits, largest, floor, n_lanes, p, total, shifted, for_size=None):
    if p.dtype == types.float32:
        return exp_weights_single.py_func

    def call_double(logits, largest, floor, n_lanes, p, total, shifted, for_size=None):
        exp_weights_double(logits, largest, floor, n_lanes, p, total, shifted)

    return call_double

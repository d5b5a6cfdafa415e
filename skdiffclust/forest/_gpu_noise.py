"""The noise of the perturbed spanning forests on CUDA (numba.cuda device functions):
entry (i, j), i < j, of ``Z_s`` as the CPU's ``_perturbed.py`` draws it (splitmix64
and its Box-Muller transform, in float32 series), a function of (seed, s, i, j, n)
alone, evaluated where a kernel needs it (``_gpu_kernels``) and never stored.
"""

import math

import numpy as np
from numba import cuda

# the simulator's threads iterate over the globals of the module of the function
# they run; the first warning raised here (numpy's uint64 overflow in splitmix64)
# would add ``__warningregistry__`` to them mid-iteration (see ``_gpu_kernels``)
__warningregistry__ = {}

# splitmix64 and the Box-Muller transform, exactly as in _perturbed.py
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_SHIFT16 = np.uint64(16)
_SHIFT27 = np.uint64(27)
_SHIFT30 = np.uint64(30)
_SHIFT31 = np.uint64(31)
_SHIFT40 = np.uint64(40)
_U1 = np.uint64(1)
_MASK24 = np.uint64(0xFFFFFF)
_F0 = np.float32(0.0)
_F1 = np.float32(1.0)
_F2 = np.float32(2.0)
_F3 = np.float32(3.0)
_F4 = np.float32(4.0)
_F8 = np.float32(8.0)
_F16 = np.float32(16.0)
_F24 = np.float32(24.0)
_F256 = np.float32(256.0)
_F65536 = np.float32(65536.0)
_F_HALF = np.float32(0.5)
_F_QUARTER = np.float32(0.25)
_F_SIXTEENTH = np.float32(1.0 / 16)
_F_INV256 = np.float32(1.0 / 256)
_F_INV65536 = np.float32(1.0 / 65536)
_F_MINUS2 = np.float32(-2.0)
_F_ANGLE = np.float32(1.0 / (1 << 22))
_LN2 = np.float32(np.log(2.0))
_SQRT2 = np.float32(np.sqrt(2.0))
_SQRT_HALF = np.float32(np.sqrt(0.5))
_HALF_PI = np.float32(np.pi / 2)
_C3 = np.float32(1 / 3)
_C5 = np.float32(1 / 5)
_C7 = np.float32(1 / 7)
_C9 = np.float32(1 / 9)
_S3 = np.float32(-1 / 6)
_S5 = np.float32(1 / 120)
_S7 = np.float32(-1 / 5040)
_S9 = np.float32(1 / 362880)
_K2 = np.float32(-0.5)
_K4 = np.float32(1 / 24)
_K6 = np.float32(-1 / 720)
_K8 = np.float32(1 / 40320)
_K10 = np.float32(-1 / 3628800)


# ------------------------------------------------------------------------ noise
@cuda.jit(device=True)
def splitmix64(x):
    z = x + _GOLDEN
    z = (z ^ (z >> _SHIFT30)) * _MIX1
    z = (z ^ (z >> _SHIFT27)) * _MIX2
    return z ^ (z >> _SHIFT31)


@cuda.jit(device=True)
def _log_u1(radius_bits):
    """ln(radius_bits / 2^24) by the float32 atanh series of ``_box_muller``."""
    x = np.float32(radius_bits)
    e = _F0
    if x >= _F65536:
        x = x * _F_INV65536
        e = e + _F16
    if x >= _F256:
        x = x * _F_INV256
        e = e + _F8
    if x >= _F16:
        x = x * _F_SIXTEENTH
        e = e + _F4
    if x >= _F4:
        x = x * _F_QUARTER
        e = e + _F2
    if x >= _F2:
        x = x * _F_HALF
        e = e + _F1
    if x > _SQRT2:
        x = x * _F_HALF
        e = e + _F1
    t = (x - _F1) / (x + _F1)
    t2 = t * t
    series = _F1 + t2 * (_C3 + t2 * (_C5 + t2 * (_C7 + t2 * _C9)))
    return _F2 * t * series + (e - _F24) * _LN2


@cuda.jit(device=True)
def normal_from_bits(bits, want_sine):
    """One of the two normals of a 64-bit draw: the cosine or the sine branch."""
    radius_bits = np.int32((bits >> _SHIFT40) + _U1)
    angle_bits = np.int32((bits >> _SHIFT16) & _MASK24)
    radius = np.float32(math.sqrt(_F_MINUS2 * _log_u1(radius_bits)))
    q = np.float32(angle_bits) * _F_ANGLE
    quadrant = _F0
    if q >= _F1:
        quadrant = _F1
    if q >= _F2:
        quadrant = _F2
    if q >= _F3:
        quadrant = _F3
    phi = (q - quadrant - _F_HALF) * _HALF_PI
    phi2 = phi * phi
    sin_phi = phi * (_F1 + phi2 * (_S3 + phi2 * (_S5 + phi2 * (_S7 + phi2 * _S9))))
    cos_phi = _F1 + phi2 * (_K2 + phi2 * (_K4 + phi2 * (_K6 + phi2 * (_K8 + phi2 * _K10))))
    a = (cos_phi - sin_phi) * _SQRT_HALF  # cos(pi/4 + phi)
    b = (cos_phi + sin_phi) * _SQRT_HALF  # sin(pi/4 + phi)
    if quadrant == _F0:
        cos_angle, sin_angle = a, b
    elif quadrant == _F1:
        cos_angle, sin_angle = -b, a
    elif quadrant == _F2:
        cos_angle, sin_angle = -a, -b
    else:
        cos_angle, sin_angle = b, -a
    if want_sine:
        return radius * sin_angle
    return radius * cos_angle


@cuda.jit(device=True)
def row_key_of(sample_key, i):
    """The key of row i of the noise Z_s (``noise_row``'s)."""
    return splitmix64(sample_key + np.uint64(i))


@cuda.jit(device=True)
def noise_in_row(row_key, i, j, n):
    """Entry (i, j), i < j, of the CPU's noise Z_s (``noise_row`` of row i), from the
    row's key.

    Row i holds n - i - 1 entries from (n - i) // 2 draws: the cosines first, then the
    sines. One call of :func:`normal_from_bits` for both halves (not one per branch):
    the lanes of a warp fall on both sides, and would run the Box-Muller once per side.
    """
    length = n - i - 1
    n_pairs = (length + 1) // 2
    t = j - i - 1
    sine = t >= n_pairs
    draw = t - n_pairs if sine else t
    return normal_from_bits(splitmix64(row_key + np.uint64(draw)), sine)


@cuda.jit(device=True)
def noise(sample_key, i, j, n):
    """Entry (i, j), i < j, of the CPU's noise Z_s (:func:`noise_in_row`)."""
    return noise_in_row(row_key_of(sample_key, i), i, j, n)


@cuda.jit(device=True)
def fill_row_keys(row_keys, sample_key, n, tid, n_threads):
    """``row_keys[i]`` = the key of row i of Z_s, for i < n (each by one thread; the
    caller's barrier makes them visible)."""
    i = np.uint32(tid)
    while i < n:
        row_keys[i] = row_key_of(sample_key, i)
        i += np.uint32(n_threads)


@cuda.jit(device=True)
def perturbed_from_row(S, epsilon, single, row_key, a, b):
    """(S + epsilon Z_s)[a, b] as the CPU's ``perturb`` stores it, as a float64, given
    the key of row min(a, b) of Z_s.

    ``single``: S is float32, so the sum is rounded to float32 as the CPU stores it.
    ``epsilon == 0`` gives S itself (the unperturbed forest of the control variate).
    Both triangles go through one call of :func:`noise_in_row` (selects, no branch),
    for the same reason as in :func:`noise_in_row`: Prim's lanes see both.
    """
    # unsigned indices: numba wraps signed ones around at every access
    value = np.float64(S[np.uint32(a), np.uint32(b)])
    if epsilon == 0.0:
        return value
    lower = a < b
    i = a if lower else b
    j = b if lower else a
    value = value + epsilon * np.float64(noise_in_row(row_key, i, j, S.shape[0]))
    if single:
        value = np.float64(np.float32(value))
    return value


@cuda.jit(device=True)
def perturbed(S, epsilon, single, sample_key, a, b):
    """(S + epsilon Z_s)[a, b] (:func:`perturbed_from_row`, the row's key hashed)."""
    return perturbed_from_row(S, epsilon, single, row_key_of(sample_key, a if a < b else b),
                              a, b)

"""Arrays packed into buffers (``_utils._packed``): the views a kernel rebuilds are
the views Python gets, sharing the buffers' memory."""

import numpy as np
import pytest

from skdiffclust._utils._packed import pack, unpacker

SPEC = (((0, 2), (1, 1)), (0, 3), (2, 2))  # roles: float32, float64, int64
DTYPES = (np.float32, np.float64, np.int64)


def _arrays(rng):
    return ((rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal(5)),
            rng.standard_normal((2, 3, 2)).astype(np.float32),
            rng.integers(0, 100, (4, 1)))


def _leaves(nested):
    if isinstance(nested, np.ndarray):
        return [nested]
    return [leaf for part in nested for leaf in _leaves(part)]


def test_pack_copies_each_array_into_its_roles_buffer():
    arrays = _arrays(np.random.default_rng(0))
    buffers, layout, views = pack(SPEC, arrays, DTYPES)
    assert [b.dtype for b in buffers] == [np.dtype(d) for d in DTYPES]
    assert [b.size for b in buffers] == [12 + 12, 5, 4]
    for array, view in zip(_leaves(arrays), _leaves(views)):
        assert view.flags.c_contiguous and any(np.shares_memory(view, b) for b in buffers)
        np.testing.assert_array_equal(view, array)
    np.testing.assert_array_equal(layout[:, 0], [0, 0, 12, 0])  # offsets
    np.testing.assert_array_equal(layout[1, 1:], [5, 0, 0])


def test_pack_refuses_arrays_that_do_not_follow_the_spec():
    first, second, third = _arrays(np.random.default_rng(0))
    with pytest.raises(ValueError, match="2 dimensions of float32 where the spec has 3"):
        pack(SPEC, (first, first[0], third), DTYPES)
    with pytest.raises(ValueError, match="of int64 where the spec has 2 of float32"):
        pack(SPEC, ((third, first[1]), second, third), DTYPES)
    with pytest.raises(ValueError, match="not nested as the spec"):
        pack(SPEC, (first, second), DTYPES)


def test_the_kernels_views_are_pythons_views():
    import numba

    unpack = unpacker(SPEC)

    @numba.njit
    def double_and_sum(buffers, layout):
        (a, b), c, d = unpack(buffers, layout)
        total = 0.0
        for value in a.ravel():
            total += value
        for value in c.ravel():
            total += value
        for i in range(b.shape[0]):
            b[i] *= 2.0
        d[3, 0] = -1
        return total + b.sum() + d.sum(), (a.shape, c.shape, d.shape)

    arrays = _arrays(np.random.default_rng(1))
    buffers, layout, views = pack(SPEC, arrays, DTYPES)
    (a, b), c, d = views
    expected = float(a.sum(dtype=np.float64) + c.sum(dtype=np.float64) + 2 * b.sum()
                     + d[:3].sum() - 1)
    total, shapes = double_and_sum(buffers, layout)
    assert total == pytest.approx(expected, rel=1e-6)
    assert shapes == (a.shape, c.shape, d.shape)
    np.testing.assert_array_equal(b, 2 * arrays[0][1])  # written in place
    assert d[3, 0] == -1


def test_a_view_returned_by_a_kernel_keeps_its_buffer_alive():
    import numba

    unpack = unpacker(SPEC)

    @numba.njit
    def third_view(buffers, layout):
        return unpack(buffers, layout)[2]

    arrays = _arrays(np.random.default_rng(2))
    buffers, layout, _ = pack(SPEC, arrays, DTYPES)
    view = third_view(buffers, layout)
    del buffers
    np.testing.assert_array_equal(view, arrays[2])


def test_unpack_refuses_what_is_not_buffers_and_a_layout():
    import numba

    unpack = unpacker(SPEC)

    @numba.njit
    def views(buffers, layout):
        return unpack(buffers, layout)

    buffers, layout, _ = pack(SPEC, _arrays(np.random.default_rng(0)), DTYPES)
    with pytest.raises(numba.core.errors.TypingError, match="unpack: needs a tuple"):
        views(buffers[:2], layout)
    with pytest.raises(numba.core.errors.TypingError, match="unpack: needs a tuple"):
        views(buffers, layout.astype(np.float64))

"""Arrays packed into buffers (``_utils._packed``): the views a kernel rebuilds are
the views Python gets, sharing the buffers' memory."""

import numpy as np
import pytest

from skdiffclust._utils._packed import pack, unpacker
from tests._isolated import outcomes_in_subprocess

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


LIFETIME = """
    import gc, weakref
    import numba
    import numpy as np
    from skdiffclust._utils._packed import pack, unpacker

    SPEC, DTYPES = {spec!r}, (np.float32, np.float64, np.int64)
    unpack = unpacker(SPEC)

    @numba.njit
    def first_and_last(buffers, layout):
        (a, b), c, d = unpack(buffers, layout)
        return a, d

    def views_without_their_buffers(seed):
        # nothing of this frame survives it but what the kernel returns
        rng = np.random.default_rng(seed)
        a = rng.standard_normal((3, 4)).astype(np.float32)
        arrays = ((a, rng.standard_normal(5)), a[:2, :3].reshape(2, 3, 1).repeat(2, 2),
                  rng.integers(0, 100, (4, 1)))
        buffers, layout = pack(SPEC, arrays, DTYPES)[:2]
        alive = [weakref.ref(buffer) for buffer in buffers]
        return (arrays[0][0].copy(), arrays[2].copy()), alive, first_and_last(buffers, layout)
    """

LIFETIME_CASES = [("views outlive the buffers' Python references", """
(expected_a, expected_d), alive, (a, d) = views_without_their_buffers(3)
gc.collect()
# memory freed now would be handed out again to arrays of the same sizes
junk = [np.full(n, -7, dtype) for n, dtype in [(24, np.float32), (5, np.float64),
                                              (4, np.int64)] * 200]
held = [ref() is not None for ref in alive]
assert held == [True, False, True], f"buffers held (those of the views only): {held}"
assert np.array_equal(a, expected_a) and np.array_equal(d, expected_d), "values"
a[...] = 1.0
d[...] = 2
del a, d
gc.collect()
held = [ref() is not None for ref in alive]
assert held == [False] * 3, f"buffers held after their last view went: {held}"
""")]


def test_the_views_a_kernel_returns_keep_their_buffers_alive_and_no_longer():
    """Views returned by a kernel hold their buffers (a reference each, taken by the
    intrinsic), which go with the last of them: with no Python reference left to a
    buffer, it lives as long as its views, and no longer. Run in a fresh process:
    views over freed memory could crash it."""
    outcomes = outcomes_in_subprocess(LIFETIME.format(spec=SPEC), LIFETIME_CASES)
    assert outcomes == {name: "returned" for name, _ in LIFETIME_CASES}, outcomes


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


def _corrupted(layout, row, column, value):
    layout = layout.copy()
    layout[row, column] = value
    return layout


# (row, column, value) of a layout entry made wrong, and the row named
CORRUPTIONS = {
    "a view of 1,000,000 items over a 24-item buffer": (2, 1, 1_000_000),
    "past the end by one item": (2, 1, 3),
    "a negative offset": (0, 0, -1),
    "an offset past the buffer's end": (1, 0, 6),
    "a negative extent": (3, 1, -4),
    "two negative extents, a positive product": (0, 2, -4),
    "extents whose product overflows int64": (2, 2, 2**62),
}


@pytest.mark.parametrize("case", CORRUPTIONS)
def test_check_layout_names_the_view_that_does_not_fit(case):
    from skdiffclust._utils._packed import check_layout

    row, column, value = CORRUPTIONS[case]
    buffers, layout, _ = pack(SPEC, _arrays(np.random.default_rng(0)), DTYPES)
    check_layout(SPEC, buffers, layout, DTYPES)
    bad = _corrupted(layout, row, column, value)
    if case == "two negative extents, a positive product":
        bad[0, 1] = -3
    with pytest.raises(ValueError, match=rf"packed layout: row {row} \(an array of"):
        check_layout(SPEC, buffers, bad, DTYPES)


def test_check_layout_refuses_buffers_and_layouts_of_another_form():
    from skdiffclust._utils._packed import check_layout

    buffers, layout, _ = pack(SPEC, _arrays(np.random.default_rng(0)), DTYPES)
    wrong = {
        "a tuple of at least 3 buffers": (buffers[:2], layout),
        "buffer 1 is not an aligned, C-contiguous 1-D": (
            (buffers[0], np.zeros(10)[::2], buffers[2]), layout),
        "buffer 2 holds int32": ((*buffers[:2], buffers[2].astype(np.int32)), layout),
        "of 4 rows and at least 4 columns is expected, not int64 of shape .3, 4.": (
            buffers, layout[:3].copy()),
        "not float64 of shape": (buffers, layout.astype(np.float64)),
        "not int64 of shape .4, 3.": (buffers, np.ascontiguousarray(layout[:, :3])),
        "C-contiguous int64 array": (buffers, np.asfortranarray(layout)),
    }
    for message, (some_buffers, some_layout) in wrong.items():
        with pytest.raises(ValueError, match=message):
            check_layout(SPEC, some_buffers, some_layout, DTYPES)


@pytest.mark.parametrize("case", CORRUPTIONS)
def test_the_kernel_refuses_a_layout_that_does_not_fit_its_buffers(case):
    """Layouts that skipped :func:`check_layout`: the intrinsic refuses them before
    it makes a view (this kernel reads no item, only the views' sizes)."""
    import numba

    unpack = unpacker(SPEC)

    @numba.njit
    def sizes(buffers, layout):
        (a, b), c, d = unpack(buffers, layout)
        return a.size, b.size, c.size, d.size

    row, column, value = CORRUPTIONS[case]
    buffers, layout, _ = pack(SPEC, _arrays(np.random.default_rng(0)), DTYPES)
    assert sizes(buffers, layout) == (12, 5, 12, 4)
    bad = _corrupted(layout, row, column, value)
    if case == "two negative extents, a positive product":
        bad[0, 1] = -3
    with pytest.raises(ValueError, match="unpack: the layout does not fit the buffers"):
        sizes(buffers, bad)
    for short in (layout[:3].copy(), np.ascontiguousarray(layout[:, :3])):
        with pytest.raises(ValueError, match="unpack: the layout is not of 4 rows and at "
                                             "least 4 columns"):
            sizes(buffers, short)


def _model_without(name=None, retyped=None, extra=False):
    """A data model manager whose arrays' model lacks the field ``name``, has the
    field ``retyped`` an int32, or has a field more."""
    from numba.core import types
    from numba.core.datamodel import default_manager, models

    class Model(models.StructModel):
        def __init__(self, dmm, fe_type):
            known = models.ArrayModel(dmm, fe_type)
            members = [(field, types.int32 if field == retyped else kind)
                       for field, kind in zip(known._fields, known._members)
                       if field != name]
            super().__init__(dmm, fe_type, members + [("flags", types.intp)] * extra)

    class Manager:
        def lookup(self, fe_type):
            return Model(default_manager, fe_type)

    return Manager()


def test_numbas_array_model_is_the_one_the_intrinsic_fills():
    from skdiffclust._utils._packed import array_model_problem, check_array_model

    assert array_model_problem() is None
    check_array_model()
    problems = {"has the fields": _model_without("nitems"),
                "'flags'": _model_without(extra=True),
                "the field nitems of array(float64, 1d, C) is int32, not int64":
                _model_without(retyped="nitems")}
    for message, manager in problems.items():
        assert message in array_model_problem(manager)
        with pytest.raises(RuntimeError, match="numba .*'s array model is not the one it "
                                               "knows: "):
            check_array_model(manager)


def test_the_numba_versions_packed_relies_on_are_bounded_and_each_end_tested():
    """``_packed`` relies on numba's array model: the requirement bounds numba on
    both sides, the installed numba is inside, and CI tests the lowest release."""
    import re
    from pathlib import Path

    import numba
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    root = Path(__file__).resolve().parent.parent
    requirement = re.search(r'^\s*"numba([^"]*)",', (root / "pyproject.toml").read_text(),
                            re.MULTILINE)
    specifier = SpecifierSet(requirement.group(1))
    bounds = {spec.operator: Version(spec.version) for spec in specifier}
    assert set(bounds) == {">=", "<"}, specifier
    assert specifier.contains(Version(numba.__version__)), (numba.__version__, specifier)
    lowest = bounds[">="]
    ci = (root / ".ci" / "run").read_text()
    assert f'"numba=={lowest.major}.{lowest.minor}.*"' in ci, f"CI does not test numba {lowest}"

"""Arrays packed into a few buffers, for kernels called from Python with many arrays.

numba compiles, into the entry point of a kernel called from Python, code of its own
for each array argument (unboxing it). ClAM's epoch kernel takes about 40 scratch
and result arrays; unboxing them was a noticeable share of the work of its first
fit in a fresh process.

* :func:`pack` copies nested arrays into one buffer per role (a dtype each), and
  returns the buffers, a layout (each array's offset and shape, one row per array)
  and the arrays' views in the buffers, nested as they were.
* :func:`unpacker` makes the numba intrinsic that rebuilds the same views inside a
  kernel from the buffers and the layout: a few instructions per array.

Both follow a *spec*, the nesting of the arrays in tuples, with ``(role, ndim)`` for
each array: ``role`` indexes the buffers.

A layout is data: were it wrong, the views would reach past their buffers. So
:func:`check_layout` checks it against the buffers in Python (:func:`pack` does, on
what it returns; a caller that keeps a layout or its buffers between calls checks
them again before it hands them to a kernel), and the intrinsic refuses a layout
that does not fit its buffers with a ``ValueError`` before it builds a view (a loop
over the layout's rows in a small function of its own, once per kernel call).

The intrinsic builds numba's array structures field by field: it relies on numba's
data model of arrays (:data:`ARRAY_FIELDS`), the same from numba 0.59 to the newest
release that the package's requirements admit, each end tested in CI.
:func:`check_array_model` refuses another with a clear error, from :func:`pack` and
when a kernel using the intrinsic compiles.
"""

import functools
import itertools
import math
import operator

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, errors, types
from numba.extending import intrinsic

# The fields of numba's array structure that the intrinsic fills, in its data model
ARRAY_FIELDS = ("meminfo", "parent", "nitems", "itemsize", "data", "shape", "strides")
INT64_MAX = np.iinfo(np.int64).max


def _leaves(spec):
    """The ``(role, ndim)`` leaves of ``spec``, depth first."""
    if _is_leaf(spec):
        return [spec]
    return [leaf for part in spec for leaf in _leaves(part)]


def _is_leaf(spec):
    return len(spec) == 2 and all(isinstance(value, int) for value in spec)


def _nest(spec, items):
    """The items of the iterator ``items`` nested in tuples as ``spec``'s leaves."""
    if _is_leaf(spec):
        return next(items)
    return tuple(_nest(part, items) for part in spec)


def _flat(spec, nested):
    if _is_leaf(spec):
        return [nested]
    if len(nested) != len(spec):
        raise ValueError(f"the arrays are not nested as the spec: {len(nested)} items "
                         f"where it has {len(spec)}")
    return [leaf for part, item in zip(spec, nested) for leaf in _flat(part, item)]


def pack(spec, arrays, dtypes):
    """Copy ``arrays``, nested as ``spec``, into one buffer for each dtype of
    ``dtypes`` (a role each).

    Parameters
    ----------
    spec : tuple
        The nesting, ``(role, ndim)`` for each array.
    arrays : tuple
        The arrays, nested as ``spec``; each has its leaf's ndim and its role's dtype.
    dtypes : tuple of dtype
        Each role's dtype.

    Returns
    -------
    buffers : tuple of ndarray
        One 1-D buffer for each role.
    layout : ndarray of shape (n_arrays, 1 + max ndim), int64
        Each array's offset in its buffer and its shape, depth first.
    views : tuple
        The arrays' copies, views in the buffers, nested as ``spec``.
    """
    leaves, flat = _leaves(spec), _flat(spec, arrays)
    sizes, rows = [0] * len(dtypes), []
    for (role, ndim), array in zip(leaves, flat):
        if array.ndim != ndim or array.dtype != dtypes[role]:
            raise ValueError(f"an array of {array.ndim} dimensions of {array.dtype} where "
                             f"the spec has {ndim} of {np.dtype(dtypes[role])}")
        rows.append((role, sizes[role], array))
        sizes[role] += array.size
    buffers = tuple(np.empty(size, dtype) for size, dtype in zip(sizes, dtypes))
    layout = np.zeros((len(rows), 1 + max(ndim for _, ndim in leaves)), np.int64)
    views = []
    for i, (role, offset, array) in enumerate(rows):
        layout[i, 0] = offset
        layout[i, 1:1 + array.ndim] = array.shape
        view = buffers[role][offset:offset + array.size].reshape(array.shape)
        view[...] = array
        views.append(view)
    check_layout(spec, buffers, layout, dtypes)
    return buffers, layout, _nest(spec, iter(views))


def check_layout(spec, buffers, layout, dtypes=None):
    """Raise ``ValueError``, naming the first bad entry, unless every view of
    ``layout`` lies inside its buffer (and numba's array model is the one
    :func:`unpacker` knows, :func:`check_array_model`).

    Parameters
    ----------
    spec : tuple
        The nesting, ``(role, ndim)`` for each array, as for :func:`pack`.
    buffers : tuple of ndarray
        One aligned, C-contiguous 1-D buffer for each role (each of its role's dtype
        in ``dtypes``, if given).
    layout : ndarray of shape (n_arrays, at least 1 + max ndim), int64
        C-contiguous; each array's offset and shape, depth first: the offset is not
        negative, nor is any extent, and the offset plus the product of the extents
        is at most the buffer's size.
    dtypes : tuple of dtype, optional
        Each role's dtype.
    """
    check_array_model()
    leaves = _leaves(spec)
    n_roles = 1 + max(role for role, _ in leaves)
    width = 1 + max(ndim for _, ndim in leaves)
    if not isinstance(buffers, tuple) or len(buffers) < n_roles:
        raise ValueError(f"packed layout: a tuple of at least {n_roles} buffers is "
                         f"expected, not {type(buffers).__name__} of "
                         f"{len(buffers) if isinstance(buffers, tuple) else '?'}")
    for role, buffer in enumerate(buffers):
        if not (isinstance(buffer, np.ndarray) and buffer.ndim == 1
                and buffer.flags.c_contiguous and buffer.flags.aligned):
            raise ValueError(f"packed layout: buffer {role} is not an aligned, "
                             f"C-contiguous 1-D array")
        if dtypes is not None and buffer.dtype != np.dtype(dtypes[role]):
            raise ValueError(f"packed layout: buffer {role} holds {buffer.dtype}, where "
                             f"its role has {np.dtype(dtypes[role])}")
    if not (isinstance(layout, np.ndarray) and layout.dtype == np.int64
            and layout.ndim == 2 and layout.flags.c_contiguous
            and layout.shape[0] == len(leaves) and layout.shape[1] >= width):
        raise ValueError(f"packed layout: a C-contiguous int64 array of {len(leaves)} "
                         f"rows and at least {width} columns is expected, not "
                         f"{getattr(layout, 'dtype', type(layout).__name__)} of shape "
                         f"{getattr(layout, 'shape', '?')}")
    for row, ((role, ndim), entries) in enumerate(zip(leaves, layout.tolist())):
        offset, shape = entries[0], tuple(entries[1:1 + ndim])
        # the intrinsic's products of the extents, left to right, stay in int64
        products = itertools.accumulate(shape, operator.mul)
        if (offset < 0 or min(shape, default=0) < 0 or max(products, default=0) > INT64_MAX
                or offset + math.prod(shape) > buffers[role].size):
            raise ValueError(f"packed layout: row {row} (an array of {ndim} dimensions "
                             f"in buffer {role}) has offset {offset} and shape {shape}: "
                             f"{math.prod(shape)} items from {offset} do not fit in the "
                             f"buffer's {buffers[role].size}")


def check_array_model(manager=None):
    """Raise ``RuntimeError`` unless numba's data model of arrays (``manager``'s, by
    default numba's) is the one the intrinsic of :func:`unpacker` fills
    (:data:`ARRAY_FIELDS`, of the types it gives them)."""
    problem = array_model_problem(manager)
    if problem is not None:
        raise RuntimeError(
            f"skdiffclust builds numba arrays field by field (_utils._packed) and "
            f"numba {numba.__version__}'s array model is not the one it knows: "
            f"{problem}. Install a numba release that skdiffclust's requirements admit.")


@functools.cache
def array_model_problem(manager=None):
    """What differs between numba's data model of arrays (``manager``'s, by default
    numba's) and :data:`ARRAY_FIELDS`, or None."""
    from numba.core.datamodel import default_manager, models

    manager = default_manager if manager is None else manager
    for ndim in (1, 2):
        kind = types.Array(types.float64, ndim, "C")
        model = manager.lookup(kind)
        if not isinstance(model, models.StructModel):
            return f"{kind} is a {type(model).__name__}, not a structure"
        fields = tuple(getattr(model, "_fields", ()))
        if sorted(fields) != sorted(ARRAY_FIELDS):
            return f"{kind} has the fields {fields}, not {ARRAY_FIELDS}"
        expected = {"meminfo": types.MemInfoPointer(types.float64),
                    "parent": types.pyobject, "nitems": types.intp,
                    "itemsize": types.intp, "data": types.CPointer(types.float64),
                    "shape": types.UniTuple(types.intp, ndim),
                    "strides": types.UniTuple(types.intp, ndim)}
        for name, member in expected.items():
            if model.get_member_fe_type(name) != member:
                return (f"the field {name} of {kind} is "
                        f"{model.get_member_fe_type(name)}, not {member}")
    return None


def unpacker(spec):
    """The numba intrinsic ``unpack(buffers, layout)`` that returns the views of
    :func:`pack` (C-contiguous arrays, nested in tuples as ``spec``) inside a kernel.

    ``buffers`` and ``layout`` are those :func:`pack` returned for ``spec``: a
    layout that does not fit the buffers (:func:`check_layout`: a row's offset or an
    extent negative, or a view past its buffer's end, or too few rows or columns)
    raises ``ValueError`` before any view is made.
    """
    leaves = _leaves(spec)

    @intrinsic
    def unpack(typingctx, buffers, layout):
        problem = array_model_problem()
        if problem is not None:
            raise errors.TypingError(f"unpack: numba's array model is not the one it "
                                     f"knows: {problem}")
        if not (isinstance(buffers, types.BaseTuple)
                and all(isinstance(b, types.Array) and b.ndim == 1 and b.layout == "C"
                        for b in buffers)
                and max(role for role, _ in leaves) < len(buffers)
                and isinstance(layout, types.Array) and layout.ndim == 2
                and layout.layout == "C" and layout.dtype == types.int64):
            raise errors.TypingError(
                f"unpack: needs a tuple of 1-D buffers and an int64 layout, not "
                f"{buffers} and {layout}")
        kinds = [types.Array(buffers[role].dtype, ndim, "C") for role, ndim in leaves]
        result = _nest_types(spec, iter(kinds))

        def codegen(context, builder, signature, args):
            views = _build_views(context, builder, signature.args, args, leaves, kinds)
            value = _make_tuples(context, builder, spec, result, iter(views))
            return _borrowed(context, builder, result, value)

        return result(buffers, layout), codegen

    return unpack


def _nest_types(spec, kinds):
    if _is_leaf(spec):
        return next(kinds)
    return types.Tuple([_nest_types(part, kinds) for part in spec])


def _make_tuples(context, builder, spec, kind, views):
    if _is_leaf(spec):
        return next(views)
    parts = [_make_tuples(context, builder, part, part_kind, views)
             for part, part_kind in zip(spec, kind.types)]
    return context.make_tuple(builder, kind, parts)


def _build_views(context, builder, arg_types, args, leaves, kinds):
    buffer_types, layout_type = arg_types
    buffers = [_fields(context, builder, kind, value) for kind, value in
               zip(buffer_types, cgutils.unpack_tuple(builder, args[0], len(buffer_types)))]
    layout = _fields(context, builder, layout_type, args[1])
    n_columns = builder.extract_value(layout["shape"], 1)
    intp = context.get_value_type(types.intp)

    def entry(row, column):
        index = builder.add(builder.mul(intp(row), n_columns), intp(column))
        return builder.load(builder.gep(layout["data"], [index]))

    # the layout's own shape, before any of its entries is read
    width = 1 + max(ndim for _, ndim in leaves)
    _refuse_unless(context, builder, builder.and_(
        builder.icmp_signed("==", builder.extract_value(layout["shape"], 0),
                            intp(len(leaves))),
        builder.icmp_signed(">=", n_columns, intp(width))),
        f"unpack: the layout is not of {len(leaves)} rows and at least {width} columns")
    fits = _layout_fits(context, builder, intp, layout, n_columns, leaves, buffers)
    _refuse_unless(context, builder, fits,
                   "unpack: the layout does not fit the buffers (an offset or an extent "
                   "is negative, or a view ends past its buffer)")
    rows = [(entry(row, 0), [entry(row, 1 + axis) for axis in range(ndim)])
            for row, (_, ndim) in enumerate(leaves)]

    views = []
    for (offset, shape), ((role, ndim), kind) in zip(rows, zip(leaves, kinds)):
        buffer = buffers[role]
        strides, stride = [], buffer["itemsize"]
        for extent in reversed(shape):  # C order
            strides.insert(0, stride)
            stride = builder.mul(stride, extent)
        fields = dict(buffer, nitems=builder.sdiv(stride, buffer["itemsize"]),
                      data=builder.gep(buffer["data"], [offset]),
                      shape=cgutils.pack_array(builder, shape, intp),
                      strides=cgutils.pack_array(builder, strides, intp))
        views.append(_struct(context, builder, kind, fields))
    return views


def _fits_function(module, intp):
    """The LLVM function ``fits(layout, n_columns, roles, ndims, n_rows, sizes)`` (an
    i1): whether each of the ``n_rows`` views of the layout fits in its buffer
    (``roles`` and ``ndims``: each view's buffer and number of dimensions;
    ``sizes``: each buffer's number of items).

    A loop in a function of its own, never inlined: a few instructions whatever the
    spec, where comparisons unrolled into the kernel cost LLVM's optimiser more
    compilation (it carries what they imply into every loop over the views) than
    packing the arrays saves."""
    function_type = ir.FunctionType(ir.IntType(1), [intp.as_pointer(), intp,
                                                    intp.as_pointer(), intp.as_pointer(),
                                                    intp, intp.as_pointer()])
    function = cgutils.get_or_insert_function(module, function_type,
                                              "skdiffclust_packed_fits")
    if not function.is_declaration:
        return function
    function.linkage = "internal"
    function.attributes.add("noinline")
    builder = ir.IRBuilder(function.append_basic_block("entry"))
    layout, n_columns, roles, ndims, n_rows, sizes = function.args
    count = cgutils.alloca_once(builder, intp)

    def refuse_if(condition):
        with builder.if_then(condition, likely=False):
            builder.ret(cgutils.false_bit)

    def load(array, index):
        return builder.load(builder.gep(array, [index]))

    with cgutils.for_range(builder, n_rows, intp=intp) as row:
        first = builder.mul(row.index, n_columns)
        size, offset = load(sizes, load(roles, row.index)), load(layout, first)
        refuse_if(builder.icmp_unsigned(">", offset, size))  # a negative one too
        builder.store(intp(1), count)
        with cgutils.for_range(builder, load(ndims, row.index), intp=intp) as axis:
            extent = load(layout, builder.add(first, builder.add(axis.index, intp(1))))
            refuse_if(builder.icmp_signed("<", extent, intp(0)))
            product = builder.smul_with_overflow(builder.load(count), extent)
            refuse_if(builder.extract_value(product, 1))
            builder.store(builder.extract_value(product, 0), count)
        refuse_if(builder.icmp_signed(">", builder.load(count), builder.sub(size, offset)))
    builder.ret(cgutils.true_bit)
    return function


def _layout_fits(context, builder, intp, layout, n_columns, leaves, buffers):
    """Whether each view of ``layout`` fits in its buffer (:func:`_fits_function`)."""
    def constant(values, name):
        array = ir.Constant(ir.ArrayType(intp, len(values)), [intp(v) for v in values])
        return cgutils.gep(builder, cgutils.global_constant(builder, name, array), 0, 0)

    sizes = cgutils.alloca_once(builder, intp, size=len(buffers))
    for role, buffer in enumerate(buffers):
        builder.store(buffer["nitems"], builder.gep(sizes, [intp(role)]))
    return builder.call(_fits_function(builder.module, intp), [
        layout["data"], n_columns, constant([role for role, _ in leaves], "packed_roles"),
        constant([ndim for _, ndim in leaves], "packed_ndims"), intp(len(leaves)), sizes])


def _refuse_unless(context, builder, condition, message):
    """Return ``ValueError(message)`` from the calling kernel unless ``condition``."""
    with cgutils.if_unlikely(builder, builder.not_(condition)):
        context.call_conv.return_user_exc(builder, ValueError, (message,))


def _fields(context, builder, kind, value):
    """The fields of ``value``, of the numba array type ``kind``, by name."""
    model = context.data_model_manager[kind]
    return {name: builder.extract_value(value, model.get_field_position(name))
            for name in ("meminfo", "parent", "nitems", "itemsize", "data", "shape")}


def _struct(context, builder, kind, fields):
    """The value of the numba type ``kind`` (a struct) with the given fields, built
    directly (numba's structure helpers go through memory)."""
    model = context.data_model_manager[kind]
    value = cgutils.get_null_value(model.get_value_type())
    for name, field in fields.items():
        value = builder.insert_value(value, field, model.get_field_position(name))
    return value


def _borrowed(context, builder, kind, value):
    """The views share the buffers' memory: a new reference to it for each."""
    if context.enable_nrt:
        context.nrt.incref(builder, kind, value)
    return value

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
"""

import numpy as np
from numba.core import cgutils, errors, types
from numba.extending import intrinsic


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
    return buffers, layout, _nest(spec, iter(views))


def unpacker(spec):
    """The numba intrinsic ``unpack(buffers, layout)`` that returns the views of
    :func:`pack` (C-contiguous arrays, nested in tuples as ``spec``) inside a kernel.

    ``buffers`` and ``layout`` are those :func:`pack` returned for ``spec``; the
    views are not checked against the buffers' bounds.
    """
    leaves = _leaves(spec)

    @intrinsic
    def unpack(typingctx, buffers, layout):
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

    views = []
    for row, ((role, ndim), kind) in enumerate(zip(leaves, kinds)):
        buffer = buffers[role]
        shape = [entry(row, 1 + axis) for axis in range(ndim)]
        strides, stride = [], buffer["itemsize"]
        for extent in reversed(shape):  # C order
            strides.insert(0, stride)
            stride = builder.mul(stride, extent)
        fields = dict(buffer, nitems=builder.sdiv(stride, buffer["itemsize"]),
                      data=builder.gep(buffer["data"], [entry(row, 0)]),
                      shape=cgutils.pack_array(builder, shape, intp),
                      strides=cgutils.pack_array(builder, strides, intp))
        views.append(_struct(context, builder, kind, fields))
    return views


def _fields(context, builder, kind, value):
    """The fields of ``value``, of the numba array type ``kind``, by name."""
    model = context.data_model_manager[kind]
    return {name: builder.extract_value(value, model.get_field_position(name))
            for name in ("meminfo", "parent", "itemsize", "data", "shape")}


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

"""ONNX's tensor protos read into the core's plain descriptions: element types, shapes, byte sizes.

The readers of ``onnx.TensorProto`` element types (:func:`dtype_name`, :func:`dtype_bits`),
of the shapes a ``TypeProto`` declares (:func:`shape_from_type`, :func:`dim_from_proto`) and of
initializers and ``Constant`` values (:func:`tensor_info`, a :class:`~explorer.core.tensors.TensorInfo`
without their data). The descriptions themselves are IR-neutral and live in the core
(:mod:`explorer.core.tensors`).

Examples
--------
>>> import numpy as np
>>> from onnx import numpy_helper
>>> from explorer.onnx_adapter.tensor_protos import tensor_info
>>> info = tensor_info(numpy_helper.from_array(np.ones((2, 3), np.float32), "w"))
>>> info.shape, info.dtype, info.nbytes, info.numel
((2, 3), 'float32', 24, 6)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from explorer.core.tensors import SMALL_VALUE_LIMIT, Dim, Shape, TensorInfo, array_stats

__all__ = [
    "dtype_name",
    "dtype_from_name",
    "dtype_bits",
    "dim_from_proto",
    "shape_from_type",
    "shape_bytes",
    "tensor_info",
]

_BITS = {
    TensorProto.BOOL: 8,
    TensorProto.STRING: 0,
    TensorProto.UINT4: 4,
    TensorProto.INT4: 4,
    TensorProto.FLOAT4E2M1: 4,
    TensorProto.UINT2: 2,
    TensorProto.INT2: 2,
    TensorProto.FLOAT6E2M3: 6,
    TensorProto.FLOAT6E3M2: 6,
}

_NAMES = {
    TensorProto.FLOAT: "float32",
    TensorProto.DOUBLE: "float64",
    TensorProto.FLOAT16: "float16",
    TensorProto.BFLOAT16: "bfloat16",
}


def dtype_name(elem_type: int) -> str:
    """Return a short, numpy-like name for an ONNX element type.

    Parameters
    ----------
    elem_type : int
        A ``onnx.TensorProto.DataType`` value.

    Returns
    -------
    str
        ``"float32"``, ``"int64"``, ``"bool"``, ... or ``"undefined"``.

    Examples
    --------
    >>> from onnx import TensorProto
    >>> dtype_name(TensorProto.FLOAT), dtype_name(TensorProto.INT64)
    ('float32', 'int64')
    """
    if elem_type in _NAMES:
        return _NAMES[elem_type]
    try:
        return TensorProto.DataType.Name(elem_type).lower()
    except ValueError:
        return f"unknown({elem_type})"


def dtype_from_name(name: str) -> int:
    """The ONNX element type of a name :func:`dtype_name` gives (``TensorProto.UNDEFINED`` if none).

    Examples
    --------
    >>> from onnx import TensorProto
    >>> dtype_from_name("float32") == TensorProto.FLOAT, dtype_from_name("int64") == TensorProto.INT64
    (True, True)
    """
    for elem, short in _NAMES.items():
        if short == name:
            return elem
    try:
        return int(TensorProto.DataType.Value(name.upper()))
    except ValueError:
        return TensorProto.UNDEFINED


def dtype_bits(elem_type: int) -> int:
    """Return the storage size of one element in bits (0 when not fixed, e.g. strings).

    Examples
    --------
    >>> from onnx import TensorProto
    >>> dtype_bits(TensorProto.FLOAT), dtype_bits(TensorProto.INT4)
    (32, 4)
    """
    if elem_type in _BITS:
        return _BITS[elem_type]
    try:
        return int(onnx.helper.tensor_dtype_to_np_dtype(elem_type).itemsize) * 8
    except (KeyError, TypeError, ValueError):
        return 0


def shape_bytes(shape: Shape | None, elem_type: int) -> int | None:
    """Return the byte size of a tensor, or ``None`` when a dimension is not known.

    Examples
    --------
    >>> from onnx import TensorProto
    >>> shape_bytes((2, 3), TensorProto.FLOAT), shape_bytes(("batch", 3), TensorProto.FLOAT)
    (24, None)
    """
    if shape is None or any(not isinstance(d, int) for d in shape):
        return None
    return math.ceil(math.prod(shape) * dtype_bits(elem_type) / 8)


def shape_from_type(type_proto: onnx.TypeProto) -> tuple[Shape | None, int]:
    """Read the shape and element type of a tensor ``TypeProto``.

    Returns
    -------
    shape : tuple or None
        Dimensions as ``int`` (known), ``str`` (symbolic) or ``None`` (unknown,
        including paddle2onnx's ``dim_value: -1``; see :func:`dim_from_proto`);
        ``None`` when the rank itself is unknown or the value is not a tensor.
    elem_type : int
        The ONNX element type (0 when unknown).

    Examples
    --------
    >>> from onnx import helper, TensorProto
    >>> vi = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, None])
    >>> shape_from_type(vi.type)
    (('batch', 3, None), 1)
    """
    which = type_proto.WhichOneof("value")
    if which == "sparse_tensor_type":
        tensor_type = type_proto.sparse_tensor_type
    elif which == "tensor_type":
        tensor_type = type_proto.tensor_type
    elif which in ("sequence_type", "optional_type"):
        inner = (
            type_proto.sequence_type.elem_type
            if which == "sequence_type"
            else type_proto.optional_type.elem_type
        )
        _, elem = shape_from_type(inner) if inner.WhichOneof("value") else (None, 0)
        return None, elem
    else:
        return None, 0
    if not tensor_type.HasField("shape"):
        return None, tensor_type.elem_type
    return tuple(dim_from_proto(dim) for dim in tensor_type.shape.dim), tensor_type.elem_type


def dim_from_proto(dim: onnx.TensorShapeProto.Dimension) -> Dim:
    """Read one dimension: its size, its symbolic name, or ``None`` when it is dynamic and unnamed.

    A non-positive ``dim_value`` is dynamic too: paddle2onnx writes ``-1`` and
    older converters (keras2onnx, onnxmltools) ``0`` for dynamic dims, so they
    read as ``None``, like a dim with neither a value nor a name. (A truly
    empty dimension is legal ONNX but vanishingly rare on graph inputs; models
    that declare one are shown as dynamic there.)

    Examples
    --------
    >>> from onnx import TensorShapeProto
    >>> [dim_from_proto(TensorShapeProto.Dimension(**kw))
    ...  for kw in ({"dim_value": 3}, {"dim_param": "batch"}, {"dim_value": -1}, {}, {"dim_value": 0})]
    [3, 'batch', None, None, None]
    """
    kind = dim.WhichOneof("value")
    if kind == "dim_value":
        return int(dim.dim_value) if dim.dim_value > 0 else None
    if kind == "dim_param":
        return dim.dim_param or None
    return None


def _has_data(tensor: TensorProto) -> bool:
    if tensor.data_location == TensorProto.EXTERNAL:
        return False
    return bool(
        tensor.HasField("raw_data")  # not `tensor.raw_data`: that copies the bytes
        or tensor.float_data
        or tensor.int32_data
        or tensor.int64_data
        or tensor.double_data
        or tensor.uint64_data
        or tensor.string_data
    )


def _small_values(array: np.ndarray) -> tuple[Any, ...]:
    flat = array.reshape(-1)
    if flat.dtype.kind in "fc":
        return tuple(float(v) if flat.dtype.kind == "f" else str(v) for v in flat)
    if flat.dtype.kind in "iub":
        return tuple(int(v) for v in flat)
    return tuple(v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in flat)


def tensor_info(
    tensor: TensorProto,
    *,
    source: str = "initializer",
    with_stats: bool = False,
    external_available: bool = False,
) -> TensorInfo:
    """Describe a ``TensorProto`` without keeping its data.

    Parameters
    ----------
    tensor : onnx.TensorProto
        An initializer or the ``value`` of a ``Constant`` node.
    source : str
        ``"initializer"`` or ``"constant"``.
    with_stats : bool
        Compute min/max/mean/std of floating-point data in memory (costs a pass over it).
    external_available : bool
        The tensor's external file was checked and can be read on demand
        (:func:`explorer.onnx_adapter.weights.tensor_array`): then it counts as ``loaded``.

    Returns
    -------
    TensorInfo

    Examples
    --------
    >>> import numpy as np
    >>> from onnx import numpy_helper
    >>> tensor_info(numpy_helper.from_array(np.array([1, -1], np.int64), "shape")).values
    (1, -1)
    """
    shape = tuple(int(d) for d in tensor.dims)
    numel = math.prod(shape)
    nbytes = math.ceil(numel * dtype_bits(tensor.data_type) / 8)
    external = tensor.data_location == TensorProto.EXTERNAL
    in_memory = _has_data(tensor) or numel == 0
    loaded = in_memory or (external and external_available)
    values = None
    stats = None
    if in_memory and (numel <= SMALL_VALUE_LIMIT or with_stats):
        try:
            array = numpy_helper.to_array(tensor)
        except Exception:  # exotic dtypes numpy cannot hold
            array = None
        if array is not None:
            if numel <= SMALL_VALUE_LIMIT:
                values = _small_values(array)
            if with_stats:
                stats = array_stats(array)
    if tensor.data_type == TensorProto.STRING:
        nbytes = sum(len(s) for s in tensor.string_data)
    return TensorInfo(
        name=tensor.name,
        shape=shape,
        dtype=dtype_name(tensor.data_type),
        numel=numel,
        nbytes=nbytes,
        source=source,
        values=values,
        external=external,
        loaded=loaded,
        stats=stats,
    )

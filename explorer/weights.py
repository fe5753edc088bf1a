"""Weights: where a tensor's bytes live, checked, and read only when something needs their values.

Loading reads a model's structure; the values of large tensors stored in
external files stay on disk (:data:`LAZY_EXTERNAL_BYTES`) and are read on
demand through a memory map: the details panel's statistics, weight digests
for diffs, runtimes (which read the files themselves). Every external location
is checked before anything is read, exactly as strictly for lazy tensors as
for eager ones: absolute paths, ``..`` and symlinks that leave the model's
folder are refused, and offsets or lengths past the end of the file are errors.

Examples
--------
>>> import numpy as np
>>> from onnx import numpy_helper
>>> w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
>>> from explorer.tensors import array_stats
>>> tensor_array(w, None).sum(), array_stats(tensor_array(w, None))["max"]
(np.float32(15.0), 5.0)
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath

import numpy as np
import onnx
from onnx import ModelProto, TensorProto, numpy_helper

from .errors import ExternalDataError, MissingExternalDataError, UnsafeExternalDataError
from .onnx_protos import iter_graphs
from .tensors import STATS_CHUNK, array_stats, chunk_stats, dtype_bits, shape_bytes

__all__ = [
    "LAZY_EXTERNAL_BYTES",
    "STRIP_KEEP_BYTES",
    "ExternalSpan",
    "external_tensors",
    "external_span",
    "check_external_data",
    "read_span",
    "tensor_array",
    "tensor_digest",
    "tensor_stats",
    "stripped_copy",
    "has_strippable_tensors",
    "model_bytes",
]

LAZY_EXTERNAL_BYTES = 1 << 20
"""External tensors of at least this many bytes stay on disk and are read on demand; smaller ones load."""

STRIP_KEEP_BYTES = 64 << 10
"""Tensors up to this size keep their values in the stripped copy (shape data propagation reads them)."""

_HASH_BLOCK = 1 << 24


@dataclass(frozen=True)
class ExternalSpan:
    """Where the bytes of one external tensor are: a checked file, an offset and a length.

    Attributes
    ----------
    tensor : str
        The tensor's name.
    path : Path
        The file (inside the model's folder; checked).
    offset, length : int
        The byte range (checked against the file's size).
    """

    tensor: str
    path: Path
    offset: int
    length: int


def external_tensors(model: ModelProto) -> list[TensorProto]:
    """Return every tensor in the model (all graphs, Constant values) stored in an external file.

    Examples
    --------
    >>> from explorer import zoo
    >>> external_tensors(zoo.build("mlp"))
    []
    """
    found: list[TensorProto] = []
    for graph, _ in iter_graphs(model.graph):
        found.extend(t for t in graph.initializer if t.data_location == TensorProto.EXTERNAL)
        for node in graph.node:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.TENSOR and attr.t.data_location == TensorProto.EXTERNAL:
                    found.append(attr.t)
    return found


def _fields(tensor: TensorProto) -> dict[str, str]:
    return {entry.key: entry.value for entry in tensor.external_data}


def _safe_location(tensor: TensorProto, base_dir: Path, label: str) -> Path:
    location = _fields(tensor).get("location", "")
    what = f"external data of tensor {tensor.name!r}"
    if not location:
        raise ExternalDataError(f"{what} has no location", path=label)
    posix, windows = PurePosixPath(location), PureWindowsPath(location)
    if posix.is_absolute() or windows.is_absolute() or windows.drive or location.startswith(("/", "\\")):
        raise UnsafeExternalDataError(
            f"{what} points to an absolute path {location!r}; external data must lie in the "
            "model's folder (refused, nothing was read)",
            path=label,
        )
    if ".." in posix.parts or ".." in windows.parts:
        raise UnsafeExternalDataError(
            f"{what} location {location!r} climbs out of the model's folder with '..' "
            "(refused, nothing was read)",
            path=label,
        )
    candidate = base_dir / location
    resolved = candidate.resolve()
    if not resolved.is_relative_to(base_dir.resolve()):
        raise UnsafeExternalDataError(
            f"{what} location {location!r} is a symlink that escapes the model's folder to "
            f"{str(resolved)!r} (refused, nothing was read)",
            path=label,
        )
    return candidate


def external_span(tensor: TensorProto, base_dir: Path, label: str = "<model>") -> ExternalSpan:
    """Check one external tensor's location and byte range, reading nothing.

    Parameters
    ----------
    tensor : onnx.TensorProto
        A tensor with ``data_location == EXTERNAL``.
    base_dir : Path
        The model's folder.
    label : str
        The model's name in error messages.

    Returns
    -------
    ExternalSpan

    Raises
    ------
    UnsafeExternalDataError
        The location is absolute, climbs out with ``..`` or is a symlink leaving the folder.
    MissingExternalDataError
        The file is missing, or offset + length is past its end.
    ExternalDataError
        No location, non-integer fields, or a length that does not match the shape.

    Examples
    --------
    >>> import tempfile
    >>> from onnx import TensorProto, helper
    >>> t = helper.make_tensor("w", TensorProto.FLOAT, [2], [0.0, 0.0])
    >>> t.ClearField("float_data"); t.data_location = TensorProto.EXTERNAL
    >>> e = t.external_data.add(); e.key, e.value = "location", "../w.bin"
    >>> try:
    ...     external_span(t, Path(tempfile.gettempdir()), "m.onnx")
    ... except UnsafeExternalDataError as err:
    ...     print(str(err).split(":")[0])
    m.onnx
    """
    path = _safe_location(tensor, base_dir, label)
    fields = _fields(tensor)
    what = f"external data of tensor {tensor.name!r} ({str(path)!r})"
    if not path.is_file():
        raise MissingExternalDataError(f"{what}: the file does not exist", path=label)
    try:
        offset = int(fields.get("offset", "0") or 0)
        length_field = fields.get("length")
        length = int(length_field) if length_field else None
    except ValueError:
        raise ExternalDataError(f"{what}: offset/length are not integers", path=label) from None
    expected = shape_bytes(tuple(int(d) for d in tensor.dims), tensor.data_type) or 0
    if length is None:
        length = expected
    size = path.stat().st_size
    if offset < 0 or length < 0 or offset + length > size:
        raise MissingExternalDataError(
            f"{what}: offset {offset:,} + length {length:,} bytes points past the end of the "
            f"{size:,}-byte file",
            path=label,
        )
    if tensor.data_type != TensorProto.STRING and length != expected:
        raise ExternalDataError(
            f"{what}: {length:,} bytes stored but shape {list(tensor.dims)} needs {expected:,}",
            path=label,
        )
    return ExternalSpan(tensor.name, path, offset, length)


def check_external_data(
    tensors: Iterable[TensorProto], base_dir: Path, label: str = "<model>"
) -> list[ExternalSpan]:
    """Check every external tensor's location first, then its byte range; read nothing.

    All locations are checked before any file is looked at, so an unsafe
    location is refused even when another tensor's file is missing.

    Examples
    --------
    >>> check_external_data([], Path("."))
    []
    """
    tensors = list(tensors)
    for tensor in tensors:
        _safe_location(tensor, base_dir, label)
    return [external_span(tensor, base_dir, label) for tensor in tensors]


def read_span(span: ExternalSpan) -> bytes:
    """Read the bytes of a checked span.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile() as f:
    ...     _ = f.write(b"abcdef"); f.flush()
    ...     read_span(ExternalSpan("t", Path(f.name), 2, 3))
    b'cde'
    """
    with open(span.path, "rb") as handle:
        handle.seek(span.offset)
        return handle.read(span.length)


def tensor_array(tensor: TensorProto, base_dir: Path | None, label: str = "<model>") -> np.ndarray:
    """The values of a tensor; external data is memory-mapped read-only, not read into memory.

    Parameters
    ----------
    tensor : onnx.TensorProto
        An initializer or Constant value, in memory or external.
    base_dir : Path or None
        The folder external data resolves against (``None``: the tensor must be in memory).
    label : str
        The model's name in error messages.

    Raises
    ------
    ExternalDataError
        The tensor is external and there is no folder to read it from.

    Examples
    --------
    >>> from onnx import numpy_helper
    >>> tensor_array(numpy_helper.from_array(np.ones(3, np.int64), "s"), None).tolist()
    [1, 1, 1]
    """
    if tensor.data_location != TensorProto.EXTERNAL:
        return numpy_helper.to_array(tensor)
    if base_dir is None:
        raise ExternalDataError(
            f"tensor {tensor.name!r} is stored in an external file, and the model was not loaded "
            "from a path with external_data=True, so its values cannot be read",
            path=label,
        )
    span = external_span(tensor, base_dir, label)
    shape = tuple(int(d) for d in tensor.dims)
    dtype = _mappable_dtype(tensor, span)
    if dtype is None:
        copy = TensorProto()
        copy.CopyFrom(tensor)
        del copy.external_data[:]
        copy.data_location = TensorProto.DEFAULT
        copy.raw_data = read_span(span)
        return numpy_helper.to_array(copy)
    return np.memmap(span.path, dtype=dtype, mode="r", offset=span.offset, shape=shape)


def _is_external(tensor: TensorProto) -> bool:
    return tensor.data_location == TensorProto.EXTERNAL


def _mappable_dtype(tensor: TensorProto, span: ExternalSpan) -> np.dtype | None:
    """The little-endian numpy dtype to read a span's bytes as, or ``None`` when they need onnx's decoding."""
    if tensor.data_type == TensorProto.STRING or span.length == 0:
        return None
    try:
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)).newbyteorder("<")
    except (KeyError, TypeError, ValueError):
        return None
    return None if dtype.itemsize * 8 != dtype_bits(tensor.data_type) else dtype  # packed int4 etc.


def tensor_stats(
    tensor: TensorProto, base_dir: Path | None, label: str = "<model>"
) -> dict[str, float] | None:
    """``min``, ``max``, ``mean`` and ``std`` of a float tensor; external data is read in chunks.

    A multi-GB external weight costs one sequential read of its bytes and a few
    MB of memory (no memory map is kept). ``None`` for non-float tensors.

    Examples
    --------
    >>> from onnx import numpy_helper
    >>> tensor_stats(numpy_helper.from_array(np.array([1.0, 3.0], np.float32), "w"), None)["std"]
    1.0
    """
    span = external_span(tensor, base_dir, label) if _is_external(tensor) and base_dir is not None else None
    dtype = _mappable_dtype(tensor, span) if span is not None else None
    if span is None or dtype is None:  # in memory, or a dtype numpy cannot read straight from the file
        return array_stats(tensor_array(tensor, base_dir, label))

    def chunks() -> Iterable[np.ndarray]:
        with open(span.path, "rb") as handle:
            handle.seek(span.offset)
            left = span.length // dtype.itemsize
            while left > 0:
                block = np.fromfile(handle, dtype=dtype, count=min(left, STATS_CHUNK))
                if block.size == 0:
                    break
                left -= block.size
                yield block

    return chunk_stats(chunks())


_DIGESTS: dict[tuple, str] = {}


def tensor_digest(tensor: TensorProto, base_dir: Path | None) -> str:
    """A content digest of a tensor's type, shape and values (external data hashed from its file).

    External tensors are hashed from a memory map, in chunks, once per file
    region and modification time; tensors whose data cannot be read get a digest
    of their type and shape only.

    Examples
    --------
    >>> from onnx import numpy_helper
    >>> a = numpy_helper.from_array(np.ones(2, np.float32), "a")
    >>> b = numpy_helper.from_array(np.ones(2, np.float32), "b")
    >>> tensor_digest(a, None) == tensor_digest(b, None)
    True
    """
    hasher = hashlib.sha256()  # SHA extensions make it about twice blake2b's speed on x86
    hasher.update(f"{tensor.data_type}:{list(tensor.dims)}".encode())
    if tensor.data_location == TensorProto.EXTERNAL:
        try:
            span = external_span(tensor, base_dir, "<model>") if base_dir is not None else None
        except ExternalDataError:
            span = None
        if span is None:
            hasher.update(b"unloaded")
            return hasher.hexdigest()[:32]
        stat = span.path.stat()
        key = (str(span.path.resolve()), span.offset, span.length, stat.st_size, stat.st_mtime_ns)
        if key not in _DIGESTS:
            content = hashlib.sha256()
            with open(span.path, "rb") as handle:
                handle.seek(span.offset)
                left = span.length
                while left > 0:
                    block = handle.read(min(left, _HASH_BLOCK))
                    if not block:
                        break
                    content.update(block)
                    left -= len(block)
            _DIGESTS[key] = content.hexdigest()
        hasher.update(_DIGESTS[key].encode())
    elif tensor.HasField("raw_data"):
        hasher.update(tensor.raw_data)
    else:
        try:
            array = numpy_helper.to_array(tensor)
            hasher.update(
                np.ascontiguousarray(array).tobytes() if array.dtype != object else repr(array).encode()
            )
        except Exception:
            hasher.update(b"unloaded")
    return hasher.hexdigest()[:32]


def _strip(tensor: TensorProto) -> None:
    """Drop a tensor's values in place, keeping its name, dims and element type."""
    for name in (
        "raw_data",
        "float_data",
        "int32_data",
        "int64_data",
        "double_data",
        "uint64_data",
        "string_data",
        "external_data",
    ):
        tensor.ClearField(name)
    tensor.data_location = TensorProto.DEFAULT


def _tensor_bytes(tensor: TensorProto) -> int:
    return shape_bytes(tuple(int(d) for d in tensor.dims), tensor.data_type) or 0


def stripped_copy(model: ModelProto, keep_bytes: int = STRIP_KEEP_BYTES) -> ModelProto:
    """A copy of the model without the values of its large tensors, for shape inference.

    Large initializers and large ``Constant`` values keep their name, dims and
    element type; tensors up to ``keep_bytes`` keep their values, because shape
    data propagation reads them (Reshape targets, Slice bounds). External tensors
    lose their locations, so nothing reads them. The copy costs the same for 8 MB
    and 3 GiB of weights and serializes far below protobuf's 2 GiB limit.

    Examples
    --------
    >>> from explorer import zoo
    >>> m = zoo.build("resnet18")
    >>> s = stripped_copy(m)
    >>> first, kept = m.graph.initializer[0], s.graph.initializer[0]
    >>> s.ByteSize() < m.ByteSize() / 100, list(kept.dims) == list(first.dims)
    (True, True)
    """
    copy = ModelProto()
    for descriptor, value in model.ListFields():  # every field but the main graph, as it is
        if descriptor.name != "graph":
            _copy_field(copy, descriptor, value)
    for descriptor, value in model.graph.ListFields():  # the main graph without its initializers' bytes
        if descriptor.name != "initializer":
            _copy_field(copy.graph, descriptor, value)
    for tensor in model.graph.initializer:
        kept = copy.graph.initializer.add()
        if tensor.data_location != TensorProto.EXTERNAL and _tensor_bytes(tensor) <= keep_bytes:
            kept.CopyFrom(tensor)
        else:
            kept.name = tensor.name
            kept.data_type = tensor.data_type
            kept.dims.extend(tensor.dims)
    for proto, _ in iter_graphs(copy.graph):
        if proto is not copy.graph:  # subgraphs were copied whole
            for tensor in proto.initializer:
                if tensor.data_location == TensorProto.EXTERNAL or _tensor_bytes(tensor) > keep_bytes:
                    _strip(tensor)
        for node in proto.node:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.TENSOR and (
                    attr.t.data_location == TensorProto.EXTERNAL or _tensor_bytes(attr.t) > keep_bytes
                ):
                    _strip(attr.t)
    return copy


def _copy_field(target: object, descriptor: object, value: object) -> None:
    name = descriptor.name  # type: ignore[attr-defined]
    repeated = getattr(descriptor, "is_repeated", None)
    if repeated is None:  # protobuf before 5.x
        repeated = descriptor.label == descriptor.LABEL_REPEATED  # type: ignore[attr-defined]
    if repeated:
        getattr(target, name).extend(value)  # type: ignore[call-overload]
    elif descriptor.message_type is not None:  # type: ignore[attr-defined]
        getattr(target, name).CopyFrom(value)
    else:
        setattr(target, name, value)


def has_strippable_tensors(model: ModelProto, keep_bytes: int = STRIP_KEEP_BYTES) -> bool:
    """Whether :func:`stripped_copy` would drop anything: an external tensor, or one over ``keep_bytes``.

    Examples
    --------
    >>> from explorer import zoo
    >>> m = zoo.build("resnet18")
    >>> has_strippable_tensors(m), has_strippable_tensors(stripped_copy(m))
    (True, False)
    """

    def large(tensor: TensorProto) -> bool:
        return (
            tensor.data_location == TensorProto.EXTERNAL or _tensor_bytes(tensor) > keep_bytes
        ) and _has_values(tensor)

    for proto, _ in iter_graphs(model.graph):
        if any(large(t) for t in proto.initializer):
            return True
        for node in proto.node:
            if any(a.type == onnx.AttributeProto.TENSOR and large(a.t) for a in node.attribute):
                return True
    return False


def _has_values(tensor: TensorProto) -> bool:
    """Whether a tensor still carries values or a location (a stripped one carries neither)."""
    return tensor.data_location == TensorProto.EXTERNAL or any(
        tensor.HasField("raw_data") if name == "raw_data" else len(getattr(tensor, name)) > 0
        for name in ("raw_data", "float_data", "int32_data", "int64_data", "double_data", "uint64_data")
    )


def model_bytes(model: ModelProto) -> int:
    """The model's size with all its weights: the protobuf plus the bytes of its external tensors.

    Examples
    --------
    >>> from explorer import zoo
    >>> m = zoo.build("mlp")
    >>> model_bytes(m) == m.ByteSize()
    True
    """
    external = 0
    for tensor in external_tensors(model):
        length = _fields(tensor).get("length")
        external += int(length) if length and length.isdigit() else _tensor_bytes(tensor)
    return model.ByteSize() + external

"""Weights: where a tensor's bytes live, checked, and read only when something needs their values.

Loading reads a model's structure; the values of large tensors stored in
external files stay on disk (:data:`LAZY_EXTERNAL_BYTES`) and are read on
demand through a memory map: the details panel's statistics, weight digests
for diffs, runtimes (which read the files themselves). Every external location
is checked before anything is read, exactly as strictly for lazy tensors as
for eager ones: absolute paths, ``..`` and symlinks that leave the model's
folder are refused, and offsets or lengths past the end of the file are errors.
Large tensors inside the model file itself stay there too
(:func:`~explorer.onnx_adapter.model_wire.read_model_lazily`): they read as
external data pointing into that file.

Examples
--------
>>> import numpy as np
>>> from onnx import numpy_helper
>>> w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
>>> from explorer.core.tensors import array_stats
>>> tensor_array(w, None).sum(), array_stats(tensor_array(w, None))["max"]
(np.float32(15.0), 5.0)
"""

from __future__ import annotations

import hashlib
import math
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath

import numpy as np
import onnx
from onnx import ModelProto, TensorProto, numpy_helper

from explorer.core.errors import (
    ExternalDataError,
    InvalidModelError,
    MissingExternalDataError,
    UnsafeExternalDataError,
    UsageError,
)
from explorer.core.tensors import STATS_CHUNK, array_stats, chunk_stats, format_bytes
from explorer.isolation.io import file_kind
from explorer.onnx_adapter.protos import iter_graphs
from explorer.onnx_adapter.tensor_protos import dtype_bits, shape_bytes

__all__ = [
    "LAZY_EXTERNAL_BYTES",
    "STRIP_KEEP_BYTES",
    "ExternalSpan",
    "FileStamp",
    "content_key",
    "external_tensors",
    "external_span",
    "check_external_data",
    "check_declared_sizes",
    "check_stored_sizes",
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


@dataclass(frozen=True)
class FileStamp:
    """A file as it was when a model was read from it: path, size and modification time.

    A model whose weights stay in its file
    (:func:`~explorer.onnx_adapter.model_wire.read_model_lazily`) reads them from there
    later; :meth:`changed` says whether the file was rewritten since.

    Attributes
    ----------
    path : Path
        The file (resolved).
    size, mtime_ns : int
        Its size and modification time when it was read.
    """

    path: Path
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path: str | os.PathLike[str]) -> FileStamp:
        """The stamp of ``path`` now.

        Examples
        --------
        >>> import tempfile
        >>> with tempfile.NamedTemporaryFile() as f:
        ...     FileStamp.of(f.name).size
        0
        """
        resolved = Path(path).resolve()
        stat = resolved.stat()
        return cls(resolved, stat.st_size, stat.st_mtime_ns)

    def changed(self) -> bool:
        """Whether the file is gone or differs in size or modification time from the stamp.

        Examples
        --------
        >>> import tempfile
        >>> with tempfile.NamedTemporaryFile() as f:
        ...     stamp = FileStamp.of(f.name)
        ...     before = stamp.changed()
        ...     _ = f.write(b"more"); f.flush()
        ...     before, stamp.changed()
        (False, True)
        """
        try:
            stat = self.path.stat()
        except OSError:
            return True
        return (stat.st_size, stat.st_mtime_ns) != (self.size, self.mtime_ns)


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
    try:
        mode = path.stat().st_mode
    except OSError:
        raise MissingExternalDataError(f"{what}: the file does not exist", path=label) from None
    if not stat.S_ISREG(mode):  # a FIFO would block the read, a device read without end
        raise ExternalDataError(f"{what}: is {file_kind(mode)}, not a data file", path=label)
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


def _held_tensors(model: ModelProto) -> Iterator[TensorProto]:
    """Every tensor of the model whose values are in the proto: initializers and tensor attributes of
    every graph and function, not external ones."""
    nodes: list[Iterable[onnx.NodeProto]] = [function.node for function in model.functions]
    for graph, _ in iter_graphs(model.graph):
        yield from (t for t in graph.initializer if t.data_location != TensorProto.EXTERNAL)
        nodes.append(graph.node)
    for node in (node for group in nodes for node in group):
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.TENSOR:
                tensors: Iterable[TensorProto] = (attr.t,)
            elif attr.type == onnx.AttributeProto.TENSORS:
                tensors = attr.tensors
            else:
                continue
            yield from (t for t in tensors if t.data_location != TensorProto.EXTERNAL)


def check_declared_sizes(model: ModelProto, source_bytes: int, label: str = "<model>") -> None:
    """Refuse a tensor whose declared shape holds more values than the whole source could store.

    A tensor with values in the proto stores each at least in one byte (4-bit types: half a
    byte), so its shape can declare at most that many for a source of ``source_bytes``: a
    115-byte file whose initializer declares ``[1000000, 1000000]`` floats is corrupt, and
    whatever would trust that shape (allocate it, count it as 4 TB of weights) is not reached.
    Reads nothing: neither the values nor (costly for large tensors) their lengths.

    Parameters
    ----------
    model : onnx.ModelProto
        The model as read (external tensors are checked by :func:`external_span` instead).
    source_bytes : int
        The length of what it was read from: the model file, or the bytes given.
    label : str
        The model's name in error messages.

    Raises
    ------
    InvalidModelError
        Naming the tensor, its declared shape and size, and the source's size.

    Examples
    --------
    >>> from onnx import helper
    >>> w = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[1000, 1000], raw_data=b"0123")
    >>> model = helper.make_model(helper.make_graph([], "g", [], [], initializer=[w]))
    >>> try:
    ...     check_declared_sizes(model, 200, "m.onnx")
    ... except InvalidModelError as err:
    ...     print(err)  # doctest: +NORMALIZE_WHITESPACE
    m.onnx: tensor 'W' declares shape [1000, 1000] (float32, 3.8 MiB) but the whole model is 200 B: its
    values cannot be in it (a corrupt or hand-edited model)
    """
    for tensor in _held_tensors(model):
        dims = tuple(int(d) for d in tensor.dims)
        if any(d < 0 for d in dims) or not _has_values(tensor):
            continue
        count = math.prod(dims)
        least = math.ceil(count * min(dtype_bits(tensor.data_type) or 8, 8) / 8)
        if least <= source_bytes:
            continue
        try:
            dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).name
            if tensor.data_type == TensorProto.BFLOAT16:
                dtype = "bfloat16"
        except (KeyError, TypeError, ValueError):
            dtype = f"type {tensor.data_type}"
        size = format_bytes(shape_bytes(dims, tensor.data_type) or least)
        raise InvalidModelError(
            f"tensor {tensor.name!r} declares shape {list(dims)} ({dtype}, {size}) but the whole model is "
            f"{format_bytes(source_bytes)}: its values cannot be in it (a corrupt or hand-edited model)",
            path=label,
        )


_FIELD_OF_TYPE: dict[int, tuple[str, int]] = {
    **{
        getattr(TensorProto, name): ("int32_data", 1)
        for name in (
            "UINT8",
            "INT8",
            "UINT16",
            "INT16",
            "INT32",
            "BOOL",
            "FLOAT16",
            "BFLOAT16",
            "FLOAT8E4M3FN",
            "FLOAT8E4M3FNUZ",
            "FLOAT8E5M2",
            "FLOAT8E5M2FNUZ",
            "FLOAT8E8M0",
        )
        if hasattr(TensorProto, name)
    },
    **{t: ("int32_data", 2) for t in (TensorProto.UINT4, TensorProto.INT4, TensorProto.FLOAT4E2M1)},
    TensorProto.FLOAT: ("float_data", -1),
    TensorProto.COMPLEX64: ("float_data", -2),
    TensorProto.DOUBLE: ("double_data", -1),
    TensorProto.COMPLEX128: ("double_data", -2),
    TensorProto.INT64: ("int64_data", -1),
    TensorProto.UINT32: ("uint64_data", -1),
    TensorProto.UINT64: ("uint64_data", -1),
    TensorProto.STRING: ("string_data", -1),
}
"""Element type -> the typed field that holds its values, and how: ``-k`` for ``k`` entries per value,
``k`` for ``k`` values packed into one entry (4-bit types: two per ``int32_data`` entry), as ONNX and
ONNX Runtime read them."""


def _stored_mismatch(tensor: TensorProto) -> str | None:
    """How a tensor's values in the proto disagree with its dims and type, in words; None when they agree
    (or when there is nothing to compare: no values, a negative dim, an element type not known here)."""
    dims = tuple(int(d) for d in tensor.dims)
    if any(d < 0 for d in dims) or not (_has_values(tensor) or len(tensor.string_data)):
        return None
    count = math.prod(dims)
    if tensor.HasField("raw_data"):  # ONNX Runtime reads raw_data first, whatever else is set
        expected = shape_bytes(dims, tensor.data_type)
        if tensor.data_type == TensorProto.STRING or (not expected and count):
            return None
        stored = len(tensor.raw_data)
        if stored == expected:
            return None
        return f"holds {stored:,} bytes of values (raw_data) but {{shape}} needs {expected:,}"
    field, per = _FIELD_OF_TYPE.get(tensor.data_type, ("", 0))
    if not field:
        return None
    stored = len(getattr(tensor, field))
    expected = count * -per if per < 0 else math.ceil(count / per)
    if stored == expected:
        return None
    return f"holds {stored:,} values in {field} but {{shape}} needs {expected:,}"


def check_stored_sizes(model: ModelProto, label: str = "<model>") -> None:
    """Refuse a tensor whose values in the proto are more or fewer than its dims and type call for.

    ONNX Runtime refuses such a model when it makes a session (``raw_data size (12 bytes) does not match
    expected size``); other runtimes read past the values, drop some, or fail on a reshape. Each
    initializer and tensor attribute held in the proto (of every graph and function) is checked:
    ``raw_data``'s length against the bytes the shape needs, or the count of the typed field
    (``float_data``, ``int32_data``, ...) against the values it needs. External tensors are checked
    against their files by :func:`external_span`; tensors without values (stripped) pass.

    Parameters
    ----------
    model : onnx.ModelProto
        The model as read.
    label : str
        The model's name in error messages.

    Raises
    ------
    InvalidModelError
        Naming the tensor, what it holds, and what its shape and type need.

    Examples
    --------
    >>> from onnx import helper
    >>> w = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[4], raw_data=bytes(12))
    >>> model = helper.make_model(helper.make_graph([], "g", [], [], initializer=[w]))
    >>> try:
    ...     check_stored_sizes(model, "m.onnx")
    ... except InvalidModelError as err:
    ...     print(err)  # doctest: +NORMALIZE_WHITESPACE
    m.onnx: tensor 'W' holds 12 bytes of values (raw_data) but its shape [4] of float32 needs 16: a corrupt
    or hand-edited model (re-export it, or make the tensor's dims match its values)
    >>> check_stored_sizes(helper.make_model(helper.make_graph([], "g", [], [])), "m.onnx")
    """
    for tensor in _held_tensors(model):
        why = _stored_mismatch(tensor)
        if why is None:
            continue
        shape = f"its shape {[int(d) for d in tensor.dims]} of {_dtype_words(tensor.data_type)}"
        raise InvalidModelError(
            f"tensor {tensor.name!r} {why.format(shape=shape)}: a corrupt or hand-edited model (re-export "
            "it, or make the tensor's dims match its values)",
            path=label,
        )


def _dtype_words(data_type: int) -> str:
    """numpy's name of an ONNX element type (``bfloat16`` for bfloat16), or ``type N``."""
    if data_type == TensorProto.BFLOAT16:
        return "bfloat16"
    try:
        return onnx.helper.tensor_dtype_to_np_dtype(data_type).name
    except (KeyError, TypeError, ValueError):
        return f"type {data_type}"


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


def tensor_array(
    tensor: TensorProto, base_dir: Path | None, label: str = "<model>", *, mode: str = "r"
) -> np.ndarray:
    """The values of a tensor; external data is memory-mapped read-only, not read into memory.

    Parameters
    ----------
    tensor : onnx.TensorProto
        An initializer or Constant value, in memory or external.
    base_dir : Path or None
        The folder external data resolves against (``None``: the tensor must be in memory).
    label : str
        The model's name in error messages.
    mode : {"r", "c"}
        How external data is mapped: ``"r"`` read-only; ``"c"`` copy-on-write (a writable array
        whose writes stay in this process and never reach the file: what libraries that refuse
        read-only buffers, such as DLPack consumers, take without a copy).

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
    if mode not in ("r", "c"):
        raise UsageError(f"mode must be 'r' or 'c', not {mode!r}")
    return np.memmap(span.path, dtype=dtype, mode=mode, offset=span.offset, shape=shape)


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

    External tensors (and those
    :func:`~explorer.onnx_adapter.model_wire.read_model_lazily` left in their model
    file) are hashed from the file, in chunks, once per file region and
    modification time; a tensor gets the same digest whether its values are in
    memory or in a file. Tensors whose data cannot be read get a digest of their
    type and shape only.

    Examples
    --------
    >>> from onnx import numpy_helper
    >>> a = numpy_helper.from_array(np.ones(2, np.float32), "a")
    >>> b = numpy_helper.from_array(np.ones(2, np.float32), "b")
    >>> tensor_digest(a, None) == tensor_digest(b, None)
    True
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "a.bin").write_bytes(a.raw_data)
    >>> c = numpy_helper.from_array(np.ones(2, np.float32), "c")
    >>> c.ClearField("raw_data"); c.data_location = TensorProto.EXTERNAL
    >>> e = c.external_data.add(); e.key, e.value = "location", "a.bin"
    >>> tensor_digest(c, folder) == tensor_digest(a, None)
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
    elif tensor.HasField(
        "raw_data"
    ):  # its content's digest, as for a file region: equal values, equal digests
        hasher.update(hashlib.sha256(tensor.raw_data).hexdigest().encode())
    else:
        try:
            array = numpy_helper.to_array(tensor)
            content = np.ascontiguousarray(array).tobytes() if array.dtype != object else repr(array).encode()
            hasher.update(hashlib.sha256(content).hexdigest().encode())
        except Exception:
            hasher.update(b"unloaded")
    return hasher.hexdigest()[:32]


def content_key(tensor: TensorProto, base_dir: Path | None) -> bytes:
    """The tensor serialized without its values, and the digest of its values instead.

    Two tensors with equal names, types, shapes and values have equal keys,
    wherever their values are (in memory, in an external file, left in the model
    file): what comparing models by content needs.

    Examples
    --------
    >>> from onnx import numpy_helper
    >>> a = numpy_helper.from_array(np.ones(2, np.float32), "w")
    >>> b = TensorProto(); b.CopyFrom(a); b.ClearField("raw_data"); b.float_data.extend([1.0, 1.0])
    >>> content_key(a, None) == content_key(b, None)
    True
    """
    digest = tensor_digest(tensor, base_dir)
    shell = TensorProto(
        name=tensor.name, data_type=tensor.data_type, dims=tensor.dims, doc_string=tensor.doc_string
    )
    return shell.SerializeToString(deterministic=True) + digest.encode()


_VALUE_FIELDS = ("raw_data", "float_data", "int32_data", "int64_data", "double_data", "uint64_data")
"""The fields of a TensorProto that hold its numeric values in the file (``string_data`` holds a string
tensor's)."""


def _strip(tensor: TensorProto) -> None:
    """Drop a tensor's values in place, keeping its name, dims and element type."""
    for name in (*_VALUE_FIELDS, "string_data", "external_data"):
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
        for name in _VALUE_FIELDS
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

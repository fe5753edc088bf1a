"""A model file's protobuf wire format, read to leave its large weights in the file.

:func:`read_model_lazily` walks the serialized ``ModelProto`` field by field, reading the
file in small blocks (never memory-mapped), and finds the raw bytes of the large tensors
(the main graph's initializers, its nodes' tensor attributes) without parsing them. It
rewrites each such tensor as external data pointing into the model file itself (its
``location`` the file's name, ``offset`` and ``length`` where the bytes lie) and parses
only what is left: the structure. So a large model loads lazily; its values are read
from the file when something needs them (:mod:`explorer.onnx_adapter.weights`), and
:func:`in_model_file` tells such a tensor from one stored in an external file.

Examples
--------
>>> from explorer import zoo
>>> from explorer.onnx_adapter.weights import external_tensors
>>> path = zoo.save("resnet18")
>>> model = read_model_lazily(path)
>>> all(in_model_file(t, path) for t in external_tensors(model))
True
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from onnx import ModelProto, TensorProto

from explorer.isolation.io import open_model_file
from explorer.onnx_adapter.tensor_protos import shape_bytes
from explorer.onnx_adapter.weights import LAZY_EXTERNAL_BYTES, _fields

__all__ = ["read_model_lazily", "in_model_file"]


# Field numbers of onnx.proto3 that the scan below walks (wire format: tag = field << 3 | wire type).
_MODEL_GRAPH = 7
_GRAPH_NODE, _GRAPH_INITIALIZER = 1, 5
_NODE_ATTRIBUTE = 5
_ATTRIBUTE_T = 5
_TENSOR_DIMS, _TENSOR_DATA_TYPE, _TENSOR_RAW_DATA = 1, 2, 9
_TENSOR_EXTERNAL_DATA, _TENSOR_DATA_LOCATION = 13, 14
_LENGTH_DELIMITED = 2


class _WireError(ValueError):
    """The bytes are not the protobuf the scan expects (the caller parses the file the usual way)."""


class _FileBytes:
    """A file's bytes by index and slice, read on demand; never memory-mapped.

    A memory map would count the pages it touches in the process's memory, and the page
    cache may hold a recently written file in large folios (up to 2 MiB each): touching
    the header of every large tensor would then map most of the weights.
    """

    _BLOCK = 1 << 16

    def __init__(self, handle: Any, size: int) -> None:
        self.handle, self.size = handle, size
        self._start, self._block = -1, b""

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, key: int | slice) -> Any:
        if isinstance(key, slice):
            return self._read(key.start, key.stop - key.start) if key.stop > key.start else b""
        if not self._start <= key < self._start + len(self._block):
            self._start = key - key % self._BLOCK
            self._block = self._read(self._start, self._BLOCK)
            if not self._block:
                raise _WireError("past the end of the file")
        return self._block[key - self._start]

    def _read(self, start: int, length: int) -> bytes:
        self.handle.seek(start)
        return self.handle.read(length)


def _varint(buf: _FileBytes, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise _WireError("truncated varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _wire_fields(buf: _FileBytes, start: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
    """``(field, wire type, field start, value start, value end)`` for each field of a message."""
    pos = start
    while pos < end:
        field_start = pos
        tag, pos = _varint(buf, pos, end)
        field, wire = tag >> 3, tag & 7
        if field == 0:
            raise _WireError("field number 0")
        if wire == 0:
            _, value_end = _varint(buf, pos, end)
        elif wire == 1:
            value_end = pos + 8
        elif wire == _LENGTH_DELIMITED:
            length, pos = _varint(buf, pos, end)
            value_end = pos + length
        elif wire == 5:
            value_end = pos + 4
        else:  # groups: not in onnx.proto
            raise _WireError(f"wire type {wire}")
        if value_end > end:
            raise _WireError("a field runs past its message")
        yield field, wire, field_start, pos, value_end
        pos = value_end


def _entry(key: str, value: str) -> bytes:
    body = b"".join(
        bytes([number << 3 | _LENGTH_DELIMITED]) + _encode_varint(len(text)) + text
        for number, text in ((1, key.encode()), (2, value.encode()))
    )
    return bytes([_TENSOR_EXTERNAL_DATA << 3 | _LENGTH_DELIMITED]) + _encode_varint(len(body)) + body


class _Scan:
    """Rewrites a serialized model without the raw bytes of its large tensors (:func:`read_model_lazily`)."""

    def __init__(self, buf: _FileBytes, location: str, min_bytes: int) -> None:
        self.buf, self.location, self.min_bytes = buf, location, min_bytes
        self.left = 0

    def _sub(self, field_start: int, value_start: int, value_end: int, rewrite: Any) -> bytes:
        """A length-delimited field, its value rewritten when it is large enough to hold a large tensor."""
        if value_end - value_start < self.min_bytes:
            return bytes(self.buf[field_start:value_end])
        body = rewrite(value_start, value_end)
        _, tag_end = _varint(self.buf, field_start, value_start)  # the tag's bytes, then the new length
        return bytes(self.buf[field_start:tag_end]) + _encode_varint(len(body)) + body

    def _message(self, start: int, end: int, children: dict[int, Any]) -> bytes:
        parts = []
        for field, wire, field_start, value_start, value_end in _wire_fields(self.buf, start, end):
            rewrite = children.get(field) if wire == _LENGTH_DELIMITED else None
            if rewrite is None:
                parts.append(self.buf[field_start:value_end])
            else:
                parts.append(self._sub(field_start, value_start, value_end, rewrite))
        return b"".join(parts)

    def model(self, start: int, end: int) -> bytes:
        return self._message(start, end, {_MODEL_GRAPH: self.graph})

    def graph(self, start: int, end: int) -> bytes:
        return self._message(start, end, {_GRAPH_NODE: self.node, _GRAPH_INITIALIZER: self.tensor})

    def node(self, start: int, end: int) -> bytes:
        return self._message(start, end, {_NODE_ATTRIBUTE: self.attribute})

    def attribute(self, start: int, end: int) -> bytes:
        return self._message(start, end, {_ATTRIBUTE_T: self.tensor})

    def tensor(self, start: int, end: int) -> bytes:
        dims: list[int] = []
        data_type = 0
        raw: tuple[int, int, int] | None = None
        plain = True  # no external data, no location: the raw bytes are the values
        for field, wire, field_start, value_start, value_end in _wire_fields(self.buf, start, end):
            if field == _TENSOR_DIMS and wire == 0:
                dims.append(_varint(self.buf, value_start, value_end)[0])
            elif field == _TENSOR_DIMS and wire == _LENGTH_DELIMITED:  # packed
                pos = value_start
                while pos < value_end:
                    dim, pos = _varint(self.buf, pos, value_end)
                    dims.append(dim)
            elif field == _TENSOR_DATA_TYPE and wire == 0:
                data_type = _varint(self.buf, value_start, value_end)[0]
            elif field == _TENSOR_RAW_DATA and wire == _LENGTH_DELIMITED:
                raw = (field_start, value_start, value_end)
            elif field in (_TENSOR_EXTERNAL_DATA, _TENSOR_DATA_LOCATION):
                plain = False
        if raw is None or not plain or data_type == TensorProto.STRING:
            return bytes(self.buf[start:end])
        field_start, value_start, value_end = raw
        length = value_end - value_start
        dims = [d - (1 << 64) if d >= 1 << 63 else d for d in dims]  # int64 varints
        if length < self.min_bytes or shape_bytes(tuple(dims), data_type) != length:
            return bytes(self.buf[start:end])
        self.left += 1
        return b"".join(
            (
                self.buf[start:field_start],
                self.buf[value_end:end],
                _entry("location", self.location),
                _entry("offset", str(value_start)),
                _entry("length", str(length)),
                bytes([_TENSOR_DATA_LOCATION << 3]) + _encode_varint(TensorProto.EXTERNAL),
            )
        )


def read_model_lazily(
    path: str | os.PathLike[str], min_bytes: int = LAZY_EXTERNAL_BYTES
) -> ModelProto | None:
    """Parse a model file, leaving the bytes of its large in-file tensors in the file.

    Every initializer of the main graph and every tensor attribute of its nodes
    (``Constant`` values) whose raw bytes take at least ``min_bytes`` is parsed as
    if it were external data pointing into the model file itself: ``location`` is
    the file's name, ``offset`` and ``length`` where its bytes lie. So the
    process holds the model's structure only; :func:`~explorer.onnx_adapter.weights.tensor_array`,
    :func:`~explorer.onnx_adapter.weights.tensor_stats` and
    :func:`~explorer.onnx_adapter.weights.tensor_digest` read the values from the file
    when something needs them, as they read external data, and workers read the
    file itself. Subgraphs and functions are parsed as they are.

    Parameters
    ----------
    path : path
        A model file.
    min_bytes : int
        Tensors with fewer raw bytes are parsed into memory.

    Returns
    -------
    onnx.ModelProto or None
        The model; ``None`` when the file is not a protobuf this scan can walk
        (empty, truncated, another format): the caller parses it the usual way,
        which says what is wrong.

    Raises
    ------
    ModelNotFoundError
        The path is missing, or not a regular file (a FIFO, a device, a folder):
        :func:`explorer.isolation.io.check_model_file`, before anything is opened.

    Examples
    --------
    >>> import os
    >>> from explorer import zoo
    >>> from explorer.onnx_adapter.weights import external_tensors
    >>> path = zoo.save("resnet18")
    >>> model = read_model_lazily(path)
    >>> lazy = external_tensors(model)
    >>> len(lazy) > 0, {e.value for t in lazy for e in t.external_data if e.key == "location"}
    (True, {'resnet18.onnx'})
    >>> model.ByteSize() < os.path.getsize(path) / 10
    True
    """
    path = Path(path)
    try:
        with open_model_file(path) as handle:
            size = os.fstat(handle.fileno()).st_size
            if size == 0:
                return None
            data = _Scan(_FileBytes(handle, size), path.name, min_bytes).model(0, size)
    except (OSError, ValueError, BufferError):  # _WireError is a ValueError
        return None
    model = ModelProto()
    try:
        model.ParseFromString(data)
    except Exception:  # DecodeError, RecursionError: the usual parse reports it
        return None
    return model


def in_model_file(tensor: TensorProto, model_file: str | os.PathLike[str] | None) -> bool:
    """Whether a tensor's bytes were left in its own model file by :func:`read_model_lazily`.

    Such a tensor reads as external data whose location is the model file's name; it is
    not stored externally (the file holds it), so summaries do not count it as external.

    Examples
    --------
    >>> from explorer import zoo
    >>> from explorer.onnx_adapter.weights import external_tensors
    >>> path = zoo.save("resnet18")
    >>> tensor = external_tensors(read_model_lazily(path))[0]
    >>> in_model_file(tensor, path), in_model_file(tensor, None)
    (True, False)
    """
    if model_file is None or tensor.data_location != TensorProto.EXTERNAL:
        return False
    return _fields(tensor).get("location") == Path(model_file).name

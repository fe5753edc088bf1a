"""Copy a model whose weights live in external files without reading the weights into memory.

:func:`copy_external_model` writes ``out_path`` and one ``<name>.data`` beside it: the model's
structure is re-serialized (it is small: its weights are outside it), and each external
tensor's bytes are copied file to file by the kernel (``os.copy_file_range``), a bounded
chunk at a time where that is not available. Each tensor's location is checked first
(:func:`~explorer.onnx_adapter.weights.external_span`: inside the model's folder, a regular
file, its byte range within the file) and its new offset is page-aligned, so ONNX Runtime can
map it. The memory used is the structure's, whatever the weights' size: a 3 GiB model is
saved in the memory of its graph.

Examples
--------
>>> import os, tempfile
>>> from explorer import zoo
>>> source = zoo.write_external_chain(tempfile.mkdtemp(), hidden=64, layers=2)
>>> out = copy_external_model(source, os.path.join(tempfile.mkdtemp(), "copy.onnx"))
>>> sorted(os.listdir(out.parent))
['copy.onnx', 'copy.onnx.data']
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import onnx
from onnx import TensorProto

from explorer.isolation.io import write_bytes_atomic, writing_atomically
from explorer.onnx_adapter.weights import ExternalSpan, external_span, external_tensors

__all__ = ["copy_external_model", "ALIGNMENT"]

ALIGNMENT = 4096
"""Each tensor starts at a multiple of this offset in the data file (a page: ONNX Runtime maps it)."""

_CHUNK = 16 * 2**20


def _data_regions(descriptor: int, start: int, end: int) -> Iterator[tuple[int, int]]:
    """The ranges of ``[start, end)`` that hold data, skipping a sparse file's holes (which read as
    zeros); the whole range where the file system does not say."""
    position = start
    while position < end:
        try:
            data = os.lseek(descriptor, position, os.SEEK_DATA)
            hole = os.lseek(descriptor, data, os.SEEK_HOLE)
        except (AttributeError, OSError) as err:  # no data past here (ENXIO), or no hole support
            if getattr(err, "errno", None) == errno.ENXIO:
                return
            yield position, end
            return
        if data >= end:
            return
        yield data, min(hole, end)
        position = hole


def _copy_span(span: ExternalSpan, target: int, at: int) -> None:
    """Copy ``span``'s bytes into the open file ``target`` at offset ``at``, holding at most one chunk;
    a hole in the source stays a hole (zeros) in the target."""
    with open(span.path, "rb") as source:
        end = span.offset + span.length
        for first, last in _data_regions(source.fileno(), span.offset, end):
            done = first
            while done < last:
                want = min(_CHUNK, last - done)
                where = at + done - span.offset
                try:
                    copied = os.copy_file_range(source.fileno(), target, want, done, where)
                except (AttributeError, OSError):  # not this platform or file system: a bounded chunk
                    copied = os.pwrite(target, os.pread(source.fileno(), want, done), where)
                if copied <= 0:
                    raise OSError(f"{span.path}: the copy of tensor {span.tensor!r} stopped at byte {done:,}")
                done += copied


def copy_external_model(source: str | os.PathLike[str], out_path: str | os.PathLike[str]) -> Path:
    """Copy the model file ``source`` to ``out_path``, its external weights to ``<out name>.data``.

    Parameters
    ----------
    source : str or os.PathLike
        A model file; its external data is read (checked) relative to its folder.
    out_path : str or os.PathLike
        The new model file. Its data file is ``<out_path>.data``; both are written whole
        (the model file atomically, last). A model with no external tensor is copied as it is.

    Returns
    -------
    Path
        ``out_path``.

    Raises
    ------
    explorer.core.errors.ExternalDataError
        A tensor's external data is missing, outside the model's folder or not a regular file.

    Examples
    --------
    >>> import os, tempfile, onnx, numpy as np
    >>> from onnx import numpy_helper
    >>> from explorer import zoo
    >>> source = zoo.write_external_chain(tempfile.mkdtemp(), hidden=32, layers=2)
    >>> out = copy_external_model(source, os.path.join(tempfile.mkdtemp(), "m.onnx"))
    >>> a, b = onnx.load(source), onnx.load(out)
    >>> all(np.array_equal(numpy_helper.to_array(x), numpy_helper.to_array(y))
    ...     for x, y in zip(a.graph.initializer, b.graph.initializer))
    True
    """
    source, out = Path(source), Path(out_path)
    model = onnx.load(os.fspath(source), load_external_data=False)
    tensors = external_tensors(model)
    spans = [external_span(tensor, source.parent, source.name) for tensor in tensors]
    data_path = out.with_name(f"{out.name}.data")
    if tensors:
        with writing_atomically(data_path) as data:
            offset = 0
            for tensor, span in zip(tensors, spans, strict=True):
                _copy_span(span, data.fileno(), offset)
                del tensor.external_data[:]
                for key, value in (("location", data_path.name), ("offset", offset), ("length", span.length)):
                    entry = tensor.external_data.add()
                    entry.key, entry.value = key, str(value)
                tensor.data_location = TensorProto.EXTERNAL
                offset += -(-span.length // ALIGNMENT) * ALIGNMENT
            os.ftruncate(data.fileno(), offset)
    return write_bytes_atomic(model.SerializeToString(), out)

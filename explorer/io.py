"""Writing files safely: outputs are written to a temp file beside the target and renamed into place.

Examples
--------
>>> import tempfile, os
>>> from explorer import zoo
>>> with tempfile.TemporaryDirectory() as tmp:
...     path = save_model_atomic(zoo.build("mlp"), os.path.join(tmp, "out.onnx"))
...     os.path.basename(path), sorted(os.listdir(tmp))
('out.onnx', ['out.onnx'])
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import onnx

__all__ = ["write_bytes_atomic", "write_text_atomic", "save_model_atomic"]


def write_bytes_atomic(data: bytes, path: str | os.PathLike[str], *, fsync: bool = True) -> Path:
    """Write ``data`` to ``path`` so readers see the old file or the whole new one, never half.

    ``fsync=False`` skips flushing to the disk before the rename: still atomic for readers,
    not durable across a power cut (right for private scratch files).

    Examples
    --------
    >>> import tempfile, os
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     write_bytes_atomic(b"hi", os.path.join(tmp, "a.bin")).read_bytes()
    b'hi'
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            if fsync:
                os.fsync(out.fileno())
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise
    return target


def write_text_atomic(text: str, path: str | os.PathLike[str]) -> Path:
    """Write UTF-8 ``text`` to ``path`` atomically (see :func:`write_bytes_atomic`).

    Examples
    --------
    >>> import tempfile, os
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     write_text_atomic("ok", os.path.join(tmp, "a.txt")).read_text()
    'ok'
    """
    return write_bytes_atomic(text.encode("utf-8"), path)


def save_model_atomic(model: onnx.ModelProto, path: str | os.PathLike[str]) -> Path:
    """Save ``model`` to ``path`` atomically; models over 2 GiB are refused with a clear error.

    Examples
    --------
    >>> save_model_atomic.__name__
    'save_model_atomic'
    """
    from .tensors import PROTOBUF_LIMIT

    if model.ByteSize() >= PROTOBUF_LIMIT:
        raise ValueError(f"{path}: the model is over 2 GiB; save it with external data (onnx.save_model)")
    return write_bytes_atomic(model.SerializeToString(), path)

"""Models travel to the worker as files, never as pickled protobufs: :func:`run_on_model` stages a
model (its path, or a proto saved with its weights) in a private call folder, and moves what the
step wrote out of it atomically.

Examples
--------
>>> import onnx
>>> from explorer import zoo
>>> run_on_model(lambda path: onnx.load(path).graph.name, zoo.build("mlp"))  # doctest: +SKIP
'mlp'
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from explorer.isolation.io import check_model_file, move_atomic
from explorer.isolation.worker.pool import _run
from explorer.isolation.worker.progress import ProgressEvent
from explorer.isolation.worker.settings import defaults

__all__ = ["run_on_model"]


def run_on_model(
    fn: Callable[..., Any],
    model: Any,
    *args: Any,
    output: str | os.PathLike[str] | None = None,
    timeout: float | None = None,
    memory_mb: int | None = None,
    progress: Callable[[ProgressEvent], object] | None = None,
    step: str | None = None,
    gpu: bool = False,
    reuse: bool | None = None,
    **kwargs: Any,
) -> Any:
    """Run ``fn(model_path, *args, **kwargs)`` in a worker, passing the model as a file.

    A ``ModelProto`` or bytes are written to a private temp folder (mode 0700); a path is
    passed as it is (steps must only read it). When ``output`` is given, ``fn`` also gets
    ``out_path=`` inside the same temp folder, and what it writes there (the file and any
    external-data files next to it) is moved to ``output`` once it succeeded, atomically
    (rename, or copy then rename across file systems). The temp folder is removed whatever
    happens.

    Parameters
    ----------
    fn : callable
        A picklable function taking the model path first
        (e.g. :func:`explorer.onnx_adapter.files.check_model`).
    model : str, os.PathLike, bytes or onnx.ModelProto
        The model.
    *args, **kwargs
        More arguments for ``fn``. With ``output``, pass those after ``out_path`` in fn's
        signature by keyword (``fn`` receives ``out_path=`` as a keyword).
    output : str or os.PathLike, optional
        Where the file ``fn`` writes to ``out_path`` should end up.
    timeout, memory_mb, progress, step, gpu, reuse
        As in :func:`run`.

    Returns
    -------
    object
        What ``fn`` returned.

    Raises
    ------
    ModelNotFoundError
        ``model`` is a path that is not a regular file (missing, a folder, a FIFO, a device), checked
        before the worker opens it.
    WorkerError
        As in :func:`run`.

    Examples
    --------
    >>> from explorer import zoo
    >>> from explorer.onnx_adapter.files import check_model
    >>> from explorer.isolation import worker
    >>> worker.run_on_model(check_model, zoo.single_op())["valid"]
    True
    """
    call_dir = Path(tempfile.mkdtemp(prefix="explorer-call-", dir=defaults.tmp_dir))
    try:
        path = _stage_model(model, call_dir)
        out_dir = call_dir / "out"
        if output is not None:
            out_dir.mkdir(mode=0o700)
            kwargs["out_path"] = str(out_dir / Path(output).name)
        result = _run(fn, (str(path), *args), kwargs, timeout, memory_mb, progress, step, gpu, reuse)
        if output is not None:
            _move_outputs(out_dir, Path(output))
        return result
    finally:
        shutil.rmtree(call_dir, ignore_errors=True)


def _stage_model(model: Any, call_dir: Path) -> Path:
    """Return a path to the model: the given one, or a file written into ``call_dir``."""
    if isinstance(model, (str, os.PathLike)):
        path = Path(os.path.abspath(model))  # a warm worker does not follow the parent's chdir
        check_model_file(path, label=os.fspath(model))  # a FIFO would hang the worker, a device fill it
        return path
    target = call_dir / "model.onnx"
    if isinstance(model, (bytes, bytearray, memoryview)):
        target.write_bytes(bytes(model))
    elif hasattr(model, "SerializeToString"):
        _save_proto(model, target)
    else:
        raise TypeError(f"model must be a path, bytes or onnx.ModelProto, not {type(model).__name__}")
    return target


def _save_proto(model: Any, target: Path) -> None:
    from explorer.core.tensors import over_protobuf_limit

    if not over_protobuf_limit(model):
        target.write_bytes(model.SerializeToString())
        return
    import onnx

    copy = onnx.ModelProto()
    copy.CopyFrom(model)  # saving with external data rewrites the proto: leave the caller's alone
    onnx.save_model(copy, str(target), save_as_external_data=True, location=f"{target.name}.data")


def _move_outputs(out_dir: Path, output: Path) -> None:
    """Move what the step wrote into ``out_dir`` next to ``output`` (the main file becomes ``output``)."""
    output.parent.mkdir(parents=True, exist_ok=True)
    for item in sorted(out_dir.iterdir()):
        if item.is_file():
            move_atomic(item, output if item.name == output.name else output.parent / item.name)

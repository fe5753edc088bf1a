"""Typed errors raised by the explorer.

Every error the explorer raises on purpose derives from :class:`ExplorerError`,
so callers (the CLI, the widgets) can tell "the input is bad" apart from a bug.
Messages always name the file (when there is one) and the reason.

Examples
--------
>>> from explorer.core.errors import ModelNotFoundError, ModelLoadError
>>> err = ModelNotFoundError("no such file", path="missing.onnx")
>>> isinstance(err, ModelLoadError)
True
>>> str(err)
'missing.onnx: no such file'
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = [
    "ExplorerError",
    "ModelLoadError",
    "ModelNotFoundError",
    "EmptyModelError",
    "ModelParseError",
    "InvalidModelError",
    "GraphCycleError",
    "DanglingInputError",
    "UnsupportedOpsetError",
    "ExternalDataError",
    "UnsafeExternalDataError",
    "MissingExternalDataError",
    "MissingDependencyError",
    "ModelTooLargeError",
    "MemoryBudgetError",
    "UnknownNameError",
    "UnknownPassError",
    "PipelineSyntaxError",
    "UsageError",
    "OutputPathError",
    "RuntimeUnsupportedError",
    "LoweringError",
    "WorkerError",
    "WorkerCrashed",
    "WorkerTimeout",
    "WorkerOutOfMemory",
    "WorkerFailed",
    "WorkerCancelled",
    "UnguardedMainError",
]


class ExplorerError(Exception):
    """Base class of every error the explorer raises deliberately."""


class ModelLoadError(ExplorerError):
    """A model could not be loaded.

    Parameters
    ----------
    reason : str
        What is wrong, in words a user can act on.
    path : str or Path, optional
        The file the model came from, or a description such as ``"<bytes>"``.
    """

    def __init__(self, reason: str, *, path: str | Path | None = None) -> None:
        self.reason = reason
        self.path = None if path is None else str(path)
        super().__init__(f"{self.path}: {reason}" if self.path else reason)


class ModelNotFoundError(ModelLoadError):
    """The model file does not exist (or is not a file)."""


class EmptyModelError(ModelLoadError):
    """The model file or byte string is empty."""


class ModelParseError(ModelLoadError):
    """The bytes are not a valid serialized ``onnx.ModelProto`` (random or truncated)."""


class InvalidModelError(ModelLoadError):
    """The model parsed but its graph is not well formed."""


class GraphCycleError(InvalidModelError):
    """The graph's nodes form a cycle, so there is no data-flow order."""


class DanglingInputError(InvalidModelError):
    """A node reads a tensor that no node, input or initializer produces."""


class UnsupportedOpsetError(ModelLoadError):
    """The model asks for an opset newer than the installed ``onnx`` knows."""


class ExternalDataError(ModelLoadError):
    """A problem with tensors stored outside the model file."""


class UnsafeExternalDataError(ExternalDataError):
    """An external-data location escapes the model's folder (``..``, absolute, symlink)."""


class MissingExternalDataError(ExternalDataError):
    """An external-data file is missing or shorter than the model says."""


class ModelTooLargeError(ExplorerError):
    """A step cannot take a model this large (e.g. it needs one protobuf message, limited to 2 GiB).

    The message names the limit, the model's size and what to do instead.
    """


class MemoryBudgetError(ModelTooLargeError):
    """A command would need more memory for this model than this machine gives it, or a compiler
    path cannot take weights this large: refused before any work, with the figures and what to do.

    Parameters
    ----------
    message : str
        The figures and what to do, in words.
    path : str, optional
        The model's source.
    runtime : str, optional
        The command or runtime refused (``"bench tvm"``).

    Examples
    --------
    >>> str(MemoryBudgetError("needs 9.0 GiB, 4.0 GiB here", path="big.onnx", runtime="bench tvm"))
    'big.onnx: bench tvm: needs 9.0 GiB, 4.0 GiB here'
    """

    def __init__(self, message: str, *, path: str | None = None, runtime: str | None = None) -> None:
        self.path, self.runtime = path, runtime
        super().__init__(": ".join(part for part in (path, runtime, message) if part))


class MissingDependencyError(ExplorerError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""


class UnknownNameError(ExplorerError, KeyError):
    """A name (a sample model, a pass) is not registered; the message lists or suggests valid ones.

    A :class:`KeyError`, but printed as its message rather than quoted.
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class UnknownPassError(UnknownNameError):
    """The pipeline names a pass the registry does not have."""


class PipelineSyntaxError(ExplorerError, ValueError):
    """A pipeline string is malformed (unbalanced parentheses, a parameter without ``=``)."""


class UsageError(ExplorerError, ValueError):
    """An argument is wrong (a name that is not an input, a negative count, a pass that does not exist).

    The message says which argument, why, and what is valid.
    """


class OutputPathError(ExplorerError):
    """An output path cannot be written: it is the input (or a hard link to it), or its folder is
    missing or read-only. Nothing was written and the input is untouched."""


class RuntimeUnsupportedError(ExplorerError):
    """A runtime cannot take this model: an operator it has no kernel for (at this opset or domain), a
    type it does not support, a missing system facility (a locale). The user's model, not a bug.

    Parameters
    ----------
    message : str
        The runtime's reason in words.
    runtime : str
        The runtime's label, e.g. ``"onnxruntime CPUExecutionProvider"``.
    op_type, domain : str, optional
        The operator at fault, when known.
    opset : int, optional
        The opset of that domain the model imports.
    path : str, optional
        The model's source.

    Examples
    --------
    >>> err = RuntimeUnsupportedError(
    ...     "no kernel", runtime="ort", op_type="AveragePool", opset=1, path="m.onnx"
    ... )
    >>> str(err)
    'm.onnx: ort cannot run AveragePool (opset 1): no kernel'
    """

    def __init__(
        self,
        message: str,
        *,
        runtime: str,
        op_type: str | None = None,
        domain: str = "",
        opset: int | None = None,
        path: str | None = None,
    ) -> None:
        self.reason = message
        self.runtime = runtime
        self.op_type = op_type
        self.domain = domain
        self.opset = opset
        self.path = path
        what = "the model"
        if op_type:
            what = f"{domain}::{op_type}" if domain and domain != "ai.onnx" else op_type
            if opset is not None:
                what += f" (opset {opset})"
        head = f"{path}: " if path else ""
        super().__init__(f"{head}{runtime} cannot run {what}: {message}")


class LoweringError(ExplorerError):
    """A compiler pass failed on the model (e.g. TVM's LegalizeOps met a tensor of unknown shape).

    Parameters
    ----------
    message : str
        The pass's own words.
    pass_name : str
        The pass that failed.
    binding : str, optional
        The Relax binding (or IR op) it failed on, when known.
    onnx_nodes : sequence of str, optional
        The ONNX nodes that binding came from (its ``origin``).
    fix : str, optional
        What would fix it, in words.
    path : str, optional
        The model's source.
    compiler : str
        Whose pass it was: ``"TVM"`` (Relax) or ``"IREE"`` (the MLIR path, where ``pass_name``
        names the compilation phase and pass, and ``binding`` the op).

    Examples
    --------
    >>> err = LoweringError("shape unknown", pass_name="LegalizeOps", binding="lv3", onnx_nodes=["/Reshape"],
    ...                     fix="use onnxsim", path="m.onnx")
    >>> print(err)
    m.onnx: TVM pass LegalizeOps failed at lv3 (from ONNX node /Reshape): shape unknown; fix: use onnxsim
    """

    def __init__(
        self,
        message: str,
        *,
        pass_name: str,
        binding: str | None = None,
        onnx_nodes: tuple[str, ...] | list[str] = (),
        fix: str | None = None,
        path: str | None = None,
        compiler: str = "TVM",
    ) -> None:
        self.reason = message
        self.pass_name = pass_name
        self.compiler = compiler
        self.binding = binding
        self.onnx_nodes = tuple(onnx_nodes)
        self.fix = fix
        self.path = path
        where = f" at {binding}" if binding else ""
        if self.onnx_nodes:
            where += f" (from ONNX node {', '.join(self.onnx_nodes[:3])})"
        head = f"{path}: " if path else ""
        tail = f"; fix: {fix}" if fix else ""
        what = f"TVM pass {pass_name}" if compiler == "TVM" else f"{compiler} {pass_name}"
        super().__init__(f"{head}{what} failed{where}: {message}{tail}")

    def replace(self, **changes: Any) -> LoweringError:
        """The same error with some of its fields changed (``path``, ``fix``, ...).

        Examples
        --------
        >>> err = LoweringError("shape unknown", pass_name="FoldConstant", binding="lv3")
        >>> moved = err.replace(path="m.onnx")
        >>> moved.binding, str(moved).startswith("m.onnx: ")
        ('lv3', True)
        """
        message = changes.pop("message", self.reason)
        return LoweringError(message, **{**self._fields(), **changes})

    def _fields(self) -> dict[str, Any]:
        return {
            "pass_name": self.pass_name,
            "binding": self.binding,
            "onnx_nodes": self.onnx_nodes,
            "fix": self.fix,
            "path": self.path,
            "compiler": self.compiler,
        }

    def __reduce__(self) -> tuple:
        """Pickle with every attribute (the worker raises it; the parent rebuilds it typed).

        Examples
        --------
        >>> import pickle
        >>> err = LoweringError("shape unknown", pass_name="FoldConstant", binding="lv3", fix="onnxsim")
        >>> again = pickle.loads(pickle.dumps(err))
        >>> again.pass_name, again.binding, str(again) == str(err)
        ('FoldConstant', 'lv3', True)
        """
        return _rebuild_lowering_error, (self.reason, self._fields())


def _rebuild_lowering_error(message: str, fields: dict[str, Any]) -> LoweringError:
    """A :class:`LoweringError` from what its ``__reduce__`` keeps."""
    return LoweringError(message, **fields)


class WorkerError(ExplorerError):
    """A step run in a worker process did not return a result.

    Parameters
    ----------
    message : str
        What happened.
    step : str, optional
        The name of the step (function) that was running.
    stderr_tail : str, optional
        The last lines the child wrote to stderr (faulthandler's dump on a crash).
    """

    def __init__(self, message: str, *, step: str | None = None, stderr_tail: str = "") -> None:
        self.step = step
        self.stderr_tail = stderr_tail
        super().__init__(message)


class WorkerCrashed(WorkerError):
    """The worker process died from a signal (e.g. ``SIGSEGV``) or exited abnormally."""

    def __init__(
        self,
        message: str,
        *,
        step: str | None = None,
        stderr_tail: str = "",
        signal_name: str | None = None,
        exitcode: int | None = None,
    ) -> None:
        self.signal_name = signal_name
        self.exitcode = exitcode
        super().__init__(message, step=step, stderr_tail=stderr_tail)


class WorkerTimeout(WorkerError):
    """The step ran longer than its time limit; its process group was killed."""

    def __init__(
        self, message: str, *, step: str | None = None, stderr_tail: str = "", timeout: float | None = None
    ) -> None:
        self.timeout = timeout
        super().__init__(message, step=step, stderr_tail=stderr_tail)


class WorkerOutOfMemory(WorkerError):
    """The step tried to use more memory than its cap allows."""

    def __init__(
        self, message: str, *, step: str | None = None, stderr_tail: str = "", memory_mb: int | None = None
    ) -> None:
        self.memory_mb = memory_mb
        super().__init__(message, step=step, stderr_tail=stderr_tail)


class WorkerCancelled(WorkerError):
    """The step was stopped on request (:func:`explorer.isolation.worker.cancel`, a stop button); its process
    group was killed and the next call starts a fresh worker."""


class UnguardedMainError(WorkerError):
    """A script starts the worker at import time, without the ``if __name__ == "__main__":`` guard.

    The worker is a spawned process, and spawn imports the parent's main script again in it (as
    ``__mp_main__``): its top level would run twice. Raised in the parent before the worker starts,
    or after the worker, still starting, found its import of the script starting a worker again.

    Parameters
    ----------
    message : str
        What happened, and the guard to add.
    path : str, optional
        The script.
    line : int, optional
        The line of its top level that started the worker, when known.

    Examples
    --------
    >>> err = UnguardedMainError("put the calls under the guard", path="run.py", line=3)
    >>> isinstance(err, WorkerError), err.step, err.line
    (True, 'worker start', 3)
    """

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        self.path = path
        self.line = line
        super().__init__(message, step="worker start")


class WorkerFailed(WorkerError):
    """A Python exception raised in the worker whose type cannot be rebuilt in the parent.

    Keeps the original type name, message and traceback text.
    """

    def __init__(
        self,
        message: str,
        *,
        step: str | None = None,
        stderr_tail: str = "",
        exc_type: str = "Exception",
        traceback_text: str = "",
    ) -> None:
        self.exc_type = exc_type
        self.traceback_text = traceback_text
        super().__init__(message, step=step, stderr_tail=stderr_tail)

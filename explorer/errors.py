"""Typed errors raised by the explorer.

Every error the explorer raises on purpose derives from :class:`ExplorerError`,
so callers (the CLI, the widgets) can tell "the input is bad" apart from a bug.
Messages always name the file (when there is one) and the reason.

Examples
--------
>>> from explorer.errors import ModelNotFoundError, ModelLoadError
>>> err = ModelNotFoundError("no such file", path="missing.onnx")
>>> isinstance(err, ModelLoadError)
True
>>> str(err)
'missing.onnx: no such file'
"""

from __future__ import annotations

from pathlib import Path

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
    "UnknownNameError",
    "UnknownPassError",
    "PipelineSyntaxError",
    "WorkerError",
    "WorkerCrashed",
    "WorkerTimeout",
    "WorkerOutOfMemory",
    "WorkerFailed",
    "WorkerCancelled",
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
    """The step was stopped on request (:func:`explorer.worker.cancel`, a stop button); its process
    group was killed and the next call starts a fresh worker."""


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

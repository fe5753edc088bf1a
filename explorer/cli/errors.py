"""Exit codes and how a failure reaches the user: one line on stderr, and with ``--json`` one
document whose ``"error"`` says the type, the message and the exit code (an interrupt's too).

Examples
--------
>>> from explorer.core.errors import ExplorerError
>>> error_dict(ExplorerError("no such target 'npu'"), EXIT_BAD_INPUT)
{'type': 'ExplorerError', 'message': "no such target 'npu'", 'exit_code': 2}
"""

from __future__ import annotations

import json
import sys
from typing import Any

from explorer.core.errors import ExplorerError

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_INTERNAL",
    "EXIT_NOT_IMPORTED",
    "EXIT_INTERRUPTED",
    "EXIT_BROKEN_PIPE",
    "ERROR_FIELDS",
    "ArgumentsRejected",
    "error_dict",
    "fail",
    "say_error",
    "print_error_document",
]

EXIT_BAD_INPUT = 2
"""Exit code for bad input (missing file, broken model, bad arguments, an output path that cannot be
written or would replace the input)."""
EXIT_INTERNAL = 1
"""Exit code for an unexpected internal error (a bug: please report it)."""
EXIT_NOT_IMPORTED = 3
"""Exit code when the model does not import or lower into a runtime or compiler: TVM Relax's import
or one of its passes fails (:class:`~explorer.core.errors.LoweringError`), or a runtime cannot take an
operator or type of the model (:class:`~explorer.core.errors.RuntimeUnsupportedError`). The failing ops,
pass or runtime are named."""

EXIT_INTERRUPTED = 130
"""Exit code when the user stopped the run (Ctrl-C: 128 + SIGINT, as a shell reports it)."""

EXIT_BROKEN_PIPE = 141
"""Exit code when the reader of stdout closed the pipe (``| head``): 128 + SIGPIPE, as a shell reports
it; nothing more is written and no error is claimed."""

ERROR_FIELDS = ("path", "runtime", "op_type", "domain", "opset", "pass_name", "binding", "onnx_nodes", "fix")
"""Attributes of typed errors the ``--json`` error document carries when they are set."""


class ArgumentsRejected(SystemExit):
    """argparse refused the arguments (usage and message already on stderr); ``main`` adds the
    ``--json`` error document. Uncaught, it exits 2 as argparse does."""

    def __init__(self, message: str) -> None:
        super().__init__(EXIT_BAD_INPUT)
        self.message = message


def error_dict(err: ExplorerError, code: int) -> dict[str, Any]:
    """``{"type", "message", "exit_code", ...}``: the ``"error"`` of a ``--json`` document, with the
    :data:`ERROR_FIELDS` the error has set.

    Examples
    --------
    >>> from explorer.core.errors import ModelNotFoundError
    >>> error = error_dict(ModelNotFoundError("no such file", path="missing.onnx"), EXIT_BAD_INPUT)
    >>> error["type"], error["exit_code"], error["path"]
    ('ModelNotFoundError', 2, 'missing.onnx')
    """
    data: dict[str, Any] = {
        "type": type(err).__name__,
        "message": " ".join(str(err).split()),
        "exit_code": code,
    }
    for name in ERROR_FIELDS:
        value = getattr(err, name, None)
        if value not in (None, "", ()):
            data[name] = list(value) if isinstance(value, tuple) else value
    return data


def say_error(err: BaseException) -> None:
    """Print ``onnx-explorer: error: MESSAGE`` on stderr, the message on one line.

    Examples
    --------
    >>> import contextlib, io
    >>> with contextlib.redirect_stderr(io.StringIO()) as stderr:
    ...     say_error(ExplorerError("bad.onnx: the file is empty\\n(0 bytes)"))
    >>> stderr.getvalue()
    'onnx-explorer: error: bad.onnx: the file is empty (0 bytes)\\n'
    """
    print(f"onnx-explorer: error: {' '.join(str(err).split())}", file=sys.stderr)


def fail(err: ExplorerError, code: int, as_json: bool) -> int:
    """Report ``err`` as one line on stderr (and, with ``--json``, as the error document on stdout)
    and return ``code``.

    Examples
    --------
    >>> import contextlib, io
    >>> with contextlib.redirect_stderr(io.StringIO()) as stderr:
    ...     fail(ExplorerError("no such target 'npu'"), EXIT_BAD_INPUT, as_json=True)
    {"error": {"type": "ExplorerError", "message": "no such target 'npu'", "exit_code": 2}}
    2
    >>> stderr.getvalue()
    "onnx-explorer: error: no such target 'npu'\\n"
    """
    say_error(err)
    if as_json:
        print(json.dumps({"error": error_dict(err, code)}))
    return code


def print_error_document(kind: str, message: str, code: int) -> None:
    """Print the ``--json`` document of a failure that is no :class:`ExplorerError` (arguments argparse
    refused, an interrupt, an internal error): ``{"error": {"type", "message", "exit_code"}}``.

    Examples
    --------
    >>> print_error_document("interrupted", "interrupted (Ctrl-C)", EXIT_INTERRUPTED)
    {"error": {"type": "interrupted", "message": "interrupted (Ctrl-C)", "exit_code": 130}}
    """
    print(json.dumps({"error": {"type": kind, "message": message, "exit_code": code}}))

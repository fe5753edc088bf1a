"""``onnx-explorer`` run in the test process: the same ``main`` and output, without a Python start and
a worker per call (the command's own process is tested in test_cli and the README tests)."""

from __future__ import annotations

import contextlib
import io
import subprocess

from explorer.cli import main

__all__ = ["run_cli"]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``onnx-explorer ARGS`` in this process: exit code, stdout and stderr as a subprocess gives them.

    Examples
    --------
    >>> run_cli("info", "zoo:mlp", "--json").returncode
    0
    """
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return subprocess.CompletedProcess(["onnx-explorer", *args], code, out.getvalue(), err.getvalue())

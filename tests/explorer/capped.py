"""Run the CLI or a snippet in a fresh Python process under a memory cap and a time limit.

For inputs that, mishandled, read without end (``/dev/zero``, a declared size the file cannot
hold) or block forever (a FIFO): a regression then fails its test (``MemoryError`` under the
cap: exit 1 and "internal error"; a hang: ``subprocess.TimeoutExpired``) instead of taking the
machine, or the test run, down. A process of its own, not a fork of pytest's: a fork would share
the test process's warm worker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["CAP_BYTES", "run_cli_capped", "load_capped"]

ROOT = Path(__file__).resolve().parents[2]

CAP_BYTES = 2 << 30
"""The address space the process may use (``RLIMIT_AS``, soft): the CLI refusing a bad input takes
under 200 MB; a read without end reaches it in about a second."""

TIMEOUT_S = 60.0
"""A refusal takes well under a second; a FIFO opened for reading blocks forever."""

_CLI = "import sys; from explorer.cli import main; sys.exit(main(sys.argv[1:]))"

_LOAD = """
import json, sys
import explorer
try:
    graph = explorer.load(sys.argv[1])
except Exception as err:
    print(json.dumps({"type": type(err).__name__, "mro": [c.__name__ for c in type(err).__mro__],
                      "message": str(err)}))
else:
    print(json.dumps({"type": None, "source": graph.source}))
"""


_CAP = """
import resource
_, hard = resource.getrlimit(resource.RLIMIT_AS)  # the soft limit only: the worker sets its own
resource.setrlimit(resource.RLIMIT_AS, ({cap} if hard == resource.RLIM_INFINITY else min({cap}, hard), hard))
"""


def _run(
    code: str, args: tuple[str, ...], cap_bytes: int, timeout: float
) -> subprocess.CompletedProcess[str]:
    """``python -c CODE ARGS``, capped first thing (set in the child's code: no ``preexec_fn``, which is
    unsafe in a process with threads, as pytest's may have)."""
    return subprocess.run(
        [sys.executable, "-c", _CAP.format(cap=int(cap_bytes)) + code, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},
    )


def run_cli_capped(
    *args: str, cap_bytes: int = CAP_BYTES, timeout: float = TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    """``onnx-explorer ARGS`` in a fresh process capped at ``cap_bytes`` of address space.

    Examples
    --------
    >>> done = run_cli_capped("info", "/dev/zero", "--json")
    >>> done.returncode, json.loads(done.stdout)["error"]["type"]
    (2, 'ModelNotFoundError')
    """
    return _run(_CLI, args, cap_bytes, timeout)


def load_capped(
    path: str | os.PathLike[str], *, cap_bytes: int = CAP_BYTES, timeout: float = TIMEOUT_S
) -> Any:
    """``explorer.load(path)`` in a fresh capped process: what it raised, as a dict.

    Returns ``{"type", "mro", "message"}`` for an exception (``"mro"``: the names of its classes),
    ``{"type": None, "source"}`` when it loaded; a crash or the cap's ``MemoryError`` outside the
    ``try`` fails with the child's stderr.

    Examples
    --------
    >>> outcome = load_capped("/dev/urandom")
    >>> outcome["type"], "ModelLoadError" in outcome["mro"]
    ('ModelNotFoundError', True)
    """
    done = _run(_LOAD, (os.fspath(path),), cap_bytes, timeout)
    assert done.returncode == 0 and done.stdout.strip(), done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])

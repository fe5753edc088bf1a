"""The worker process's side: its own process group, stderr to a log file, the memory cap, a watch on
the parent (it exits when the parent is gone), and the loop that runs each call sent to it.

Examples
--------
>>> _type_name(ValueError), _type_name(OSError)
('ValueError', 'OSError')
"""

from __future__ import annotations

import contextlib
import faulthandler
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import time
import traceback
from multiprocessing.connection import Connection

from explorer.isolation.cpu_cores import size_tvm_thread_pool
from explorer.isolation.worker import progress
from explorer.isolation.worker.progress import _Channel

__all__: list[str] = []


def _child_main(conn: Connection, log_path: str, memory_mb: int | None, parent_pid: int) -> None:
    """Entry point of the spawned worker: set up isolation, then serve calls until told to stop."""
    pgid = _enter_own_process_group()
    multiprocessing.current_process().daemon = False  # let steps start their own worker pools
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when a step is cancelled
    _redirect_stderr(log_path)
    _redirect_stdout()
    faulthandler.enable(all_threads=False)  # the crashing thread only: keeps the dump short
    _watch_parent(parent_pid)  # before the cap: a thread needs address space for its stack
    capped = _apply_memory_cap(memory_mb)
    size_tvm_thread_pool()  # before TVM's pool exists: one thread per physical core, as ONNX Runtime
    channel = progress._CHANNEL = _Channel(conn)  # what report() sends through
    channel.send(("ready", os.getpid(), pgid, capped))
    _serve(channel)


def _enter_own_process_group() -> int:
    with contextlib.suppress(AttributeError, OSError):
        os.setpgid(0, 0)
    return os.getpgrp() if hasattr(os, "getpgrp") else os.getpid()


def _redirect_stderr(log_path: str) -> None:
    """Send fd 2 (Python's and native libraries' stderr) to the log file the parent reads."""
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    sys.stderr.flush()
    os.dup2(fd, 2)
    os.close(fd)


def _redirect_stdout() -> None:
    """Send fd 1 to the log as well (after :func:`_redirect_stderr`): what a native library or an
    importer prints (TVM's ``print("Error converting operator ...")``) never reaches the parent's
    stdout, which may be one ``--json`` document."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        sys.stdout.flush()
    os.dup2(2, 1)
    sys.stdout = sys.stderr


def _apply_memory_cap(memory_mb: int | None) -> bool:
    """Set RLIMIT_AS (soft) to ``memory_mb``; return whether a cap is in force."""
    if memory_mb is None:
        return False
    try:
        import resource
    except ImportError:  # not POSIX
        return False
    limit = int(memory_mb) * 2**20
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    try:
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ValueError, OSError):
        return False
    return True


def _watch_parent(parent_pid: int) -> None:
    """Kill this process group if the parent dies (a killed kernel must not leave workers behind)."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(1.0)
        _kill_own_group()

    threading.Thread(target=watch, name="explorer-parent-watch", daemon=True).start()


def _kill_own_group() -> None:
    try:
        if os.getpgrp() == os.getpid():
            os.killpg(0, signal.SIGKILL)
    finally:
        os._exit(1)


def _serve(channel: _Channel) -> None:
    while True:
        try:
            message = channel.conn.recv()
        except (EOFError, OSError):
            return
        if message[0] != "call":
            return
        _, call_id, payload = message
        channel.call_id = call_id
        _truncate_stderr()
        _send_reply(channel, call_id, _execute(payload))


def _truncate_stderr() -> None:
    try:
        sys.stderr.flush()
        os.ftruncate(2, 0)
    except (OSError, ValueError):
        pass


def _execute(payload: bytes) -> tuple:
    try:
        fn, args, kwargs = pickle.loads(payload)
        return ("ok", fn(*args, **kwargs))
    except BaseException as exc:  # everything, even SystemExit, must go back to the parent
        return _error_reply(exc)


def _error_reply(exc: BaseException) -> tuple:
    try:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        blob = _pickled_exception(exc) if isinstance(exc, Exception) else None
        return ("err", blob, _type_name(type(exc)), str(exc), text, isinstance(exc, MemoryError))
    except BaseException:  # e.g. MemoryError while formatting: send what is cheap
        return ("err", None, _type_name(type(exc)), "", "", isinstance(exc, MemoryError))


def _pickled_exception(exc: Exception) -> bytes | None:
    """Pickle ``exc`` if it survives a round trip; None otherwise."""
    try:
        blob = pickle.dumps(exc)
        pickle.loads(blob)
    except Exception:
        return None
    return blob


def _send_reply(channel: _Channel, call_id: int, reply: tuple) -> None:
    try:
        channel.send((reply[0], call_id, *reply[1:]))
    except Exception as exc:  # the result could not be pickled (or was too big to copy)
        channel.send(
            (
                "err",
                call_id,
                None,
                _type_name(type(exc)),
                f"the step's result could not be sent back to the parent: {exc}",
                traceback.format_exc(),
                isinstance(exc, MemoryError),
            )
        )


def _type_name(cls: type) -> str:
    module = cls.__module__
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"

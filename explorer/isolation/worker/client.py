"""The parent's side of one worker: :class:`Worker`, a spawned child process with its pipe, its calls
(timeout, cancel, progress) and every way the child can fail as a typed
:class:`~explorer.core.errors.WorkerError`.

Examples
--------
>>> from explorer.isolation.worker.client import Worker
>>> worker = Worker(memory_mb=None)
>>> worker.call(abs, -2)
2
>>> worker.close()
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import pickle
import shutil
import signal
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from typing import Any

from explorer.core.errors import (
    WorkerCancelled,
    WorkerCrashed,
    WorkerError,
    WorkerFailed,
    WorkerOutOfMemory,
    WorkerTimeout,
)
from explorer.isolation.worker.child import _child_main
from explorer.isolation.worker.main_guard import _refuse_unguarded_main, _reimported_main_error
from explorer.isolation.worker.progress import ProgressEvent
from explorer.isolation.worker.settings import (
    _CANCEL_POLL_S,
    _KILL_WAIT_S,
    _MAIN_REIMPORTED_EXIT,
    _OOM_MARKERS,
    _PROCESS_NAME,
    _TAIL_BYTES,
    _resolve,
    defaults,
)

__all__ = ["Worker"]


def _step_name(fn: Callable[..., Any]) -> str:
    target = getattr(fn, "func", fn)  # functools.partial
    name = getattr(target, "__qualname__", None) or type(target).__qualname__
    module = getattr(target, "__module__", None)
    return f"{module}.{name}" if module and module != "builtins" else name


def _dumps_call(fn: Callable[..., Any], args: tuple, kwargs: dict) -> bytes:
    """Pickle the call; cloudpickle (when installed) also ships functions defined in a notebook."""
    try:
        import cloudpickle
    except ImportError:
        return pickle.dumps((fn, args, kwargs), protocol=pickle.HIGHEST_PROTOCOL)
    return cloudpickle.dumps((fn, args, kwargs), protocol=pickle.HIGHEST_PROTOCOL)


def _looks_like_oom(*texts: str) -> bool:
    return any(marker in text for text in texts for marker in _OOM_MARKERS)


def _signal_name(exitcode: int) -> str | None:
    if exitcode >= 0:
        return None
    try:
        return signal.Signals(-exitcode).name
    except ValueError:
        return f"signal {-exitcode}"


class Worker:
    """A persistent child process that runs steps one at a time.

    The process starts on the first call and stays warm between calls. After a crash, a
    timeout, an out-of-memory or a cancel it is killed, and the next call starts a fresh one.
    The memory cap is set once, when the process starts.

    Parameters
    ----------
    memory_mb : int, optional
        Address-space cap (RLIMIT_AS) in MiB; None means no cap.
    gpu : bool, optional
        The steps use a GPU: no memory cap is applied (GPU drivers map huge address ranges).
    start_timeout : float, optional
        Seconds the process may take to start; by default ``defaults.start_timeout``.

    Examples
    --------
    >>> import os
    >>> from explorer.isolation.worker import Worker
    >>> with Worker(memory_mb=4096) as w:
    ...     first, second = w.call(os.getpid), w.call(os.getpid)
    >>> first == second
    True
    """

    def __init__(
        self, *, memory_mb: int | None = None, gpu: bool = False, start_timeout: float | None = None
    ) -> None:
        self.memory_mb = None if gpu else memory_mb
        self.gpu = gpu
        self.start_timeout = start_timeout
        self.capped = False
        self._proc: Any = None
        self._conn: Connection | None = None
        self._pgid: int | None = None
        self._dir: str | None = None
        self._call_id = 0
        self._lock = threading.RLock()
        self._cancelled = threading.Event()
        self.busy = False

    def __repr__(self) -> str:
        state = f"pid={self.pid}" if self.alive else "not started"
        return f"Worker({state}, memory_mb={self.memory_mb})"

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        """Process id of the child, or None before it starts."""
        return None if self._proc is None else self._proc.pid

    @property
    def alive(self) -> bool:
        """Whether the child process is running."""
        return self._proc is not None and self._proc.is_alive()

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> Worker:
        """Start the child (if not running) and wait until it is ready; return ``self``."""
        with self._lock:
            if self.alive:
                return self
            self.kill()  # clean up after a child that died while idle
            _refuse_unguarded_main()  # spawn would run the script's top level again
            try:
                self._spawn()
                self._await_ready()
            except BaseException:
                self.kill()
                raise
            return self

    def _spawn(self) -> None:
        _LIVE.add(self)
        ctx = multiprocessing.get_context("spawn")
        self._dir = tempfile.mkdtemp(prefix="explorer-worker-", dir=defaults.tmp_dir)
        parent_conn, child_conn = ctx.Pipe(duplex=True)
        args = (child_conn, self._log_path(), self.memory_mb, os.getpid())
        # daemon: at interpreter exit multiprocessing terminates it instead of waiting for it
        self._proc = ctx.Process(target=_child_main, args=args, name=_PROCESS_NAME, daemon=True)
        self._conn = parent_conn
        try:
            self._proc.start()
        finally:
            child_conn.close()

    def _await_ready(self) -> None:
        limit = self.start_timeout if self.start_timeout is not None else defaults.start_timeout
        try:
            message = self._receive(time.monotonic() + limit, None, "worker start", 0.0)
        except WorkerTimeout:
            raise WorkerTimeout(
                f"the worker process did not start within {limit:g} s",
                step="worker start",
                stderr_tail=self._tail(),
                timeout=limit,
            ) from None
        except WorkerCrashed as err:
            if err.exitcode == _MAIN_REIMPORTED_EXIT:  # its import of the script started a worker
                raise _reimported_main_error() from None
            raise
        _, _, pgid, self.capped = message
        self._pgid = pgid if pgid == self._proc.pid else None

    def close(self) -> None:
        """Stop the child gracefully (killing it if it does not stop) and remove its temp folder."""
        with self._lock:
            if self.alive and self._conn is not None:
                try:
                    self._conn.send(("stop",))
                    self._proc.join(2.0)
                except (OSError, ValueError):
                    pass
            self.kill()

    def kill(self) -> None:
        """Kill the child's whole process group at once and remove its temp folder."""
        with self._lock:
            if self._proc is not None:
                self._kill_group()
            if self._conn is not None:
                self._conn.close()
            if self._dir is not None:
                shutil.rmtree(self._dir, ignore_errors=True)
            self._proc = self._conn = self._pgid = self._dir = None

    def _kill_group(self) -> None:
        if self._pgid is not None and hasattr(os, "killpg") and self._pgid != os.getpgrp():
            with contextlib.suppress(OSError):  # the group may be empty already
                os.killpg(self._pgid, signal.SIGKILL)
        if self._proc.pid is not None and self._proc.is_alive():
            self._proc.kill()
        self._proc.join(_KILL_WAIT_S)

    # ----------------------------------------------------------------- calls

    def call(
        self,
        fn: Callable[..., Any],
        *args: Any,
        timeout: float | None = None,
        progress: Callable[[ProgressEvent], object] | None = None,
        step: str | None = None,
        **kwargs: Any,
    ) -> Any:
        """Run ``fn(*args, **kwargs)`` in the child and return its result.

        Parameters
        ----------
        fn : callable
            A picklable function (top-level in an importable module, or anything cloudpickle
            can ship).
        *args, **kwargs
            Its arguments (picklable).
        timeout : float, optional
            Wall-clock limit in seconds; None uses ``defaults.timeout``, 0 means no limit.
        progress : callable, optional
            Receives a :class:`ProgressEvent` for each :func:`report` in the step.
        step : str, optional
            Name of the step in errors and progress events; by default fn's qualified name.

        Returns
        -------
        object
            What ``fn`` returned.

        Raises
        ------
        WorkerCrashed, WorkerTimeout, WorkerOutOfMemory, WorkerFailed
            See the module docstring.
        Exception
            The step's own exception, rebuilt, with the child's traceback as a note.

        Examples
        --------
        >>> from explorer.isolation.worker import Worker
        >>> with Worker() as w:
        ...     w.call(pow, 2, 10)
        1024
        """
        limit = _resolve(timeout, defaults.timeout, "timeout")
        return self._call(fn, args, kwargs, limit, progress, step or _step_name(fn))

    def _call(
        self,
        fn: Callable[..., Any],
        args: tuple,
        kwargs: dict,
        timeout: float | None,
        progress: Callable[[ProgressEvent], object] | None,
        step: str,
    ) -> Any:
        payload = _dumps_call(fn, args, kwargs)  # unpicklable arguments fail here, in the parent
        with self._lock:
            self._cancelled.clear()  # a stop asked before this call does not stop it
            self.start()
            self._call_id += 1
            started = time.monotonic()
            deadline = None if timeout is None else started + timeout
            self.busy = True
            try:
                self._conn.send(("call", self._call_id, payload))
                reply = self._receive(deadline, progress, step, started)
            except BaseException:  # timeout, crash, cancel, KeyboardInterrupt, a failing progress callback
                self.kill()
                raise
            finally:
                self.busy = False
            return self._unpack(reply, step)

    def _receive(
        self,
        deadline: float | None,
        progress: Callable[[ProgressEvent], object] | None,
        step: str,
        started: float,
    ) -> tuple:
        """Wait for the reply to the current call, forwarding progress; raise on death or timeout."""
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise self._timeout_error(step, deadline - started)
            if self._cancelled.is_set():
                raise WorkerCancelled(f"{step} was stopped", step=step)
            poll = _CANCEL_POLL_S if remaining is None else min(remaining, _CANCEL_POLL_S)
            ready = wait([self._conn, self._proc.sentinel], poll)
            if not ready:
                continue
            try:
                message = self._conn.recv() if self._conn.poll() else None
            except (EOFError, OSError):
                message = None
            if message is None:
                raise self._death_error(step)
            if message[0] == "progress":
                self._forward(message, progress, step, started)
            elif message[0] == "ready" or message[1] == self._call_id:
                return message

    def cancel(self) -> None:
        """Stop the call in flight, from any thread: it raises :class:`~explorer.core.errors.WorkerCancelled`
        within a fraction of a second and the process is killed (the next call starts a fresh one).

        Examples
        --------
        >>> import threading, time
        >>> from explorer.core.errors import WorkerCancelled
        >>> w = Worker().start()  # started first: the timer stops the call, not the start
        >>> threading.Timer(0.5, w.cancel).start()
        >>> try:
        ...     w.call(time.sleep, 30)
        ... except WorkerCancelled as err:
        ...     print(err)
        time.sleep was stopped
        >>> w.close()
        """
        self._cancelled.set()

    def _forward(
        self,
        message: tuple,
        progress: Callable[[ProgressEvent], object] | None,
        step: str,
        started: float,
    ) -> None:
        _, call_id, fraction, text = message
        if progress is not None and call_id == self._call_id:
            progress(ProgressEvent(step, fraction, text, time.monotonic() - started))

    def _unpack(self, reply: tuple, step: str) -> Any:
        if reply[0] == "ok":
            return reply[2]
        _, _, blob, type_name, message, tb_text, is_memory_error = reply
        if is_memory_error or _looks_like_oom(type_name, message):
            tail = self._tail()
            self.kill()  # native state after a failed allocation is not trusted
            raise WorkerOutOfMemory(
                f"step {step!r} ran out of memory{self._cap_text()}: {type_name}: {message}",
                step=step,
                stderr_tail=tail,
                memory_mb=self.memory_mb,
            )
        exc = _rebuild(blob)
        if exc is None:
            raise WorkerFailed(
                f"step {step!r} raised {type_name}: {message}",
                step=step,
                stderr_tail=self._tail(),
                exc_type=type_name,
                traceback_text=tb_text,
            )
        _add_note(exc, f"Raised in worker process {self.pid} while running step {step!r}:\n{tb_text}")
        raise exc

    # ----------------------------------------------------------------- errors

    def _cap_text(self) -> str:
        return f" (cap {self.memory_mb} MiB)" if self.memory_mb is not None else ""

    def _timeout_error(self, step: str, limit: float) -> WorkerTimeout:
        self._kill_group()
        return WorkerTimeout(
            f"step {step!r} did not finish within {limit:g} s; its processes were killed",
            step=step,
            stderr_tail=self._tail(),
            timeout=limit,
        )

    def _death_error(self, step: str) -> WorkerError:
        self._proc.join(_KILL_WAIT_S)
        code = self._proc.exitcode  # None: alive, but it closed its end of the pipe
        tail = self._tail()
        self._kill_group()  # grandchildren may outlive the child
        name = None if code is None else _signal_name(code)
        if _looks_like_oom(tail) or name == "SIGKILL":
            why = "the system's OOM killer" if name == "SIGKILL" else "a failed allocation"
            return WorkerOutOfMemory(
                f"step {step!r} ran out of memory{self._cap_text()}: the worker died ({name or code}, {why})",
                step=step,
                stderr_tail=tail,
                memory_mb=self.memory_mb,
            )
        how = f"was killed by {name}" if name else f"exited (code {code})"
        headline = _headline(tail)
        return WorkerCrashed(
            f"the worker process {how} while running step {step!r}" + (f" ({headline})" if headline else ""),
            step=step,
            stderr_tail=tail,
            signal_name=name,
            exitcode=code,
        )

    def _log_path(self) -> str:
        return os.path.join(self._dir, "stderr.log")

    def _tail(self) -> str:
        """The last ``defaults.tail_lines`` lines the child wrote to fd 2 during this call."""
        if self._dir is None:
            return ""
        try:
            with open(self._log_path(), "rb") as log:
                log.seek(0, os.SEEK_END)
                log.seek(max(0, log.tell() - _TAIL_BYTES))
                data = log.read()
        except OSError:
            return ""
        return _last_lines(data.decode("utf-8", errors="replace"), defaults.tail_lines)


def _last_lines(text: str, count: int) -> str:
    """The last ``count`` lines, led by faulthandler's "Fatal Python error" line if it scrolled away."""
    lines = text.splitlines()
    tail = lines[-count:] if count > 0 else []
    fatal = [line for line in lines[: len(lines) - len(tail)] if line.startswith("Fatal Python error")]
    return "\n".join([fatal[-1], "[...]", *tail] if fatal else tail)


def _headline(tail: str) -> str:
    """The most telling stderr line: faulthandler's "Fatal Python error", else the last one."""
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    fatal = [line for line in lines if line.startswith("Fatal Python error")]
    return (fatal or lines or [""])[-1][:200]


def _rebuild(blob: bytes | None) -> Exception | None:
    if blob is None:
        return None
    try:
        exc = pickle.loads(blob)
    except Exception:
        return None
    return exc if isinstance(exc, Exception) else None


def _add_note(exc: Exception, note: str) -> None:
    if hasattr(exc, "add_note"):
        exc.add_note(note)
        return
    with contextlib.suppress(AttributeError):  # Python 3.10: keep it where 3.11 would look
        exc.__notes__ = [*getattr(exc, "__notes__", []), note]


_LIVE: weakref.WeakSet[Worker] = weakref.WeakSet()
"""Every worker not yet collected (:func:`~explorer.isolation.worker.pool.cancel` stops the busy ones)."""

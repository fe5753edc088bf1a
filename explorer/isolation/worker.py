"""Run native steps in a child process that may crash without taking the notebook down.

The onnx checker, onnxsim, onnxoptimizer, ONNX Runtime and TVM are C++ libraries with
known segfaults, aborts and runaway allocations on malformed models. :func:`run` calls a
picklable function in a *spawned* child process (never forked: the parent may hold threads
and TVM state) with a wall-clock timeout and an address-space cap, and turns every way the
child can fail into a typed :class:`~explorer.core.errors.WorkerError`:

* :class:`~explorer.core.errors.WorkerCrashed` - the child died from a signal (``SIGSEGV``,
  ``SIGABRT``, ...) or exited; carries the signal name, the step and the last lines of the
  child's stderr (faulthandler's dump included);
* :class:`~explorer.core.errors.WorkerTimeout` - the step ran past its limit; the child's whole
  process group (grandchildren included) was killed;
* :class:`~explorer.core.errors.WorkerOutOfMemory` - the step hit the memory cap (``MemoryError``,
  ``std::bad_alloc``, an allocation failure reported by the library, or the kernel's OOM killer);
* :class:`~explorer.core.errors.WorkerFailed` - a Python exception that cannot be rebuilt in the
  parent. Picklable exceptions come back as themselves, with the child's traceback attached
  as a note.

Models travel as files (:func:`run_on_model`), never as pickled protobufs. A warm worker
process is kept per memory cap and reused between calls (importing TVM alone takes seconds);
after a crash, timeout or out-of-memory the next call gets a fresh process. See
``docs/isolation.md`` for the whole picture.

Examples
--------
>>> from explorer.isolation import worker
>>> worker.run(abs, -3)
3
>>> worker.run(divmod, 7, 2, timeout=30)
(3, 1)
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import faulthandler
import importlib
import math
import multiprocessing
import os
import pickle
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from explorer.core.errors import (
    UnguardedMainError,
    UsageError,
    WorkerCancelled,
    WorkerCrashed,
    WorkerError,
    WorkerFailed,
    WorkerOutOfMemory,
    WorkerTimeout,
)
from explorer.isolation.cpu_cores import size_tvm_thread_pool
from explorer.isolation.io import check_model_file, move_atomic

__all__ = [
    "ProgressEvent",
    "WorkerDefaults",
    "Worker",
    "defaults",
    "configure",
    "default_memory_mb",
    "run",
    "run_on_model",
    "report",
    "shutdown",
    "cancel",
    "prestart",
]

#: Text in an error message or stderr that means "an allocation failed".
_OOM_MARKERS = (
    "bad_alloc",
    "MemoryError",
    "Cannot allocate memory",
    "out of memory",
    "Out of memory",
    "Failed to allocate memory",
    "failed to allocate memory",
)
_TAIL_BYTES = 64 * 1024
#: How often a waiting call looks whether it was asked to stop (:meth:`Worker.cancel`).
_CANCEL_POLL_S = 0.2
_KILL_WAIT_S = 10.0
#: The worker processes' name (``multiprocessing.current_process().name`` in them, from their start).
_PROCESS_NAME = "explorer-worker"
#: The exit code of a worker that, still starting, found the parent's main script (imported again
#: by spawn) starting a worker: its top level runs without the ``__main__`` guard.
_MAIN_REIMPORTED_EXIT = 86


# --------------------------------------------------------------------------- defaults


def default_memory_mb(fraction: float = 0.75) -> int | None:
    """Return a memory cap in MiB: ``fraction`` of physical RAM (or of the cgroup limit if lower).

    Parameters
    ----------
    fraction : float, optional
        Share of the available memory the child may map, by default 0.75.

    Returns
    -------
    int or None
        The cap in MiB, or None where the total memory cannot be read.

    Examples
    --------
    >>> from explorer.isolation.worker import default_memory_mb
    >>> default_memory_mb() > 0
    True
    """
    totals = [t for t in (_physical_memory_bytes(), _cgroup_limit_bytes()) if t]
    if not totals:
        return None
    return max(1, int(min(totals) * fraction) // 2**20)


def _physical_memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def _cgroup_limit_bytes() -> int | None:
    for name in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(name).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 2**60:
            return int(text)
    return None


@dataclasses.dataclass
class WorkerDefaults:
    """Settings used when a call does not give its own.

    Attributes
    ----------
    timeout : float or None
        Wall-clock limit of one call in seconds (600); None means no limit.
    memory_mb : int or None
        Address-space cap of the child in MiB (75% of RAM); None means no cap.
    reuse : bool
        Keep a warm worker per memory cap and reuse it between calls (True).
    start_timeout : float
        Seconds a new child may take to start and report ready (120).
    tail_lines : int
        How many of the child's last stderr lines errors carry (20).
    tmp_dir : str or None
        Where private temp folders are made; None means the system default.
    max_warm : int
        How many warm workers (one per memory cap) are kept at most (2).

    Examples
    --------
    >>> from explorer.isolation.worker import WorkerDefaults
    >>> WorkerDefaults(timeout=5).timeout
    5
    """

    timeout: float | None = 600.0
    memory_mb: int | None = dataclasses.field(default_factory=default_memory_mb)
    reuse: bool = True
    start_timeout: float = 120.0
    tail_lines: int = 20
    tmp_dir: str | None = None
    max_warm: int = 2


#: The module-wide defaults; change them with :func:`configure`.
defaults = WorkerDefaults()


def configure(**changes: Any) -> dict[str, Any]:
    """Change the module-wide defaults; return the previous values of what changed.

    Parameters
    ----------
    **changes
        Fields of :class:`WorkerDefaults`, e.g. ``timeout=60, memory_mb=4096``.

    Returns
    -------
    dict
        The old values, so that ``configure(**old)`` restores them.

    Raises
    ------
    TypeError
        If a name is not a field of :class:`WorkerDefaults`.

    Examples
    --------
    >>> from explorer.isolation import worker
    >>> old = worker.configure(timeout=60)
    >>> worker.defaults.timeout
    60
    >>> _ = worker.configure(**old)
    """
    fields = {f.name for f in dataclasses.fields(WorkerDefaults)}
    unknown = sorted(set(changes) - fields)
    if unknown:
        raise TypeError(f"unknown worker setting(s) {unknown}; known: {sorted(fields)}")
    old = {name: getattr(defaults, name) for name in changes}
    for name, value in changes.items():
        setattr(defaults, name, value)
    return old


def _resolve(value: float | None, default: float | None, name: str) -> float | None:
    """None means "use the default"; 0 means "no limit"; ``name`` is the argument's, for the error."""
    if value is None:
        value = default
    if value is None or value == 0 or value == math.inf:
        return None
    if value < 0:
        raise UsageError(
            f"{name} must be positive (0 means no limit, None the worker's default), got {value}"
        )
    return value


# --------------------------------------------------------------------------- progress


@dataclasses.dataclass(frozen=True)
class ProgressEvent:
    """One progress report from a step running in a worker.

    Attributes
    ----------
    step : str
        The step that reported.
    fraction : float or None
        Share done, from 0 to 1, when the step knows it.
    message : str or None
        What the step is doing.
    elapsed : float
        Seconds since the call was sent to the worker.

    Examples
    --------
    >>> from explorer.isolation.worker import ProgressEvent
    >>> ProgressEvent("simplify", 0.5, "folding constants", 1.25).fraction
    0.5
    """

    step: str
    fraction: float | None
    message: str | None
    elapsed: float


class _Channel:
    """The child's end of the pipe, shared by :func:`report` and the serving loop."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.lock = threading.Lock()
        self.call_id = 0

    def send(self, message: tuple) -> None:
        with self.lock:
            self.conn.send(message)


_CHANNEL: _Channel | None = None


def report(progress: float | str | None = None, message: str | None = None) -> None:
    """Report progress from inside a step; the parent's ``progress`` callback receives it.

    Outside a worker (a step called directly) this does nothing, so steps may always call it.

    Parameters
    ----------
    progress : float or str, optional
        Share done (0 to 1), or a message when given a string.
    message : str, optional
        What the step is doing.

    Examples
    --------
    >>> from explorer.isolation import worker
    >>> worker.report(0.5, "half way")  # no-op outside a worker
    """
    if isinstance(progress, str) and message is None:
        progress, message = None, progress
    channel = _CHANNEL
    if channel is None:
        return
    fraction = None if progress is None else float(progress)
    with contextlib.suppress(OSError, ValueError):  # the parent is gone: nothing to report to
        channel.send(("progress", channel.call_id, fraction, message))


# --------------------------------------------------------------------------- child side


def _child_main(conn: Connection, log_path: str, memory_mb: int | None, parent_pid: int) -> None:
    """Entry point of the spawned worker: set up isolation, then serve calls until told to stop."""
    global _CHANNEL
    pgid = _enter_own_process_group()
    multiprocessing.current_process().daemon = False  # let steps start their own worker pools
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when a step is cancelled
    _redirect_stderr(log_path)
    _redirect_stdout()
    faulthandler.enable(all_threads=False)  # the crashing thread only: keeps the dump short
    _watch_parent(parent_pid)  # before the cap: a thread needs address space for its stack
    capped = _apply_memory_cap(memory_mb)
    size_tvm_thread_pool()  # before TVM's pool exists: one thread per physical core, as ONNX Runtime
    _CHANNEL = _Channel(conn)
    _CHANNEL.send(("ready", os.getpid(), pgid, capped))
    _serve(_CHANNEL)


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


# --------------------------------------------------------------------------- start-up: the main script

_GUARD = 'if __name__ == "__main__":'


def _starting_up_as_worker() -> bool:
    """Whether this process is a worker still starting up: spawn is importing the parent's main
    script in it (as ``__mp_main__``, before the worker's own code runs), so a worker started now
    comes from the script's top level."""
    me = multiprocessing.current_process()
    return bool(getattr(me, "_inheriting", False)) and me.name == _PROCESS_NAME


def _reimported_main() -> tuple[Any, str] | None:
    """The main module and its file when spawn imports that file again in a child (a script run as
    ``python script.py`` or ``python -m pkg.mod``, as :func:`multiprocessing.spawn.get_preparation_data`
    decides); None when it does not (a notebook, ``python -c``, ``python -m pkg``)."""
    from multiprocessing import process

    main = sys.modules.get("__main__")
    name = getattr(getattr(main, "__spec__", None), "name", None)
    path = getattr(main, "__file__", None)
    if main is None or not path or (name is not None and (name == "__main__" or name.endswith(".__main__"))):
        return None
    if not os.path.isabs(path) and process.ORIGINAL_DIR is not None:
        path = os.path.join(process.ORIGINAL_DIR, path)
    if os.path.splitext(os.path.basename(path))[0] == "ipython":
        return None
    return main, os.path.normpath(path)


def _unguarded_main_line() -> tuple[str, int] | None:
    """The main script and the line of its top level that runs now, when that line is not under
    an ``if __name__ == "__main__":`` guard and spawn would import the script again in a worker
    (which would run the script's top level a second time); None otherwise, or when it cannot tell.

    Read from the main thread's frames, so a worker started from another thread (``explorer.load``
    infers shapes from one) is judged by what the script's top level is doing.
    """
    found = _reimported_main()
    if found is None:
        return None
    main, path = found
    frame = sys._current_frames().get(threading.main_thread().ident)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "<module>" and frame.f_globals is vars(main):
            break
        frame = frame.f_back
    if frame is None or os.path.normpath(os.path.abspath(frame.f_code.co_filename)) != path:
        return None
    line = frame.f_lineno
    return None if _under_main_guard(path, line) else (path, line)


def _under_main_guard(path: str, line: int) -> bool:
    """Whether ``line`` of the script at ``path`` is in the branch of an ``if __name__ == "__main__":``
    (or the ``else`` of a ``!=`` one); True when the script cannot be read or parsed (cannot tell)."""
    import ast

    try:
        tree = ast.parse(Path(path).read_bytes(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return True
    for node in ast.walk(tree):
        if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
            continue
        test = node.test
        sides = (test.left, *test.comparators)
        names = [isinstance(n, ast.Name) and n.id == "__name__" for n in sides]
        mains = [isinstance(n, ast.Constant) and n.value == "__main__" for n in sides]
        if len(sides) != 2 or sorted(names) != [False, True] or sorted(mains) != [False, True]:
            continue
        branch = {ast.Eq: node.body, ast.NotEq: node.orelse}.get(type(test.ops[0]), [])
        if branch and branch[0].lineno <= line <= (branch[-1].end_lineno or branch[-1].lineno):
            return True
    return False


def _refuse_unguarded_main() -> None:
    """Before a worker starts. In a worker still starting up whose import of the parent's script
    started a worker: exit at once (the parent raises :class:`~explorer.core.errors.UnguardedMainError`),
    running no more of the script. In the parent: raise it when the script's top level runs unguarded."""
    if _starting_up_as_worker():
        os._exit(_MAIN_REIMPORTED_EXIT)
    where = _unguarded_main_line()
    if where is not None:
        path, line = where
        raise UnguardedMainError(
            f"{path}, line {line}, starts the explorer's worker process at import time: the worker is a "
            f"spawned process, which imports the script again and would run its top level a second "
            f"time. Put the script's calls under `{_GUARD}` (docs/isolation.md, Start-up)",
            path=path,
            line=line,
        )


def _reimported_main_error() -> UnguardedMainError:
    """What the parent raises when the worker exited with :data:`_MAIN_REIMPORTED_EXIT`."""
    found = _reimported_main()
    path = found[1] if found is not None else None
    return UnguardedMainError(
        f"the explorer's worker process imported {path or 'the main script'} again (spawn does, as "
        f"__mp_main__) and its top level started a worker once more: the script calls the explorer at "
        f"import time. Put the script's calls under `{_GUARD}` (docs/isolation.md, Start-up)",
        path=path,
    )


# --------------------------------------------------------------------------- parent side


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


# --------------------------------------------------------------------------- warm pool

_POOL: OrderedDict[int | None, Worker] = OrderedDict()
_POOL_LOCK = threading.Lock()
#: Every worker that started a process, so that none outlives the interpreter with its temp folder.
_LIVE: weakref.WeakSet[Worker] = weakref.WeakSet()


def _checkout(cap: int | None) -> Worker:
    """Take the warm worker for ``cap`` out of the pool, or make a new one."""
    with _POOL_LOCK:
        worker = _POOL.pop(cap, None)
    return worker if worker is not None else Worker(memory_mb=cap)


def _checkin(cap: int | None, worker: Worker) -> None:
    """Put a live worker back; close what no longer fits in the pool."""
    surplus = []
    with _POOL_LOCK:
        if not worker.alive or cap in _POOL:
            surplus.append(worker)
        else:
            _POOL[cap] = worker
        while len(_POOL) > max(0, defaults.max_warm):
            surplus.append(_POOL.popitem(last=False)[1])
    for extra in surplus:
        extra.close()


def shutdown() -> None:
    """Close every warm worker (also run at interpreter exit).

    Examples
    --------
    >>> from explorer.isolation import worker
    >>> worker.shutdown()
    """
    with _POOL_LOCK:
        workers = list(_POOL.values())
        _POOL.clear()
    for item in workers:
        item.close()


def cancel() -> int:
    """Stop every call in flight in every worker of this process (a notebook's stop button).

    Returns
    -------
    int
        How many workers were running a call.

    Examples
    --------
    >>> from explorer.isolation import worker
    >>> worker.cancel()
    0
    """
    busy = [w for w in list(_LIVE) if w.busy]
    for item in busy:
        item.cancel()
    return len(busy)


def _close_all_at_exit() -> None:
    shutdown()
    for item in list(_LIVE):
        item.close()


# Registered after multiprocessing's own exit hook, so it runs first (atexit is LIFO).
atexit.register(_close_all_at_exit)


# --------------------------------------------------------------------------- prestart

_PRESTART_LOCK = threading.Lock()
_PRESTARTED: dict[int | None, tuple[Worker, threading.Thread]] = {}


def _import_modules(names: Sequence[str]) -> list[str]:
    """Child side of :func:`prestart`: import ``names``; return those that imported."""
    done = []
    for name in names:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
            done.append(name)
    return done


def prestart(imports: Sequence[str] = (), *, memory_mb: int | None = None) -> threading.Thread | None:
    """Start the warm worker in a background thread and import ``imports`` in it.

    The worker is put in the warm pool at once, holding its lock until it has started and
    imported, so a call made meanwhile (``explorer.load``'s shape inference, say) waits for
    this worker instead of starting a second one, and finds its modules already imported.
    Calling it again while that worker is alive does nothing. A failed start is not an error
    here: the next call starts a fresh process as usual.

    Parameters
    ----------
    imports : sequence of str
        Modules to import in the worker, named by the caller: the worker knows no module above
        it (``widgets`` hands in what ``explorer.load`` runs there, the ONNX adapter's
        ``PRESTART_IMPORTS``). A module that does not import is skipped.
    memory_mb : int, optional
        The worker's cap, as in :func:`run`; None uses ``defaults.memory_mb``.

    Returns
    -------
    threading.Thread or None
        The thread doing it (join it to wait), or None when ``defaults.reuse`` is off (no
        warm worker is kept, so there is nothing to start).

    Examples
    --------
    >>> import os
    >>> from explorer.isolation import worker
    >>> worker.shutdown()  # no warm worker yet (with one, prestart leaves it be)
    >>> thread = worker.prestart()
    >>> worker.prestart() is thread  # idempotent while that worker is alive
    True
    >>> thread.join(); worker.run(os.getpid) == worker.run(os.getpid)
    True
    """
    if not defaults.reuse:
        return None
    cap = _resolve(memory_mb, defaults.memory_mb, "memory_mb")
    cap = None if cap is None else int(cap)
    with _PRESTART_LOCK:
        known = _PRESTARTED.get(cap)
        if known is not None and (known[1].is_alive() or known[0].alive):
            return known[1]
        worker = Worker(memory_mb=cap)
        placed = threading.Event()
        thread = threading.Thread(
            target=_prestart_worker,
            args=(worker, cap, tuple(imports), placed),
            name="explorer-worker-prestart",
            daemon=True,
        )
        _PRESTARTED[cap] = (worker, thread)
        thread.start()
        placed.wait()
    return thread


def _prestart_worker(
    worker: Worker, cap: int | None, imports: tuple[str, ...], placed: threading.Event
) -> None:
    """Body of :func:`prestart`'s thread: pool the worker (locked), start it, import."""
    with worker._lock:
        try:
            with _POOL_LOCK:
                pooled = cap not in _POOL
                if pooled:
                    _POOL[cap] = worker
        finally:
            placed.set()
        if not pooled:  # a warm worker for this cap exists already
            return
        with contextlib.suppress(Exception):  # a failed warm-up only means a cold start later
            worker._call(_import_modules, (imports,), {}, defaults.start_timeout, None, "worker prestart")


# --------------------------------------------------------------------------- public calls


def run(
    fn: Callable[..., Any],
    *args: Any,
    timeout: float | None = None,
    memory_mb: int | None = None,
    progress: Callable[[ProgressEvent], object] | None = None,
    step: str | None = None,
    gpu: bool = False,
    reuse: bool | None = None,
    **kwargs: Any,
) -> Any:
    """Run ``fn(*args, **kwargs)`` in a child process with a time limit and a memory cap.

    Parameters
    ----------
    fn : callable
        A picklable function: top-level in an importable module (e.g. :mod:`explorer.onnx_adapter.files`),
        or a notebook function, which cloudpickle ships by value.
    *args, **kwargs
        Its arguments (picklable; pass models as files, see :func:`run_on_model`). The names
        of this function's own keywords cannot reach ``fn``; use :func:`functools.partial`.
    timeout : float, optional
        Wall-clock limit in seconds; None uses ``defaults.timeout`` (600), 0 means no limit.
    memory_mb : int, optional
        Address-space cap in MiB; None uses ``defaults.memory_mb`` (75% of RAM), 0 means none.
    progress : callable, optional
        Receives a :class:`ProgressEvent` for each :func:`report` made by the step.
    step : str, optional
        Label of the step in errors and progress; by default fn's qualified name.
    gpu : bool, optional
        The step uses a GPU: no memory cap (drivers map huge address ranges).
    reuse : bool, optional
        Use the warm worker for this cap (None uses ``defaults.reuse``, True); False runs
        in a fresh process that is closed afterwards.

    Returns
    -------
    object
        What ``fn`` returned.

    Raises
    ------
    WorkerCrashed
        The child died from a signal or exited.
    WorkerTimeout
        The limit passed; the child's process group was killed.
    WorkerOutOfMemory
        The step hit the memory cap.
    WorkerFailed
        The step raised an exception that cannot be rebuilt here.
    Exception
        The step's own exception, rebuilt, with the child's traceback as a note.
    KeyboardInterrupt
        Interrupted while waiting; the child's process group was killed first.

    Examples
    --------
    >>> from explorer.isolation import worker
    >>> worker.run(abs, -3)
    3
    >>> worker.run(int, "12", base=8, timeout=30, memory_mb=2048)
    10
    >>> try:
    ...     worker.run(int, "not a number")
    ... except ValueError as exc:
    ...     print(exc)
    invalid literal for int() with base 10: 'not a number'
    """
    return _run(fn, args, kwargs, timeout, memory_mb, progress, step, gpu, reuse)


def _run(
    fn: Callable[..., Any],
    args: tuple,
    kwargs: dict,
    timeout: float | None,
    memory_mb: int | None,
    progress: Callable[[ProgressEvent], object] | None,
    step: str | None,
    gpu: bool,
    reuse: bool | None,
) -> Any:
    limit = _resolve(timeout, defaults.timeout, "timeout")
    cap = None if gpu else _resolve(memory_mb, defaults.memory_mb, "memory_mb")
    cap = None if cap is None else int(cap)
    warm = defaults.reuse if reuse is None else reuse
    worker = _checkout(cap) if warm else Worker(memory_mb=cap)
    try:
        return worker._call(fn, args, kwargs, limit, progress, step or _step_name(fn))
    finally:
        if warm:
            _checkin(cap, worker)
        else:
            worker.close()


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

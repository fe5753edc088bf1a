"""Warm workers, one per memory cap, reused between calls (:func:`run`); workers started ahead of
need (:func:`prestart`); stopping the busy ones (:func:`cancel`) and all (:func:`shutdown`).

Examples
--------
>>> run(abs, -3)
3
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from explorer.isolation.worker.client import _LIVE, Worker, _step_name
from explorer.isolation.worker.progress import ProgressEvent
from explorer.isolation.worker.settings import _resolve, defaults

__all__ = ["run", "shutdown", "cancel", "prestart"]

_POOL: OrderedDict[int | None, Worker] = OrderedDict()
_POOL_LOCK = threading.Lock()
#: Every worker that started a process, so that none outlives the interpreter with its temp folder.


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

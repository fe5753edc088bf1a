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

The package's parts, one job each: :mod:`~explorer.isolation.worker.settings` (the defaults),
:mod:`~explorer.isolation.worker.progress` (reports from a step), :mod:`~explorer.isolation.worker.child`
(the child process), :mod:`~explorer.isolation.worker.main_guard` (the unguarded main script),
:mod:`~explorer.isolation.worker.client` (one worker, seen from the parent),
:mod:`~explorer.isolation.worker.pool` (warm workers, :func:`run`) and
:mod:`~explorer.isolation.worker.staging` (models as files, :func:`run_on_model`).

Examples
--------
>>> from explorer.isolation import worker
>>> worker.run(abs, -3)
3
>>> worker.run(divmod, 7, 2, timeout=30)
(3, 1)
"""

from __future__ import annotations

from explorer.isolation.worker.client import Worker
from explorer.isolation.worker.pool import cancel, prestart, run, shutdown
from explorer.isolation.worker.progress import ProgressEvent, report
from explorer.isolation.worker.settings import WorkerDefaults, configure, default_memory_mb, defaults
from explorer.isolation.worker.staging import run_on_model

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

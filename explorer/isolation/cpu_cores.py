"""This machine's physical cores, and TVM's CPU thread pool sized to them.

ONNX Runtime and MetaSchedule (``num-cores`` in the ``llvm`` target) use one thread per
physical core. TVM's runtime does not: without ``TVM_NUM_THREADS`` its thread pool takes
half of ``std::thread::hardware_concurrency()`` on x86 ("ignore hyper-threading",
``src/runtime/threading_backend.cc``). On a machine without SMT, such as a 2-vCPU cloud VM,
that is half the cores: every TVM kernel ran on one core while ONNX Runtime used two.
:func:`size_tvm_thread_pool` sets the variable (unless the user did) before the pool exists;
the pool is sized once, at the first parallel kernel of a thread, and MetaSchedule's runner
processes inherit the variable, so tuning measures what the model will run with.

Examples
--------
>>> physical_cores() >= 1
True
"""

from __future__ import annotations

import os

__all__ = ["TVM_THREADS_ENV", "physical_cores", "size_tvm_thread_pool", "tvm_threads"]

TVM_THREADS_ENV = "TVM_NUM_THREADS"
"""The variable TVM's runtime reads for its thread count (then ``OMP_NUM_THREADS``)."""


def physical_cores() -> int:
    """The physical cores this process may run on (logical CPUs when that is unknown).

    Returns
    -------
    int
        ``psutil.cpu_count(logical=False)``, capped by the process's CPU affinity.

    Examples
    --------
    >>> 1 <= physical_cores() <= (os.cpu_count() or 1)
    True
    """
    logical = os.cpu_count() or 1
    try:
        import psutil

        cores = psutil.cpu_count(logical=False) or logical
    except ImportError:  # psutil is a dependency; a bare environment falls back to logical CPUs
        cores = logical
    if hasattr(os, "sched_getaffinity"):
        cores = min(cores, len(os.sched_getaffinity(0)) or cores)
    return max(int(cores), 1)


def size_tvm_thread_pool(environ: dict[str, str] | None = None) -> int:
    """Make TVM's CPU thread pool one thread per physical core, unless the user chose a count.

    Sets ``TVM_NUM_THREADS`` (when neither it nor ``OMP_NUM_THREADS`` is set) in ``environ``
    (default: this process's, which TVM's runtime reads and child processes inherit). Call it
    before TVM runs its first parallel kernel in this process.

    Parameters
    ----------
    environ : dict, optional
        The environment to change (default ``os.environ``).

    Returns
    -------
    int
        The thread count TVM's runtime will use.

    Examples
    --------
    >>> env = {}
    >>> size_tvm_thread_pool(env) == physical_cores() == int(env["TVM_NUM_THREADS"])
    True
    >>> size_tvm_thread_pool({"TVM_NUM_THREADS": "1"})
    1
    """
    environ = os.environ if environ is None else environ
    for name in (TVM_THREADS_ENV, "OMP_NUM_THREADS"):
        value = environ.get(name, "").strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    environ[TVM_THREADS_ENV] = str(physical_cores())
    return int(environ[TVM_THREADS_ENV])


def tvm_threads() -> int:
    """The threads TVM's runtime uses in this thread of this process (creates its pool).

    Returns
    -------
    int
        ``runtime.NumThreads()``: the pool's size, fixed when it was created.

    Examples
    --------
    >>> tvm_threads() >= 1
    True
    """
    import tvm

    return int(tvm.get_global_func("runtime.NumThreads")())

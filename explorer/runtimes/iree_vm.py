"""(worker) IREE's runtime in the worker: its thread pool sized once, a VM module loaded, run, read back.

Everything here runs in the worker (:mod:`explorer.isolation.worker`), where a crash of IREE's
runtime never reaches the notebook's kernel. IREE's ``local-task`` driver runs dispatches on a
pool of worker threads created with the driver, which ``iree.runtime`` creates once per process
and caches: its size comes from the process-wide flag ``--task_topology_max_group_count``, read
then and never again. :func:`iree_driver` sets it before the first ``local-task`` device exists,
to the count asked for (the project's default: one thread per physical core, as ONNX Runtime,
TVM and PyTorch eager run here). One thread is IREE's ``local-sync`` driver (dispatches run
inline on the calling thread), so a single-threaded run never fixes the pool's size; a second
multi-threaded count in the same worker is refused with what to do instead.

Examples
--------
>>> iree_outputs(None), [a.shape for a in iree_outputs((np.zeros(2), np.ones((1, 3))))]
([], [(2,), (1, 3)])
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "DRIVER",
    "SINGLE_THREAD_DRIVER",
    "iree_driver",
    "pool_threads",
    "load_iree_function",
    "bind_iree_inputs",
    "iree_outputs",
    "runtime_version",
]

DRIVER = "local-task"
"""IREE's multi-threaded CPU driver (a task system over a pool of worker threads)."""

SINGLE_THREAD_DRIVER = "local-sync"
"""IREE's CPU driver that runs every dispatch inline on the calling thread: one thread."""

_POOL_THREADS: list[int] = []  # the local-task pool's size, once this process has set it


def pool_threads() -> int | None:
    """The threads of this process's ``local-task`` pool, once :func:`iree_driver` sized it.

    Examples
    --------
    >>> pool_threads() is None or pool_threads() >= 1
    True
    """
    return _POOL_THREADS[0] if _POOL_THREADS else None


def iree_driver(threads: int) -> str:
    """The driver that runs on ``threads`` threads: ``local-sync`` for one, else ``local-task``,
    whose pool is sized to ``threads`` here when this process has not created it yet.

    Raises
    ------
    UsageError
        The pool was sized to another count earlier in this process (IREE reads the flag once).

    Examples
    --------
    >>> iree_driver(1)
    'local-sync'
    """
    threads = max(1, int(threads))
    if threads == 1:
        return SINGLE_THREAD_DRIVER
    if not _POOL_THREADS:
        import iree.runtime as rt

        rt.flags.parse_flags(f"--task_topology_max_group_count={threads}")
        _POOL_THREADS.append(threads)
    if _POOL_THREADS[0] != threads:
        from explorer.core.errors import UsageError

        raise UsageError(
            f"IREE's local-task pool in this worker already runs {_POOL_THREADS[0]} threads, and IREE "
            f"sizes it once per process: {threads} threads need a new worker "
            "(explorer.isolation.worker.shutdown(), then prepare again), or 1 thread (local-sync)"
        )
    return DRIVER


def load_iree_function(vmfb: str, function: str, driver: str) -> tuple[Any, Any]:
    """Load the VM module at ``vmfb`` (memory-mapped) on ``driver``'s device; its entry point
    ``function`` and the device (to place inputs on).

    A module built with its weights as parameters gets its archive
    (:func:`~explorer.lower.iree.iree_parameters.parameters_path`) memory-mapped beside it.

    Examples
    --------
    >>> import os, tempfile
    >>> from explorer import zoo
    >>> from explorer.onnx_adapter.files import save_model
    >>> from explorer.lower.iree.iree_compile import build_vmfb
    >>> folder = tempfile.mkdtemp()
    >>> save_model(zoo.build("mlp"), os.path.join(folder, "m.onnx"))
    >>> built = build_vmfb(os.path.join(folder, "m.onnx"), None, os.path.join(folder, "m.vmfb"))
    >>> call, device = load_iree_function(built["vmfb"], built["function"], "local-sync")
    >>> iree_outputs(call(*bind_iree_inputs(device, {"input": np.ones((1, 1, 28, 28), np.float32)})))[0].shape
    (1, 10)
    """
    import iree.runtime as rt

    from explorer.lower.iree.iree_parameters import PARAMETER_SCOPES, parameters_path

    archive = parameters_path(vmfb)
    if not os.path.exists(archive):
        module = rt.load_vm_flatbuffer_file(vmfb, driver=driver)
        return module[function], rt.get_device(driver)
    config = rt.Config(device=rt.get_device(driver))
    index = rt.ParameterIndex()
    index.load(archive)  # mapped: the packed weights are used where they lie
    providers = [index.create_provider(scope=scope) for scope in PARAMETER_SCOPES]  # the module asks one
    parameters = rt.create_io_parameters_module(config.vm_instance, *providers)
    main = rt.VmModule.mmap(config.vm_instance, vmfb)
    context = rt.SystemContext(vm_modules=[parameters, main], config=config)
    return context.modules[main.name][function], config.device


def bind_iree_inputs(device: Any, feeds: Mapping[str, np.ndarray], names: Sequence[str] = ()) -> list[Any]:
    """``feeds`` as IREE device arrays on ``device``, in the order of ``names`` (default: the
    feeds' own), made before any clock starts (as TVM's tensors are).

    Examples
    --------
    >>> import iree.runtime as rt
    >>> bound = bind_iree_inputs(rt.get_device("local-sync"), {"x": np.arange(3.0)})
    >>> bound[0].to_host().tolist()
    [0.0, 1.0, 2.0]
    """
    import iree.runtime as rt

    order = list(names) or list(feeds)
    return [rt.asdevicearray(device, np.ascontiguousarray(feeds[name])) for name in order]


def iree_outputs(result: Any) -> list[np.ndarray]:
    """A call's result (one device array, a tuple of them, or None) as numpy arrays on the host.

    Examples
    --------
    >>> iree_outputs(np.zeros((1, 2)))[0].shape
    (1, 2)
    """
    if result is None:
        return []
    items = result if isinstance(result, (tuple, list)) else (result,)
    return [np.array(item.to_host() if hasattr(item, "to_host") else item) for item in items]


def runtime_version() -> str:
    """The installed IREE runtime's version (``3.13.0rc...``).

    Examples
    --------
    >>> runtime_version().startswith("3.")
    True
    """
    from iree.runtime import version

    return str(version.VERSION)

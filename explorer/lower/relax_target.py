"""The TVM target the worker compiles for: this machine's CPU, with the threads its kernels will run on.

Examples
--------
>>> cpu_target().kind.name
'llvm'
"""

from __future__ import annotations

from typing import Any

from explorer.isolation.cpu_cores import size_tvm_thread_pool

__all__ = ["cpu_target"]


def cpu_target(kind: str = "llvm") -> Any:
    """A ``tvm.target.Target`` for this CPU (``mcpu`` and ``num-cores`` set); it sizes TVM's thread pool.

    MetaSchedule needs ``num-cores``: the threads the kernels will run on
    (:func:`explorer.isolation.cpu_cores.size_tvm_thread_pool`). Run it where TVM is (the worker).

    Raises
    ------
    ValueError
        Any kind but ``"llvm"``: only the CPU is built for here.

    Examples
    --------
    >>> target = cpu_target()
    >>> int(target.attrs["num-cores"]) >= 1
    True
    >>> cpu_target("cuda")
    Traceback (most recent call last):
    ...
    ValueError: only the llvm (CPU) target is built here, not 'cuda'
    """
    import tvm

    if kind != "llvm":
        raise ValueError(f"only the llvm (CPU) target is built here, not {kind!r}")
    cores = size_tvm_thread_pool()  # MetaSchedule needs num-cores: the threads the kernels will run on
    return tvm.target.Target(
        {"kind": "llvm", "mcpu": tvm.target.codegen.llvm_get_system_cpu(), "num-cores": int(cores)}
    )

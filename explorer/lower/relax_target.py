"""The TVM target the worker compiles for: this machine's CPU, with the threads its kernels will run on,
and this CPU's tensor intrinsics registered (not every platform's).

Examples
--------
>>> cpu_target().kind.name
'llvm'
"""

from __future__ import annotations

from typing import Any

from explorer.isolation.cpu_cores import size_tvm_thread_pool

__all__ = ["cpu_target", "register_cpu_intrinsics"]


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


def register_cpu_intrinsics() -> None:
    """Register only this CPU's tensor intrinsics (x86 or Arm), not every platform's.

    ``import tvm.s_tir.tensor_intrin`` registers CUDA, ROCm, Hexagon, Metal, RISC-V, Arm and
    x86 intrinsics: 35-55 s on this machine (CUDA's alone 31 s). MetaSchedule imports it in
    every tuning process (``TuneContext``) and in every builder process, and the builder's
    pool restarts for every batch: a trial cost 20 s instead of about 1. Installing the
    package as a bare namespace first and importing this CPU's module alone takes 0.3 s;
    the later ``import tvm.s_tir.tensor_intrin`` then finds it.

    Examples
    --------
    >>> register_cpu_intrinsics()
    >>> import sys; "tvm.s_tir.tensor_intrin" in sys.modules
    True
    """
    import importlib
    import importlib.util
    import platform
    import sys
    import types

    name = "tvm.s_tir.tensor_intrin"
    if name not in sys.modules:
        import tvm.s_tir  # noqa: F401  (the parent package, loaded as usual)

        spec = importlib.util.find_spec(name)
        package = types.ModuleType(name)
        package.__path__ = list(spec.submodule_search_locations or []) if spec else []
        package.__package__ = name
        sys.modules[name] = package
    machine = platform.machine().lower()
    importlib.import_module(f"{name}.{'arm_cpu' if machine in ('aarch64', 'arm64') else 'x86'}")

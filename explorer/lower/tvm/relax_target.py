"""The TVM target the worker compiles for: this machine's CPU or one named (``llvm -mcpu=haswell``,
a server's own CPU over RPC), with the threads its kernels will run on, and this CPU's tensor
intrinsics registered (not every platform's). This CPU's feature flags (:func:`cpu_flags`) say
whether code built for a target runs here (:func:`runs_here`) and which shipped tuning records
fit it (:func:`explorer.lower.tvm.tvm_records.records_key`).

TVM 0.27 takes targets as JSON dicts only (``{"kind": "llvm", "mcpu": "haswell"}``); the
command-line form users know (``llvm -mcpu=haswell -num-cores=2``) is read here
(:func:`parse_target`) and written back (:func:`target_text`), so a target is one short
string in options, folder names and labels.

Examples
--------
>>> cpu_target().kind.name
'llvm'
>>> target_text(parse_target('llvm -mcpu=haswell -num-cores=2'))
'llvm -mcpu=haswell -num-cores=2'
"""

from __future__ import annotations

import contextlib
import json
import shlex
from pathlib import Path
from typing import Any

from explorer.core.errors import UsageError
from explorer.isolation.cpu_cores import size_tvm_thread_pool

__all__ = [
    "cpu_target",
    "check_cpu",
    "parse_target",
    "target_text",
    "remote_target",
    "float32_lanes",
    "runs_here",
    "foreign_architecture",
    "register_cpu_intrinsics",
    "cpu_flags",
    "TARGET_FLAGS",
]

TARGET_FLAGS = ("mtriple", "mcpu", "mattr", "num-cores")
"""The llvm target's attributes a target string may set, in the order :func:`target_text` writes them."""


def parse_target(text: str) -> dict[str, Any]:
    """A target string as TVM's JSON form: ``llvm``, ``llvm -mcpu=haswell -num-cores=2``,
    ``llvm -mtriple=aarch64-linux-gnu -mattr=+neon``, or a JSON dict.

    Raises
    ------
    UsageError
        A kind other than ``llvm``, an attribute not in :data:`TARGET_FLAGS`, a malformed flag.

    Examples
    --------
    >>> parse_target("llvm -mcpu=haswell -num-cores=2")
    {'kind': 'llvm', 'mcpu': 'haswell', 'num-cores': 2}
    >>> parse_target("llvm -mattr=+avx2,+fma")["mattr"]
    ['+avx2', '+fma']
    >>> parse_target("cuda")
    Traceback (most recent call last):
    ...
    explorer.core.errors.UsageError: only llvm (CPU) targets are built here, not 'cuda'
    """
    text = text.strip()
    if text.startswith("{"):
        try:
            spec = dict(json.loads(text))
        except (ValueError, TypeError) as err:
            raise UsageError(f"the target {text!r} is not a JSON object: {err}") from None
    else:
        words = shlex.split(text)
        spec = {"kind": words[0] if words else ""}
        for word in words[1:]:
            name, sep, value = word.lstrip("-").partition("=")
            if not word.startswith("-") or not sep or not value:
                raise UsageError(
                    f"a target flag is -NAME=VALUE (e.g. -mcpu=haswell), not {word!r} in {text!r}"
                )
            if name not in TARGET_FLAGS:
                raise UsageError(
                    f"unknown target flag -{name} in {text!r}: use {', '.join('-' + f for f in TARGET_FLAGS)}"
                )
            spec[name] = value.split(",") if name == "mattr" else value
    if spec.get("kind") != "llvm":
        raise UsageError(f"only llvm (CPU) targets are built here, not {spec.get('kind') or text!r}")
    if "num-cores" in spec:
        cores = str(spec["num-cores"])
        if not cores.isdigit() or int(cores) < 1:
            raise UsageError(f"-num-cores is a positive number of threads, not {cores!r} in {text!r}")
        spec["num-cores"] = int(cores)
    return spec


def target_text(spec: dict[str, Any]) -> str:
    """The short form of a target (:func:`parse_target`'s inverse, attributes in :data:`TARGET_FLAGS` order).

    Examples
    --------
    >>> target_text({"kind": "llvm", "num-cores": 4, "mtriple": "aarch64-linux-gnu"})
    'llvm -mtriple=aarch64-linux-gnu -num-cores=4'
    """
    flags = []
    for name in TARGET_FLAGS:
        if name in spec:
            value = spec[name]
            flags.append(f"-{name}={','.join(value) if isinstance(value, list | tuple) else value}")
    return " ".join([str(spec.get("kind", "llvm")), *flags])


def cpu_target(target: str = "llvm") -> Any:
    """A ``tvm.target.Target`` for ``target`` (:func:`parse_target`); a target that names no CPU
    and no triple is this CPU (``mcpu`` set). Without ``-num-cores``, the threads the kernels will
    run on here (MetaSchedule needs it: :func:`explorer.isolation.cpu_cores.size_tvm_thread_pool`).
    It sizes TVM's thread pool; run it where TVM is (the worker).

    Raises
    ------
    UsageError
        Not an llvm target, or a malformed one (:func:`parse_target`); a ``-mcpu`` LLVM does not
        know for the target's triple, listing those it knows (LLVM would build for a generic CPU
        instead, under the name given).

    Examples
    --------
    >>> target = cpu_target()
    >>> int(target.attrs["num-cores"]) >= 1
    True
    >>> str(cpu_target("llvm -mcpu=haswell -num-cores=2").attrs["mcpu"])
    'haswell'
    >>> cpu_target("cuda")
    Traceback (most recent call last):
    ...
    explorer.core.errors.UsageError: only llvm (CPU) targets are built here, not 'cuda'
    >>> cpu_target("llvm -mcpu=notacpu")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    explorer.core.errors.UsageError: -mcpu=notacpu in 'llvm -mcpu=notacpu' is no CPU LLVM knows for ...
    """
    import tvm

    spec = parse_target(target)
    check_cpu(target)
    cores = size_tvm_thread_pool()  # MetaSchedule needs num-cores: the threads the kernels will run on
    if "mcpu" not in spec and "mtriple" not in spec:
        spec["mcpu"] = tvm.target.codegen.llvm_get_system_cpu()
    spec.setdefault("num-cores", int(cores))
    return tvm.target.Target(spec)


def check_cpu(target: str) -> None:
    """Refuse a target whose ``-mcpu`` LLVM does not know for the target's triple (default: this
    machine's), naming those it knows; a target that names no CPU passes. It imports TVM (seconds):
    run it in the worker, as :meth:`explorer.runtimes.tvm_runtime.TvmRuntime.check_target` does before
    any runtime runs.

    Raises
    ------
    UsageError
        A malformed target (:func:`parse_target`), or a CPU LLVM does not know (LLVM would build
        for a generic CPU instead, under the name given).

    Examples
    --------
    >>> check_cpu("llvm -mcpu=haswell -num-cores=2")
    >>> check_cpu("llvm -mcpu=notacpu")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    explorer.core.errors.UsageError: -mcpu=notacpu in 'llvm -mcpu=notacpu' is no CPU LLVM knows for ...
    """
    spec = parse_target(target)
    if "mcpu" in spec:
        _check_cpu(str(spec["mcpu"]), str(spec.get("mtriple") or ""), target)


def _check_cpu(cpu: str, triple: str, text: str) -> None:
    """Refuse a CPU LLVM does not know for ``triple`` (default: this machine's), naming those it knows;
    TVM would only log it and build for a generic CPU under the name given."""
    import tvm
    from tvm.target import codegen

    triple = triple or str(codegen.llvm_get_system_triple())
    if codegen.llvm_is_valid_cpu(cpu, triple):
        return
    listed = codegen.llvm_get_cpu_archlist(tvm.target.Target({"kind": "llvm", "mtriple": triple}))
    known = ", ".join(sorted(str(c) for c in listed)) or "none (is the triple right?)"
    raise UsageError(f"-mcpu={cpu} in {text!r} is no CPU LLVM knows for {triple}; it knows: {known}")


def float32_lanes(target: Any) -> int:
    """float32 lanes of the target's widest vector unit: 16 (AVX-512), 8 (AVX2), else 4 (SSE, NEON).

    Read from the CPU features LLVM knows for the target's CPU (``llvm_get_vector_width`` says
    512 for ``haswell`` on an AVX-512 host).

    Examples
    --------
    >>> float32_lanes(cpu_target("llvm -mcpu=haswell -num-cores=2")), float32_lanes(
    ...     cpu_target("llvm -mcpu=skylake-avx512 -num-cores=2"))
    (8, 16)
    """
    from tvm.target import codegen

    with target:
        for feature, lanes in (("avx512f", 16), ("avx2", 8)):
            if codegen.llvm_cpu_has_features(feature, target):
                return lanes
    return 4


def _arch(name: str) -> str:
    """An architecture's one name (``arm64`` is ``aarch64``, ``amd64`` is ``x86_64``)."""
    name = name.lower()
    return {"arm64": "aarch64", "amd64": "x86_64"}.get(name, name)


def foreign_architecture(triple: str) -> str | None:
    """The architecture of an LLVM triple when it is not this machine's; None when it is (or no
    triple is given: this machine). Needs no TVM.

    Examples
    --------
    >>> import platform
    >>> foreign_architecture(""), foreign_architecture(f"{platform.machine()}-linux-gnu")
    (None, None)
    """
    import platform

    arch = _arch(triple.split("-", 1)[0]) if triple else None
    return arch if arch is not None and arch != _arch(platform.machine()) else None


def runs_here(target: Any) -> str | None:
    """None when code built for ``target`` runs on this CPU; else why not, in words (another
    architecture, or a vector unit this CPU lacks: running it would stop the process on an
    illegal instruction).

    Examples
    --------
    >>> runs_here(cpu_target()) is None
    True
    >>> runs_here(cpu_target("llvm -mtriple=aarch64-linux-gnu -num-cores=4"))
    'it is built for aarch64, and this machine is x86_64'
    """
    import platform

    from tvm.target import codegen

    here = _arch(platform.machine())
    other = foreign_architecture(str(target.attrs.get("mtriple", "") or ""))
    if other is not None:
        return f"it is built for {other}, and this machine is {here}"
    if here == "x86_64":
        have = cpu_flags()
        with target:
            lacking = [
                f for f in ("avx512f", "avx2") if codegen.llvm_cpu_has_features(f, target) and f not in have
            ]
        if lacking and have:
            return f"it uses {', '.join(lacking)}, which this CPU lacks"
    return None


def cpu_flags() -> set[str]:
    """This CPU's feature flags (``/proc/cpuinfo``; empty where there is none).

    Examples
    --------
    >>> isinstance(cpu_flags(), set)
    True
    """
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            return set(line.split(":", 1)[1].split())
    return set()


def remote_target(session: Any) -> str | None:
    """The target of an RPC server's own CPU (triple, CPU, threads), asked over the session; None
    when the server has TVM's runtime only (a phone), which cannot say its CPU.

    Examples
    --------
    >>> from tvm import rpc
    >>> remote_target(rpc.LocalSession()).startswith("llvm -mtriple=")
    True
    """
    spec: dict[str, Any] = {"kind": "llvm"}
    for name, function in (
        ("mtriple", "target.llvm_get_system_triple"),
        ("mcpu", "target.llvm_get_system_cpu"),
    ):
        try:
            spec[name] = str(session.get_function(function)())
        except Exception:  # a runtime-only server has no LLVM: it cannot say
            return None
    with contextlib.suppress(Exception):  # an older runtime: the build sizes it as for this machine
        spec["num-cores"] = int(session.get_function("runtime.NumThreads")())
    return target_text(spec)


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

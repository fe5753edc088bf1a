"""The installed ONNX Runtime's kernel registry: its ops, and its kernels per execution provider.

The registry (``onnxruntime.capi._pybind_state.get_all_opkernel_def()``) lists every kernel
of the installed build: provider, domain, op, the schema versions it covers and its type
constraints. It is read once, without starting a session. An op with no ONNX schema is either
ONNX Runtime's own (``com.microsoft`` contrib ops, which a summary reports as runtime ops) or
unknown to every runtime (:func:`ort_ops`); a provider's kernels (:func:`installed_kernels`)
word a session's refusal (:mod:`explorer.runtimes.sessions`) and are the ONNX Runtime targets'
support check (:mod:`explorer.targets.ort_kernels`, which adds the published tables of providers
the installed build lacks).

Examples
--------
>>> ("com.microsoft", "FusedMatMul") in ort_ops()
True
>>> kernels = installed_kernels("CPUExecutionProvider")
>>> ("ai.onnx", "Conv") in kernels and ("ai.onnx", "NoSuchOp") not in kernels
True
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "kernel_defs",
    "ort_ops",
    "OrtKernel",
    "KernelTable",
    "OPEN_ENDED",
    "kernel_table",
    "installed_kernels",
    "installed_providers",
]

OPEN_ENDED = 2**31 - 1
"""ONNX Runtime's last schema version of a kernel that covers "this and every later version"."""


@functools.cache
def kernel_defs() -> tuple[Any, ...]:
    """Every kernel definition of the installed ONNX Runtime (empty when it is not installed).

    Examples
    --------
    >>> any(k.op_name == "Conv" for k in kernel_defs())
    True
    """
    try:
        from onnxruntime.capi import _pybind_state
    except ImportError:
        return ()
    return tuple(_pybind_state.get_all_opkernel_def())


@functools.cache
def ort_ops() -> frozenset[tuple[str, str]]:
    """(domain, op) pairs the installed ONNX Runtime has a kernel for, on any provider.

    Examples
    --------
    >>> ("ai.onnx", "Conv") in ort_ops()
    True
    """
    return frozenset((k.domain or "ai.onnx", k.op_name) for k in kernel_defs())


@dataclass(frozen=True)
class OrtKernel:
    """One kernel: the schema versions it covers and the element types it takes.

    Attributes
    ----------
    domain, op : str
        ``"ai.onnx"`` (not ``""``) or another domain, and the op type.
    since, until : int
        The schema versions covered, inclusive (``until`` is :data:`OPEN_ENDED` when open-ended).
    type_constraints : mapping
        Constraint name (``"T"``) -> the type strings it takes (``"tensor(float)"``).

    Examples
    --------
    >>> OrtKernel("ai.onnx", "Relu", 14, OPEN_ENDED, {"T": ("tensor(float)",)}).versions
    '14+'
    """

    domain: str
    op: str
    since: int
    until: int
    type_constraints: Mapping[str, tuple[str, ...]]

    @property
    def versions(self) -> str:
        """The version range as ONNX Runtime's docs write it (``"6-12"``, ``"14+"``)."""
        if self.until >= OPEN_ENDED:
            return f"{self.since}+"
        return str(self.since) if self.since == self.until else f"{self.since}-{self.until}"


KernelTable = Mapping[tuple[str, str], tuple[OrtKernel, ...]]
"""(domain, op) -> the kernels of one provider."""


def kernel_table(kernels: Iterable[OrtKernel]) -> dict[tuple[str, str], tuple[OrtKernel, ...]]:
    """One provider's kernels as a :data:`KernelTable`: by (domain, op), oldest version first.

    Examples
    --------
    >>> new, old = OrtKernel("ai.onnx", "Relu", 14, OPEN_ENDED, {}), OrtKernel("ai.onnx", "Relu", 6, 12, {})
    >>> [k.versions for k in kernel_table([new, old])[("ai.onnx", "Relu")]]
    ['6-12', '14+']
    """
    table: dict[tuple[str, str], list[OrtKernel]] = {}
    for k in kernels:
        table.setdefault((k.domain, k.op), []).append(k)
    return {key: tuple(sorted(ks, key=lambda k: k.since)) for key, ks in table.items()}


@functools.cache
def installed_kernels(provider: str) -> KernelTable:
    """The installed ONNX Runtime's kernels of ``provider`` (empty when it has none).

    Examples
    --------
    >>> len(installed_kernels("NoSuchExecutionProvider"))
    0
    """
    return kernel_table(
        OrtKernel(
            k.domain or "ai.onnx",
            k.op_name,
            int(k.version_range[0]),
            int(k.version_range[1]),
            {name: tuple(types) for name, types in k.type_constraints.items()},
        )
        for k in kernel_defs()
        if k.provider == provider
    )


def installed_providers() -> tuple[str, ...]:
    """Execution providers with kernels in the installed build's registry.

    Examples
    --------
    >>> "CPUExecutionProvider" in installed_providers()
    True
    """
    return tuple(sorted({k.provider for k in kernel_defs()}))

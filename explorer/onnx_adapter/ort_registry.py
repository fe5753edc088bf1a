"""The installed ONNX Runtime's kernel registry: which ops it defines beyond the onnx package's schemas.

An op with no ONNX schema is either ONNX Runtime's own (``com.microsoft`` contrib ops,
which a summary reports as runtime ops) or unknown to every runtime. The registry is
read once, without starting a session; :mod:`explorer.targets.ort_kernels` builds the
per-provider kernel tables from the same read.

Examples
--------
>>> ("com.microsoft", "FusedMatMul") in ort_ops()
True
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["kernel_defs", "ort_ops"]


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

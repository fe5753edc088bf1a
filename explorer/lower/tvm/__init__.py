"""TVM, one of the two compilers below the ONNX graph: Relax import, its passes, TIR, tuning and the build.

Every module here runs its TVM work in the worker (:mod:`explorer.isolation.worker`); what
the parent reads (TIR text, tuning logs, schedule records) needs no TVM. The compiler's one
interface is :data:`explorer.lower.compilers.COMPILERS` ``["tvm"]``.

Examples
--------
>>> from explorer.lower.tvm.tir import loop_stats
>>> loop_stats("for i in T.parallel(4):\\n    pass").parallel
1
"""

from __future__ import annotations

__all__: list[str] = []

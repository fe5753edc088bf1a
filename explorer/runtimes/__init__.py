"""Runtimes side by side: ONNX Runtime, TVM, IREE behind one interface, prepared in the worker, timed there.

:class:`~explorer.runtimes.base.Runtime` is the interface (``available``, ``prepare`` -> a
session kept warm in the worker); :class:`OrtRuntime` (per execution provider),
:class:`TvmRuntime` (per target, untuned or tuned with MetaSchedule under a budget),
:class:`IreeRuntime` (IREE's MLIR compiler for this CPU) and :class:`TorchEagerRuntime`
implement it; :func:`bench` measures them on the same inputs and compares their outputs;
:func:`compare_intermediates` finds the first node where they disagree;
:func:`explorer.runtimes.profile.profile` puts each kernel's time on the graph and
:func:`explorer.runtimes.roofline.roofline` against the machine's peaks.

Examples
--------
>>> from explorer.runtimes import random_feeds, run_onnxruntime
>>> from explorer import zoo
>>> model = zoo.build("mlp")
>>> outputs = run_onnxruntime(model, random_feeds(model))
>>> outputs[0].shape
(1, 10)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from explorer.core.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from explorer.core.compare import Agreement, agreement, max_abs_diff
    from explorer.onnx_adapter.inputs import random_feeds
    from explorer.onnx_adapter.ort_run import run_onnxruntime
    from explorer.runtimes.base import PreparedSession, Runtime
    from explorer.runtimes.bench import BenchReport, BenchResult, bench, get_runtime
    from explorer.runtimes.intermediates import IntermediateComparison, compare_intermediates
    from explorer.runtimes.iree_runtime import IreeRuntime
    from explorer.runtimes.machine import MachinePeak, measure_peak
    from explorer.runtimes.ort_runtime import OrtRuntime
    from explorer.runtimes.profile import Profile
    from explorer.runtimes.roofline import Roofline
    from explorer.runtimes.torch_runtime import TorchEagerRuntime
    from explorer.runtimes.tvm_runtime import TvmRuntime

__all__ = [
    "random_feeds",
    "max_abs_diff",
    "run_onnxruntime",
    "Runtime",
    "PreparedSession",
    "OrtRuntime",
    "TvmRuntime",
    "TorchEagerRuntime",
    "IreeRuntime",
    "bench",
    "get_runtime",
    "BenchResult",
    "BenchReport",
    "Agreement",
    "agreement",
    "compare_intermediates",
    "IntermediateComparison",
    "Profile",
    "Roofline",
    "measure_peak",
    "MachinePeak",
]

#: Public name -> the module that defines it, imported on first use: a worker that unpickles
#: :func:`explorer.runtimes.ort_prepare.prepare_ort` imports this package, and must not pay for bench,
#: profile, the TVM runtime (networkx) or IREE with it. The agreement checks, random inputs and
#: ONNX Runtime's reference run live below the stages (the core and the ONNX adapter).
_LAZY = {
    "random_feeds": "explorer.onnx_adapter.inputs",
    "max_abs_diff": "explorer.core.compare",
    "Agreement": "explorer.core.compare",
    "agreement": "explorer.core.compare",
    "run_onnxruntime": "explorer.onnx_adapter.ort_run",
    "Runtime": "explorer.runtimes.base",
    "PreparedSession": "explorer.runtimes.base",
    "OrtRuntime": "explorer.runtimes.ort_runtime",
    "TvmRuntime": "explorer.runtimes.tvm_runtime",
    "TorchEagerRuntime": "explorer.runtimes.torch_runtime",
    "IreeRuntime": "explorer.runtimes.iree_runtime",
    "bench": "explorer.runtimes.bench",
    "get_runtime": "explorer.runtimes.registry",
    "BenchResult": "explorer.runtimes.bench",
    "BenchReport": "explorer.runtimes.bench",
    "compare_intermediates": "explorer.runtimes.intermediates",
    "IntermediateComparison": "explorer.runtimes.intermediates",
    "Profile": "explorer.runtimes.profile",
    "Roofline": "explorer.runtimes.roofline",
    "measure_peak": "explorer.runtimes.machine",
    "MachinePeak": "explorer.runtimes.machine",
}


lazy_exports(__name__, _LAZY)

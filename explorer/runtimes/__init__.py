"""Runtimes side by side: ONNX Runtime and TVM behind one interface, prepared once in the worker, timed there.

:class:`~explorer.runtimes.base.Runtime` is the interface (``available``, ``prepare`` -> a
session kept warm in the worker); :class:`OrtRuntime` (per execution provider) and
:class:`TvmRuntime` (per target, untuned or tuned with MetaSchedule under a budget)
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

from .base import PreparedSession, Runtime
from .bench import BenchReport, BenchResult, bench, get_runtime
from .compare import Agreement, agreement, max_abs_diff, random_feeds
from .intermediates import IntermediateComparison, compare_intermediates
from .machine import MachinePeak, measure_peak
from .ort import run_onnxruntime
from .ort_runtime import OrtRuntime
from .profile import Profile
from .roofline import Roofline
from .tvm_runtime import TvmRuntime

__all__ = [
    "random_feeds",
    "max_abs_diff",
    "run_onnxruntime",
    "Runtime",
    "PreparedSession",
    "OrtRuntime",
    "TvmRuntime",
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

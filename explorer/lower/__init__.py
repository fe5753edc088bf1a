"""Compilers below the ONNX graph: TVM Relax import and its lowering, pass by pass and its build.

``build`` is :func:`relax_build` under the name the lowering's issue gave it.

Examples
--------
>>> from explorer import load
>>> from explorer.lower import relax_import
>>> relax_import(load("zoo:mlp")).ok
True
>>> from explorer.lower import build
>>> build is relax_build
True
"""

from __future__ import annotations

from explorer.lower.import_fix import lower_with_fixes
from explorer.lower.rewrites import FIX, REWRITE_FIXES, ImportFailure
from explorer.lower.timeline import LoweringTimeline
from explorer.lower.tvm.relax_adapter import relax_graph
from explorer.lower.tvm.relax_build import RelaxBuild, relax_build
from explorer.lower.tvm.relax_import import RelaxImport, relax_import
from explorer.lower.tvm.relax_pipeline import (
    PIPELINES,
    ZERO_PIPELINE,
    RelaxImportFailed,
    is_kernel,
    lowering_counts,
    relax_pipeline,
)
from explorer.lower.tvm.tir import LoopStats, TirTimeline, loop_stats, tir_diff

build = relax_build

__all__ = [
    "FIX",
    "REWRITE_FIXES",
    "ImportFailure",
    "LoopStats",
    "LoweringTimeline",
    "RelaxBuild",
    "build",
    "RelaxImport",
    "RelaxImportFailed",
    "ZERO_PIPELINE",
    "PIPELINES",
    "is_kernel",
    "loop_stats",
    "lower_with_fixes",
    "lowering_counts",
    "relax_build",
    "relax_graph",
    "relax_import",
    "relax_pipeline",
    "tir_diff",
    "TirTimeline",
]

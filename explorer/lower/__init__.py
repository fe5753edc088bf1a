"""Compilers below the ONNX graph: TVM Relax import and its lowering, pass by pass and its build.

``build`` is :func:`relax_build` under the name the lowering's issue gave it.

Examples
--------
>>> from explorer import load
>>> from explorer.lower import relax_import
>>> relax_import(load("zoo:mlp")).ok
True
>>> from explorer.lower import build, relax_build
>>> build is relax_build
True
"""

from __future__ import annotations

from explorer.core.lazy_exports import lazy_exports

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

#: Public name -> the module that defines it, imported on first use: the CLI and the widgets read
#: the compiler registry (:mod:`explorer.lower.compilers`) without paying for TVM's modules.
_LAZY = {
    "FIX": "explorer.lower.rewrites",
    "REWRITE_FIXES": "explorer.lower.rewrites",
    "ImportFailure": "explorer.lower.rewrites",
    "LoopStats": "explorer.lower.tvm.tir",
    "LoweringTimeline": "explorer.lower.timeline",
    "RelaxBuild": "explorer.lower.tvm.relax_build",
    "build": "explorer.lower.tvm.relax_build",
    "RelaxImport": "explorer.lower.tvm.relax_import",
    "RelaxImportFailed": "explorer.lower.tvm.relax_pipeline",
    "ZERO_PIPELINE": "explorer.lower.tvm.relax_pipeline",
    "PIPELINES": "explorer.lower.tvm.relax_pipeline",
    "is_kernel": "explorer.lower.tvm.relax_pipeline",
    "loop_stats": "explorer.lower.tvm.tir",
    "lower_with_fixes": "explorer.lower.import_fix",
    "lowering_counts": "explorer.lower.tvm.relax_pipeline",
    "relax_build": "explorer.lower.tvm.relax_build",
    "relax_graph": "explorer.lower.tvm.relax_adapter",
    "relax_import": "explorer.lower.tvm.relax_import",
    "relax_pipeline": "explorer.lower.tvm.relax_pipeline",
    "tir_diff": "explorer.lower.tvm.tir",
    "TirTimeline": "explorer.lower.tvm.tir",
}

lazy_exports(__name__, _LAZY)

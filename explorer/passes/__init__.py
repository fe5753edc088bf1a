"""Optimisation and rewrite passes on ONNX models, one step at a time.

Every onnxoptimizer pass on its own (and its fuse-and-eliminate preset),
onnxsim and its sub-stages, onnxscript's optimizer and each of its ONNX Runtime
fusion rule sets, ONNX Runtime's offline graph optimisation levels and its
transformer optimizer per model type, and onnx's version converter, behind
one :class:`~explorer.passes.base.Pass` protocol, listed in a registry with an explanation for learners.

Examples
--------
>>> from explorer.passes import get_pass, pass_names
>>> len(pass_names("onnxoptimizer")) > 40
True
>>> "com.microsoft" in get_pass("ort:extended").description
True
"""

from __future__ import annotations

from explorer.passes.base import FunctionPass, Pass, PassResult, models_differ
from explorer.passes.registry import (
    FAMILIES,
    get_pass,
    list_passes,
    parse_pipeline,
    pass_names,
    passes_frame,
    split_pipeline,
)

__all__ = [
    "Pass",
    "PassResult",
    "FunctionPass",
    "models_differ",
    "FAMILIES",
    "get_pass",
    "list_passes",
    "pass_names",
    "passes_frame",
    "parse_pipeline",
    "split_pipeline",
]

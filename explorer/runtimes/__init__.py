"""Runtimes: run a model on ONNX Runtime (and, with later work, TVM and IREE) in the worker.

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

from .compare import max_abs_diff, random_feeds
from .ort import run_onnxruntime

__all__ = ["random_feeds", "max_abs_diff", "run_onnxruntime"]

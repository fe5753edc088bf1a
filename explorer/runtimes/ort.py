"""Moved: ONNX Runtime's reference run is :mod:`explorer.onnx_adapter.ort_run`, below the stages that use it.

The passes run ONNX Runtime too, and a stage imports only the stages before it; this module
keeps the old names working.

Examples
--------
>>> from explorer import zoo
>>> from explorer.onnx_adapter.inputs import random_feeds
>>> from explorer.runtimes.ort import run_onnxruntime
>>> model = zoo.build("mlp")
>>> [o.shape for o in run_onnxruntime(model, random_feeds(model))]
[(1, 10)]
"""

from __future__ import annotations

from explorer.onnx_adapter.ort_run import (
    ORT_LEVELS,
    create_ort_session,
    ort_session,
    run_onnxruntime,
    run_ort,
)

__all__ = ["run_onnxruntime", "ORT_LEVELS", "ort_session", "create_ort_session", "run_ort"]

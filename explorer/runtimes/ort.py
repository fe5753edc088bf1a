"""Run a model on ONNX Runtime, inside the worker process (a crash there is a typed error).

Examples
--------
>>> from explorer import zoo
>>> from explorer.runtimes.compare import random_feeds
>>> model = zoo.build("mlp")
>>> [o.shape for o in run_onnxruntime(model, random_feeds(model))]
[(1, 10)]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .. import worker

__all__ = ["run_onnxruntime", "ort_run_step"]


def ort_run_step(
    path: str,
    feeds: Mapping[str, np.ndarray],
    providers: Sequence[str] = ("CPUExecutionProvider",),
    optimization: str = "all",
) -> list[np.ndarray]:
    """Create a session for the model at ``path`` and run it once (runs in the worker).

    Examples
    --------
    >>> ort_run_step.__name__
    'ort_run_step'
    """
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = {
        "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }[optimization]
    session = ort.InferenceSession(path, options, providers=list(providers))
    return [np.asarray(o) for o in session.run(None, dict(feeds))]


def run_onnxruntime(
    model: Any,
    feeds: Mapping[str, np.ndarray],
    *,
    providers: Sequence[str] = ("CPUExecutionProvider",),
    optimization: str = "all",
    timeout: float | None = None,
    memory_mb: int | None = None,
) -> list[np.ndarray]:
    """Run ``model`` (path, bytes or ModelProto) once on ONNX Runtime in the worker.

    Parameters
    ----------
    model : path, bytes or onnx.ModelProto
        The model.
    feeds : mapping
        Input name -> array.
    providers : sequence of str
        Execution providers, in priority order.
    optimization : {"disabled", "basic", "extended", "all"}
        ONNX Runtime's graph optimisation level for the session.
    timeout, memory_mb
        Worker limits (see :func:`explorer.worker.run`).

    Returns
    -------
    list of numpy.ndarray
        The outputs, in graph-output order.

    Examples
    --------
    >>> from explorer import zoo
    >>> from explorer.runtimes.compare import random_feeds
    >>> m = zoo.build("mlp")
    >>> len(run_onnxruntime(m, random_feeds(m), optimization="disabled"))
    1
    """
    return worker.run_on_model(
        ort_run_step,
        model,
        dict(feeds),
        tuple(providers),
        optimization,
        step="onnxruntime run",
        timeout=timeout,
        memory_mb=memory_mb,
    )

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

from .. import native, worker

__all__ = ["run_onnxruntime"]


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
    outputs = worker.run_on_model(
        native.run_ort,
        model,
        dict(feeds),
        providers=tuple(providers),
        optimization_level="disable" if optimization == "disabled" else optimization,
        step="onnxruntime run",
        timeout=timeout,
        memory_mb=memory_mb,
    )
    return [np.asarray(value) for value in outputs.values()]  # graph-output order

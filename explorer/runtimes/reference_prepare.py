"""ONNX's reference implementation, prepared in the worker: ``onnx.reference.ReferenceEvaluator``, kept warm.

The reference evaluator runs each node with the operator's reference code, in numpy, as the
ONNX specification defines it: slow, but written from the specification, so it is the answer
the other runtimes' outputs are judged against. Each node is timed where it runs (its
``run`` wrapped), so the profile puts its time on the node.

Examples
--------
>>> from explorer.isolation import worker
>>> from explorer import zoo
>>> info = worker.run(prepare_reference, str(zoo.save("mlp")), "doc-reference-prepare", {})
>>> info["runtime"], info["reused"]
('onnx-reference', False)
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from explorer.runtimes.sessions import _get, _keep, _Session, has_session

__all__ = ["prepare_reference", "reference_refusal"]

_UNKNOWN_NODE = re.compile(r"Node type '([^']+)' from domain '([^']*)' is unknown")
_NO_VERSION = re.compile(r"No implementation for operator '([^']+)' domain '([^']*)' and version (\d+)")


def reference_refusal(message: str) -> dict[str, Any] | None:
    """The op, domain and opset the reference evaluator refused, read from its message; None otherwise.

    Examples
    --------
    >>> reference_refusal("Node type 'FusedMatMul' from domain 'com.microsoft' is unknown, known ...")
    {'op_type': 'FusedMatMul', 'domain': 'com.microsoft', 'opset': None}
    >>> reference_refusal("No implementation for operator 'DequantizeLinear' domain '' and version 17")
    {'op_type': 'DequantizeLinear', 'domain': '', 'opset': 17}
    >>> reference_refusal("something else") is None
    True
    """
    if match := _UNKNOWN_NODE.search(message):
        return {"op_type": match[1], "domain": match[2], "opset": None}
    if match := _NO_VERSION.search(message):
        return {"op_type": match[1], "domain": match[2], "opset": int(match[3])}
    return None


def prepare_reference(path: str, key: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The model at ``path`` in ONNX's reference evaluator under ``key``, each node's run timed.

    Large weights, external or in the model file, are mapped copy-on-write from their file
    (:func:`~explorer.onnx_adapter.weights.tensor_array`), not read into memory: the evaluator
    holds the model's structure and maps its weights, once.

    Returns
    -------
    dict
        ``{"runtime": "onnx-reference", "prepare_s", "version", "reused"}``, or the refusal of an
        operator it has no implementation for (``{"ok": False, "op_type", "domain", "opset",
        "reason", "version"}``).

    Examples
    --------
    >>> from explorer.isolation import worker
    >>> from explorer import zoo
    >>> worker.run(prepare_reference, str(zoo.save("custom_domain")), "doc-ref-refused", {})["op_type"]
    'FusedMatMul'
    """
    if has_session(key):
        return {**_get(key).info, "reused": True}
    import onnx
    from onnx.reference import ReferenceEvaluator

    from explorer.onnx_adapter.model_wire import read_model_lazily
    from explorer.onnx_adapter.weights import tensor_array

    base_dir = Path(path).resolve().parent

    class MappedWeights(ReferenceEvaluator):  # type: ignore[misc]
        """The evaluator with every external (or left-in-file) weight mapped from its file, not read."""

        def retrieve_external_data(self, initializer: onnx.TensorProto) -> np.ndarray:
            return tensor_array(initializer, base_dir, path, mode="c")

    started = time.perf_counter()
    # the large weights stay in their files (the model's own, or external data): mapped, never copied
    model = read_model_lazily(path) or onnx.load(path, load_external_data=False)
    try:
        evaluator = MappedWeights(model)
    except (NotImplementedError, RuntimeError) as err:  # the model's op: data for a typed error
        refusal = reference_refusal(str(err))
        if refusal is None:
            raise
        return {
            "ok": False,
            "runtime": "onnx-reference",
            "version": onnx.__version__,
            "reason": str(err),
            **refusal,
        }
    timings: list[tuple[str, str, float]] | None = None  # set while profiling: each node's run appended

    def timed(run: Any, name: str, op: str) -> Any:
        def run_timed(*args: Any, **kwargs: Any) -> Any:
            if timings is None:
                return run(*args, **kwargs)
            begin = time.perf_counter_ns()
            out = run(*args, **kwargs)
            timings.append((name, op, (time.perf_counter_ns() - begin) / 1e6))
            return out

        return run_timed

    for node in evaluator.rt_nodes_:
        node.run = timed(node.run, node.onnx_node.name, node.onnx_node.op_type)
    info = {
        "runtime": "onnx-reference",
        "prepare_s": time.perf_counter() - started,
        "version": onnx.__version__,
    }

    def call(feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        return evaluator.run(None, dict(feeds))

    def profile(model_path: str, feeds: Mapping[str, np.ndarray], runs: int) -> list[dict[str, Any]]:
        nonlocal timings
        records: list[dict[str, Any]] = []
        call(feeds)  # warm-up, as for the other runtimes
        for run in range(runs):
            timings = []
            try:
                call(feeds)
            finally:
                done, timings = timings, None
            records += [{"name": name, "op": op, "ms": ms, "run": run} for name, op, ms in done]
        return records

    return _keep(
        key,
        _Session(
            bind=lambda feeds: {name: np.ascontiguousarray(value) for name, value in feeds.items()},
            call=call,
            outputs=lambda result: [np.asarray(value) for value in result],
            info=info,
            profile=profile,
        ),
    )

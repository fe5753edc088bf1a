"""PyTorch eager's worker-side preparation: the ONNX graph translated to torch modules, kept warm.

Examples
--------
>>> from explorer.isolation import worker
>>> from explorer import zoo
>>> info = worker.run(prepare_torch, str(zoo.save("mlp")), "doc-torch-prepare", {"threads": 1})
>>> info["runtime"]
'torch-eager'
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from explorer.isolation.cpu_cores import physical_cores
from explorer.runtimes.sessions import _get, _keep, _Session, has_session

__all__ = ["prepare_torch"]


def prepare_torch(path: str, key: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """Load the model at ``path`` as eager PyTorch (:func:`explorer.runtimes.torch_eager.torch_program`)
    under ``key``: one ``torch`` call per node, the weights as torch tensors.

    ``options``: ``threads`` (PyTorch's intra-op threads; 0 = one per physical core, as ONNX
    Runtime and TVM run here).

    Returns
    -------
    dict
        ``{"runtime": "torch-eager", "prepare_s", "threads", "version", "reused"}``, or the
        refusal of a node it has no translation for (``{"ok": False, "op_type", "domain",
        "node", "reason", "version"}``).

    Examples
    --------
    >>> from explorer.isolation import worker
    >>> from explorer import zoo
    >>> path = str(zoo.save("mlp"))
    >>> info = worker.run(prepare_torch, path, "doc-prepare-torch", {"threads": 1})
    >>> info["runtime"], info["threads"]
    ('torch-eager', 1)
    """
    if has_session(key):
        return {**_get(key).info, "reused": True}
    import onnx
    import torch

    from explorer.runtimes.torch_eager import TorchUnsupported, torch_program

    threads = int(options.get("threads", 0) or 0) or physical_cores()
    started = time.perf_counter()
    model = onnx.load(path)
    try:
        program = torch_program(model)
    except TorchUnsupported as err:  # the model's op, not our bug: data for a typed error
        domain = next((n.domain for n in model.graph.node if n.op_type == err.op_type), "")
        return {
            "ok": False,
            "runtime": "torch-eager",
            "version": torch.__version__,
            "op_type": err.op_type,
            "domain": domain,
            "node": err.node,
            "reason": str(err),
        }
    info = {
        "runtime": "torch-eager",
        "prepare_s": time.perf_counter() - started,
        "threads": threads,
        "version": torch.__version__,
    }

    def bind(feeds: Mapping[str, np.ndarray]) -> dict[str, Any]:
        torch.set_num_threads(threads)  # the worker's one PyTorch pool: this session's count
        return {name: torch.from_numpy(np.ascontiguousarray(value)) for name, value in feeds.items()}

    def call(bound: Mapping[str, Any]) -> list[Any]:
        with torch.inference_mode():
            return program(bound)

    def profile(model_path: str, bound: Mapping[str, Any], runs: int) -> list[dict[str, Any]]:
        records = []
        with torch.inference_mode():
            program(bound)  # warm-up: PyTorch's first call of a kernel picks and caches its algorithm
            for run in range(runs):
                times: list[tuple[str, str, float]] = []
                program(bound, times)
                records += [{"name": name, "op": op, "ms": ms, "run": run} for name, op, ms in times]
        return records

    return _keep(
        key,
        _Session(
            bind=bind,
            call=call,
            outputs=lambda result: [t.numpy() for t in result],
            info=info,
            profile=profile,
        ),
    )

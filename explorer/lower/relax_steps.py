"""What runs in the worker for TVM Relax: import an ONNX file, and read a Relax function as graph data.

TVM is imported here only, inside the worker: a crash in its C++ code never reaches the
notebook, and the notebook never pays TVM's import (seconds). What crosses the pipe is plain
data: node and edge records of :mod:`explorer.graph_schema`, the module as TVMScript text,
and for a failed import the ONNX nodes that failed and why.

Examples
--------
>>> import os, tempfile, onnx
>>> from explorer import worker, zoo
>>> path = os.path.join(tempfile.mkdtemp(), "mlp.onnx")
>>> onnx.save(zoo.build("mlp"), path)
>>> out = worker.run(import_relax, path, {"input": [1, 1, 28, 28]})
>>> out["ok"], out["graph"]["name"]
(True, 'main')
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..graph_schema import edge_data, node_data
from ..node_ids import INPUT_PREFIX, OUTPUT_PREFIX
from ..tensors import TensorInfo

__all__ = ["import_relax", "relax_graph_data", "IMPORTER"]

IMPORTER = "TVM's Relax ONNX importer (tvm.relax.frontend.onnx.from_onnx)"
"""Who converts ONNX to Relax, as named in failure reasons."""

_HANDLED_OUTSIDE_THE_MAP = {"If", "Constant"}


def import_relax(path: str, input_shapes: Mapping[str, Sequence[int]] | None = None) -> dict[str, Any]:
    """Import the ONNX model at ``path`` into Relax (``keep_params_in_input=False``).

    Returns
    -------
    dict
        ``{"ok": True, "graph": relax_graph_data(...), "text": TVMScript, "elapsed": s,
        "tvm": version}``, or ``{"ok": False, "missing": bool, "failures": [{"node", "op_type",
        "reason"}], "error": str, "tvm": version}`` naming each ONNX node the importer could not
        convert (``missing``: operators it has no converter for, all of them; else the one
        node it stopped at).
    """
    import onnx
    import tvm
    from tvm.relax.frontend.onnx import from_onnx, onnx_frontend

    model = onnx.load(path)
    convert_map = onnx_frontend._get_convert_map()
    missing = [
        {
            "node": node.name,
            "op_type": node.op_type,
            "reason": f"{_qualified(node)} is not an operator {IMPORTER} converts (TVM {tvm.__version__})",
        }
        for node in model.graph.node
        if node.op_type not in convert_map and node.op_type not in _HANDLED_OUTSIDE_THE_MAP
    ]
    if missing:
        ops = sorted({f["op_type"] for f in missing})
        return {
            "ok": False,
            "missing": True,
            "failures": missing,
            "error": f"unsupported operators: {', '.join(ops)}",
            "tvm": tvm.__version__,
        }
    current: dict[str, str] = {}
    importer = onnx_frontend.ONNXGraphImporter
    original = importer._convert_operator

    def tracked(self: Any, op_name: str, inputs: Any, attrs: dict[str, Any], opset: int) -> Any:
        current.update(node=str(attrs.get("tvm_custom", {}).get("name", "")), op_type=op_name)
        return original(self, op_name, inputs, attrs, opset)

    shapes = {k: [int(d) for d in v] for k, v in input_shapes.items()} if input_shapes else None
    started = time.perf_counter()
    importer._convert_operator = tracked  # the worker's own copy of TVM: nothing else sees it
    try:
        mod = from_onnx(model, shape_dict=shapes, keep_params_in_input=False)
    except Exception as err:  # the node being converted is the one that failed
        text = " ".join(str(err).split())
        failure = {
            "node": current.get("node", ""),
            "op_type": current.get("op_type", ""),
            "reason": f"{type(err).__name__}: {text[:400]}",
        }
        return {
            "ok": False,
            "missing": False,
            "failures": [failure],
            "error": failure["reason"],
            "tvm": tvm.__version__,
        }
    finally:
        importer._convert_operator = original
    elapsed = time.perf_counter() - started
    return {
        "ok": True,
        "graph": relax_graph_data(mod),
        "text": mod.script(show_meta=False),
        "elapsed": elapsed,
        "tvm": tvm.__version__,
    }


def _qualified(node: Any) -> str:
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"


def _dims(ty: Any) -> tuple[Any, ...] | None:
    shape = getattr(ty, "shape", None)
    if shape is None:
        return None
    values = getattr(shape, "values", shape)
    try:
        return tuple(int(d) if hasattr(d, "value") or isinstance(d, int) else str(d) for d in values)
    except TypeError:
        return None


def _dtype(ty: Any) -> str | None:
    dtype = getattr(ty, "dtype", None)
    return str(dtype) if dtype not in (None, "") else None


def _attributes(call: Any) -> dict[str, Any]:
    attrs = getattr(call, "attrs", None)
    if attrs is None:
        return {}
    found: dict[str, Any] = {}
    for key in dir(attrs):
        if key.startswith("_") or key in ("id_", "is_", "same_as", "get_int", "get_int_tuple", "get_str"):
            continue
        try:
            value = getattr(attrs, key)
        except Exception:
            continue
        if callable(value):
            continue
        if isinstance(value, (int, float, str, bool)) or value is None:
            found[key] = value
        elif isinstance(value, (tuple, list)) or hasattr(value, "__len__"):
            try:
                found[key] = [_scalar(v) for v in value]
            except TypeError:
                found[key] = str(value)
        else:
            found[key] = str(value)
    return found


def _scalar(value: Any) -> Any:
    """A Python scalar from an attribute element: ints and floats as they are, TIR immediates by value."""
    if isinstance(value, (int, float, str, bool)):
        return value
    inner = getattr(value, "value", None)
    return inner if isinstance(inner, (int, float)) else str(value)


def _op_name(value: Any) -> str:
    op = getattr(value, "op", None)
    if op is not None:
        return str(getattr(op, "name", None) or getattr(op, "name_hint", None) or op)
    return f"relax.{type(value).__name__}"


def relax_graph_data(mod: Any, function: str = "main") -> dict[str, Any]:
    """A Relax function's bindings as graph-model records: one node per binding, edges by variable use.

    Constants a binding reads become its weights (TensorInfo); shapes and dtypes come from
    the variables' types; the function's parameters and its result are the input and output
    nodes. Runs wherever TVM is imported (the worker).
    """
    from tvm import relax

    func = mod[function]
    nodes: list[tuple[str, dict[str, Any]]] = []
    edges: list[tuple[str, str, str, dict[str, Any]]] = []
    producer: dict[str, str] = {}
    types: dict[str, tuple[Any, str | None]] = {}
    for param in func.params:
        shape, dtype = _dims(param.ty), _dtype(param.ty)
        node_id = INPUT_PREFIX + param.name
        nodes.append(
            (node_id, node_data("input", "Input", param.name, outputs=[param.name], shape=shape, dtype=dtype))
        )
        producer[param.name] = node_id
        types[param.name] = (shape, dtype)

    def tensor_edge(name: str, target: str, slot: int) -> None:
        shape, dtype = types.get(name, (None, None))
        nbytes = _nbytes(shape, dtype)
        edges.append((producer[name], target, name, edge_data(name, shape, dtype, nbytes, slots=(slot,))))

    index = 0
    for block in func.body.blocks:
        for binding in block.bindings:
            var, value = binding.var, binding.value
            shape, dtype = _dims(var.ty), _dtype(var.ty)
            op = _op_name(value)
            args = list(getattr(value, "args", ()))
            if isinstance(value, relax.TupleGetItem):
                args = [value.tuple_value]
            weights = []
            attributes = _attributes(value)
            if isinstance(value, relax.TupleGetItem):
                attributes["index"] = int(value.index)
            reads: list[tuple[str, int]] = []
            for slot, arg in enumerate(args):
                name = getattr(arg, "name", None)
                if isinstance(name, str) and name in producer:
                    reads.append((name, slot))
                elif hasattr(arg, "value") and hasattr(arg, "ty") and _dims(arg.ty) is not None:
                    wshape, wdtype = _dims(arg.ty), _dtype(arg.ty)
                    numel = 1
                    for d in wshape or ():
                        numel *= d if isinstance(d, int) else 1
                    weights.append(
                        TensorInfo(
                            f"{var.name}.const{slot}",
                            tuple(wshape or ()),
                            wdtype or "",
                            numel,
                            _nbytes(wshape, wdtype) or 0,
                            source="constant",
                        )
                    )
                else:
                    attributes[f"arg{slot}"] = " ".join(str(arg).split())[:80]
            nodes.append(
                (
                    var.name,
                    node_data(
                        "op",
                        op.removeprefix("relax."),
                        var.name,
                        op=op,
                        index=index,
                        attributes=attributes,
                        inputs=[n for n, _ in reads],
                        outputs=[var.name],
                        weights=weights,
                    ),
                )
            )
            for name, slot in reads:
                tensor_edge(name, var.name, slot)
            producer[var.name] = var.name
            types[var.name] = (shape, dtype)
            index += 1
    result = func.body.body
    out_name = getattr(result, "name", "output")
    out_id = OUTPUT_PREFIX + out_name
    shape, dtype = types.get(out_name, (None, None))
    nodes.append(
        (out_id, node_data("output", "Output", out_name, inputs=[out_name], shape=shape, dtype=dtype))
    )
    if out_name in producer:
        tensor_edge(out_name, out_id, 0)
    return {"name": function, "nodes": nodes, "edges": edges}


def _nbytes(shape: Any, dtype: str | None) -> int | None:
    if shape is None or dtype is None or any(not isinstance(d, int) for d in shape):
        return None
    import numpy as np

    try:
        itemsize = np.dtype(dtype).itemsize
    except TypeError:
        return None
    count = 1
    for d in shape:
        count *= d
    return count * itemsize

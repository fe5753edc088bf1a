"""Run TVM's ONNX importer in the worker: the Relax module, where each binding came from, or what failed.

TVM is imported here only inside functions that run in the worker: a crash in its C++ code
never reaches the notebook, and the notebook never pays TVM's import (seconds).
:func:`run_importer` runs ``tvm.relax.frontend.onnx.from_onnx`` (tracking the node being
converted, so a failure names it) and keeps the module for this process;
:func:`import_origins` traces each Relax binding back to the ONNX node it was converted from;
:func:`import_relax` is what crosses the pipe: the module as graph data and TVMScript text,
or the ONNX nodes that failed and why (:func:`explorer.lower.tvm.relax_import.relax_import` is
the notebook's side).

Examples
--------
>>> from explorer.isolation import worker
>>> from explorer import zoo
>>> out = worker.run_on_model(import_relax, zoo.build("mlp"), {"input": [1, 1, 28, 28]})
>>> out["ok"], out["graph"]["name"]
(True, 'main')
"""

from __future__ import annotations

import mmap
import os
import re
import time
import warnings
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from explorer.lower.tvm.relax_exprs import operands
from explorer.lower.tvm.relax_graph_data import module_counts, relax_graph_data

__all__ = [
    "IMPORTER",
    "import_relax",
    "import_relax_module",
    "importer_ops",
    "run_importer",
    "import_origins",
    "constant_tensor",
    "release_constant",
]

IMPORTER = "TVM's Relax ONNX importer (tvm.relax.frontend.onnx.from_onnx)"
"""Who converts ONNX to Relax, as named in failure reasons."""

_TVM_ALIGNMENT = 64
"""The data alignment TVM's tensors have (a mapped weight at another offset is copied)."""

_MAPPED: dict[int, weakref.ref[np.memmap]] = {}  # data pointer -> the mapping a constant is made of

_HANDLED_OUTSIDE_THE_MAP = {"If", "Constant"}


def import_relax(path: str, input_shapes: Mapping[str, Sequence[int]] | None = None) -> dict[str, Any]:
    """Import the ONNX model at ``path`` into Relax (``keep_params_in_input=False``), as plain data.

    Returns
    -------
    dict
        ``{"ok": True, "graph": relax_graph_data(...), "text": TVMScript, "elapsed": s,
        "tvm": version}``, or ``{"ok": False, "missing": bool, "failures": [{"node", "op_type",
        "reason"}], "error": str, "tvm": version}`` naming each ONNX node the importer could not
        convert (``missing``: operators it has no converter for, all of them; else the one
        node it stopped at).

    Examples
    --------
    >>> from explorer.isolation import worker
    >>> from explorer import zoo
    >>> out = worker.run_on_model(import_relax, zoo.build("custom_domain"))
    >>> out["ok"], out["missing"], sorted({f["op_type"] for f in out["failures"]})
    (False, True, ['FusedMatMul', 'Swish'])
    """
    return import_relax_module(path, input_shapes)[0]


def importer_ops() -> frozenset[str]:
    """The ONNX op types TVM's importer converts: its converter table and the ops it handles
    outside the table (call it where TVM is imported: the worker).

    Examples
    --------
    >>> from explorer.isolation import worker
    >>> {"Conv", "If"} <= worker.run(importer_ops)
    True
    """
    from tvm.relax.frontend.onnx import onnx_frontend

    return frozenset(onnx_frontend._get_convert_map()) | _HANDLED_OUTSIDE_THE_MAP


def import_relax_module(
    path: str, input_shapes: Mapping[str, Sequence[int]] | None = None
) -> tuple[dict[str, Any], Any, dict[Any, str]]:
    """What :func:`import_relax` returns, plus the module and its origins (:func:`import_origins`)
    for this process; on failure the failure, ``None`` and ``{}``.

    Examples
    --------
    >>> from explorer import zoo
    >>> out, mod, origins = import_relax_module(zoo.build("mlp"), {"input": [1, 1, 28, 28]})
    >>> out["counts"]["bindings"], sorted(set(origins.values()))[:2]
    (12, ['/Flatten', '/fc1/Gemm'])
    """
    import tvm

    imported = run_importer(path, input_shapes)
    if not imported["ok"]:
        return imported, None, {}
    mod = imported.pop("module")
    origins = import_origins(imported.pop("model"), imported.pop("importer"), mod)
    described = {
        **imported,
        "graph": relax_graph_data(mod, origins=origins),
        "counts": module_counts(mod),
        "text": mod.script(show_meta=False),
        "tvm": tvm.__version__,
    }
    return described, mod, origins


def constant_tensor(array: np.ndarray) -> Any:
    """A TVM tensor of ``array``'s values: the mapped file itself (no copy) for an external weight
    mapped copy-on-write (:func:`~explorer.onnx_adapter.weights.tensor_array` with ``mode="c"``),
    so the imported weights stay file pages the kernel can drop and read again rather than memory
    the process holds; a copy for anything else (in-memory values, or a mapping TVM cannot take:
    not 64-byte aligned, not contiguous).

    Examples
    --------
    >>> constant_tensor(np.arange(3, dtype=np.float32)).numpy().tolist()
    [0.0, 1.0, 2.0]
    >>> constant_tensor(np.array(3, np.int64)).shape  # a scalar stays a scalar
    ()
    """
    import tvm

    mapped = isinstance(array, np.memmap) and array.flags.writeable and array.flags.c_contiguous
    if mapped and array.ctypes.data % _TVM_ALIGNMENT == 0:
        _MAPPED[array.ctypes.data] = weakref.ref(array)
        return tvm.runtime.from_dlpack(array)  # keeps the mapping alive as long as the tensor
    return tvm.runtime.tensor(array)  # (as the importer does: a 0-d value stays 0-d)


def release_constant(tensor: Any) -> bool:
    """Hand back the pages of a constant :func:`constant_tensor` mapped from its file (they are read
    again from the file if it is used after); whether it was such a mapping.

    Examples
    --------
    >>> release_constant(constant_tensor(np.ones(4, np.float32)))  # in memory: nothing to hand back
    False
    """
    try:
        pointer = np.from_dlpack(tensor).ctypes.data
    except (BufferError, TypeError, RuntimeError):
        return False
    array = _MAPPED.get(pointer, lambda: None)()
    if array is None:
        return False
    mapping = array
    while mapping is not None and getattr(mapping, "_mmap", None) is None:
        mapping = mapping.base if isinstance(mapping.base, np.ndarray) else None
    if mapping is None or mapping._mmap is None:
        return False
    mapping._mmap.madvise(mmap.MADV_DONTNEED)  # private, never written: the file's pages come back
    return True


def run_importer(
    path: str | os.PathLike[str] | Any, input_shapes: Mapping[str, Sequence[int]] | None
) -> dict[str, Any]:
    """Run the importer on the ONNX file at ``path`` (or a ``ModelProto``).

    Returns
    -------
    dict
        ``{"ok": True, "module", "model", "importer", "elapsed"}`` (for this process only: a
        module does not cross the pipe; ``importer`` is TVM's importer object, whose tensor
        table :func:`import_origins` reads), or the failure :func:`import_relax` returns.

    Examples
    --------
    >>> from explorer import zoo
    >>> out = run_importer(zoo.build("mlp"), {"input": [1, 1, 28, 28]})
    >>> out["ok"], out["module"]["main"].params[0].name
    (True, 'input')
    >>> run_importer(zoo.build("custom_domain"), None)["error"]
    'unsupported operators: FusedMatMul, Swish'
    """
    import onnx
    import tvm
    from tvm.relax.frontend.onnx import from_onnx, onnx_frontend

    from explorer.onnx_adapter.weights import check_external_data, external_tensors, tensor_array

    base_dir = Path(path).parent if isinstance(path, (str, os.PathLike)) else None
    # Weights in external files stay there: the importer reads each one mapped (below), so the
    # model's weights are in memory once (as TVM's constants), not twice (proto and constants).
    model = onnx.load(os.fspath(path), load_external_data=False) if base_dir is not None else path
    if base_dir is not None:  # a bad file raises here, before the importer (whose failures are data)
        check_external_data(external_tensors(model), base_dir, os.fspath(path))
    converted = importer_ops()
    missing = [
        {
            "node": node.name,
            "op_type": node.op_type,
            "reason": f"{_qualified(node)} is not an operator {IMPORTER} converts (TVM {tvm.__version__})",
        }
        for node in model.graph.node
        if node.op_type not in converted
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
    importers: list[Any] = []
    original_from_onnx = importer.from_onnx

    def keep(self: Any, graph: Any, opset: int) -> Any:
        importers.append(self)  # its tensor table maps ONNX outputs to Relax expressions: origins
        return original_from_onnx(self, graph, opset)

    original_get_numpy = onnx_frontend.get_numpy

    def mapped(tensor: Any) -> Any:
        return (
            tensor_array(tensor, base_dir, os.fspath(path), mode="c")
            if base_dir is not None
            else original_get_numpy(tensor)
        )

    original_parse_array = importer._parse_array

    def parse_array(self: Any, tensor: Any) -> Any:
        return constant_tensor(onnx_frontend.get_numpy(tensor).reshape(tuple(tensor.dims)))

    importer._convert_operator = tracked  # the worker's own copy of TVM: nothing else sees it
    importer.from_onnx = keep
    importer._parse_array = parse_array
    onnx_frontend.get_numpy = mapped
    try:
        with warnings.catch_warnings():  # TVM runs onnx's checker, which looks for external data in the cwd
            warnings.filterwarnings("ignore", message="Data of TensorProto", category=UserWarning)
            mod = from_onnx(model, shape_dict=shapes, keep_params_in_input=False)
    except Exception as err:  # the node being converted is the one that failed
        text = " ".join(str(err).split())
        node, op_type = current.get("node", ""), current.get("op_type", "")
        named = _NODE_IN_MESSAGE.search(text)  # some checks fail before the converter is called
        if named is not None:
            node = named.group(1)
            op_type = next((n.op_type for n in model.graph.node if n.name == node), op_type)
        failure = {"node": node, "op_type": op_type, "reason": f"{type(err).__name__}: {text[:400]}"}
        return {
            "ok": False,
            "missing": False,
            "failures": [failure],
            "error": failure["reason"],
            "tvm": tvm.__version__,
        }
    finally:
        importer._convert_operator = original
        importer.from_onnx = original_from_onnx
        importer._parse_array = original_parse_array
        onnx_frontend.get_numpy = original_get_numpy
    elapsed = time.perf_counter() - started
    importer_used = importers[0] if importers else None
    return {"ok": True, "module": mod, "model": model, "importer": importer_used, "elapsed": elapsed}


_NODE_IN_MESSAGE = re.compile(r"Node (\S+) cannot handle")


def import_origins(model: Any, importer: Any, mod: Any) -> dict[Any, str]:
    """Relax variable -> the ONNX node it was converted from, where that can be traced.

    The importer's tensor table maps each ONNX output to the Relax expression that holds it:
    a binding whose variable or value is that expression comes from the node producing the
    output. Bindings a converter emitted on the way (tuple parts, reshapes of weights) take
    the origin of the bindings that read them, or else of those they read, when that is one
    node. ``model``, ``importer`` and ``mod``: what :func:`run_importer` returned.

    Examples
    --------
    >>> from explorer import zoo
    >>> out = run_importer(zoo.build("mlp"), None)
    >>> origins = import_origins(out["model"], out["importer"], out["module"])
    >>> sorted(str(var.name) for var, node in origins.items() if node == "/fc1/Gemm")  # one Gemm, 3 bindings
    ['lv1', 'lv2', 'lv3']
    """
    from tvm import relax

    if importer is None:
        return {}
    from explorer.onnx_adapter.graph_builder import onnx_node_ids

    nodes = list(model.graph.node)
    ids = onnx_node_ids(nodes)
    producer = {out: node_id for node_id, node in zip(ids, nodes, strict=True) for out in node.output}
    by_expr: dict[Any, str] = {}
    for tensor, expr in getattr(importer, "_nodes", {}).items():
        if tensor in producer:
            by_expr.setdefault(expr, producer[tensor])
    bindings = [b for block in mod["main"].body.blocks for b in block.bindings]
    origins: dict[Any, str] = {}
    reads: dict[Any, list[Any]] = {}
    for binding in bindings:
        found = by_expr.get(binding.var) or by_expr.get(binding.value)
        if found is not None:
            origins[binding.var] = found
        reads[binding.var] = [a for a in operands(binding.value) if isinstance(a, relax.Var)]
    readers: dict[Any, list[Any]] = {}
    for var, used in reads.items():
        for u in used:
            readers.setdefault(u, []).append(var)
    for _ in range(3):  # a few rounds reach helpers of helpers
        for binding in bindings:
            var = binding.var
            if var in origins:
                continue
            after = {origins[r] for r in readers.get(var, ()) if r in origins}
            before = {origins[u] for u in reads.get(var, ()) if u in origins}
            for candidates in (after, before):
                if len(candidates) == 1:
                    origins[var] = next(iter(candidates))
                    break
    return origins


def _qualified(node: Any) -> str:
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"

"""Read a Relax function as graph data: bindings as nodes, variable uses as edges, fused functions as scopes.

Runs where TVM is (the worker). What crosses the pipe is plain data: node and edge records
of :mod:`explorer.core.graph_schema`, which :func:`explorer.lower.tvm.relax_adapter.relax_graph`
turns into a graph model on the notebook's side. Each node keeps the ONNX node it came from
(``origin``, traced by the import), and a call of a fused function (what FuseOps makes) is
drawn as its members, scoped by the function. :func:`module_counts` puts what a lowering step
changed in numbers.

Examples
--------
>>> from explorer import zoo
>>> from explorer.lower.tvm.relax_frontend import run_importer
>>> data = relax_graph_data(run_importer(zoo.build("mlp"), {"input": [1, 1, 28, 28]})["module"])
>>> data["name"], len(data["nodes"]), len(data["edges"])
('main', 14, 13)
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from explorer.core.graph_schema import edge_data, node_data
from explorer.core.node_ids import INPUT_PREFIX, OUTPUT_PREFIX
from explorer.core.tensors import TensorInfo
from explorer.core.unique_names import UniqueNames
from explorer.lower.tvm.relax_exprs import (
    CALL_PRIM_FUNC,
    call_attributes,
    called_prim_func,
    is_var,
    op_name,
    operands,
    tensor_dims,
    tensor_dtype,
)

__all__ = ["relax_graph_data", "module_counts", "prim_func_scripts", "ALLOC_TENSOR"]


def relax_graph_data(
    mod: Any, function: str = "main", *, origins: Mapping[Any, str] | None = None
) -> dict[str, Any]:
    """A Relax function's bindings as graph-model records: one node per binding, edges by variable use.

    Constants a binding reads become its weights (TensorInfo); shapes and dtypes come from
    the variables' types; the function's parameters and its result are the input and output
    nodes. A ``call_tir`` node is named by the PrimFunc it calls (``conv2d``,
    ``fused_conv2d_add_relu``); a call of a fused Relax function (what FuseOps makes) is drawn
    as its member bindings, each with the fused function as its ``scope``, so the group
    collapses into one box and expands into what FuseOps merged. Runs where TVM is (the worker).

    Examples
    --------
    >>> from explorer.isolation import worker
    >>> from explorer import zoo
    >>> from explorer.lower.tvm.relax_frontend import import_relax
    >>> data = worker.run_on_model(import_relax, zoo.build("mlp"))["graph"]  # made by relax_graph_data
    >>> [node for node, _ in data["nodes"]][:2], data["nodes"][1][1]["origin"]
    (['input:input', 'lv'], ('/Flatten',))
    """
    func = mod[function]
    builder = _GraphBuilder(mod, origins or {})
    env: dict[Any, str] = {}  # Relax variable (by identity: names repeat) -> the graph's tensor name
    for param in func.params:
        shape, dtype = tensor_dims(param.ty), tensor_dtype(param.ty)
        name = builder.unique(param.name)
        data = node_data("input", "Input", param.name, outputs=[name], shape=shape, dtype=dtype)
        builder.add_node(INPUT_PREFIX + name, data, name, shape, dtype)
        env[param] = name
    builder.bindings(func, env, ())
    result = func.body.body
    out_name = getattr(result, "name", "output")
    tensor = env.get(result, out_name)
    shape, dtype = builder.types.get(tensor, (None, None))
    out_id = OUTPUT_PREFIX + out_name
    builder.nodes.append(
        (out_id, node_data("output", "Output", out_name, inputs=[out_name], shape=shape, dtype=dtype))
    )
    if tensor in builder.producer:
        builder.edge(tensor, out_id, 0)
    return {"name": function, "nodes": builder.nodes, "edges": builder.edges}


def module_counts(mod: Any) -> dict[str, int]:
    """``bindings`` of ``main``, ``prim_funcs`` and ``fused`` functions (fused Relax functions and
    fused PrimFuncs) of a module: what a lowering step changed, in numbers.

    Examples
    --------
    >>> from tvm import relax
    >>> from explorer import zoo
    >>> from explorer.lower.tvm.relax_frontend import run_importer
    >>> mod = run_importer(zoo.build("mlp"), {"input": [1, 1, 28, 28]})["module"]
    >>> counts = module_counts(relax.transform.LegalizeOps()(mod))
    >>> module_counts(mod)["prim_funcs"], counts["prim_funcs"] > 0, counts["bindings"]
    (0, True, 12)
    """
    from tvm import relax

    funcs = list(mod.functions.items())
    prim = [gv for gv, f in funcs if not isinstance(f, relax.Function)]
    fused = [
        gv
        for gv, f in funcs
        if (isinstance(f, relax.Function) and f.attrs is not None and "Primitive" in f.attrs)
        or (not isinstance(f, relax.Function) and gv.name_hint.startswith("fused_"))
    ]
    main = mod["main"]
    bindings = [b for block in main.body.blocks for b in block.bindings]
    storages = [b.value for b in bindings if op_name(b.value) in _ALLOC_STORAGE]
    tensors = [b.value for b in bindings if op_name(b.value) in ALLOC_TENSOR]
    return {
        "bindings": len(bindings),
        "prim_funcs": len(prim),
        "fused": len(fused),
        "tensor_allocations": len(tensors),
        "tensor_bytes": sum(_tensor_bytes(call) for call in tensors),
        "storages": len(storages),
        "storage_bytes": sum(_storage_bytes(call) for call in storages),
    }


_ALLOC_STORAGE = frozenset({"relax.memory.alloc_storage", "relax.vm.alloc_storage"})
"""The ops that allocate a storage (a buffer tensors are placed in), before and after VM lowering."""

ALLOC_TENSOR = frozenset({"relax.builtin.alloc_tensor", "relax.memory.alloc_tensor", "relax.vm.alloc_tensor"})
"""The ops that allocate a tensor a kernel writes (after CallTIRRewrite), as the graph names them."""


def _storage_bytes(call: Any) -> int:
    """The bytes an ``alloc_storage`` allocates (its size is in bytes), where that size is static (else 0)."""
    from tvm import relax

    size = call.args[0]
    values = getattr(size, "values", None) if isinstance(size, relax.ShapeExpr) else None
    if not values or not all(hasattr(v, "value") for v in values):
        return 0
    return math.prod(int(v.value) for v in values)


def _tensor_bytes(call: Any) -> int:
    """The bytes of the tensor an ``alloc_tensor`` allocates (shape and dtype arguments), where static."""
    import tvm
    from tvm import relax

    shape = next((a for a in call.args if isinstance(a, relax.ShapeExpr)), None)
    dtypes = (_DTYPE_ARG.fullmatch(str(a)) for a in call.args)  # printed R.dtype("float32")
    dtype = next((m.group(1) for m in dtypes if m is not None), None)
    if shape is None or dtype is None or not all(hasattr(v, "value") for v in shape.values):
        return 0
    element = tvm.DataType(dtype)
    return math.prod(int(v.value) for v in shape.values) * element.bits * element.lanes // 8


_DTYPE_ARG = re.compile(r'R\.dtype\("(\w+)"\)')


def prim_func_scripts(mod: Any) -> dict[str, str]:
    """PrimFunc name -> its TVMScript, for every PrimFunc of ``mod`` (what a lowering step shows as TIR).

    Examples
    --------
    >>> from tvm import relax
    >>> from explorer import zoo
    >>> from explorer.lower.tvm.relax_frontend import run_importer
    >>> imported = run_importer(zoo.build("mlp"), {"input": [1, 1, 28, 28]})["module"]
    >>> mod = relax.transform.LegalizeOps()(imported)
    >>> sorted(prim_func_scripts(mod))[:2], "T.prim_func" in prim_func_scripts(mod)["relu"]
    (['add', 'add1'], True)
    """
    from tvm import relax

    return {gv.name_hint: f.script() for gv, f in mod.functions.items() if not isinstance(f, relax.Function)}


class _GraphBuilder:
    """Collects node and edge records while walking bindings (fused functions inline)."""

    def __init__(self, mod: Any, origins: Mapping[Any, str]) -> None:
        self.mod = mod
        self.origins = origins
        self.nodes: list[tuple[str, dict[str, Any]]] = []
        self.edges: list[tuple[str, str, str, dict[str, Any]]] = []
        self.producer: dict[str, str] = {}
        self.types: dict[str, tuple[Any, str | None]] = {}
        self.index = 0
        self.unique = UniqueNames(separator="#")  # Relax variables share name hints

    def add_node(
        self, node_id: str, data: dict[str, Any], tensor: str, shape: Any, dtype: str | None
    ) -> None:
        self.nodes.append((node_id, data))
        self.producer[tensor] = node_id
        self.types[tensor] = (shape, dtype)

    def edge(self, tensor: str, target: str, slot: int) -> None:
        shape, dtype = self.types.get(tensor, (None, None))
        nbytes = _nbytes(shape, dtype)
        self.edges.append(
            (self.producer[tensor], target, tensor, edge_data(tensor, shape, dtype, nbytes, slots=(slot,)))
        )

    def bindings(
        self,
        func: Any,
        env: dict[Any, str],
        scope: tuple[str, ...],
        constants: Mapping[Any, Any] | None = None,
    ) -> None:
        """Walk ``func``'s bindings; ``env`` maps its variables to tensor names of the graph,
        ``constants`` those of its parameters that a caller bound to constants (a fused function)."""
        from tvm import relax

        prefix = f"{scope[-1]}/" if scope else ""
        for block in func.body.blocks:
            for binding in block.bindings:
                var, value = binding.var, binding.value
                callee = getattr(value, "op", None)
                target = None
                if isinstance(callee, relax.GlobalVar) and callee in self.mod.functions:
                    target = self.mod[callee]
                if isinstance(target, relax.Function) and not scope:  # a fused function: its members
                    inner_env: dict[Any, str] = {}
                    consts: dict[Any, Any] = {}
                    for param, arg in zip(target.params, value.args, strict=False):
                        if is_var(arg) and arg in env:
                            inner_env[param] = env[arg]
                        else:
                            consts[param] = arg
                    group = (self.unique(callee.name_hint),)  # one box per call
                    self.bindings(target, inner_env, group, consts)
                    result = target.body.body
                    if result in inner_env:
                        env[var] = inner_env[result]
                    continue
                node_id = self.unique(prefix + var.name)
                self._op_node(node_id, var, value, env, scope, constants or {})
                env[var] = node_id

    def _op_node(
        self,
        node_id: str,
        var: Any,
        value: Any,
        env: dict[Any, str],
        scope: tuple[str, ...],
        constants: Mapping[Any, Any],
    ) -> None:
        from tvm import relax

        shape, dtype = tensor_dims(var.ty), tensor_dtype(var.ty)
        op = op_name(value)
        op_type = op.removeprefix("relax.")
        args = operands(value)
        attributes = call_attributes(value)
        if isinstance(value, relax.TupleGetItem):
            attributes["index"] = int(value.index)
        callee = called_prim_func(value)
        direct = getattr(value, "op", None)
        if isinstance(direct, relax.GlobalVar) and not isinstance(
            self.mod.functions.get(direct), relax.Function
        ):
            op, callee = (
                CALL_PRIM_FUNC,
                direct.name_hint,
            )  # after CallTIRRewrite: it writes its last argument
        if callee is not None:
            op_type = callee  # the PrimFunc: conv2d, fused_conv2d_add_relu, ...
            attributes["prim_func"] = callee
        weights = []
        reads: list[tuple[str, int]] = []
        for slot, arg in enumerate(args):
            if is_var(arg) and arg in constants:
                arg = constants[arg]
            if is_var(arg) and arg in env and env[arg] in self.producer:
                reads.append((env[arg], slot))
            elif hasattr(arg, "value") and hasattr(arg, "ty") and tensor_dims(arg.ty) is not None:
                wshape, wdtype = tensor_dims(arg.ty), tensor_dtype(arg.ty)
                numel = math.prod(d for d in wshape or () if isinstance(d, int))
                weights.append(
                    TensorInfo(
                        f"{node_id}.const{slot}",
                        tuple(wshape or ()),
                        wdtype or "",
                        numel,
                        _nbytes(wshape, wdtype) or 0,
                        source="constant",
                    )
                )
            else:
                attributes[f"arg{slot}"] = " ".join(str(arg).split())[:80]
        data = node_data(
            "op",
            op_type,
            var.name,
            op=op,
            index=self.index,
            attributes=attributes,
            inputs=[n for n, _ in reads],
            outputs=[node_id],
            scope=scope,
            weights=weights,
            origin=(self.origins[var],) if var in self.origins else (),
        )
        self.add_node(node_id, data, node_id, shape, dtype)
        for tensor, slot in reads:
            self.edge(tensor, node_id, slot)
        self.index += 1


def _nbytes(shape: Any, dtype: str | None) -> int | None:
    if shape is None or dtype is None or any(not isinstance(d, int) for d in shape):
        return None
    import numpy as np

    try:
        itemsize = np.dtype(dtype).itemsize
    except TypeError:
        return None
    return math.prod(shape) * itemsize

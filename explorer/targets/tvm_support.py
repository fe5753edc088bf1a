"""Which ONNX nodes TVM Relax takes: its ONNX importer, tried on each distinct node for real.

The importer's converter table says which op types it knows, but a converter can still
refuse an attribute value, an opset or a dynamic input. So every distinct node of a model
(op, domain, opset, attributes, and its inputs' dtypes, ranks and constness) is written as
a one-node model and imported by ``tvm.relax.frontend.onnx.from_onnx`` in the worker (a
crash there costs the worker, not the notebook). Small constants keep their values
(shape-carrying inputs need them); large weights become graph inputs of the same type.
A node whose import raises is unsupported, with the importer's words as the reason.

TVM compiles a whole graph or nothing, and in a whole graph the importer knows more than
in one node: a Reshape whose shape comes from Shape ops gets a symbolic shape, not an
unknown tensor. So the whole model is imported first; when it imports, every node is
supported. Only when it does not are the nodes tried one by one, and a node that fails
alone with an input computed at run time is reported as needing that input at import
time (fixed input shapes and onnxsim make it a constant).

Examples
--------
>>> from explorer import load
>>> judged = tvm_reasons(load("zoo:mlp"))
>>> sorted(judged.values())
[[], [], [], [], [], []]
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from explorer.isolation import worker
from explorer.lower.tvm.relax_frontend import importer_ops
from explorer.onnx_adapter.adapter import has_onnx_model, opset_versions
from explorer.onnx_adapter.model_files import worker_source
from explorer.onnx_adapter.protos import constant_tensor
from explorer.targets.support import CONSTANT_INPUT, IMPORT_FAILED, OP_MISSING, NodeFacts, Reason

if TYPE_CHECKING:
    from onnx import ModelProto, NodeProto, TensorProto

    from explorer.core.graph import ModelGraph

__all__ = [
    "tvm_reasons",
    "node_signature",
    "single_node_model",
    "small_constant",
    "import_each",
    "import_whole",
    "KEEP_VALUES_UP_TO",
]

KEEP_VALUES_UP_TO = 4096
"""Constants with at most this many elements keep their values in the one-node models."""


def node_signature(facts: NodeFacts) -> str:
    """What makes two nodes the same to the importer: op, opset, attributes, input types.

    Examples
    --------
    >>> from explorer.targets.support import NodeFacts, TensorFact
    >>> x = TensorFact("x", "float32", (1, 4), False)
    >>> node_signature(NodeFacts("a", "Relu", "", 17, 14, (x,), (), {})) == node_signature(
    ...     NodeFacts("b", "Relu", "", 17, 14, (x,), (), {}))
    True
    """
    inputs = [None if t is None else (t.dtype, t.rank, t.constant) for t in facts.inputs]
    return json.dumps(
        [facts.domain_name, facts.op, facts.opset, sorted(facts.attributes.items()), inputs], default=repr
    )


def small_constant(graph: ModelGraph, name: str) -> TensorProto | None:
    """A constant's value (an initializer, or a Constant node's output) when it has at most
    :data:`KEEP_VALUES_UP_TO` elements and can be read; else None (it becomes a typed input).

    Examples
    --------
    >>> from explorer import load
    >>> small_constant(load("zoo:mlp"), "fc1.weight") is None  # 200,704 values: kept out
    True
    """
    from onnx import numpy_helper

    from explorer.onnx_adapter.weights import tensor_array

    info = graph.weights.get(name)
    if info is None or (info.numel or 0) > KEEP_VALUES_UP_TO or not has_onnx_model(graph):
        return None
    proto = next((t for t in graph.model.graph.initializer if t.name == name), None)
    if proto is None:
        for node in graph.model.graph.node:
            if node.op_type == "Constant" and name in node.output:
                proto = constant_tensor(node)
                break
    if proto is None:
        return None
    try:
        return numpy_helper.from_array(tensor_array(proto, graph.weights_dir), name)
    except Exception:
        return None


def _value_info(name: str, dtype: str | None, shape: Any, unknown_dtype: bool = False) -> Any:
    """A typed graph input / output: symbolic dims by name; an unknown dtype is float (inputs) or
    left undefined (outputs, which the importer infers)."""
    from onnx import TensorProto, helper

    from explorer.onnx_adapter.tensor_protos import dtype_from_name

    unknown = TensorProto.UNDEFINED if unknown_dtype else TensorProto.FLOAT
    elem = dtype_from_name(dtype) if dtype else unknown
    dims = None if shape is None else [d if isinstance(d, int) and d >= 0 else str(d) for d in shape]
    return helper.make_tensor_value_info(name, elem, dims)


def single_node_model(graph: ModelGraph, facts: NodeFacts, node: NodeProto) -> ModelProto:
    """``node`` alone in a model: its inputs typed as in ``graph``, small constants with their values.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.targets.support import node_facts
    >>> g = load("zoo:resnet18")
    >>> proto = g.model.graph.node[0]
    >>> m = single_node_model(g, node_facts(g)["/conv1/Conv"], proto)
    >>> [i.name for i in m.graph.input], len(m.graph.initializer)
    (['input', 'conv1.weight'], 0)
    """
    from onnx import helper

    inputs, initializers = [], []
    for tensor in facts.inputs:
        if tensor is None:
            continue
        value = small_constant(graph, tensor.name) if tensor.constant else None
        if value is not None:
            initializers.append(value)
        else:
            inputs.append(_value_info(tensor.name, tensor.dtype, tensor.shape))
    names = {i.name for i in inputs} | {t.name for t in initializers}
    for _, _, name, data in graph.nx.in_edges(facts.node, keys=True, data=True):
        if data.get("implicit") and name not in names:  # read by a subgraph of the node
            inputs.append(_value_info(name, data.get("dtype"), data.get("shape")))
            names.add(name)
    outputs = [_value_info(t.name, t.dtype, None, unknown_dtype=True) for t in facts.outputs if t is not None]
    one = helper.make_graph([node], "one_node", inputs, outputs, initializer=initializers)
    opsets = [helper.make_opsetid(domain, version) for domain, version in opset_versions(graph).items()]
    model = helper.make_model(one, opset_imports=opsets)
    if has_onnx_model(graph):
        model.ir_version = graph.model.ir_version
    return model


def import_each(models: list[bytes]) -> list[str | None]:
    """Import each serialized one-node model with TVM's ONNX importer (run in the worker).

    Returns
    -------
    list
        Per model: None when it imported, else ``"ErrorType: first line"``.

    Examples
    --------
    >>> from explorer import zoo
    >>> worker.run(import_each, [zoo.single_op("Relu", (2,)).SerializeToString()])
    [None]
    """
    import onnx

    out: list[str | None] = []
    for i, blob in enumerate(models):
        worker.report(i / max(len(models), 1), f"importing node {i + 1} of {len(models)}")
        out.append(_import_error(lambda b=blob: onnx.load_from_string(b)))
    return out


def import_whole(path: str) -> str | None:
    """Import the model file at ``path`` with TVM's ONNX importer (in the worker): None, or the error.

    Examples
    --------
    >>> from explorer import zoo
    >>> worker.run_on_model(import_whole, zoo.build("mlp")) is None
    True
    """
    import onnx

    worker.report(0.0, "importing the whole model")
    return _import_error(lambda: onnx.load(path))


def _import_error(read_model: Any) -> str | None:
    """Import the model ``read_model()`` gives with TVM's importer: None, or ``"ErrorType: first line"``."""
    from tvm.relax.frontend.onnx import from_onnx

    try:
        with contextlib.redirect_stdout(io.StringIO()):  # the importer prints its own errors
            from_onnx(read_model(), keep_params_in_input=False)
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        return f"{type(exc).__name__}: {first[:300]}"
    return None


def _failure_reasons(facts: NodeFacts, error: str) -> list[Reason]:
    """The reasons of a node that failed alone: an input computed at run time, else the error."""
    computed = [
        (i, t.name)
        for i, t in enumerate(facts.inputs)
        if i > 0 and t is not None and not t.constant and t.dtype in ("int64", "int32")
    ]
    if computed:
        i, name = computed[0]
        return [
            Reason(
                CONSTANT_INPUT,
                f"input {i} ({name}) is computed at run time; TVM's importer needs it at import time "
                f"(fix the input shapes and run onnxsim) [{error}]",
            )
        ]
    return [Reason(IMPORT_FAILED, error)]


@functools.cache
def _converted_ops() -> frozenset[str] | None:
    """The op types the importer converts (asked once per process, in the worker), None without TVM."""
    return worker.run(_importer_ops_if_installed, step="TVM importer's converter table")


def _importer_ops_if_installed() -> frozenset[str] | None:
    try:
        return importer_ops()
    except ImportError:
        return None


def tvm_reasons(graph: ModelGraph, facts: Mapping[str, NodeFacts] | None = None) -> dict[str, list[Reason]]:
    """Import each distinct node of ``graph`` into Relax and say which failed, and why.

    Parameters
    ----------
    graph : ModelGraph
        An ONNX graph with its model.
    facts : mapping, optional
        Its :func:`~explorer.targets.support.node_facts`.

    Returns
    -------
    dict
        Node id -> reasons (empty when the node imported).

    Examples
    --------
    >>> from explorer import load
    >>> judged = tvm_reasons(load("zoo:custom_domain"))
    >>> sorted({r.kind for reasons in judged.values() for r in reasons})
    ['op missing']
    """
    from explorer.targets.support import node_facts

    facts = node_facts(graph) if facts is None else facts
    if not has_onnx_model(graph):
        return {}
    known = _converted_ops()
    if known is not None and all(f.op in known for f in facts.values()) and not graph.model.functions:
        whole = worker.run_on_model(import_whole, worker_source(graph), step="TVM import of the model")
        if whole is None:
            return {node: [] for node in facts}
    protos = {node: graph.model.graph.node[graph.nx.nodes[node]["index"]] for node in facts}
    out: dict[str, list[Reason]] = {}
    distinct: dict[str, list[str]] = {}
    for node, f in facts.items():
        if f.function_body is not None or (known is not None and f.op not in known):
            out[node] = [Reason(OP_MISSING, f"TVM's ONNX importer has no converter for {f.qualified_op}")]
            continue
        distinct.setdefault(node_signature(f), []).append(node)
    order = list(distinct)
    blobs = [
        single_node_model(graph, facts[distinct[s][0]], protos[distinct[s][0]]).SerializeToString()
        for s in order
    ]
    errors = worker.run(import_each, blobs, step="TVM import of each distinct node") if blobs else []
    for signature, error in zip(order, errors, strict=True):
        for node in distinct[signature]:
            out[node] = [] if error is None else _failure_reasons(facts[node], error)
    return out

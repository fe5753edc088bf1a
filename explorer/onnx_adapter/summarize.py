"""The ONNX summary: producer, IR version, opsets, functions, external data and ops no runtime knows.

Examples
--------
>>> from explorer import load
>>> s = summarize(load("zoo:mlp"))
>>> s.to_dict()["nodes"] == sum(s.ops.values())
True
"""

from __future__ import annotations

import math
from collections import Counter
from typing import TYPE_CHECKING

import onnx
from onnx import GraphProto

from explorer.core.errors import UsageError
from explorer.core.node_ids import INPUT_PREFIX, OUTPUT_PREFIX
from explorer.core.summary import STANDARD_DOMAINS, ModelSummary, TensorSpec, dynamic_dims
from explorer.onnx_adapter.decoder import decoder_spec
from explorer.onnx_adapter.model_wire import in_model_file
from explorer.onnx_adapter.ort_registry import ort_ops
from explorer.onnx_adapter.protos import constant_tensor, has_schema, iter_graphs
from explorer.onnx_adapter.tensor_protos import dtype_name, shape_bytes, shape_from_type

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph

__all__ = ["summarize"]


def summarize(graph: ModelGraph) -> ModelSummary:
    """Compute the summary of a top-level ModelGraph.

    Parameters
    ----------
    graph : ModelGraph
        A graph returned by :func:`explorer.load`.

    Returns
    -------
    ModelSummary

    Examples
    --------
    >>> from explorer import load
    >>> summarize(load("zoo:mlp")).inputs[0].name
    'input'
    """
    model = graph.model
    if model is None:
        raise UsageError("summaries are computed for top-level graphs (this one has no ModelProto)")
    main = model.graph
    ops = dict(graph.op_counts)  # the main graph's node list, as the ONNX adapter counted it
    local_functions = {(f.domain, f.name) for f in model.functions}
    in_file = graph.lazy_file.path if graph.lazy_file is not None else None
    sub_ops: Counter[str] = Counter()
    unknown: set[str] = set()
    contrib: set[str] = set()
    params = param_bytes = initializers = constants = external = subgraphs = max_depth = 0

    graphs: list[tuple[GraphProto, int, bool]] = [(g, d, False) for g, d in iter_graphs(main)]
    for function in model.functions:
        graphs.extend((g, d, True) for g, d in iter_graphs(_function_body(function)))
    for graph_proto, depth, in_function in graphs:
        if depth > 0 and not in_function:
            subgraphs += 1
            max_depth = max(max_depth, depth)
            sub_ops.update(n.op_type for n in graph_proto.node)
        tensors = list(graph_proto.initializer)
        initializers += len(graph_proto.initializer)
        for node in graph_proto.node:
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
                constants += 1
                tensor = constant_tensor(node)
                if tensor is not None:
                    tensors.append(tensor)
            elif (node.domain, node.op_type) not in local_functions and not has_schema(
                node.op_type, node.domain
            ):
                key = (node.domain or "ai.onnx", node.op_type)
                (contrib if key in ort_ops() else unknown).add("::".join(key))
        for tensor in tensors:
            dims = tuple(int(d) for d in tensor.dims)
            params += math.prod(dims)
            param_bytes += shape_bytes(dims, tensor.data_type) or 0
            # a tensor load left in the model file reads as external data, but the file holds it
            stored_outside = tensor.data_location == onnx.TensorProto.EXTERNAL
            external += stored_outside and not in_model_file(tensor, in_file)

    opsets = {(o.domain or "ai.onnx"): int(o.version) for o in model.opset_import}
    custom = tuple(sorted(d for d in opsets if d not in STANDARD_DOMAINS))
    initializer_names = {t.name for t in main.initializer}
    inputs = tuple(_spec(v, graph) for v in main.input if v.name not in initializer_names)
    outputs = tuple(_spec(v, graph) for v in main.output)
    dynamic = dynamic_dims((*inputs, *outputs))

    shapes = [shape for *_, shape in graph.nx.edges(data="shape")]
    known = sum(1 for s in shapes if s is not None and all(d is not None for d in s))
    producer = f"{model.producer_name} {model.producer_version}".strip()
    return ModelSummary(
        source=graph.source,
        graph_name=main.name,
        producer=producer,
        ir_version=int(model.ir_version),
        opsets=opsets,
        nodes=len(main.node),
        ops=ops,
        ops_in_subgraphs=dict(sub_ops),
        inputs=inputs,
        outputs=outputs,
        params=params,
        param_bytes=param_bytes,
        initializers=initializers,
        constant_nodes=constants,
        dynamic_dims=tuple(dynamic),
        subgraphs=subgraphs,
        max_depth=max_depth,
        unknown_ops=tuple(sorted(unknown)),
        runtime_ops=tuple(sorted(contrib)),
        custom_domains=custom,
        functions=len(model.functions),
        external_tensors=external,
        shapes_known=round(known / len(shapes), 4) if shapes else 1.0,
        notes=tuple(graph.notes),
        llm=None if (decoder := decoder_spec(model, graph.model_path)) is None else decoder.to_dict(),
    )


def _function_body(function: onnx.FunctionProto) -> GraphProto:
    """Wrap a function body as a graph so its nodes and subgraphs can be walked."""
    body = GraphProto(name=function.name)
    body.node.extend(function.node)
    return body


def _spec(value: onnx.ValueInfoProto, graph: ModelGraph) -> TensorSpec:
    node_id = (INPUT_PREFIX if graph.nx.has_node(INPUT_PREFIX + value.name) else OUTPUT_PREFIX) + value.name
    data = graph.nx.nodes.get(node_id)
    if data is not None and data.get("shape") is not None:
        return TensorSpec(value.name, data.get("dtype"), data["shape"])
    shape, elem_type = shape_from_type(value.type)
    return TensorSpec(value.name, dtype_name(elem_type) if elem_type else None, shape)

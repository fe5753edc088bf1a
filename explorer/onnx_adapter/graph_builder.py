"""Build the core's graph model from an ONNX model: the ONNX adapter's graph builder.

Nodes are operators (plus one node per graph input and output); edges are
tensor uses, keyed by tensor name, carrying shape, dtype and byte size.
Initializers and ``Constant`` nodes are attached to the operators that read
them (as :class:`~explorer.core.tensors.TensorInfo` weights) instead of being drawn.
The subgraphs of ``If`` / ``Loop`` / ``Scan`` become nested ModelGraphs.

Every walk over the model is iterative, so deeply nested control flow and
100k-node chains never hit Python's recursion limit.

Examples
--------
>>> from explorer import zoo
>>> mg = build_graph(zoo.single_op("Relu", node_name="/act/Relu"))
>>> sorted(mg.nx.nodes)
['/act/Relu', 'input:x', 'output:y']
>>> mg.nx.nodes["/act/Relu"]["scope"]
('act',)
"""

from __future__ import annotations

from collections import ChainMap, Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx
from onnx import AttributeProto, GraphProto, ModelProto, NodeProto

from explorer.core.errors import DanglingInputError, GraphCycleError, InvalidModelError
from explorer.core.graph import ModelGraph
from explorer.core.graph_schema import edge_data, node_data
from explorer.core.node_ids import INPUT_PREFIX, OUTER_PREFIX, OUTPUT_PREFIX
from explorer.core.scopes import node_scope
from explorer.core.tensors import Shape, TensorInfo
from explorer.onnx_adapter.adapter import ONNX, onnx_model
from explorer.onnx_adapter.protos import (
    GraphPath,
    constant_tensor,
    declared_types,
    iter_graph_paths,
    iter_graphs,
    subgraph_attrs,
)
from explorer.onnx_adapter.tensor_protos import dtype_name, shape_bytes, shape_from_type, tensor_info

__all__ = ["TypeTable", "apply_types", "build_graph", "onnx_node_ids"]

TypeTable = Mapping[str, tuple[Shape | None, int]]
"""Tensor name -> (shape, ONNX element type) within one graph, as found by shape inference."""


def _decode_attribute(attr: AttributeProto) -> Any:
    kind = attr.type
    if kind == AttributeProto.FLOAT:
        return attr.f
    if kind == AttributeProto.INT:
        return attr.i
    if kind == AttributeProto.STRING:
        return attr.s.decode("utf-8", "replace")
    if kind == AttributeProto.FLOATS:
        return list(attr.floats)
    if kind == AttributeProto.INTS:
        return list(attr.ints)
    if kind == AttributeProto.STRINGS:
        return [s.decode("utf-8", "replace") for s in attr.strings]
    if kind == AttributeProto.TENSOR:
        return tensor_info(attr.t, source="attribute").to_dict()
    if kind == AttributeProto.TENSORS:
        return [tensor_info(t, source="attribute").to_dict() for t in attr.tensors]
    if kind == AttributeProto.GRAPH:
        return f"<subgraph {attr.g.name!r}: {len(attr.g.node)} nodes>"
    if kind == AttributeProto.GRAPHS:
        return [f"<subgraph {g.name!r}: {len(g.node)} nodes>" for g in attr.graphs]
    if kind == AttributeProto.SPARSE_TENSOR:
        return {"sparse": True, "dims": list(attr.sparse_tensor.dims)}
    if kind == AttributeProto.TYPE_PROTO:
        return str(attr.tp)
    if attr.ref_attr_name:
        return f"<ref {attr.ref_attr_name}>"
    return None


def _outer_reads(node: NodeProto) -> set[str]:
    """Names the node's subgraphs (at any depth) read but do not define themselves."""
    read: set[str] = set()
    defined: set[str] = set()
    for attr in node.attribute:
        for _, top in subgraph_attrs(attr):
            for graph, _ in iter_graphs(top):
                defined.update(v.name for v in graph.input)
                defined.update(t.name for t in graph.initializer)
                defined.update(t.values.name for t in graph.sparse_initializer)
                for sub in graph.node:
                    defined.update(sub.output)
                    read.update(name for name in sub.input if name)
                read.update(v.name for v in graph.output)
    return read - defined


@dataclass
class _Scope:
    """Names visible in one graph, chained to the enclosing graph's scope."""

    names: set[str]
    parent: _Scope | None = None

    def resolves(self, name: str) -> bool:
        scope: _Scope | None = self
        while scope is not None:
            if name in scope.names:
                return True
            scope = scope.parent
        return False


@dataclass
class _Job:
    proto: GraphProto
    scope: _Scope | None
    depth: int
    path: tuple[tuple[int, str], ...] = ()
    label: str = "main graph"


_Drawn = list[tuple[str, int, NodeProto]]
"""(node id, index in the node list, node) of the operators a graph draws."""


def onnx_node_ids(nodes: Sequence[NodeProto]) -> list[str]:
    """The graph model's ids of a graph's nodes (its node list, in order): the node's name when it is
    unique, else ``NAME#INDEX`` or ``OPTYPE#INDEX`` (an unnamed node).

    Examples
    --------
    >>> from onnx import helper
    >>> nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Relu", ["y"], ["z"], name="r")]
    >>> onnx_node_ids(nodes)
    ['Relu#0', 'r']
    """
    return _node_ids(list(nodes), list(range(len(nodes))), set())


def _node_ids(nodes: list[NodeProto], indices: list[int], reserved: set[str]) -> list[str]:
    counts = Counter(n.name for n in nodes)
    taken = set(reserved)
    ids: list[str] = []
    for index, node in zip(indices, nodes, strict=True):
        name = node.name
        if name and counts[name] == 1 and name not in taken:
            node_id = name
        else:
            node_id = f"{name or node.op_type}#{index}"
            while node_id in taken:
                node_id += "'"
        taken.add(node_id)
        ids.append(node_id)
    return ids


def _edge_data(name: str, types: TypeTable, slots: tuple[int, ...], implicit: bool) -> dict[str, Any]:
    shape, elem_type = types.get(name, (None, 0))
    dtype = dtype_name(elem_type) if elem_type else None
    nbytes = shape_bytes(shape, elem_type) if elem_type else None
    return edge_data(name, shape, dtype, nbytes, slots=slots, implicit=implicit)


def _build_one(
    job: _Job, types: TypeTable, constants_as_nodes: bool, source: str, external_available: bool
) -> tuple[ModelGraph, _Scope, _Drawn]:
    """Build one graph (not its subgraphs); also return its scope and drawn nodes for the subgraphs."""
    proto = job.proto
    where = f"{source} ({job.label})" if job.label != "main graph" else source
    weights: dict[str, TensorInfo] = {
        t.name: tensor_info(t, external_available=external_available) for t in proto.initializer
    }
    for sparse in proto.sparse_initializer:
        weights[sparse.values.name] = TensorInfo(
            sparse.values.name,
            tuple(int(d) for d in sparse.dims),
            dtype_name(sparse.values.data_type),
            int(sparse.values.dims[0]) if sparse.values.dims else 0,
            0,
            source="initializer",
        )
    graph_outputs = {v.name for v in proto.output}

    drawn: list[NodeProto] = []
    indices: list[int] = []
    for index, node in enumerate(proto.node):
        if (
            not constants_as_nodes
            and node.op_type == "Constant"
            and node.domain in ("", "ai.onnx")
            and len(node.output) == 1
            and node.output[0] not in graph_outputs
        ):
            tensor = constant_tensor(node)
            if tensor is not None:
                weights[node.output[0]] = tensor_info(
                    tensor, source="constant", external_available=external_available
                )
                continue
        drawn.append(node)
        indices.append(index)

    inputs = [v for v in proto.input if v.name not in weights]
    reserved = {INPUT_PREFIX + v.name for v in inputs} | {OUTPUT_PREFIX + v.name for v in proto.output}
    ids = _node_ids(drawn, indices, reserved)

    producer: dict[str, str] = {}
    for value in inputs:
        producer[value.name] = INPUT_PREFIX + value.name
    for node_id, node in zip(ids, drawn, strict=True):
        for out in node.output:
            if not out:
                continue
            if out in producer or out in weights:
                raise InvalidModelError(
                    f"tensor {out!r} is produced twice (again by node {node_id!r} "
                    f"[{node.op_type}]); ONNX graphs must assign each tensor once",
                    path=where,
                )
            producer[out] = node_id

    graph = nx.MultiDiGraph(name=proto.name)
    node_rows: list[tuple[str, dict[str, Any]]] = []
    for value in inputs:
        shape, elem_type = types.get(value.name) or shape_from_type(value.type)
        dtype = dtype_name(elem_type) if elem_type else None
        data = node_data("input", "Input", value.name, outputs=[value.name], shape=shape, dtype=dtype)
        node_rows.append((INPUT_PREFIX + value.name, data))

    edge_rows: list[tuple[str, str, str, dict[str, Any]]] = []
    outer_nodes: dict[str, str] = {}
    scope = _Scope(set(producer) | set(weights), job.scope)

    def source_of(name: str, reader: str) -> str | None:
        """Producer node id of a tensor, or None when it is a weight."""
        if name in weights:
            return None
        if name in producer:
            return producer[name]
        if job.scope is not None and job.scope.resolves(name):
            if name not in outer_nodes:
                outer_nodes[name] = OUTER_PREFIX + name
            return outer_nodes[name]
        raise DanglingInputError(
            f"{reader} reads tensor {name!r}, which no node, graph input or initializer produces",
            path=where,
        )

    for node_id, index, node in zip(ids, indices, drawn, strict=True):
        subgraph_attrs = tuple(
            a.name for a in node.attribute if a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS)
        )
        node_weights: dict[str, TensorInfo] = {}
        slots_by_tensor: dict[str, list[int]] = {}
        for slot, name in enumerate(node.input):
            if not name:
                continue
            src = source_of(name, f"node {node_id!r} [{node.op_type}]")
            if src is None:
                node_weights.setdefault(name, weights[name])
            else:
                slots_by_tensor.setdefault(name, []).append(slot)
        for name, slots in slots_by_tensor.items():
            edge_rows.append(
                (
                    producer.get(name) or outer_nodes[name],
                    node_id,
                    name,
                    _edge_data(name, types, tuple(slots), False),
                )
            )
        if subgraph_attrs:
            for name in sorted(_outer_reads(node)):
                if name in slots_by_tensor:
                    continue
                if name in weights:
                    node_weights.setdefault(name, weights[name])
                    continue
                if name in producer or (job.scope is not None and job.scope.resolves(name)):
                    src = source_of(name, f"a subgraph of node {node_id!r} [{node.op_type}]")
                    edge_rows.append((src, node_id, name, _edge_data(name, types, (), True)))
                else:
                    raise DanglingInputError(
                        f"a subgraph of node {node_id!r} [{node.op_type}] reads tensor {name!r}, "
                        "which nothing in or around it produces",
                        path=where,
                    )
        data = node_data(
            "op",
            node.op_type,
            node.name,
            domain=node.domain,
            index=index,
            attributes={a.name: _decode_attribute(a) for a in node.attribute},
            inputs=node.input,
            outputs=node.output,
            scope=node_scope(node),
            weights=node_weights.values(),
            subgraphs=subgraph_attrs,
        )
        node_rows.append((node_id, data))

    for value in proto.output:
        out_id = OUTPUT_PREFIX + value.name
        shape, elem_type = types.get(value.name) or shape_from_type(value.type)
        dtype = dtype_name(elem_type) if elem_type else None
        data = node_data("output", "Output", value.name, inputs=[value.name], shape=shape, dtype=dtype)
        src = source_of(value.name, f"graph output {value.name!r}")
        if src is None:
            data["weights"] = (weights[value.name],)
        else:
            edge_rows.append((src, out_id, value.name, _edge_data(value.name, types, (0,), False)))
        node_rows.append((out_id, data))

    for name, outer_id in outer_nodes.items():
        shape, elem_type = types.get(name, (None, 0))
        dtype = dtype_name(elem_type) if elem_type else None
        data = node_data("outer", "Outer", name, outputs=[name], shape=shape, dtype=dtype)
        node_rows.append((outer_id, data))

    graph.add_nodes_from(node_rows)
    graph.add_edges_from(edge_rows)
    _check_acyclic(graph, where)
    built = ModelGraph(graph, proto=proto, weights=weights, source=source, depth=job.depth, adapter=ONNX)
    return built, scope, list(zip(ids, indices, drawn, strict=True))


def _check_acyclic(graph: nx.MultiDiGraph, where: str) -> None:
    if nx.is_directed_acyclic_graph(graph):
        return
    cycle = nx.find_cycle(graph)
    names = [u for u, *_ in cycle]
    shown = " -> ".join(repr(n) for n in names[:8]) + (" -> ..." if len(names) > 8 else "")
    raise GraphCycleError(
        f"the graph has a cycle, so there is no data-flow order: {shown} -> {names[0]!r}",
        path=where,
    )


def _type_tables(model: ModelProto, types: Mapping[Any, Any] | None) -> dict[GraphPath, TypeTable]:
    """Per graph path: declared types overlaid with ``types``; subgraphs see their parents' names."""
    flat = bool(types) and all(isinstance(k, str) for k in types)  # a flat table: the main graph
    given: Mapping[Any, Any] = {(): types} if flat else (types or {})
    tables: dict[GraphPath, TypeTable] = {}
    for path, graph_proto in iter_graph_paths(model.graph):
        own = {**declared_types(graph_proto), **dict(given.get(path, {}))}
        parent = tables[path[:-1]] if path else None
        if parent is None:
            tables[path] = own  # a plain dict: the main graph's lookups are the hot ones
        else:
            tables[path] = ChainMap(own, *(parent.maps if isinstance(parent, ChainMap) else [parent]))
    return tables


def apply_types(graph: ModelGraph, types: Mapping[Any, Any]) -> None:
    """Redraw a built graph's shapes and dtypes from ``types``, in place, as if it had been built with them.

    Lets :func:`explorer.load` build the graph while shape inference still runs
    in the worker: edges (``shape``, ``dtype``, ``bytes``) and graph inputs,
    outputs and outer-scope nodes of the graph and every subgraph get exactly
    what ``build_graph(model, types=types)`` gives them.

    Parameters
    ----------
    graph : ModelGraph
        A top-level graph from :func:`build_graph`.
    types : mapping
        As for :func:`build_graph`.

    Examples
    --------
    >>> from explorer import zoo
    >>> from explorer.onnx_adapter.shape_inference import infer_types
    >>> m = zoo.build("mlp")
    >>> g = build_graph(m)
    >>> apply_types(g, infer_types(m)[0])
    >>> g.nx.edges["/fc1/Gemm", "/relu1/Relu", "/fc1/Gemm_output_0"]["shape"]
    ('batch', 256)
    """
    onnx_model(graph, "apply_types")
    tables = _type_tables(graph.model, types)
    for _, sub in (((), graph), *graph.iter_subgraphs()):
        table = tables[sub.graph_path]
        declared = {v.name: v for v in (*sub.proto.input, *sub.proto.output)}
        for _, _, data in sub.nx.edges(data=True):
            data.update(_edge_data(data["tensor"], table, data["slots"], data["implicit"]))
        for _, data in sub.nx.nodes(data=True):
            kind = data["kind"]
            if kind in ("input", "output", "outer"):
                name = data["name"]
                value = declared.get(name) if kind != "outer" else None
                shape, elem_type = table.get(name) or (
                    shape_from_type(value.type) if value is not None else (None, 0)
                )
                data["shape"] = shape
                data["dtype"] = dtype_name(elem_type) if elem_type else None
        sub._summary = None


def build_graph(
    model: ModelProto,
    *,
    types: Mapping[Any, Any] | None = None,
    constants_as_nodes: bool = False,
    source: str = "<model>",
    weights_dir: Path | None = None,
) -> ModelGraph:
    """Build the ModelGraph of a model (and of all its subgraphs), iteratively.

    Parameters
    ----------
    model : onnx.ModelProto
        The model; it is referenced, not copied, and never modified.
    types : mapping, optional
        Graph path (see :func:`iter_graph_paths`) -> {tensor name -> (shape,
        element type)}, e.g. from :func:`explorer.onnx_adapter.shape_inference.infer_types`;
        a flat ``{name: (shape, type)}`` describes the main graph. Falls back
        to the types declared in the model. Subgraphs see their enclosing
        graphs' types for outer-scope names, and only those.
    constants_as_nodes : bool
        Draw ``Constant`` nodes as nodes instead of folding them into their consumers.
    source : str
        Where the model came from, used in error messages.
    weights_dir : Path, optional
        The folder whose checked external files hold the model's external tensors
        (they then count as loaded and are read on demand); see :func:`explorer.load`.

    Returns
    -------
    ModelGraph

    Raises
    ------
    DanglingInputError
        A node reads a tensor nothing produces.
    GraphCycleError
        The nodes form a cycle.
    InvalidModelError
        A tensor is produced twice.

    Examples
    --------
    >>> from explorer import zoo
    >>> list(build_graph(zoo.single_op("Neg", (2,))).nx.edges(keys=True))
    [('input:x', 'Neg#0', 'x'), ('Neg#0', 'output:y', 'y')]
    """
    tables = _type_tables(model, types)
    root_job = _Job(model.graph, None, 0)
    available = weights_dir is not None
    root, root_scope, root_drawn = _build_one(root_job, tables[()], constants_as_nodes, source, available)
    root.weights_dir = weights_dir
    root.model = model
    stack: list[tuple[_Job, ModelGraph, _Scope, _Drawn]] = [(root_job, root, root_scope, root_drawn)]
    while stack:
        job, owner, scope, drawn = stack.pop()
        for node_id, index, node in drawn:
            for attr in node.attribute:
                for key, sub_proto in subgraph_attrs(attr):
                    label = f"{job.label} > {node_id}.{key}" if job.depth else f"{node_id}.{key}"
                    if len(label) > 200:
                        label = "..." + label[-197:]
                    path = (*job.path, (index, key))
                    child_job = _Job(sub_proto, scope, job.depth + 1, path=path, label=label)
                    child, child_scope, child_drawn = _build_one(
                        child_job, tables[path], constants_as_nodes, source, available
                    )
                    child.weights_dir = weights_dir
                    child.graph_path = path
                    owner.subgraphs.setdefault(node_id, {})[key] = child
                    stack.append((child_job, child, child_scope, child_drawn))
    return root

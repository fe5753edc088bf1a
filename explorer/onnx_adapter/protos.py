"""Walks over ONNX protos that need no graph model: nested subgraphs, declared types, constants.

Shape inference, the weight checks, the summary and the worker's jobs read models with these
without building a :class:`~explorer.core.graph.ModelGraph`, so they import onnx but not networkx:
the worker starts faster, and nothing here depends on how a graph is drawn.

Examples
--------
>>> from explorer import zoo
>>> [depth for _, depth in iter_graphs(zoo.build("control_flow").graph)][:2]
[0, 1]
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import onnx
from onnx import AttributeProto, GraphProto, NodeProto, TensorProto

from explorer.core.tensors import Shape
from explorer.onnx_adapter.tensor_protos import shape_from_type

__all__ = [
    "GraphPath",
    "iter_graphs",
    "iter_graph_paths",
    "subgraph_attrs",
    "has_schema",
    "declared_types",
    "constant_tensor",
    "string_inputs",
]


def iter_graphs(graph: GraphProto) -> Iterator[tuple[GraphProto, int]]:
    """Yield a graph and all its nested subgraphs, with their nesting depth, iteratively.

    Examples
    --------
    >>> from onnx import helper
    >>> [depth for _, depth in iter_graphs(helper.make_graph([], "g", [], []))]
    [0]
    """
    for path, current in iter_graph_paths(graph):
        yield current, len(path)


GraphPath = tuple[tuple[int, str], ...]
"""Where a subgraph sits: ``((node index, attribute key), ...)`` from the main graph (``()``)."""


def iter_graph_paths(graph: GraphProto) -> Iterator[tuple[GraphPath, GraphProto]]:
    """Yield ``(path, graph)`` for a graph and all its nested subgraphs, iteratively.

    Examples
    --------
    >>> from explorer import zoo
    >>> [path for path, _ in iter_graph_paths(zoo.build("control_flow").graph)][:2]
    [(), ((6, 'body'),)]
    """
    stack: list[tuple[GraphPath, GraphProto]] = [((), graph)]
    kinds = (AttributeProto.GRAPH, AttributeProto.GRAPHS)
    while stack:
        path, current = stack.pop()
        yield path, current
        for index, node in enumerate(current.node):
            for attr in node.attribute:
                if attr.type in kinds:
                    for key, sub in subgraph_attrs(attr):
                        stack.append(((*path, (index, key)), sub))


def subgraph_attrs(attr: AttributeProto) -> list[tuple[str, GraphProto]]:
    """``(key, graph)`` for each graph an attribute holds (``body``, ``branches[0]``, ...).

    Examples
    --------
    >>> from onnx import helper
    >>> [key for key, _ in subgraph_attrs(helper.make_attribute("body", helper.make_graph([], "b", [], [])))]
    ['body']
    """
    if attr.type == AttributeProto.GRAPH:
        return [(attr.name, attr.g)]
    if attr.type == AttributeProto.GRAPHS:
        return [(f"{attr.name}[{i}]", g) for i, g in enumerate(attr.graphs)]
    return []


@functools.cache
def has_schema(op_type: str, domain: str) -> bool:
    """Whether the installed onnx has a schema for this operator (any version).

    Examples
    --------
    >>> has_schema("Conv", ""), has_schema("FusedConv", "com.microsoft")
    (True, False)
    """
    try:
        return onnx.defs.has(op_type, domain)
    except Exception:  # onnx raises for malformed domains
        return False


def declared_types(graph: GraphProto) -> dict[str, tuple[Shape | None, int]]:
    """Tensor name -> (shape, element type) as declared in one graph (I/O, value_info, initializers).

    Examples
    --------
    >>> from explorer import zoo
    >>> declared_types(zoo.build("mlp").graph)["input"]
    (('batch', 1, 28, 28), 1)
    """
    table: dict[str, tuple[Shape | None, int]] = {}
    for tensor in graph.initializer:
        table[tensor.name] = (tuple(int(d) for d in tensor.dims), tensor.data_type)
    for value in (*graph.input, *graph.output, *graph.value_info):
        shape, elem_type = shape_from_type(value.type)
        if value.name not in table or (table[value.name][0] is None and shape is not None):
            table[value.name] = (shape, elem_type)
    return table


def constant_tensor(node: NodeProto) -> TensorProto | None:
    """Return the tensor a ``Constant`` node produces, or ``None`` if it has no dense value.

    Examples
    --------
    >>> from onnx import helper
    >>> constant_tensor(helper.make_node("Constant", [], ["c"], value_ints=[1, 2])).dims
    [2]
    """
    name = node.output[0] if node.output else ""
    for attr in node.attribute:
        if attr.name == "value" and attr.type == AttributeProto.TENSOR:
            tensor = TensorProto()
            tensor.CopyFrom(attr.t)
            tensor.name = name
            return tensor
        maker = _CONSTANT_MAKERS.get(attr.name)
        if maker is not None:
            return maker(name, attr)
    return None


_CONSTANT_MAKERS: dict[str, Any] = {
    "value_float": lambda n, a: onnx.helper.make_tensor(n, TensorProto.FLOAT, [], [a.f]),
    "value_floats": lambda n, a: onnx.helper.make_tensor(n, TensorProto.FLOAT, [len(a.floats)], a.floats),
    "value_int": lambda n, a: onnx.helper.make_tensor(n, TensorProto.INT64, [], [a.i]),
    "value_ints": lambda n, a: onnx.helper.make_tensor(n, TensorProto.INT64, [len(a.ints)], a.ints),
    "value_string": lambda n, a: onnx.helper.make_tensor(n, TensorProto.STRING, [], [a.s]),
    "value_strings": lambda n, a: onnx.helper.make_tensor(n, TensorProto.STRING, [len(a.strings)], a.strings),
}


def string_inputs(model: onnx.ModelProto) -> list[str]:
    """The names of a model's graph inputs that are string tensors (not weights).

    Examples
    --------
    >>> from onnx import helper
    >>> s = helper.make_tensor_value_info("s", TensorProto.STRING, [1])
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    >>> string_inputs(helper.make_model(helper.make_graph([], "g", [s, x], [s, x])))
    ['s']
    """
    weights = {t.name for t in model.graph.initializer}
    return [
        v.name
        for v in model.graph.input
        if v.name not in weights and v.type.tensor_type.elem_type == TensorProto.STRING
    ]

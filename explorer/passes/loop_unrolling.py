"""Unroll ONNX ``Loop`` nodes whose trip count is a constant, into straight-line standard ONNX.

Compilers that take no control flow (TVM 0.27's Relax importer has no ``Loop``; NPU
compilers want a static graph) can take a loop that runs a known number of times once it
is written out: the body copied once per iteration, each copy reading the loop-carried
values the previous one produced, the scan outputs stacked with ``Unsqueeze`` and
``Concat``. This is what ``torch.jit`` tracing does to a Python loop, and what a learner
does by hand. A loop is unrolled only when that is exact: its trip count is a constant, its
condition is a constant true (or absent) and the body passes it through unchanged, and the
body holds no subgraphs of its own. Every other loop is kept, and the log says why.

Examples
--------
>>> from explorer import zoo
>>> model, log = unroll_loops(zoo.build("control_flow"))
>>> [n.op_type for n in model.graph.node].count("Loop"), log[0]
(0, '/loop/Loop: unrolled 3 iterations (18 nodes)')
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import onnx
from onnx import GraphProto, ModelProto, NodeProto, helper, numpy_helper

from explorer.core.unique_names import UniqueNames
from explorer.onnx_adapter.files import save_model
from explorer.onnx_adapter.protos import constant_tensor, iter_graphs, subgraph_attrs

__all__ = ["unroll_loops", "unroll_loops_step", "MAX_TRIPS"]

MAX_TRIPS = 64
"""Loops with more iterations than this are kept (the unrolled graph would be too big to read)."""


def _constants(graph: GraphProto) -> dict[str, np.ndarray]:
    """Values known before the graph runs: initializers and ``Constant`` node outputs."""
    values = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            tensor = constant_tensor(node)
            if tensor is not None:
                values[node.output[0]] = numpy_helper.to_array(tensor)
    return values


def _names(graph: GraphProto) -> set[str]:
    """Every value and node name in the graph (to keep new names unique)."""
    taken = {v.name for v in (*graph.input, *graph.output, *graph.value_info, *graph.initializer)}
    for node in graph.node:
        taken.update(node.input)
        taken.update(node.output)
        taken.add(node.name)
    return taken


def _why_not(loop: NodeProto, constants: dict[str, np.ndarray], max_trips: int) -> str | int:
    """The trip count of a loop that can be unrolled exactly, or why it cannot."""
    body = next(a.g for a in loop.attribute if a.name == "body")
    trips = loop.input[0] if loop.input else ""
    if not trips or trips not in constants:
        return "its trip count is not a constant"
    count = int(np.asarray(constants[trips]).reshape(-1)[0])
    cond = loop.input[1] if len(loop.input) > 1 else ""
    if cond and not (cond in constants and bool(np.asarray(constants[cond]).reshape(-1)[0])):
        return "its initial condition is not a constant true"
    cond_in, cond_out = body.input[1].name, body.output[0].name
    passthrough = cond_out == cond_in or any(
        n.op_type == "Identity" and list(n.input) == [cond_in] and n.output[0] == cond_out for n in body.node
    )
    constant_true = cond_out in _constants(body) and bool(np.asarray(_constants(body)[cond_out]).all())
    if not (passthrough or constant_true):
        return "its body computes the condition (it may stop early)"
    if any(subgraph_attrs(a) for n in body.node for a in n.attribute):
        return "its body holds subgraphs of its own (If, Loop or Scan)"
    if body.sparse_initializer:
        return "its body has sparse initializers"
    if count < 1:
        return f"it runs {count} times (nothing to unroll into)"
    if count > max_trips:
        return f"it runs {count} times, more than max_trips={max_trips}"
    return count


def _unrolled(
    loop: NodeProto, count: int, namer: UniqueNames, opset: int, graph: GraphProto
) -> tuple[list[NodeProto], int]:
    """The nodes replacing ``loop`` (body copies, stacking of scan outputs), and how many body copies."""
    body = next(a.g for a in loop.attribute if a.name == "body")
    iteration, cond_in = body.input[0].name, body.input[1].name
    carried_in = [v.name for v in body.input[2:]]
    n_carried = len(carried_in)
    carried_out = [v.name for v in body.output[1 : 1 + n_carried]]
    scan_out = [v.name for v in body.output[1 + n_carried :]]
    used = {i for n in body.node for i in n.input} | {v.name for v in body.output}
    nodes: list[NodeProto] = []
    mapping_init: dict[str, str] = {}
    for tensor in body.initializer:  # once, not per iteration: they are constants
        copy = onnx.TensorProto()
        copy.CopyFrom(tensor)
        copy.name = namer(f"{loop.name}/{tensor.name}")
        graph.initializer.append(copy)
        mapping_init[tensor.name] = copy.name
    true_name = ""
    if cond_in in used:
        true_name = namer(f"{loop.name}/cond_true")
        nodes.append(helper.make_node("Constant", [], [true_name], name=true_name, value=_bool_true()))
    current = list(loop.input[2 : 2 + n_carried])
    stacked: list[list[str]] = [[] for _ in scan_out]
    for i in range(count):
        mapping = {**mapping_init, **dict(zip(carried_in, current, strict=True))}
        if cond_in in used:
            mapping[cond_in] = true_name
        if iteration in used:
            mapping[iteration] = namer(f"{loop.name}/iter{i}/iteration")
            nodes.append(
                helper.make_node(
                    "Constant",
                    [],
                    [mapping[iteration]],
                    name=mapping[iteration],
                    value=numpy_helper.from_array(np.array(i, np.int64)),
                )
            )
        for node in body.node:
            copy = NodeProto()
            copy.CopyFrom(node)
            leaf = node.name.rsplit("/", 1)[-1] or node.op_type
            copy.name = namer(f"{loop.name}/iter{i}/{leaf}")
            for slot, name in enumerate(node.output):
                if name:
                    mapping[name] = namer(f"{loop.name}/iter{i}/{name.rsplit('/', 1)[-1]}")
                    copy.output[slot] = mapping[name]
            for slot, name in enumerate(node.input):
                copy.input[slot] = mapping.get(name, name)  # outer-scope names are read as they are
            nodes.append(copy)
        current = [mapping.get(name, name) for name in carried_out]
        for j, name in enumerate(scan_out):
            stacked[j].append(mapping.get(name, name))
    for final, value in zip(loop.output[:n_carried], current, strict=False):
        if final:
            nodes.append(helper.make_node("Identity", [value], [final], name=namer(f"{loop.name}/{final}")))
    nodes.extend(_stack(loop, stacked, namer, opset))
    return _live(nodes, graph, loop), count


def _live(nodes: list[NodeProto], graph: GraphProto, loop: NodeProto) -> list[NodeProto]:
    """``nodes`` without those whose outputs nothing reads (the copies that only passed the condition on)."""
    outside = {i for n in graph.node if n is not loop for i in n.input} | {v.name for v in graph.output}
    for node in graph.node:  # values read inside other nodes' subgraphs, at any depth
        if node is loop:
            continue
        for attr in node.attribute:
            for _, sub in subgraph_attrs(attr):
                outside.update(i for g, _ in iter_graphs(sub) for n in g.node for i in n.input)
    kept = list(nodes)
    while True:
        read = outside | {i for n in kept for i in n.input}
        alive = [n for n in kept if any(o in read for o in n.output)]
        if len(alive) == len(kept):
            return kept
        kept = alive


def _stack(loop: NodeProto, stacked: list[list[str]], namer: UniqueNames, opset: int) -> Iterable[NodeProto]:
    """``Unsqueeze`` each iteration's scan value on axis 0 and ``Concat`` them into the scan output."""
    n_carried = len(loop.output) - len(stacked)
    axes = ""
    for j, values in enumerate(stacked):
        target = loop.output[n_carried + j]
        if not target:
            continue
        if opset >= 13 and not axes:
            axes = namer(f"{loop.name}/axes")
            yield helper.make_node(
                "Constant", [], [axes], name=axes, value=numpy_helper.from_array(np.array([0], np.int64))
            )
        parts = []
        for value in values:
            part = namer(f"{value}_unsqueezed")
            extra = {} if opset >= 13 else {"axes": [0]}
            inputs = [value, axes] if opset >= 13 else [value]
            yield helper.make_node("Unsqueeze", inputs, [part], name=namer(f"{part}/Unsqueeze"), **extra)
            parts.append(part)
        yield helper.make_node("Concat", parts, [target], name=namer(f"{loop.name}/{target}/Concat"), axis=0)


def _bool_true() -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(True))


def _drop_unused_constants(graph: GraphProto) -> None:
    """Remove ``Constant`` nodes nothing reads any more (the loops' trip counts and conditions)."""
    read = {i for n in graph.node for i in n.input} | {v.name for v in graph.output}
    for node in list(graph.node):
        if node.op_type == "Constant" and not any(o in read for o in node.output):
            graph.node.remove(node)


def unroll_loops(model: ModelProto, max_trips: int = MAX_TRIPS) -> tuple[ModelProto, list[str]]:
    """Unroll every top-level ``Loop`` that runs a constant number of times (a new model; ``model`` is kept).

    Parameters
    ----------
    model : onnx.ModelProto
        The model.
    max_trips : int
        Loops running more times are kept.

    Returns
    -------
    (onnx.ModelProto, list of str)
        The new model and one log line per loop: unrolled, or kept and why.

    Examples
    --------
    >>> from explorer import zoo
    >>> model, log = unroll_loops(zoo.build("control_flow"), max_trips=2)
    >>> log
    ['/loop/Loop: kept: it runs 3 times, more than max_trips=2']
    """
    out = ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    constants = _constants(graph)
    opset = next((o.version for o in out.opset_import if o.domain in ("", "ai.onnx")), 1)
    namer = UniqueNames(_names(graph))
    log: list[str] = []
    new_nodes: list[NodeProto] = []
    for node in graph.node:
        if node.op_type != "Loop" or node.domain not in ("", "ai.onnx"):
            new_nodes.append(node)
            continue
        verdict = _why_not(node, constants, max_trips)
        if isinstance(verdict, str):
            log.append(f"{node.name or 'Loop'}: kept: {verdict}")
            new_nodes.append(node)
            continue
        nodes, count = _unrolled(node, verdict, namer, opset, graph)
        log.append(f"{node.name or 'Loop'}: unrolled {count} iterations ({len(nodes)} nodes)")
        new_nodes.extend(nodes)
    if not log:
        log.append("no Loop in the main graph")
    del graph.node[:]
    graph.node.extend(new_nodes)
    _drop_unused_constants(graph)
    return out, log


def unroll_loops_step(path: str, max_trips: int = MAX_TRIPS, *, out_path: str) -> list[str]:
    """The worker step of ``explorer:unroll_loops``: :func:`unroll_loops` from ``path`` to ``out_path``.

    Examples
    --------
    >>> import os, tempfile
    >>> from explorer import zoo
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     unroll_loops_step(str(zoo.save("control_flow", tmp)), out_path=os.path.join(tmp, "out.onnx"))
    ['/loop/Loop: unrolled 3 iterations (18 nodes)']
    """
    model, log = unroll_loops(onnx.load(path), max_trips)
    save_model(model, out_path)
    return log

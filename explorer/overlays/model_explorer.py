"""Model Explorer's node data (Google AI Edge), read onto a graph and written from any overlay.

The format (``model_explorer.node_data_builder``): a JSON object keyed by graph id (ONNX models
in Model Explorer: ``main_graph``), each with ``results`` keyed by a node id or an output tensor's
name, ``{"value": number or string, "bgColor"?: css colour, "textColor"?: css colour}``, and
optionally ``thresholds`` (``[{"value", "bgColor", "textColor"?}]``: a value up to the first
threshold at or above it takes its colours) or ``gradient`` (``[{"stop": 0..1, "bgColor"}]`` over
the values' range, which wins over thresholds). One graph's object alone (``{"results": ...}``)
is read too.

A key maps to the node of that id or ONNX name, else to the node writing a tensor of that name
(or, ``<node_N>``, the N-th unnamed node, as Model Explorer's ONNX adapter names it); a graph
input's name, or a name nothing has, is listed in ``unmapped``. Written back (:func:`node_data`,
:func:`write_model_explorer`), each node is keyed as Model Explorer's ONNX adapter
(``model-explorer-onnx``) gives its id: its ONNX name, an unnamed node ``<node_N>`` (N: its
place in the graph), under the graph id the adapter uses, the ONNX graph's name
(:func:`graph_id_of`). String values (placements, reasons) are categories: each result carries
its own ``bgColor``, and ``showExpandedSummaryOnGroupNode`` makes Model Explorer list each label
with its count on a collapsed layer (the format has no legend field).

Examples
--------
>>> from explorer import load
>>> data = {"main_graph": {"results": {"/fc1/Gemm": {"value": 3, "bgColor": "#ff0000"}}}}
>>> overlay = read(data, load("zoo:mlp"))
>>> overlay.values["/fc1/Gemm"].value, overlay.values["/fc1/Gemm"].color
(3, '#ff0000')
>>> overlay.to_model_explorer()["main_graph"]["results"]
{'/fc1/Gemm': {'value': 3, 'bgColor': '#ff0000'}}
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from explorer.core.errors import UsageError
from explorer.isolation.io import write_text_atomic
from explorer.overlays.mapping import Collect, NodeIndex
from explorer.overlays.value import NODE_FIELDS, Overlay, Unmapped

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph

__all__ = [
    "FORMAT",
    "DEFAULT_GRAPH_ID",
    "sniff",
    "graphs_of",
    "scale_color",
    "read",
    "node_key",
    "graph_id_of",
    "node_data",
    "write_model_explorer",
]

FORMAT = "model-explorer"
"""The format's name in :data:`explorer.overlays.READERS`."""

DEFAULT_GRAPH_ID = "main_graph"
"""The graph id written without a graph: Model Explorer's ONNX adapter uses the ONNX graph's name,
which ``torch.onnx.export`` sets to ``main_graph``."""

UNNAMED = re.compile(r"<node_(\d+)>")
"""How Model Explorer's ONNX adapter names the N-th node of a graph when it has no name."""


def graphs_of(data: Any) -> dict[str, Mapping[str, Any]] | None:
    """Graph id -> its node data (``{"results", "thresholds"?, "gradient"?}``); one graph's object
    alone comes back under ``""``; None when ``data`` is not node data.

    Examples
    --------
    >>> graphs_of({"g": {"results": {}}}), graphs_of({"results": {}}), graphs_of([1])
    ({'g': {'results': {}}}, {'': {'results': {}}}, None)
    """
    if not isinstance(data, dict) or not data:
        return None
    if isinstance(data.get("results"), dict):
        return {"": data}
    if all(isinstance(v, dict) and isinstance(v.get("results"), dict) for v in data.values()):
        return dict(data)
    return None


def sniff(data: Any) -> bool:
    """Whether ``data`` is Model Explorer node data.

    Examples
    --------
    >>> sniff({"main_graph": {"results": {"a": {"value": 1}}}}), sniff({"execution_detail": []})
    (True, False)
    """
    return graphs_of(data) is not None


def _hex(color: str) -> tuple[int, int, int] | None:
    text = color.strip().lstrip("#")
    if len(text) == 3:
        text = "".join(c * 2 for c in text)
    if len(text) != 6:
        return None
    try:
        return int(text[0:2], 16), int(text[2:4], 16), int(text[4:6], 16)
    except ValueError:
        return None


def scale_color(
    value: float,
    low: float,
    high: float,
    *,
    thresholds: Sequence[Mapping[str, Any]] = (),
    gradient: Sequence[Mapping[str, Any]] = (),
    key: str = "bgColor",
) -> str | None:
    """The colour Model Explorer gives ``value``: from ``gradient`` (stops over ``low``..``high``,
    hex colours interpolated, others taken from the nearest stop), else from the first of
    ``thresholds`` at or above it; None when neither gives one.

    Examples
    --------
    >>> scale_color(5, 0, 10, gradient=[{"stop": 0, "bgColor": "#000000"}, {"stop": 1, "bgColor": "#ffffff"}])
    '#808080'
    >>> steps = [{"value": 10, "bgColor": "red"}, {"value": 50, "bgColor": "blue"}]
    >>> scale_color(20, 0, 100, thresholds=steps)
    'blue'
    """
    stops = sorted(
        ((float(s["stop"]), s.get(key)) for s in gradient if isinstance(s, Mapping) and "stop" in s),
        key=lambda s: s[0],
    )
    stops = [s for s in stops if s[1]]
    if stops:
        at = 0.0 if high <= low else (float(value) - low) / (high - low)
        at = min(1.0, max(0.0, at))
        below = [s for s in stops if s[0] <= at] or stops[:1]
        above = [s for s in stops if s[0] >= at] or stops[-1:]
        (s0, c0), (s1, c1) = below[-1], above[0]
        rgb0, rgb1 = _hex(str(c0)), _hex(str(c1))
        if rgb0 is None or rgb1 is None or s1 <= s0:
            return str(c0 if at - s0 <= s1 - at else c1)
        t = (at - s0) / (s1 - s0)
        return "#" + "".join(f"{round(a + (b - a) * t):02x}" for a, b in zip(rgb0, rgb1, strict=True))
    for item in sorted(
        (t for t in thresholds if isinstance(t, Mapping) and "value" in t), key=lambda t: float(t["value"])
    ):
        if float(value) <= float(item["value"]):
            return item.get(key)
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def read(
    data: Any,
    graph: ModelGraph | None = None,
    *,
    source: str | None = None,
    graph_id: str | None = None,
) -> Overlay:
    """Read Model Explorer node data, mapped onto ``graph``'s nodes.

    Parameters
    ----------
    data : dict
        The node data (parsed JSON).
    graph : ModelGraph, optional
        The model (without it, values are keyed by the file's keys).
    source : str, optional
        The file's path.
    graph_id : str, optional
        Read only this graph's results (default: every graph's).

    Returns
    -------
    Overlay
        ``value``, ``color`` and ``text_color`` per node (a colour from the thresholds or gradient
        when the result gives none); the file's thresholds and gradient kept.

    Examples
    --------
    >>> from explorer import load
    >>> data = {"main_graph": {"results": {"/fc1/Gemm_output_0": {"value": 0.5}, "input": {"value": 1}},
    ...                        "thresholds": [{"value": 1, "bgColor": "green"}]}}
    >>> overlay = read(data, load("zoo:mlp"))
    >>> overlay.values["/fc1/Gemm"].color, [u.reason for u in overlay.unmapped]
    ('green', ["'input' is a graph input, not a node"])
    """
    label = source or "<value>"
    graphs = graphs_of(data)
    if graphs is None:
        raise UsageError(
            f"{label}: not Model Explorer node data (an object keyed by graph id, each with 'results')"
        )
    if graph_id is not None:
        if graph_id not in graphs:
            raise UsageError(f"{label}: no graph {graph_id!r} in the node data; it has: {', '.join(graphs)}")
        graphs = {graph_id: graphs[graph_id]}
    index = NodeIndex(graph) if graph is not None else None
    collect = Collect()
    unmapped: list[Unmapped] = []
    thresholds: list[Mapping[str, Any]] = []
    gradient: list[Mapping[str, Any]] = []
    for gid, item in graphs.items():
        scales = {
            "thresholds": [t for t in item.get("thresholds") or () if isinstance(t, Mapping)],
            "gradient": [g for g in item.get("gradient") or () if isinstance(g, Mapping)],
        }
        thresholds += scales["thresholds"]
        gradient += scales["gradient"]
        numbers = [
            n
            for r in item["results"].values()
            if isinstance(r, Mapping)
            for n in [_number(r.get("value"))]
            if n is not None
        ]
        low, high = (min(numbers), max(numbers)) if numbers else (0.0, 0.0)
        where = f" (graph {gid!r})" if len(graphs) > 1 and gid else ""
        for key, result in item["results"].items():
            if not isinstance(result, Mapping) or "value" not in result:
                unmapped.append(
                    Unmapped(key, f"not a node-data result {{value, bgColor?, textColor?}}{where}")
                )
                continue
            node = key if index is None else index.find(key, tensors=True) or _unnamed(graph, key)
            if node is None:
                assert index is not None
                why = (
                    f"{key!r} is a graph input, not a node"
                    if index.is_graph_input(key)
                    else f"no node or tensor of the model is named {key!r}"
                )
                unmapped.append(Unmapped(key, why + where))
                continue
            number = _number(result.get("value"))
            color, text_color = result.get("bgColor"), result.get("textColor")
            if number is not None and color is None:
                color = scale_color(number, low, high, **scales)
            if number is not None and text_color is None:
                text_color = scale_color(number, low, high, **scales, key="textColor")
            collect.add(node, entry=key, value=result.get("value"), color=color, text_color=text_color)
    about = {
        "graphs": [g for g in graphs if g] or [""],
        "results": sum(len(g["results"]) for g in graphs.values()),
    }
    return collect.overlay(
        FORMAT,
        source,
        graph,
        unmapped,
        None,
        about,
        thresholds=tuple(dict(t) for t in thresholds),
        gradient=tuple(dict(g) for g in gradient),
        name=next((str(g["name"]) for g in graphs.values() if g.get("name")), None),
    )


def _unnamed(graph: ModelGraph | None, key: str) -> str | None:
    """The unnamed node Model Explorer's ONNX adapter calls ``key`` (``<node_N>``), if any."""
    match = UNNAMED.fullmatch(key)
    if graph is None or match is None:
        return None
    index = int(match.group(1))
    for node in graph.op_nodes():
        data = graph.nx.nodes[node]
        if data.get("index") == index and not data.get("name"):
            return node
    return None


def node_key(graph: ModelGraph | None, node: str) -> str:
    """The id Model Explorer's ONNX adapter gives ``node``: its ONNX name, else ``<node_N>`` with N
    its place in the graph (the adapter's name for an unnamed node); a node the graph lacks (or no
    graph): ``node`` itself.

    Examples
    --------
    >>> from explorer import load
    >>> node_key(load("zoo:mlp"), "/fc1/Gemm"), node_key(None, "x")
    ('/fc1/Gemm', 'x')
    """
    if graph is None or not graph.nx.has_node(node):
        return node
    data = graph.nx.nodes[node]
    if data.get("name"):
        return str(data["name"])
    if isinstance(data.get("index"), int):
        return f"<node_{data['index']}>"
    return node


def graph_id_of(graph: ModelGraph | None) -> str:
    """The graph id Model Explorer's ONNX adapter gives ``graph``: the ONNX graph's name
    (:data:`DEFAULT_GRAPH_ID` without a graph, or for a graph that carries no ONNX model).

    Examples
    --------
    >>> from explorer import load
    >>> graph_id_of(load("zoo:resnet18")), graph_id_of(None)
    ('resnet18', 'main_graph')
    """
    from explorer.onnx_adapter.adapter import has_onnx_model

    if graph is None or not has_onnx_model(graph) or not graph.model.graph.name:
        return DEFAULT_GRAPH_ID
    return str(graph.model.graph.name)


def node_data(
    overlay: Overlay,
    graph_id: str | None = None,
    *,
    field: str | None = None,
    graph: ModelGraph | None = None,
) -> dict[str, Any]:
    """``overlay`` as Model Explorer's node data (``ModelNodeData``): ``{graph_id: {"results": ...}}``.

    Parameters
    ----------
    overlay : Overlay
        Any overlay.
    graph_id : str, optional
        The graph's id in Model Explorer (default: :func:`graph_id_of` ``graph``, the ONNX graph's
        name; without a graph :data:`DEFAULT_GRAPH_ID`).
    field : str, optional
        Which value each result carries (one of :data:`~explorer.overlays.value.NODE_FIELDS`); by
        default ``value`` where the overlay has values, else ``time_ms``, else ``compute_unit``,
        else ``provider``.
    graph : ModelGraph, optional
        The graph the overlay is on: keys become Model Explorer's node ids (:func:`node_key`).
        Without it, keys are the node ids (an ONNX node's id is its name).

    Returns
    -------
    dict
        JSON-ready; a node's own colours go with it as ``bgColor`` / ``textColor``, the overlay's
        thresholds and gradient are kept, its ``name`` names the data, and string values (a
        category per node) ask Model Explorer to list each label's count on collapsed layers.

    Examples
    --------
    >>> from explorer.overlays.value import NodeValue
    >>> overlay = Overlay("ai-hub-profile", None, "m", {"a": NodeValue("a", time_ms=2.0, compute_unit="NPU")})
    >>> data = node_data(overlay, field="compute_unit")["main_graph"]
    >>> data["results"], data["showExpandedSummaryOnGroupNode"]
    ({'a': {'value': 'NPU'}}, True)
    """
    if field is None:
        field = next(
            (f for f in ("value", "time_ms", "compute_unit", "provider") if overlay.by_node(f)), "value"
        )
    elif field not in NODE_FIELDS:
        raise UsageError(f"no overlay field {field!r}; the fields are: {', '.join(NODE_FIELDS)}")
    results: dict[str, dict[str, Any]] = {}
    for node, value in overlay.values.items():
        item = getattr(value, field)
        if item is None:
            continue
        result: dict[str, Any] = {"value": item}
        if value.color:
            result["bgColor"] = value.color
        if value.text_color:
            result["textColor"] = value.text_color
        results[node_key(graph, node)] = result
    body: dict[str, Any] = {"results": results}
    if overlay.name:
        body["name"] = overlay.name
    if results and all(isinstance(r["value"], str) for r in results.values()):
        body["showExpandedSummaryOnGroupNode"] = True
        body["showLabelCountColumnsInChildrenStatsTable"] = True
    if overlay.thresholds:
        body["thresholds"] = [dict(t) for t in overlay.thresholds]
    if overlay.gradient:
        body["gradient"] = [dict(g) for g in overlay.gradient]
    return {graph_id or graph_id_of(graph): body}


def write_model_explorer(
    overlay: Overlay,
    path: str | os.PathLike[str],
    graph_id: str | None = None,
    *,
    field: str | None = None,
    graph: ModelGraph | None = None,
) -> Path:
    """Write ``overlay`` as a Model Explorer node-data file at ``path``, atomically (readers see the
    old file or the whole new one: :func:`explorer.isolation.io.write_text_atomic`).

    Parameters are those of :func:`node_data`.

    Returns
    -------
    Path
        ``path``.

    Examples
    --------
    >>> import json, os, tempfile
    >>> from explorer.overlays.value import NodeValue
    >>> overlay = Overlay("ort-profile", None, "m", {"a": NodeValue("a", time_ms=1.5)})
    >>> path = write_model_explorer(overlay, os.path.join(tempfile.mkdtemp(), "node_data.json"))
    >>> json.loads(path.read_text())
    {'main_graph': {'results': {'a': {'value': 1.5}}}}
    """
    document = node_data(overlay, graph_id, field=field, graph=graph)
    return write_text_atomic(json.dumps(document, indent=2) + "\n", path)

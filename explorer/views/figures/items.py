"""What an item of a drawn graph is: its data (a node's, or a collapsed scope's) and its hover text.

An *item* is what the layout places: a node id, or a collapsed scope's id
(``scope:...``, see :data:`explorer.views.layout.GROUP_PREFIX`).

Examples
--------
>>> from explorer import load
>>> from explorer.views.layout import layered
>>> g = load("zoo:resnet18")
>>> layout = layered(g, collapse=1)
>>> item_data(g, layout, "scope:layer1")["kind"], item_data(g, layout, "/conv1/Conv")["op_type"]
('group', 'Conv')
>>> node_hover(g, layout, "scope:layer1").startswith("<b>layer1</b><br>")
True
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from explorer.core.tensors import format_bytes, format_shape
from explorer.views.layout import GROUP_PREFIX, Layout
from explorer.views.node_boxes import group_data

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph

__all__ = ["item_data", "node_hover", "item_hover"]


def item_data(graph: ModelGraph, layout: Layout, item: str) -> dict[str, Any]:
    """The data dict of a drawn item: the node's data, or :func:`~explorer.views.node_boxes.group_data`.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.views.layout import layered
    >>> g = load("zoo:resnet18")
    >>> item_data(g, layered(g, collapse=1), "scope:layer1")["ops"]["Conv"]
    4
    """
    if item.startswith(GROUP_PREFIX) and item in layout.groups:
        return group_data(graph, layout.scopes[item], layout.groups[item])
    return graph.nx.nodes[item]


def _shape_text(shape: Any, dtype: Any) -> str:
    return f"{format_shape(shape)} {dtype or ''}".strip()


def node_hover(graph: ModelGraph, layout: Layout, item: str) -> str:
    """Hover text of one item: op type, name, input/output shapes and dtypes, weights.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.views.layout import layered
    >>> g = load("zoo:mlp")
    >>> "Gemm" in node_hover(g, layered(g), "/fc1/Gemm")
    True
    """
    return item_hover(graph, item_data(graph, layout, item), item)


def item_hover(graph: ModelGraph, data: Mapping[str, Any], item: str) -> str:
    """Hover text of one item from its data (:func:`item_data`), as :func:`node_hover` writes it.

    The graph figure has every item's data at hand already and asks this directly. A collapsed
    scope's hover counts its ops and names the graph inputs and outputs drawn in it (a decoder
    layer's ``past_key_values.N`` and ``present.N``).

    Examples
    --------
    >>> from explorer import load
    >>> g = load("zoo:mlp")
    >>> item_hover(g, g.nx.nodes["/fc1/Gemm"], "/fc1/Gemm").split("<br>")[0]
    '<b>Gemm</b> /fc1/Gemm'
    """
    if data["kind"] == "group":
        top = ", ".join(f"{op} {n}" for op, n in data["ops"].most_common(6))
        name = "/".join(data["scope"])
        lines = [f"<b>{name}</b>", f"{sum(data['ops'].values())} ops: {top}"]
        inside = [m for m in data["members"] if graph.nx.nodes[m].get("kind") in ("input", "output")]
        if inside:  # a decoder layer's past_key_values.N and present.N
            shown = ", ".join(graph.nx.nodes[m].get("name") or m for m in inside[:4])
            lines.append(f"with {shown}" + (f" and {len(inside) - 4} more" if len(inside) > 4 else ""))
        return "<br>".join([*lines, "<i>click to expand</i>"])
    lines = [f"<b>{data['op_type']}</b> {data['name'] or item}"]
    if data.get("domain"):
        lines[0] += f" ({data['domain']})"
    nx_graph = graph.nx
    for _, _, key, edge in nx_graph.in_edges(item, keys=True, data=True):
        lines.append(f"in  {key}: {_shape_text(edge['shape'], edge['dtype'])}")
    seen: set[str] = set()
    for _, _, key, edge in nx_graph.out_edges(item, keys=True, data=True):
        if key not in seen:
            seen.add(key)
            lines.append(f"out {key}: {_shape_text(edge['shape'], edge['dtype'])}")
    if data["kind"] in ("input", "output", "outer") and data.get("shape") is not None:
        lines.append(_shape_text(data.get("shape"), data.get("dtype")))
    for weight in data.get("weights", ())[:6]:
        lines.append(
            f"w   {weight.name}: {format_shape(weight.shape)} {weight.dtype} ({format_bytes(weight.nbytes)})"
        )
    if len(data.get("weights", ())) > 6:
        lines.append(f"... {len(data['weights']) - 6} more weights")
    if len(lines) > 14:
        lines = [*lines[:13], f"... {len(lines) - 13} more"]
    return "<br>".join(lines)

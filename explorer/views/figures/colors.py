"""Colours of a graph figure: op categories, diff statuses, colour-by and overlays.

An op box's header takes its category's colour (:mod:`explorer.core.op_categories`, the
colour the op histogram's bars share); its body is white, or takes a colour from
:func:`node_colors`: the scope or domain (``color_by``), or an overlay's category
(:data:`DIFF_COLORS` for diffs) or value (a colour scale).

Examples
--------
>>> from explorer.core.op_categories import CATEGORIES
>>> category_color("Conv") == CATEGORIES["conv"].color, DIFF_COLORS["added"]
(True, '#2ca02c')
>>> op_color("layer1") == op_color("layer1")
True
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from plotly.colors import qualitative

from explorer.core.op_categories import CATEGORIES, category_of
from explorer.views.figures.items import item_data
from explorer.views.layout import Layout

if TYPE_CHECKING:
    from explorer.core.graph import ModelGraph

__all__ = [
    "DIFF_COLORS",
    "COLOR_BY",
    "KIND_COLORS",
    "NO_VALUE_COLOR",
    "op_color",
    "category_color",
    "node_colors",
    "item_colors",
]

DIFF_COLORS = {
    "added": "#2ca02c",
    "removed": "#d62728",
    "changed": "#ff9f1c",
    "fused": "#9467bd",
    "kept": "#c7c7c7",
}
"""Colours of diff statuses: added green, removed red, changed amber, fused purple, kept grey."""

COLOR_BY = ("op_type", "scope", "kind")
"""Built-in colourings; an overlay (diff status, partition, latency) adds its own."""

KIND_COLORS = {"input": "#1f77b4", "output": "#17becf", "outer": "#7f7f7f", "constant": "#bcbd22"}
"""Colours of the items that are not ops: graph inputs and outputs, outer-scope values, constants."""

NO_VALUE_COLOR = "#e5e5e5"
"""The colour of an op or scope an overlay gives no value."""

_PALETTE = list(qualitative.Dark24) + list(qualitative.Light24)
_GROUP_COLOR = "#8c8c8c"


def op_color(name: str) -> str:
    """A stable colour for any category name (scopes, domains, overlay categories).

    Examples
    --------
    >>> op_color("Conv") == op_color("Conv"), op_color("Conv").startswith("#")
    (True, True)
    """
    digest = int(hashlib.md5(name.encode(), usedforsecurity=False).hexdigest()[:8], 16)
    return _PALETTE[digest % len(_PALETTE)]


def category_color(op_type: str, domain: str = "") -> str:
    """The header colour of an op type's category (the colour op boxes and histogram bars share).

    Examples
    --------
    >>> category_color("Conv") == CATEGORIES["conv"].color
    True
    """
    return CATEGORIES[category_of({"kind": "op", "op_type": op_type, "domain": domain})].color


def node_colors(
    graph: ModelGraph,
    layout: Layout,
    color_by: str = "op_type",
    overlay: Mapping[str, Any] | None = None,
    palette: Mapping[str, str] | None = None,
) -> list[Any]:
    """Colours of the visible items, in ``layout.positions`` order.

    Parameters
    ----------
    graph, layout
        What is drawn.
    color_by : str
        ``"op_type"`` (the op's category colour), ``"scope"`` or ``"kind"``;
        ignored when ``overlay`` is given.
    overlay : mapping, optional
        Item (or node id inside a collapsed group) -> category (str) or value
        (number). Categories use ``palette`` (default :data:`DIFF_COLORS`, then
        stable colours); numbers are returned as they are for a colour scale.
    palette : mapping, optional
        Category -> colour.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.views.layout import layered
    >>> g = load("zoo:mlp")
    >>> len(node_colors(g, layered(g))) == len(layered(g).positions)
    True
    """
    return item_colors(
        layout, [item_data(graph, layout, i) for i in layout.positions], color_by, overlay, palette
    )


def item_colors(
    layout: Layout,
    datas: Sequence[Mapping[str, Any]],
    color_by: str = "op_type",
    overlay: Mapping[str, Any] | None = None,
    palette: Mapping[str, str] | None = None,
) -> list[Any]:
    """:func:`node_colors` from the items' data (:func:`~explorer.views.figures.items.item_data`).

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.views.layout import layered
    >>> g = load("zoo:mlp")
    >>> layout = layered(g)
    >>> datas = [g.nx.nodes[i] for i in layout.positions]
    >>> colors = item_colors(layout, datas, overlay={"/fc1/Gemm": "added", "/fc2/Gemm": 2.5})
    >>> colors[list(layout.positions).index("/fc1/Gemm")], colors[list(layout.positions).index("/fc2/Gemm")]
    ('#2ca02c', 2.5)
    """
    colors: list[Any] = []
    palette = dict(DIFF_COLORS if palette is None else palette)
    for item, data in zip(layout.positions, datas, strict=True):
        if overlay is not None:
            value = overlay.get(item)
            if value is None and data["kind"] == "group":
                values = [overlay.get(m) for m in data["members"] if overlay.get(m) is not None]
                value = _group_value(values)
            if value is None:
                colors.append(
                    NO_VALUE_COLOR
                    if data["kind"] in ("op", "group")
                    else KIND_COLORS.get(data["kind"], "#999")
                )
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                colors.append(float(value))
            else:
                colors.append(palette.get(str(value)) or op_color(str(value)))
            continue
        if data["kind"] == "group":
            colors.append(op_color("/".join(data["scope"][:1])) if color_by == "scope" else _GROUP_COLOR)
        elif data["kind"] != "op":
            colors.append(KIND_COLORS.get(data["kind"], "#999"))
        elif color_by == "scope":
            colors.append(op_color("/".join(data["scope"][:2]) or "(root)"))
        elif color_by == "kind":
            colors.append(op_color(data.get("domain") or "ai.onnx"))
        else:
            colors.append(CATEGORIES[category_of(data)].color)
    return colors


def _group_value(values: Sequence[Any]) -> Any:
    """A collapsed scope's overlay value: the sum of its members' numbers, or their leading status."""
    if not values:
        return None
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return float(sum(values))
    ranked = Counter(str(v) for v in values)
    for status in ("removed", "added", "fused", "changed"):
        if status in ranked:
            return status
    return ranked.most_common(1)[0][0]

"""The graph figure's boxes: the stacked cards of collapsed scopes, the bodies and the headers.

Each box is two filled shapes: a body (white, grey for a collapsed scope, or the tinted
colour of an overlay or colour-by with a strong outline) and a header in its op category's
colour. Boxes of one colour are one trace: :data:`~explorer.views.figures.order.BODY_SLOTS`
body traces and one header trace per category (the header traces make the legend; so do the
bodies of a categorical overlay, named by its categories).

Examples
--------
>>> from explorer import load
>>> from explorer.views.figures.geometry import box_geometry
>>> from explorer.views.figures.order import BODY_SLOTS
>>> from explorer.views.layout import layered
>>> g = load("zoo:mlp")
>>> layout = layered(g)
>>> datas = [g.nx.nodes[i] for i in layout.positions]
>>> traces = box_traces(box_geometry(g, layout, datas), datas, ["#000"] * len(datas), plain=True)
>>> traces[0]["name"], traces[1]["name"], traces[1]["fillcolor"]
('shadows', 'body 0', '#ffffff')
>>> [t["name"] for t in traces[1 + BODY_SLOTS :] if t["showlegend"]]
['Convolution / linear', 'Activation', 'Tensor / shape', 'Graph input / output']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from plotly.colors import hex_to_rgb, sample_colorscale, unlabel_rgb

from explorer.core.op_categories import CATEGORIES
from explorer.views.figures.colors import DIFF_COLORS, KIND_COLORS, NO_VALUE_COLOR
from explorer.views.figures.geometry import BOX_RADIUS, BoxGeometry, rounded_rects
from explorer.views.figures.order import BODY_SLOTS
from explorer.views.node_boxes import HEADER_PX, PX_PER_UNIT

__all__ = ["box_traces", "fill_trace"]

_SHADOW = 6.0 / PX_PER_UNIT  # offset of a collapsed scope's stacked card
_BODY = "#ffffff"
_GROUP_BODY = "#f2f2f2"
_NEUTRAL_LINE = "#8c8c8c"
_PLAIN_BODIES = frozenset({_BODY, _GROUP_BODY})


def box_traces(
    geo: BoxGeometry,
    datas: Sequence[Mapping[str, Any]],
    colors: Sequence[Any],
    *,
    plain: bool,
    legend: bool = False,
    palette: Mapping[str, str] | None = None,
    colorscale: str = "Viridis",
) -> list[dict[str, Any]]:
    """The filled traces of the boxes: ``shadows``, the body traces and one header trace per category.

    Parameters
    ----------
    geo : BoxGeometry
        Where the boxes are.
    datas : sequence of mapping
        Each item's data (:func:`~explorer.views.figures.items.item_data`).
    colors : sequence
        Each item's colour (:func:`~explorer.views.figures.colors.item_colors`): a colour,
        or a number for ``colorscale``.
    plain : bool
        White bodies (grey for scopes) whatever ``colors`` says: the op-type colouring,
        where the headers carry the colour.
    legend : bool
        Show the body colours in the legend, named by the ``palette`` categories (a
        categorical overlay).
    palette : mapping, optional
        Category -> colour of the overlay (default :data:`~explorer.views.figures.colors.DIFF_COLORS`).
    colorscale : str
        The colour scale of numeric colours; they are binned into a few body colours.

    Returns
    -------
    list of dict
        ``1 + BODY_SLOTS + len(CATEGORIES)`` plotly trace dicts.

    Examples
    --------
    >>> from explorer import load
    >>> from explorer.views.figures.geometry import box_geometry
    >>> from explorer.views.layout import layered
    >>> g = load("zoo:mlp")
    >>> layout = layered(g)
    >>> datas = [g.nx.nodes[i] for i in layout.positions]
    >>> colors = ["#2ca02c" if d["kind"] == "op" else "#e5e5e5" for d in datas]
    >>> traces = box_traces(box_geometry(g, layout, datas), datas, colors, plain=False, legend=True)
    >>> [(t["name"], t["fillcolor"], t["line"]["color"]) for t in traces[1:3]]
    [('#ffffff', '#ffffff', '#8c8c8c'), ('added', '#a0d4a0', '#2ca02c')]
    >>> [t["name"] for t in traces if t["showlegend"]][:2]
    ['added', 'Convolution / linear']
    """
    keys = _body_colors(colors, datas, plain, colorscale)
    return [
        _shadow_trace(geo, datas),
        *_body_traces(geo, keys, legend, palette),
        *_head_traces(geo),
    ]


def _shadow_trace(geo: BoxGeometry, datas: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The stacked card under each collapsed scope."""
    groups = np.array([d["kind"] == "group" for d in datas], dtype=bool)
    x0, x1, y0, y1 = geo.left, geo.right, geo.bottom, geo.top
    sx, sy = rounded_rects(
        x0[groups] + _SHADOW,
        x1[groups] + _SHADOW,
        y0[groups] - _SHADOW,
        y1[groups] - _SHADOW,
        BOX_RADIUS,
        BOX_RADIUS,
    )
    return fill_trace("shadows", sx, sy, "#c9c9c9", "#9a9a9a", 0.8)


def _body_traces(
    geo: BoxGeometry, keys: Sequence[str], legend: bool, palette: Mapping[str, str] | None
) -> list[dict[str, Any]]:
    """:data:`BODY_SLOTS` traces, one per body colour in order of first use (the last one shares)."""
    slots = list(dict.fromkeys(keys))[:BODY_SLOTS]
    slot_of = {k: min(n, BODY_SLOTS - 1) for n, k in enumerate(dict.fromkeys(keys))}
    key_array = np.array([slot_of[k] for k in keys], dtype=int)
    names = {}
    if legend:
        palette_names: dict[str, list[str]] = {}
        for category, colour in dict(DIFF_COLORS if palette is None else palette).items():
            palette_names.setdefault(colour, []).append(category)  # categories may share a colour
        names = {k: ", ".join(palette_names.get(k, [k])) for k in slots}
    x0, x1, y0, y1 = geo.left, geo.right, geo.bottom, geo.top
    traces = []
    for slot in range(BODY_SLOTS):
        mask = key_array == slot
        bx, by = rounded_rects(x0[mask], x1[mask], y0[mask], y1[mask], BOX_RADIUS, BOX_RADIUS)
        key = slots[slot] if slot < len(slots) else _BODY
        strong = key not in _PLAIN_BODIES
        traces.append(
            fill_trace(
                names.get(key, f"body {slot}"),
                bx,
                by,
                _tint(key) if strong else key,
                key if strong else _NEUTRAL_LINE,
                2.4 if strong else 0.8,
                legend=legend and slot < len(slots) and strong,
            )
        )
    return traces


def _head_traces(geo: BoxGeometry) -> list[dict[str, Any]]:
    """One header trace per op category, in the legend when the figure has boxes of it."""
    head_h = HEADER_PX / PX_PER_UNIT
    x0, x1, y1 = geo.left, geo.right, geo.top
    category_array = np.array([t.category for t in geo.texts], dtype=object)
    traces = []
    for name, category in CATEGORIES.items():
        mask = category_array == name
        hx, hy = rounded_rects(x0[mask], x1[mask], y1[mask] - head_h, y1[mask], BOX_RADIUS, 0.0)
        traces.append(
            fill_trace(category.legend, hx, hy, category.color, category.color, 0.5, legend=bool(mask.any()))
        )
    return traces


def fill_trace(
    name: str, x: np.ndarray, y: np.ndarray, fill: str, line: str, width: float, legend: bool = False
) -> dict[str, Any]:
    """A filled line trace (``fill="toself"``) of closed shapes, without hover.

    Examples
    --------
    >>> trace = fill_trace("shapes", np.array([0.0, 1.0, 0.0]), np.array([0.0, 0.0, 1.0]), "#fff", "#000", 1)
    >>> trace["type"], trace["fill"], trace["showlegend"]
    ('scatter', 'toself', False)
    """
    return dict(
        type="scatter",
        x=x,
        y=y,
        mode="lines",
        fill="toself",
        fillcolor=fill,
        hoveron="points",  # no point-in-polygon tests on every mouse move
        name=name,
        line={"color": line, "width": width},
        hoverinfo="skip",
        showlegend=legend,
    )


def _rgb(color: str) -> tuple[float, float, float] | None:
    """A colour's red, green and blue, or None when it is neither ``#rrggbb`` nor ``rgb(...)``."""
    try:
        if color.startswith("#"):
            return tuple(float(c) for c in hex_to_rgb(color))  # type: ignore[return-value]
        if color.startswith("rgb"):
            return tuple(float(c) for c in unlabel_rgb(color))  # type: ignore[return-value]
    except (ValueError, TypeError):
        return None
    return None


def _tint(color: str, amount: float = 0.55) -> str:
    """The colour mixed with white (``amount`` of white)."""
    rgb = _rgb(color)
    if rgb is None:
        return color
    r, g, b = (round(c + (255 - c) * amount) for c in rgb)
    return f"#{r:02x}{g:02x}{b:02x}"


def _body_colors(
    colors: Sequence[Any], datas: Sequence[Mapping[str, Any]], plain: bool, colorscale: str
) -> list[str]:
    """Each box's body colour key: plain white (grey for scopes), or the item's colour."""
    if plain:
        return [_GROUP_BODY if d["kind"] == "group" else _BODY for d in datas]
    plain_colors = {NO_VALUE_COLOR, *KIND_COLORS.values()}  # no value, or a graph input / output: plain
    colors = [
        (_GROUP_BODY if d["kind"] == "group" else _BODY) if isinstance(c, str) and c in plain_colors else c
        for c, d in zip(colors, datas, strict=True)
    ]
    numbers = [c for c in colors if isinstance(c, float)]
    if not numbers:
        return [str(c) for c in colors]
    low, high = min(numbers), max(numbers)
    span = (high - low) or 1.0
    levels = BODY_SLOTS - 2  # a numeric overlay is binned into this many colours
    keys = []
    for c in colors:
        if isinstance(c, float):
            keys.append(
                sample_colorscale(colorscale, [round((c - low) / span * (levels - 1)) / (levels - 1)])[0]
            )
        else:
            keys.append(str(c))
    return keys

"""GraphView: an interactive graph of a model in a notebook (plotly FigureWidget + details panel).

Click a node to see everything about it; click a box (a collapsed name scope)
to expand it in place; search by name or op type; colour by op type, name
scope, kind or any overlay (diff status, partition, latency). Subgraphs of
``If`` / ``Loop`` / ``Scan`` open from the details panel. Every interaction
is one ``batch_update`` round trip. The figure itself comes from
:func:`explorer.views.figures.graph_figure`; this class only wires state and events.

Examples
--------
>>> from widgets import GraphView
>>> view = GraphView("zoo:mlp")
>>> view.select("/fc1/Gemm")
>>> "Gemm" in view.details.value
True
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import ipywidgets as w
import plotly.graph_objects as go
from ipywidgets.widgets.widget_description import DescriptionStyle
from ipywidgets.widgets.widget_string import HTMLStyle, TextStyle

from explorer.core.graph import ModelGraph
from explorer.views.details import details_html, node_details
from explorer.views.figures import COLOR_BY, NODES, graph_figure, plot_height
from explorer.views.layout import GROUP_PREFIX, Layout, auto_collapse, collapse_group, expand, layered
from explorer.views.node_boxes import PX_PER_UNIT
from explorer.views.overlay_view import overlay_colorings, overlay_details_html

from .figure_sync import show_text_for_view, sync_figure
from .recent import load_recent
from .selection_marks import ring
from .shared_models import shared, shared_layout, shared_style
from .warm import warm_plotly

__all__ = ["GraphView"]

_CSS = """
<style>
.oge-details table { border-collapse: collapse; font-size: 12px; margin: 2px 0 6px 0; }
.oge-details td { border-bottom: 1px solid #eee; padding: 1px 6px 1px 0; vertical-align: top; }
.oge-details code { font-size: 11px; overflow-wrap: anywhere; }
.oge-details .oge-meta { color: #444; margin-left: 8px; }
.oge-details .oge-shape { white-space: nowrap; }
.oge-panel { overflow-y: auto; }
</style>
"""


class GraphView(w.VBox):
    """An interactive view of one ModelGraph.

    Parameters
    ----------
    graph : ModelGraph or anything :func:`explorer.load` accepts
        The model (``"zoo:resnet18"``, a path, a ModelProto...). A file opened again
        unchanged reuses the graph loaded last time (:func:`widgets.recent.load_recent`).
    collapse : int, iterable of scopes, None or "auto"
        Name scopes drawn as boxes; ``"auto"`` collapses big graphs to a few hundred boxes.
    color_by : str
        ``"op_type"``, ``"scope"``, ``"kind"`` or the name of an overlay.
    overlays : mapping, optional
        Name -> {node id -> category or value}: extra colourings in the menu.
    overlay : Overlay, path or dict, optional
        Another tool's results (or ours) on the model: an :class:`~explorer.overlays.Overlay`, or a
        file or parsed JSON :func:`explorer.overlays.read` maps onto the graph. Each field it fills
        becomes a colouring (time and numbers continuous; compute unit, provider and placements as
        categories), the first one shown, and the details panel lists a node's overlay fields.
    height : int
        Height of the graph in pixels.

    Attributes
    ----------
    figure : GraphFigureWidget
        The graph (a ``go.FigureWidget`` that ships plotly's bundle once per kernel).
    details : ipywidgets.HTML
        The details panel (CSS class ``oge-details``).
    selected : str or None
        The selected item.
    layout_ : Layout
        The current layout.

    overlay : Overlay or None
        The overlay given (read onto the graph).

    Examples
    --------
    >>> view = GraphView("zoo:resnet18", collapse=1)
    >>> any(item.startswith("scope:") for item in view.layout_.positions)
    True
    """

    def __init__(
        self,
        graph: ModelGraph | Any,
        *,
        collapse: Any = "auto",
        color_by: str | None = None,
        overlays: Mapping[str, Mapping[str, Any]] | None = None,
        palettes: Mapping[str, Mapping[str, str]] | None = None,
        overlay: Any = None,
        height: int = 650,
    ) -> None:
        # Imported here, not at the top: plotly's widget stack is only needed once a view is made.
        from .plotly_bundle import bundle_widget

        bundle_widget()  # first: the browser evaluates plotly.js while this kernel loads the model
        from .figure_widget import GraphFigureWidget

        if isinstance(graph, ModelGraph):
            self.graph = graph
            warm_plotly()
        else:
            self.graph = load_recent(graph, while_inferring=warm_plotly)
        self.overlays: dict[str, Mapping[str, Any]] = dict(overlays or {})
        self.palettes: dict[str, Mapping[str, str]] = dict(palettes or {})
        self.overlay = self._read_overlay(overlay) if overlay is not None else None
        colorings = overlay_colorings(self.overlay) if self.overlay is not None else {}
        for name, (values, palette) in colorings.items():
            self.overlays[name] = values
            if palette is not None:
                self.palettes[name] = palette
        if color_by is None:
            color_by = next(iter(colorings), "op_type")
        self.edge_marks: dict[str, Mapping[str, str]] = {}
        self.selected: str | None = None
        self.height = height
        self._stack: list[tuple[ModelGraph, Layout, str]] = []
        self._matches: list[str] = []
        self._match_index = 0
        self._on_select: list[Callable[[str], Any]] = []
        depth = auto_collapse(self.graph) if collapse == "auto" else collapse
        self.layout_ = layered(self.graph, collapse=depth, node_size="auto")

        self.figure = GraphFigureWidget(self._figure(color_by))
        self.figure.data[NODES].on_click(self._clicked)
        self.figure.layout.on_change(self._zoomed, "xaxis.range", "yaxis.range")

        self.color_menu = w.Dropdown(
            options=[*COLOR_BY, *self.overlays],
            value=color_by,
            description="colour",
            layout=shared_layout(width="210px"),
            style=shared_style(DescriptionStyle),
        )
        self.color_menu.observe(self._recolor, names="value")
        self.search = w.Text(
            placeholder="find: name or op type",
            continuous_update=False,
            layout=shared_layout(width="230px"),
            style=shared_style(TextStyle),
        )
        self.search.add_class("oge-search")
        self.search.observe(self._searched, names="value")
        button_style = shared_style(w.ButtonStyle)
        self.next_match = w.Button(description="next", layout=shared_layout(width="60px"), style=button_style)
        self.next_match.on_click(lambda _: self._goto_match(self._match_index + 1))
        self.collapse_button = w.Button(
            description="collapse all", layout=shared_layout(width="100px"), style=button_style
        )
        self.collapse_button.on_click(
            lambda _: self.set_collapse(auto_collapse(self.graph, max_items=60) or 1)
        )
        self.expand_button = w.Button(
            description="expand all", layout=shared_layout(width="90px"), style=button_style
        )
        self.expand_button.on_click(lambda _: self.set_collapse(None))
        self.back_button = w.Button(
            description="back to parent", layout=w.Layout(width="120px", display="none"), style=button_style
        )
        self.back_button.on_click(lambda _: self.close_subgraph())
        plain, html_style = shared_layout(), shared_style(HTMLStyle)  # nothing changes these two
        self.status = w.HTML(layout=plain, style=html_style)
        self.status.add_class("oge-status")
        self.details = w.HTML("<i>click a node to see its details</i>", layout=plain, style=html_style)
        self.details.add_class("oge-details-panel")
        self.subgraph_buttons = w.HBox(layout=plain)
        css = shared(("graph-view-css",), lambda: w.HTML(_CSS, layout=plain, style=html_style))
        panel = w.VBox(
            [css, self.details, self.subgraph_buttons],
            layout=shared_layout(width="36%", max_height=f"{height}px", overflow="auto"),
        )
        panel.add_class("oge-panel")
        toolbar = w.HBox(
            [
                self.search,
                self.next_match,
                self.color_menu,
                self.collapse_button,
                self.expand_button,
                self.back_button,
            ],
            layout=plain,
        )
        super().__init__(
            [
                toolbar,
                self.status,
                w.HBox([w.Box([self.figure], layout=shared_layout(width="64%")), panel], layout=plain),
            ]
        )
        self.add_class("oge-graph-view")
        self._update_status()

    def __repr__(self) -> str:
        """What the view shows, in one line (the output's ``text/plain``), not the tree of its widgets.

        Examples
        --------
        >>> GraphView("zoo:mlp")
        GraphView(zoo:mlp: 6 nodes, 8 items drawn)
        """
        return f"{type(self).__name__}({self._what_is_drawn()})"

    def _what_is_drawn(self) -> str:
        boxes = len(self.layout_.groups)
        return (
            f"{self.graph.source}: {self.graph.summary().nodes} nodes, "
            f"{len(self.layout_.positions)} items drawn" + (f" ({boxes} collapsed scopes)" if boxes else "")
        )

    # -- drawing -------------------------------------------------------------------------------

    def _overlay(self, color_by: str) -> tuple[Mapping[str, Any] | None, Mapping[str, str] | None]:
        if color_by in self.overlays:
            return self.overlays[color_by], self.palettes.get(color_by)
        return None, None

    def _figure(self, color_by: str) -> go.Figure:
        overlay, palette = self._overlay(color_by)
        return graph_figure(
            self.graph,
            self.layout_,
            overlay,
            color_by=color_by if color_by in COLOR_BY else "op_type",
            palette=palette,
            height=self.height,
            selected=self.selected,
            edge_marks=self.edge_marks.get(color_by),
        )

    def refresh(self, keep_view: bool = True) -> None:
        """Redraw every trace from the current layout, overlay and selection in one round trip.

        Examples
        --------
        >>> view = GraphView("zoo:mlp")
        >>> view.refresh()
        """
        new = self._figure(self.color_menu.value if hasattr(self, "color_menu") else "op_type")
        if sync_figure(self.figure, new, view=not keep_view):  # SVG <-> WebGL: new traces
            self.figure.data[NODES].on_click(self._clicked)
        if hasattr(self, "status"):
            self._update_status()

    def _update_status(self) -> None:
        where = f"subgraph <code>{html.escape(self._stack[-1][2])}</code> of " if self._stack else ""
        self.status.value = f"<span>{where}{html.escape(self._what_is_drawn())}</span>"

    # -- events --------------------------------------------------------------------------------

    def _clicked(self, trace: Any, points: Any, state: Any) -> None:
        if not points.point_inds:
            return
        item = trace.customdata[points.point_inds[0]]
        if item.startswith(GROUP_PREFIX) and item in self.layout_.groups:
            self.expand(item)
        else:
            self.select(item)

    def _recolor(self, change: dict[str, Any]) -> None:
        self.refresh()

    def _zoomed(self, layout: Any, x_range: Any, y_range: Any) -> None:
        show_text_for_view(self.figure, x_range, y_range)

    def _searched(self, change: dict[str, Any]) -> None:
        self.find(change["new"])

    # -- public API ----------------------------------------------------------------------------

    def on_select(self, callback: Callable[[str], Any]) -> None:
        """Call ``callback(node_id)`` whenever a node is selected (by click, search or code).

        Examples
        --------
        >>> view = GraphView("zoo:mlp")
        >>> seen = []
        >>> view.on_select(seen.append)
        >>> view.select("/fc2/Gemm"); seen
        ['/fc2/Gemm']
        """
        self._on_select.append(callback)

    def select(self, item: str) -> None:
        """Select a node: show its details, ring it in the graph.

        Examples
        --------
        >>> view = GraphView("zoo:mlp")
        >>> view.select("/fc1/Gemm"); view.selected
        '/fc1/Gemm'
        """
        if item not in self.layout_.positions:
            self.reveal(item)
        self.selected = item
        details = node_details(self.graph, item)
        extra = (
            overlay_details_html(self.overlay, item) if self.overlay is not None and not self._stack else ""
        )
        self.details.value = details_html(details) + extra
        buttons = []
        for attr, sub in self.graph.subgraphs.get(item, {}).items():
            button = w.Button(
                description=f"open {attr} ({len(sub)} nodes)",
                layout=shared_layout(width="auto"),
                style=shared_style(w.ButtonStyle),
            )
            button.add_class("oge-open-subgraph")
            button.on_click(lambda _, a=attr: self.open_subgraph(item, a))
            buttons.append(button)
        self.subgraph_buttons.children = buttons
        ring(self.figure, self.graph, self.layout_, [item])
        for callback in self._on_select:
            callback(item)

    def highlight(self, nodes: Sequence[str], note: str = "") -> list[str]:
        """Ring several nodes at once (those in collapsed scopes ring their box) and show ``note``
        (HTML) in the status line; an empty list clears the ring. Selects nothing and calls no
        :meth:`on_select` callback: it shows where another view's selection lands here.

        Returns
        -------
        list of str
            The items ringed.

        Examples
        --------
        >>> view = GraphView("zoo:mlp")
        >>> view.highlight(["/fc1/Gemm", "/fc2/Gemm"], "two Gemms")
        ['/fc1/Gemm', '/fc2/Gemm']
        """
        self.selected = None
        shown = ring(self.figure, self.graph, self.layout_, nodes)
        if shown:
            self.center_on(shown[0])
        self.status.value = note or html.escape(self._what_is_drawn())
        return shown

    def reveal(self, node_id: str) -> None:
        """Expand the collapsed scopes that hide ``node_id`` so it is drawn.

        Examples
        --------
        >>> view = GraphView("zoo:resnet18", collapse=1)
        >>> view.reveal("/layer1/layer1.0/conv1/Conv")
        >>> "/layer1/layer1.0/conv1/Conv" in view.layout_.positions
        True
        """
        if node_id not in self.graph.nx:
            raise KeyError(f"no node {node_id!r} in this graph")
        while node_id not in self.layout_.positions:
            holder = self.layout_.item_of.get(node_id)
            if holder is None or holder not in self.layout_.groups:
                break
            self.layout_ = expand(self.layout_, self.graph, holder)
        self.refresh()

    def expand(self, group: str) -> None:
        """Expand one collapsed scope in place (incremental layout).

        Examples
        --------
        >>> view = GraphView("zoo:resnet18", collapse=1)
        >>> view.expand("scope:layer1"); "scope:layer1" in view.layout_.positions
        False
        """
        before = set(self.layout_.positions)
        self.layout_ = expand(self.layout_, self.graph, group)
        self.refresh()
        self.bring_into_view([item for item in self.layout_.positions if item not in before])

    def bring_into_view(self, items: Sequence[str], margin: float = 1.0) -> None:
        """Move the view, zooming out only as far as needed, so every drawn item of ``items`` shows.

        Nothing moves when they show already. What a box opened into shows whole, as Netron
        shows a graph: its KV-cache inputs beside its attention, not past the plot's edge.

        Examples
        --------
        >>> view = GraphView("zoo:resnet18", collapse=1)
        >>> view.figure.layout.xaxis.range = [0, 1]
        >>> view.bring_into_view(["/conv1/Conv"])
        >>> x0, x1 = view.figure.layout.xaxis.range; x0 < view.layout_.positions["/conv1/Conv"][0] < x1
        True
        """
        nodes = self.figure.data[NODES]
        index = {item: k for k, item in enumerate(nodes.customdata)}
        shown = [index[item] for item in items if item in index]
        x_range, y_range = self.figure.layout.xaxis.range, self.figure.layout.yaxis.range
        if not shown or not x_range or not y_range:
            return
        xs, ys = [nodes.x[k] for k in shown], [nodes.y[k] for k in shown]
        lo_x, hi_x, lo_y, hi_y = min(xs) - margin, max(xs) + margin, min(ys) - margin, max(ys) + margin
        (x0, x1), (y0, y1) = sorted(x_range), sorted(y_range)
        if x0 <= lo_x and hi_x <= x1 and y0 <= lo_y and hi_y <= y1:
            return
        scale = max(1.0, (hi_x - lo_x) / (x1 - x0), (hi_y - lo_y) / (y1 - y0))  # one scale on both axes
        half_x, half_y = (x1 - x0) * scale / 2, (y1 - y0) * scale / 2
        cx = min(max((x0 + x1) / 2, hi_x - half_x), lo_x + half_x)  # move as little as needed
        cy = min(max((y0 + y1) / 2, hi_y - half_y), lo_y + half_y)
        new_x, new_y = [cx - half_x, cx + half_x], [cy - half_y, cy + half_y]
        with self.figure.batch_update():
            self.figure.layout.xaxis.range = new_x if x_range[0] <= x_range[1] else new_x[::-1]
            self.figure.layout.yaxis.range = new_y if y_range[0] <= y_range[1] else new_y[::-1]
        show_text_for_view(self.figure, self.figure.layout.xaxis.range, self.figure.layout.yaxis.range)

    def collapse(self, scope: tuple[str, ...] | str) -> None:
        """Collapse a name scope (tuple, or ``"a/b"``) into one box.

        Examples
        --------
        >>> view = GraphView("zoo:resnet18", collapse=None)
        >>> view.collapse("layer1"); "scope:layer1" in view.layout_.positions
        True
        """
        parts = tuple(scope.split("/")) if isinstance(scope, str) else tuple(scope)
        self.layout_ = collapse_group(self.layout_, self.graph, parts)
        self.refresh()

    def set_collapse(self, collapse: Any) -> None:
        """Lay the graph out again with another collapse (depth, scopes or None).

        Examples
        --------
        >>> view = GraphView("zoo:resnet18", collapse=1)
        >>> view.set_collapse(None); len(view.layout_.groups)
        0
        """
        self.layout_ = layered(self.graph, collapse=collapse, previous=self.layout_, node_size="auto")
        self.refresh(keep_view=False)

    def find(self, query: str) -> list[str]:
        """Find nodes whose name contains ``query`` or whose op type equals it; go to the first.

        Examples
        --------
        >>> view = GraphView("zoo:resnet18")
        >>> len(view.find("BatchNormalization"))
        20
        """
        query = query.strip()
        if not query:
            self._matches = []
            return []
        lowered = query.lower()
        self._matches = [
            n
            for n, data in self.graph.nx.nodes(data=True)
            if data.get("op_type", "").lower() == lowered or lowered in (data.get("name") or n).lower()
        ]
        self._match_index = 0
        if self._matches:
            self._goto_match(0)
        else:
            self.status.value = f"no node matches <code>{html.escape(query)}</code>"
        return list(self._matches)

    def _goto_match(self, index: int) -> None:
        if not self._matches:
            return
        self._match_index = index % len(self._matches)
        target = self._matches[self._match_index]
        self.select(target)
        self.center_on(target)
        self.status.value = (
            f"match {self._match_index + 1} of {len(self._matches)}: <code>{html.escape(target)}</code>"
        )

    def center_on(self, item: str, span: float | None = None) -> None:
        """Move the view so ``item`` is in the middle, at the reading zoom (or ``span`` units up and down).

        Examples
        --------
        >>> view = GraphView("zoo:mlp")
        >>> view.center_on("/fc1/Gemm")
        """
        nodes = self.figure.data[NODES]
        k = list(nodes.customdata).index(item)
        x, y = nodes.x[k], nodes.y[k]  # where the figure draws it (the layout's x may be stretched)
        half = span if span is not None else plot_height(self.figure.layout) / PX_PER_UNIT / 2
        with self.figure.batch_update():
            self.figure.layout.xaxis.range = [x - half / 2, x + half / 2]  # plotly widens x to the plot
            self.figure.layout.yaxis.range = [y - half, y + half]
        show_text_for_view(self.figure, self.figure.layout.xaxis.range, self.figure.layout.yaxis.range)

    def set_overlay(
        self,
        name: str,
        values: Mapping[str, Any],
        palette: Mapping[str, str] | None = None,
        edge_marks: Mapping[str, str] | None = None,
    ) -> None:
        """Add (or replace) an overlay in the colour menu and show it (``edge_marks``: tensor -> a
        mark on its edges while the overlay is shown, e.g. partition boundaries).

        Examples
        --------
        >>> view = GraphView("zoo:mlp")
        >>> view.set_overlay("latency", {"/fc1/Gemm": 1.5}); view.color_menu.value
        'latency'
        """
        self.overlays[name] = dict(values)
        if palette is not None:
            self.palettes[name] = dict(palette)
        if edge_marks is not None:
            self.edge_marks[name] = dict(edge_marks)
        options = [*COLOR_BY, *self.overlays]
        if list(self.color_menu.options) != options:
            self.color_menu.options = options
        if self.color_menu.value == name:
            self.refresh()
        else:
            self.color_menu.value = name

    def _read_overlay(self, overlay: Any) -> Any:
        from explorer.overlays import Overlay, read

        return overlay if isinstance(overlay, Overlay) else read(overlay, self.graph)

    def show_overlay(self, overlay: Any) -> None:
        """Show another overlay (an :class:`~explorer.overlays.Overlay`, a file or parsed JSON): each of
        its colourings joins the colour menu through :meth:`set_overlay`, the first one shown, and the
        details panel lists its fields.

        Examples
        --------
        >>> view = GraphView("zoo:mlp")
        >>> view.show_overlay({"main_graph": {"results": {"/fc1/Gemm": {"value": 2.0}}}})
        >>> view.color_menu.value, view.overlays["model-explorer: value"]
        ('model-explorer: value', {'/fc1/Gemm': 2.0})
        """
        self.overlay = self._read_overlay(overlay)
        for name, (values, palette) in reversed(list(overlay_colorings(self.overlay).items())):
            self.set_overlay(name, values, palette)
        if self.selected is not None:
            self.select(self.selected)

    def hide_overlay(self) -> None:
        """Stop showing the overlay of :meth:`show_overlay`: its colourings leave the colour menu (the
        graph is coloured by op type again if one of them was shown) and the details panel drops its
        fields. Overlays added by :meth:`set_overlay` alone stay.

        Examples
        --------
        >>> view = GraphView("zoo:mlp")
        >>> view.show_overlay({"main_graph": {"results": {"/fc1/Gemm": {"value": 2.0}}}})
        >>> view.hide_overlay()
        >>> view.overlay, view.color_menu.value, "model-explorer: value" in view.overlays
        (None, 'op_type', False)
        """
        if self.overlay is None:
            return
        names = set(overlay_colorings(self.overlay))
        self.overlay = None
        for name in names:
            self.overlays.pop(name, None)
            self.palettes.pop(name, None)
            self.edge_marks.pop(name, None)
        keep = "op_type" if self.color_menu.value in names else self.color_menu.value
        self.color_menu.options = [*COLOR_BY, *self.overlays]  # the menu falls back to its first entry
        if self.color_menu.value != keep:
            self.color_menu.value = keep
        if self.selected is not None:
            self.select(self.selected)

    def open_subgraph(self, node_id: str, attr: str) -> None:
        """Show a subgraph of an ``If`` / ``Loop`` / ``Scan`` node; :meth:`close_subgraph` goes back.

        Examples
        --------
        >>> view = GraphView("zoo:control_flow")
        >>> node = next(iter(view.graph.subgraphs))
        >>> view.open_subgraph(node, next(iter(view.graph.subgraphs[node]))); view.graph.depth
        1
        """
        sub = self.graph.subgraphs[node_id][attr]
        self._stack.append((self.graph, self.layout_, f"{node_id}.{attr}"))
        self.graph, self.layout_ = sub, layered(sub, collapse=auto_collapse(sub), node_size="auto")
        self.selected = None
        self.details.value = f"<i>subgraph {html.escape(attr)} of {html.escape(node_id)}</i>"
        self.subgraph_buttons.children = []
        self.back_button.layout.display = None
        self.refresh(keep_view=False)

    def close_subgraph(self) -> None:
        """Go back to the graph that holds the open subgraph.

        Examples
        --------
        >>> view = GraphView("zoo:control_flow")
        >>> node = next(iter(view.graph.subgraphs))
        >>> view.open_subgraph(node, next(iter(view.graph.subgraphs[node]))); view.close_subgraph()
        >>> view.graph.depth
        0
        """
        if not self._stack:
            return
        self.graph, self.layout_, _ = self._stack.pop()
        if not self._stack:
            self.back_button.layout.display = "none"
        self.selected = None
        self.refresh(keep_view=False)

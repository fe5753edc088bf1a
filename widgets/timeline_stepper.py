"""TimelineStepper: step through any Timeline, before and after side by side, with the diff of each step.

The left graph is the model before the step (removed nodes red, changed amber,
nodes fused away purple); the right one is the model after it (added green,
changed amber, the fused result purple); the table lists every step with its
op-count deltas and output drift, steps that changed nothing in grey. It knows
nothing of where the timeline came from: ONNX passes (:class:`widgets.PassStepper`
puts a pass picker above it), the TVM Relax lowering (the Explorer's Lowering tab,
:func:`explorer.lower.tvm.relax_pipeline`) and a target's preparation
(:class:`widgets.CoveragePanel`). The work is done by
:mod:`explorer.core.diff` and :func:`explorer.views.figures.graph_figure`; this class wires
state and events.

Examples
--------
>>> from explorer.passes.pipeline import run_pipeline
>>> stepper = TimelineStepper(run_pipeline("zoo:resnet18", "fuse_bn_into_conv", verify=False))
>>> stepper.step, stepper.diff.op_deltas
(1, {'BatchNormalization': -20})
"""

from __future__ import annotations

import html
import math
from typing import Any

import ipywidgets as w
import plotly.graph_objects as go

from explorer.core.diff import GraphDiff
from explorer.core.errors import UsageError
from explorer.core.graph import ModelGraph
from explorer.core.node_trace import NodeTrace, lowered_from, trace_node
from explorer.core.op_deltas import format_op_deltas
from explorer.core.timeline import Timeline
from explorer.views.figures import DIFF_COLORS, NODES, diff_overlay, fusion_notes, graph_figure
from explorer.views.layout import Layout, auto_collapse, layered
from explorer.views.tables import html_table

from .figure_sync import follow_zoom, sync_figure
from .figure_widget import GraphFigureWidget
from .selection_marks import ring

__all__ = ["TimelineStepper"]

_STEP_COLUMNS = ("#", "pass", "changed", "ms", "nodes", "+", "-", "~", "max|diff|", "op deltas")


def _fmt_drift(value: float | None) -> str:
    if value is None:
        return "-"
    return "inf" if math.isinf(value) else f"{value:.1e}"


class TimelineStepper(w.VBox):
    """Step through a Timeline, one snapshot at a time.

    Parameters
    ----------
    timeline : Timeline, optional
        What to step through (or later, :meth:`set_timeline`); it opens at its first
        step that changed something.
    graph : ModelGraph, optional
        What to draw until there is a timeline (by default the timeline's first graph).
    height : int
        Height of each graph in pixels.

    Attributes
    ----------
    timeline : Timeline or None
        The timeline shown.
    step : int
        The snapshot shown on the right (0 = the model as loaded).
    diff : GraphDiff or None
        The diff shown (snapshot ``step - 1`` to ``step``).
    before, after : plotly.graph_objects.FigureWidget
        The two graphs.

    Examples
    --------
    >>> from explorer.passes.pipeline import run_pipeline
    >>> t = run_pipeline("zoo:mlp", "eliminate_identity,eliminate_deadend", verify=False)
    >>> TimelineStepper(t).visible_steps()
    [0, 1, 2]
    """

    def __init__(
        self, timeline: Timeline | None = None, *, graph: ModelGraph | None = None, height: int = 560
    ) -> None:
        if graph is None and timeline is None:
            raise UsageError("TimelineStepper needs a timeline or a graph to draw")
        self.graph = graph if graph is not None else timeline[0].graph  # type: ignore[index]
        self.timeline: Timeline | None = None
        self.step = 0
        self.diff: GraphDiff | None = None
        self._layouts: dict[int, Layout] = {}
        self._height = height
        self.followed: str | None = None
        self._trace: NodeTrace | None = None
        self.follow_note = w.HTML()
        self.follow_note.add_class("oge-follow")

        self.slider = w.IntSlider(value=0, min=0, max=0, description="step", continuous_update=False)
        self.slider.add_class("oge-step-slider")
        self.prev_button = w.Button(description="previous", layout=w.Layout(width="90px"))
        self.next_button = w.Button(description="next", layout=w.Layout(width="90px"))
        self.prev_button.add_class("oge-prev")
        self.next_button.add_class("oge-next")
        self.hide_unchanged = w.Checkbox(value=False, description="skip steps that changed nothing")
        self.step_title = w.HTML()
        self.step_title.add_class("oge-step-title")
        self.table = w.HTML()
        self.table.add_class("oge-steps")
        self.fusions = w.HTML()
        self.fusions.add_class("oge-fusions")
        self.tir_menu = w.Dropdown(options=[], description="PrimFunc", layout=w.Layout(width="420px"))
        self.tir_text = w.HTML()
        self.tir_text.add_class("oge-tir")
        self.tir_panel = w.VBox([self.tir_menu, self.tir_text], layout=w.Layout(display="none"))
        self._tir_syncing = False
        self.tir_menu.observe(lambda _: None if self._tir_syncing else self._update_tir(), names="value")
        self.before: GraphFigureWidget | None = None
        self.after: GraphFigureWidget | None = None
        if timeline is not None:
            # the figures are made at the step it opens on: replacing their traces before the page
            # shows them (the first graph's traces for a lowering step's) left stale text and legends
            self.set_timeline(timeline)
        else:
            self._show_figure("before", graph_figure(self.graph, height=height))
            self._show_figure("after", graph_figure(self.graph, height=height))

        self.slider.observe(self._slider_moved, names="value")
        self.prev_button.on_click(lambda _: self.move(-1))
        self.next_button.on_click(lambda _: self.move(+1))
        self.hide_unchanged.observe(lambda _: self._update_table(), names="value")

        legend = " ".join(
            f'<span style="color:{color}">&#9679; {status}</span>' for status, color in DIFF_COLORS.items()
        )
        stepping = w.HBox([self.prev_button, self.slider, self.next_button, self.hide_unchanged])
        graphs = w.HBox(
            [
                w.VBox([w.HTML("<b>before</b>"), self.before], layout=w.Layout(width="50%")),
                w.VBox([w.HTML("<b>after</b>"), self.after], layout=w.Layout(width="50%")),
            ]
        )
        super().__init__(
            [
                stepping,
                self.step_title,
                self.follow_note,
                w.HTML(legend),
                graphs,
                self.fusions,
                self.tir_panel,
                self.table,
            ]
        )
        self.add_class("oge-timeline-stepper")

    def set_timeline(self, timeline: Timeline) -> None:
        """Show ``timeline``, at its first step that changed something.

        Examples
        --------
        >>> from explorer.passes.pipeline import run_pipeline
        >>> stepper = TimelineStepper(graph=run_pipeline("zoo:mlp", [], verify=False)[0].graph)
        >>> stepper.set_timeline(run_pipeline("zoo:mlp", "eliminate_identity", verify=False))
        >>> stepper.step
        1
        """
        self.timeline = timeline
        self._layouts = {}
        self._trace = None
        self.slider.max = len(timeline) - 1
        self._update_table()
        target = next(
            (i for i in range(1, len(timeline)) if timeline[i].changed),
            1 if len(timeline) > 1 else 0,
        )
        self.show(target)

    def visible_steps(self) -> list[int]:
        """Snapshot indices the slider and buttons visit (skipping unchanged steps when asked).

        Examples
        --------
        >>> from explorer.passes.pipeline import run_pipeline
        >>> TimelineStepper(run_pipeline("zoo:mlp", "eliminate_identity", verify=False)).visible_steps()
        [0, 1]
        """
        if self.timeline is None:
            return [0]
        return self.timeline.steps(hide_unchanged=self.hide_unchanged.value)

    def move(self, delta: int) -> None:
        """Go to the next (``+1``) or previous (``-1``) visible step.

        Examples
        --------
        >>> from explorer.passes.pipeline import run_pipeline
        >>> t = run_pipeline("zoo:mlp", "eliminate_identity,eliminate_deadend", verify=False)
        >>> stepper = TimelineStepper(t)
        >>> stepper.show(1); stepper.move(+1); stepper.step
        2
        """
        steps = self.visible_steps()
        if self.step in steps:
            position = steps.index(self.step) + delta
        else:
            position = next((i for i, s in enumerate(steps) if s > self.step), len(steps)) - (delta < 0)
        self.show(steps[max(0, min(len(steps) - 1, position))])

    def _slider_moved(self, change: dict[str, Any]) -> None:
        if change["new"] != self.step:
            self.show(change["new"])

    def _layout(self, index: int) -> Layout:
        """Snapshot ``index``'s layout, laid out after the one before it (so every earlier one first):
        a step looks the same whichever steps were visited before."""
        first = index
        while first > 0 and first - 1 not in self._layouts:
            first -= 1
        for step in range(first, index + 1):
            if step not in self._layouts:
                graph = self.timeline[step].graph if self.timeline else self.graph
                self._layouts[step] = layered(
                    graph,
                    collapse=auto_collapse(graph),
                    previous=self._layouts.get(step - 1),
                    node_size="auto",
                )
        return self._layouts[index]

    def show(self, index: int) -> None:
        """Show snapshot ``index`` on the right, the one before it on the left, and their diff.

        Examples
        --------
        >>> from explorer.passes.pipeline import run_pipeline
        >>> stepper = TimelineStepper(run_pipeline("zoo:resnet18", "fuse_bn_into_conv", verify=False))
        >>> stepper.show(0); stepper.diff is None
        True
        """
        if self.timeline is None:
            return
        index = max(0, min(len(self.timeline) - 1, index))
        self.step = index
        if self.slider.value != index:
            self.slider.value = index
        snap = self.timeline[index]
        if index == 0:
            self.diff = None
            before_graph, after_graph = snap.graph, snap.graph
            overlay_before = overlay_after = notes_before = notes_after = None
            before_layout = after_layout = self._layout(0)
        else:
            self.diff = self.timeline.diff(index)
            before_graph, after_graph = self.timeline[index - 1].graph, snap.graph
            overlay_before, overlay_after = (
                diff_overlay(self.diff, "before"),
                diff_overlay(self.diff, "after"),
            )
            notes_before, notes_after = fusion_notes(self.diff, "before"), fusion_notes(self.diff, "after")
            before_layout, after_layout = self._layout(index - 1), self._layout(index)
        self._draw("before", before_graph, before_layout, overlay_before, notes_before)
        self._draw("after", after_graph, after_layout, overlay_after, notes_after)
        self._update_title(index)
        self._update_fusions()
        self._update_tir_menu()
        self._update_table()
        self._show_followed()

    def follow(self, node: str | None) -> str:
        """Ring ``node`` in both graphs at every step, and say where it is (None: stop following).

        A node of the timeline's first graph is followed through each step's diff (its id
        after a rename, or "fused into X by step N", "removed by step N"); any other node,
        such as an ONNX node on a lowering timeline, is shown as the nodes lowered from it
        (their ``origin``: Relax bindings, then fused functions and kernels).

        Returns
        -------
        str
            The note shown above the graphs (HTML).

        Examples
        --------
        >>> from explorer.passes.pipeline import run_pipeline
        >>> stepper = TimelineStepper(run_pipeline("zoo:resnet18", "fuse_bn_into_conv", verify=False))
        >>> "fused into /conv1/Conv (Conv, with 1 other node)" in stepper.follow("/bn1/BatchNormalization")
        True
        """
        self.followed = node
        self._trace = None
        if node is not None and self.timeline is not None and node in self.timeline[0].graph.nx:
            self._trace = trace_node(self.timeline, node)
        self._show_followed()
        return self.follow_note.value

    def _show_followed(self) -> None:
        if self.timeline is None:
            return
        node = self.followed
        steps = {"before": max(0, self.step - 1), "after": self.step}
        marked: dict[str, list[str]] = {}  # side -> the nodes that stand for the followed one there
        for side, figure in (("before", self.before), ("after", self.after)):
            k = steps[side]
            graph = self.timeline[k].graph
            if node is None:
                marked[side] = []
            elif self._trace is not None:
                name = self._trace.name_at(k)
                marked[side] = [name] if name else []
            else:
                marked[side] = lowered_from(graph, node)
            ring(figure, graph, self._layout(k), marked[side])
        if node is None:
            self.follow_note.value = ""
            return
        label = f"<b>selected</b> <code>{html.escape(node)}</code>"
        if self._trace is not None:
            here = ", ".join(
                f"{side}: <code>{html.escape(n)}</code>" if (n := self._trace.name_at(k)) else f"{side}: gone"
                for side, k in steps.items()
            )
            self.follow_note.value = f"{label}: {html.escape(self._trace.fate)} ({here})"
            return
        graph, after = self.timeline[self.step].graph, marked["after"]
        names = ", ".join(
            f"<code>{html.escape(n)}</code> ({html.escape(str(graph.nx.nodes[n].get('op') or '?'))})"
            for n in after[:8]
        )
        names += " ..." if len(after) > 8 else ""
        self.follow_note.value = (
            f"{label} &rarr; {len(after)} node{'s' * (len(after) != 1)} lowered from it at this step"
            + (f": {names}" if after else " (none: it left no trace here)")
        )

    def _draw(self, side: str, graph: ModelGraph, layout: Layout, overlay: Any, notes: Any = None) -> None:
        self._show_figure(side, graph_figure(graph, layout, overlay, height=self._height, notes=notes))

    def _show_figure(self, side: str, fig: go.Figure) -> None:
        """Draw ``fig`` on one side: a new figure widget the first time, the live one updated after."""
        target = getattr(self, side)
        if target is None:
            target = GraphFigureWidget(fig)
            follow_zoom(target)
            setattr(self, side, target)
        else:
            sync_figure(target, fig, view=True)

    def _update_title(self, index: int) -> None:
        snap = self.timeline[index]
        if index == 0:
            self.step_title.value = f"<b>step 0: the model as loaded</b> ({snap.nodes} nodes)"
            return
        counts = self.diff.counts() if self.diff else {}
        deltas = format_op_deltas(self.diff.op_deltas if self.diff else {}, empty="none")
        status = "changed" if snap.changed else "changed nothing"
        error = f" <span style='color:#d62728'>failed: {html.escape(snap.error)}</span>" if snap.error else ""
        self.step_title.value = (
            f"<b>step {index}: {html.escape(snap.name)}</b> "
            f"({status}, {snap.elapsed * 1000:.0f} ms){error}<br>"
            f"nodes {self.timeline[index - 1].nodes} &rarr; {snap.nodes}; added {counts.get('added', 0)}, "
            f"removed {counts.get('removed', 0)}, modified {counts.get('modified', 0)}, "
            f"fusions {counts.get('fusions', 0)}; op deltas: {html.escape(deltas)}; "
            f"max |output diff| vs original: {_fmt_drift(snap.max_abs_diff)}"
            + (
                f"<pre style='font-size:85%;margin:2px 0'>{html.escape(chr(10).join(snap.log))}</pre>"
                if snap.log
                else ""
            )
        )

    def _update_tir_menu(self) -> None:
        """A lowering timeline: its PrimFuncs at this step in the menu (those the step changed first)."""
        tir = getattr(self.timeline, "tir", ())
        if not tir:
            self.tir_panel.layout.display = "none"
            return
        self.tir_panel.layout.display = ""
        self.tir_menu.description = self.timeline.code_label
        names = self.timeline.prim_funcs(self.step)
        changed = [n for n in names if self.step > 0 and tir[self.step - 1].get(n) != tir[self.step].get(n)]
        options = [*changed, *[n for n in names if n not in changed]]
        keep = self.tir_menu.value if self.tir_menu.value in options else (options[0] if options else None)
        self._tir_syncing = True  # new options and value: draw the text once, below
        try:
            self.tir_menu.options = options
            self.tir_menu.value = keep
        finally:
            self._tir_syncing = False
        self._update_tir()

    def _update_tir(self) -> None:
        name = self.tir_menu.value
        if not name or not getattr(self.timeline, "tir", ()):
            label = getattr(self.timeline, "code_label", "PrimFunc")
            self.tir_text.value = f"<i>no {html.escape(label)} at this step</i>"
            return
        script = self.timeline.tir[self.step].get(name, "")
        diff = self.timeline.tir_diff(self.step, name)
        counts = self.timeline.code_summary(self.step, name)
        body = diff or script
        what = "changed by this step" if diff else "unchanged by this step"
        self.tir_text.value = (
            f"<b>{html.escape(name)}</b> ({what}; {html.escape(counts)})"
            f"<pre style='font-size:11px;max-height:360px;overflow:auto'>{html.escape(body)}</pre>"
        )

    def _update_fusions(self) -> None:
        if not self.diff or not self.diff.fusions:
            self.fusions.value = ""
            return
        items = "".join(
            f"<li><code>{html.escape(f.pattern)}</code> ({f.kind}): "
            f"{html.escape(', '.join(f.sources))} &rarr; <code>{html.escape(f.into)}</code></li>"
            for f in self.diff.fusions[:40]
        )
        more = f"<li>... {len(self.diff.fusions) - 40} more</li>" if len(self.diff.fusions) > 40 else ""
        self.fusions.value = f"<b>fusions</b><ul>{items}{more}</ul>"

    def _update_table(self) -> None:
        if self.timeline is None:
            return
        hidden = set(range(len(self.timeline))) - set(self.visible_steps())
        rows, row_attrs = [], []
        for i in range(1, len(self.timeline)):
            if i in hidden:
                continue
            row = self.timeline.step_row(i)
            style = "color:#aaa;" if not row["changed"] else ""
            style += "background:#fff3cd;" if i == self.step else ""
            style += "color:#d62728;" if row["error"] else ""
            deltas = format_op_deltas(row["op_deltas"], empty="-")
            row_attrs.append({"style": style, "data-step": i})
            rows.append(
                (
                    i,
                    html.escape(row["pass"]),
                    "yes" if row["changed"] else "no",
                    f"{row['elapsed_ms']:.0f}",
                    f"{row['nodes_before']} &rarr; {row['nodes_after']}",
                    row["added"],
                    row["removed"],
                    row["modified"],
                    _fmt_drift(self.timeline[i].max_abs_diff),
                    html.escape(deltas),
                )
            )
        table_style = {"style": "font-size:12px;border-collapse:collapse"}
        self.table.value = html_table(rows, _STEP_COLUMNS, attrs=table_style, row_attrs=row_attrs)

    def highlighted(self, side: str = "after") -> dict[str, str]:
        """Item -> colour of the nodes currently highlighted (not grey/kept) on one side.

        Examples
        --------
        >>> from explorer.passes.pipeline import run_pipeline
        >>> stepper = TimelineStepper(run_pipeline("zoo:resnet18", "fuse_bn_into_conv", verify=False))
        >>> sorted(stepper.highlighted("before").values()) == sorted(
        ...     [DIFF_COLORS["fused"]] * 20 + [DIFF_COLORS["changed"]] * 20)
        True
        """
        figure = self.after if side == "after" else self.before
        nodes = figure.data[NODES]
        neutral = {DIFF_COLORS["kept"], "#e5e5e5"}
        colors = nodes.marker.color
        return {
            item: color
            for item, color in zip(nodes.customdata, colors, strict=True)
            if isinstance(color, str) and color in DIFF_COLORS.values() and color not in neutral
        }

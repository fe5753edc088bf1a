"""PassStepper: pick passes, run them, and step through what each one changed, before and after side by side.

The left graph is the model before the step (removed nodes red, changed amber,
nodes fused away purple); the right one is the model after it (added green,
changed amber, the fused result purple); the table lists every step with its
op-count deltas and output drift, steps that changed nothing in grey. The
work is done by :func:`explorer.timeline.run_pipeline`, :mod:`explorer.diff`
and :func:`explorer.figures.graph_figure`; this class wires state and events.

Examples
--------
>>> from widgets import PassStepper
>>> stepper = PassStepper("zoo:resnet18", "fuse_bn_into_conv", verify=False)
>>> stepper.show(1)
>>> stepper.diff.op_deltas
{'BatchNormalization': -20}
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any

import ipywidgets as w
import plotly.graph_objects as go

from explorer import load
from explorer.diff import GraphDiff
from explorer.errors import PipelineSyntaxError, UnknownPassError
from explorer.figures import DIFF_COLORS, NODES, diff_overlay, fusion_notes, graph_figure
from explorer.graph import ModelGraph
from explorer.layout import Layout, auto_collapse, layered
from explorer.op_deltas import format_op_deltas
from explorer.passes import FAMILIES, get_pass, pass_names, split_pipeline
from explorer.timeline import Timeline, run_pipeline

from .figure_sync import follow_zoom, sync_figure

__all__ = ["PassStepper"]


def _fmt_drift(value: float | None) -> str:
    if value is None:
        return "-"
    return "inf" if math.isinf(value) else f"{value:.1e}"


class PassStepper(w.VBox):
    """Step through a pipeline of passes, one snapshot at a time.

    Parameters
    ----------
    graph : ModelGraph or anything :func:`explorer.load` accepts
        The model.
    pipeline : str or list, optional
        Passes to run at once (``"onnxsim,fuse_bn_into_conv,ort:extended"``);
        otherwise pick them in the widget and press *run*.
    input_shapes : mapping, optional
        Fixed input shapes (loading, onnxsim, verification inputs).
    verify : bool
        Compare every changed step's outputs with the original in ONNX Runtime.
    height : int
        Height of each graph in pixels.

    Attributes
    ----------
    timeline : Timeline or None
        The last run.
    step : int
        The snapshot shown on the right (0 = the model as loaded).
    diff : GraphDiff or None
        The diff shown (snapshot ``step - 1`` to ``step``).
    before, after : plotly.graph_objects.FigureWidget
        The two graphs.

    Examples
    --------
    >>> stepper = PassStepper("zoo:mlp", "eliminate_identity,fuse_matmul_add_bias_into_gemm", verify=False)
    >>> stepper.visible_steps()
    [0, 1, 2]
    """

    def __init__(
        self,
        graph: ModelGraph | Any,
        pipeline: str | Sequence[Any] | None = None,
        *,
        input_shapes: dict[str, Sequence[int]] | None = None,
        verify: bool = True,
        height: int = 560,
    ) -> None:
        self.graph = graph if isinstance(graph, ModelGraph) else load(graph, input_shapes=input_shapes)
        self.input_shapes = input_shapes
        self.verify = verify
        self.timeline: Timeline | None = None
        self.step = 0
        self.diff: GraphDiff | None = None
        self._layouts: dict[int, Layout] = {}

        self.family = w.Dropdown(options=list(FAMILIES), value="onnxoptimizer", description="family")
        self.pass_menu = w.Dropdown(options=pass_names("onnxoptimizer"), description="pass")
        self.explanation = w.HTML()
        self.explanation.add_class("oge-pass-explanation")
        self.add_button = w.Button(description="add to pipeline", layout=w.Layout(width="130px"))
        self.pipeline_text = w.Text(
            value=pipeline if isinstance(pipeline, str) else ",".join(str(p) for p in pipeline or ()),
            description="pipeline",
            layout=w.Layout(width="60%"),
        )
        self.run_button = w.Button(description="run", button_style="primary", layout=w.Layout(width="80px"))
        self.run_button.add_class("oge-run")
        self.progress = w.IntProgress(value=0, min=0, max=1, layout=w.Layout(width="200px"))
        self.message = w.HTML()
        self.message.add_class("oge-message")
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
        self.before = go.FigureWidget(graph_figure(self.graph, height=height))
        self.after = go.FigureWidget(graph_figure(self.graph, height=height))
        follow_zoom(self.before)
        follow_zoom(self.after)
        self._height = height

        self.family.observe(self._family_changed, names="value")
        self.pass_menu.observe(self._pass_changed, names="value")
        self.add_button.on_click(self._add_pass)
        self.run_button.on_click(lambda _: self.run())
        self.slider.observe(self._slider_moved, names="value")
        self.prev_button.on_click(lambda _: self.move(-1))
        self.next_button.on_click(lambda _: self.move(+1))
        self.hide_unchanged.observe(lambda _: self._update_table(), names="value")
        self._pass_changed({"new": self.pass_menu.value})

        legend = " ".join(
            f'<span style="color:{color}">&#9679; {status}</span>' for status, color in DIFF_COLORS.items()
        )
        picker = w.VBox(
            [
                w.HBox([self.family, self.pass_menu, self.add_button]),
                self.explanation,
                w.HBox([self.pipeline_text, self.run_button, self.progress]),
                self.message,
            ]
        )
        stepping = w.HBox([self.prev_button, self.slider, self.next_button, self.hide_unchanged])
        graphs = w.HBox(
            [
                w.VBox([w.HTML("<b>before</b>"), self.before], layout=w.Layout(width="50%")),
                w.VBox([w.HTML("<b>after</b>"), self.after], layout=w.Layout(width="50%")),
            ]
        )
        super().__init__(
            [picker, stepping, self.step_title, w.HTML(legend), graphs, self.fusions, self.table]
        )
        self.add_class("oge-pass-stepper")
        if self.pipeline_text.value:
            self.run()

    # -- pass picking --------------------------------------------------------------------------

    def _family_changed(self, change: dict[str, Any]) -> None:
        self.pass_menu.options = pass_names(change["new"])

    def _pass_changed(self, change: dict[str, Any]) -> None:
        if change["new"]:
            found = get_pass(change["new"])
            self.explanation.value = (
                f"<div style='max-width:900px'><b>{html.escape(found.name)}</b> "
                f"<i>({html.escape(found.family)}, {html.escape(found.kind)})</i>: "
                f"{html.escape(found.description)}</div>"
            )

    def _add_pass(self, _: Any) -> None:
        names = split_pipeline(self.pipeline_text.value)
        self.pipeline_text.value = ",".join([*names, self.pass_menu.value])

    # -- running -------------------------------------------------------------------------------

    def run(self, pipeline: str | Sequence[Any] | None = None) -> Timeline:
        """Run the pipeline (the text box's, or ``pipeline``) and show its last step.

        Examples
        --------
        >>> stepper = PassStepper("zoo:mlp", verify=False)
        >>> len(stepper.run("eliminate_identity"))
        2
        """
        if pipeline is not None:
            self.pipeline_text.value = pipeline if isinstance(pipeline, str) else ",".join(map(str, pipeline))
        spec = self.pipeline_text.value
        self.progress.value = 0
        self.message.value = "<i>running...</i>"

        def report(step: int, total: int, name: str) -> None:
            self.progress.value = step - 1
            self.message.value = f"<i>step {step}/{total}: {html.escape(name)}...</i>"

        try:
            self.progress.max = max(1, len(split_pipeline(spec)))
            self.timeline = run_pipeline(
                self.graph, spec, input_shapes=self.input_shapes, verify=self.verify, progress=report
            )
        except (UnknownPassError, PipelineSyntaxError) as err:
            self.message.value = f"<span style='color:#d62728'>{html.escape(str(err))}</span>"
            raise
        self.progress.value = self.progress.max
        failed = [s for s in self.timeline.snapshots if s.error]
        self.message.value = f"{len(self.timeline) - 1} steps" + (
            f", <span style='color:#d62728'>{len(failed)} failed</span>" if failed else ""
        )
        self._layouts = {}
        self.slider.max = len(self.timeline) - 1
        self._update_table()
        target = next(
            (i for i in range(1, len(self.timeline)) if self.timeline[i].changed),
            1 if len(self.timeline) > 1 else 0,
        )
        self.show(target)
        return self.timeline

    # -- stepping ------------------------------------------------------------------------------

    def visible_steps(self) -> list[int]:
        """Snapshot indices the slider and buttons visit (skipping unchanged steps when asked).

        Examples
        --------
        >>> PassStepper("zoo:mlp", "eliminate_identity", verify=False).visible_steps()
        [0, 1]
        """
        if self.timeline is None:
            return [0]
        return self.timeline.steps(hide_unchanged=self.hide_unchanged.value)

    def move(self, delta: int) -> None:
        """Go to the next (``+1``) or previous (``-1``) visible step.

        Examples
        --------
        >>> stepper = PassStepper("zoo:mlp", "eliminate_identity,eliminate_deadend", verify=False)
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
        >>> stepper = PassStepper("zoo:resnet18", "fuse_bn_into_conv", verify=False)
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
        self._draw(self.before, before_graph, before_layout, overlay_before, notes_before)
        self._draw(self.after, after_graph, after_layout, overlay_after, notes_after)
        self._update_title(index)
        self._update_fusions()
        self._update_table()

    def _draw(
        self, target: go.FigureWidget, graph: ModelGraph, layout: Layout, overlay: Any, notes: Any = None
    ) -> None:
        fig = graph_figure(graph, layout, overlay, height=self._height, notes=notes)
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
        rows = []
        for i in range(1, len(self.timeline)):
            if i in hidden:
                continue
            row = self.timeline.step_row(i)
            style = "color:#aaa;" if not row["changed"] else ""
            style += "background:#fff3cd;" if i == self.step else ""
            style += "color:#d62728;" if row["error"] else ""
            deltas = format_op_deltas(row["op_deltas"], empty="-")
            rows.append(
                f"<tr style='{style}' data-step='{i}'><td>{i}</td><td>{html.escape(row['pass'])}</td>"
                f"<td>{'yes' if row['changed'] else 'no'}</td><td>{row['elapsed_ms']:.0f}</td>"
                f"<td>{row['nodes_before']} &rarr; {row['nodes_after']}</td><td>{row['added']}</td>"
                f"<td>{row['removed']}</td><td>{row['modified']}</td>"
                f"<td>{_fmt_drift(self.timeline[i].max_abs_diff)}</td><td>{html.escape(deltas)}</td></tr>"
            )
        self.table.value = (
            "<table style='font-size:12px;border-collapse:collapse'>"
            "<tr><th>#</th><th>pass</th><th>changed</th>"
            "<th>ms</th><th>nodes</th><th>+</th><th>-</th><th>~</th><th>max|diff|</th><th>op deltas</th></tr>"
            + "".join(rows)
            + "</table>"
        )

    def highlighted(self, side: str = "after") -> dict[str, str]:
        """Item -> colour of the nodes currently highlighted (not grey/kept) on one side.

        Examples
        --------
        >>> stepper = PassStepper("zoo:resnet18", "fuse_bn_into_conv", verify=False)
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

"""CoveragePanel: which nodes each target takes, the graph coloured by partition, and the NPU-ready pipeline.

Above: the targets to check (ONNX Runtime CPU and CUDA, NNAPI, CoreML, Qualcomm HTP,
TVM, IREE; one whose compiler is not installed says so), a check button and a status
line. Below, once checked: a table per target (supported and total nodes, coverage by
nodes and by FLOPs, partitions, whether ONNX Runtime's own placement agrees, the
verdict), the op-support heatmap (rows: op types,
columns: targets), and the graph with one "partition: TARGET" entry per target in its
colour menu (each partition its own colour, CPU fallback grey, "⇄ DESTINATION" on the edges
of every tensor copied between devices). Then the NPU-ready
pipeline: pick a target and the activation type, prepare, and step through it (coverage,
partitions and the accuracy cost per step); "hide Q/DQ" draws the quantised graph like
the float one.

Predicted against measured: a Qualcomm AI Hub profile (``download_profile()``; its path in the
"measured" box, ``measured=`` or :meth:`CoveragePanel.compare_measured`) says where each layer
really ran, and the panel compares it, node by node, with where the qnn-htp target predicts it
(:func:`explorer.overlays.placement_agreement`): the summary in the status line, the node count per
category and the nodes that disagree or were not measured in a table
(:func:`explorer.views.overlay_view.placement_agreement_html`), and the graph coloured by agreement
("qnn-htp: predicted vs measured" in its colour menu, through :meth:`GraphView.show_overlay`). A
file that cannot be read, or is no AI Hub profile, is named in the status line with the reason.

The work is :mod:`explorer.targets`, :mod:`explorer.overlays` and :mod:`explorer.views`; this class
wires state and events.

Examples
--------
>>> panel = CoveragePanel("zoo:mlp", targets=("ort-cpu", "nnapi"))
>>> report = panel.check()
>>> [t.target for t in report.targets], panel.view.color_menu.value
(['ort-cpu', 'nnapi'], 'partition: nnapi')
>>> agreement = panel.compare_measured({"execution_detail": [
...     {"name": "/fc1/Gemm", "type": "FullyConnected", "compute_unit": "NPU", "execution_time": 10},
...     {"name": "/relu1/Relu", "type": "Relu", "compute_unit": "CPU", "execution_time": 5}]})
>>> panel.status.value
'qnn-htp predicted vs measured: 1 of 2 nodes agree (50.0%); 1 predicted NPU ran elsewhere, 4 not measured'
>>> panel.view.color_menu.value
'qnn-htp: predicted vs measured'
"""

from __future__ import annotations

import contextlib
import dataclasses
import html
import os
from collections.abc import Sequence
from typing import Any

import ipywidgets as w

from explorer import load
from explorer.core.graph import ModelGraph
from explorer.core.timeline import Timeline
from explorer.overlays.agreement import PlacementAgreement, placement_agreement
from explorer.overlays.registry import read
from explorer.overlays.value import Overlay
from explorer.targets import TARGET_NAMES, CoverageReport, Target, coverage, get_target
from explorer.targets.prepare import PREPARE_PIPELINES, PreparedModel, prepare_for_target
from explorer.views.overlay_view import could_not_read_html, placement_agreement_html
from explorer.views.qdq import hide_qdq
from explorer.views.tables import html_table
from explorer.views.target_figures import op_support_heatmap, partition_palette

from .graph_view import GraphView
from .timeline_stepper import TimelineStepper

__all__ = ["CoveragePanel", "DEFAULT_TARGETS"]

_TARGET_COLUMNS = ("target", "supported", "of", "coverage", "by FLOPs", "partitions", "ORT agrees", "verdict")
_STEP_COLUMNS = ("step", "coverage", "partitions", "nodes", "max abs diff", "relative")

DEFAULT_TARGETS = ("ort-cpu", "nnapi", "coreml-mlprogram", "qnn-htp")
"""The targets checked unless others are chosen (TVM's and IREE's real compile attempts take longer)."""


def _target_label(target: Target) -> str:
    """A target as the selector lists it: name and device, and "not installed" where it cannot judge."""
    label = f"{target.name}: {target.device}"
    return label if target.unavailable is None else f"{label} (not installed)"


def _percent(value: float | None) -> str:
    return "" if value is None else f"{value:.0%}"


class CoveragePanel(w.VBox):
    """Op support, partitions and CPU fallback of one model on several targets, and making it NPU-ready.

    Parameters
    ----------
    source : ModelGraph or anything :func:`explorer.load` takes
        The model.
    targets : sequence of str
        The targets selected at first (names of :data:`explorer.targets.TARGET_NAMES`).
    input_shapes : mapping, optional
        Fixed shapes for the FLOPs estimate, the NPU-ready pipeline and the prediction compared with a
        measured profile (there, without them, dynamic dimensions are 1, as AI Hub compiles).
    measured : path, dict or Overlay, optional
        A Qualcomm AI Hub profile to compare with the qnn-htp prediction at once
        (:meth:`compare_measured`); one that cannot be read is named in the status line, not raised.

    Attributes
    ----------
    report : CoverageReport or None
        The last check (:meth:`check`).
    prepared : PreparedModel or None
        The last NPU-ready pipeline run (:meth:`prepare`).
    agreement : PlacementAgreement or None
        The last measured profile against the prediction (:meth:`compare_measured`).
    measured_path, compare_button : ipywidgets.Text, ipywidgets.Button
        The path of a measured profile, and the button that compares it.
    measured_table : ipywidgets.HTML
        The counts per category and the nodes that disagree or were not measured.

    Examples
    --------
    >>> CoveragePanel("zoo:mlp").targets.value
    ('ort-cpu', 'nnapi', 'coreml-mlprogram', 'qnn-htp')
    >>> panel = CoveragePanel("zoo:control_flow", measured={"execution_detail": [
    ...     {"name": "/loop/Loop", "type": "Loop", "compute_unit": "NPU", "execution_time": 80}]})
    >>> panel.agreement.measured_npu_predicted_elsewhere, panel.view.color_menu.value
    (('/loop/Loop',), 'qnn-htp: predicted vs measured')
    >>> CoveragePanel("zoo:mlp", measured={"something": "else"}).status.value.startswith(
    ...     "<b>could not read</b> &lt;value&gt;: ")
    True
    """

    def __init__(
        self,
        source: Any,
        *,
        targets: Sequence[str] = DEFAULT_TARGETS,
        input_shapes: dict[str, list[int]] | None = None,
        measured: Any = None,
    ) -> None:
        self.graph: ModelGraph = source if isinstance(source, ModelGraph) else load(source)
        self.input_shapes = input_shapes
        self.report: CoverageReport | None = None
        self.prepared: PreparedModel | None = None
        self.agreement: PlacementAgreement | None = None
        self.targets = w.SelectMultiple(
            options=[(_target_label(get_target(name)), name) for name in TARGET_NAMES],
            value=tuple(targets),
            description="targets",
            rows=len(TARGET_NAMES),
            layout=w.Layout(width="420px"),
        )
        self.check_button = w.Button(
            description="check", button_style="primary", _dom_classes=("oge-coverage-check",)
        )
        self.status = w.HTML("<i>choose targets, then check</i>", _dom_classes=("oge-coverage-status",))
        self.table = w.HTML(_dom_classes=("oge-coverage-table",))
        self.measured_path = w.Text(
            placeholder="a Qualcomm AI Hub profile (.json)",
            description="measured",
            layout=w.Layout(width="420px"),
            _dom_classes=("oge-coverage-measured-path",),
        )
        self.compare_button = w.Button(
            description="compare",
            tooltip="where each node ran against where qnn-htp predicts it",
            _dom_classes=("oge-coverage-compare",),
        )
        self.measured_table = w.HTML(_dom_classes=("oge-coverage-measured",))
        from .figure_widget import GraphFigureWidget  # plotly's widget stack: when a panel is made

        self.heatmap = GraphFigureWidget()
        self.view = GraphView(self.graph)
        self.prepare_target = w.Dropdown(
            options=list(PREPARE_PIPELINES), value="qnn-htp", description="NPU-ready"
        )
        self.activations = w.ToggleButtons(
            options=["uint8", "uint16"], value="uint8", description="activations"
        )
        self.prepare_button = w.Button(description="prepare", _dom_classes=("oge-coverage-prepare",))
        self.hide_qdq = w.Checkbox(value=False, description="hide Q/DQ", indent=False)
        self.steps = w.HTML(_dom_classes=("oge-coverage-steps",))
        self.stepper = TimelineStepper(graph=self.graph, height=420)
        self.results = w.VBox([], _dom_classes=("oge-coverage-results",))
        self.check_button.on_click(lambda _: self.check())
        self.prepare_button.on_click(lambda _: self.prepare())
        self.compare_button.on_click(lambda _: self._compare_path())
        self.hide_qdq.observe(lambda _: self._show_prepared(), names="value")
        controls = w.VBox(
            [
                self.targets,
                w.HBox([self.check_button, self.status]),
                w.HBox([self.measured_path, self.compare_button]),
            ]
        )
        pipeline = w.VBox(
            [
                w.HBox(
                    [self.prepare_target, self.activations, self.prepare_button, self.hide_qdq],
                    layout=w.Layout(flex_flow="row wrap"),
                ),
                self.steps,
            ],
            _dom_classes=("oge-coverage-pipeline",),
        )
        super().__init__(
            [controls, self.results, self.measured_table, self.view, pipeline],
            _dom_classes=("oge-coverage-panel",),
        )
        if measured is not None:
            if isinstance(measured, (str, os.PathLike)):
                self.measured_path.value = os.fspath(measured)
            with contextlib.suppress(Exception):  # the reason is in the status line
                self.compare_measured(measured)

    def check(self) -> CoverageReport:
        """Judge the graph on the chosen targets and show the tables, the heatmap and the partitions.

        Examples
        --------
        >>> panel = CoveragePanel("zoo:resnet18", targets=("coreml-mlprogram",))
        >>> panel.check().get("coreml-mlprogram").partitions
        19
        """
        self.check_button.disabled = True
        self.status.value = f"checking {len(self.targets.value)} targets ..."
        try:
            self.report = coverage(
                self.graph, list(self.targets.value), input_shapes=self.input_shapes, with_assignment=True
            )
        except Exception as err:  # shown in the panel; the kernel and the panel stay usable
            self.status.value = f"<b>failed</b>: {html.escape(type(err).__name__)}: {html.escape(str(err))}"
            raise
        finally:
            self.check_button.disabled = False
        from .figure_widget import GraphFigureWidget

        self.heatmap = GraphFigureWidget(op_support_heatmap(self.report))
        self.table.value = self._table_html()
        self.results.children = [self.table, self.heatmap]
        first = None
        for name, p in self.report.partitionings.items():
            self.view.set_overlay(f"partition: {name}", p.overlay(), partition_palette(p), p.boundary_marks())
            if first is None or (first == "ort-cpu" and p.fallback is not None):
                first = name
        if first is not None:
            self.view.color_menu.value = f"partition: {first}"
        self.status.value = f"done: {len(self.report.targets)} targets"
        return self.report

    def compare_measured(self, profile: Any) -> PlacementAgreement:
        """Compare a measured placement with the qnn-htp prediction and show it: the summary in the
        status line, the counts and the disagreeing and unmeasured nodes in :attr:`measured_table`,
        the graph coloured by agreement. A profile that cannot be read, or has no compute unit per
        node, is named in the status line with the reason, the error raised, and what is shown stays.

        Parameters
        ----------
        profile : path, dict or Overlay
            A Qualcomm AI Hub profile (``download_profile()``): the file, its parsed JSON, or the
            overlay :func:`explorer.overlays.read` made of it on this graph.

        Returns
        -------
        PlacementAgreement
            :func:`explorer.overlays.placement_agreement` of the graph and the profile, predicted with
            the panel's ``input_shapes`` (else dynamic dimensions 1).

        Raises
        ------
        ModelNotFoundError, UsageError
            The file is missing, is not JSON or not a profile with a compute unit per node.

        Examples
        --------
        >>> panel = CoveragePanel("zoo:mlp")
        >>> agreement = panel.compare_measured({"execution_detail": [
        ...     {"name": "/fc1/Gemm", "type": "Gemm", "compute_unit": "NPU", "execution_time": 10}]})
        >>> agreement.share_agreeing, panel.view.overlays["qnn-htp: predicted vs measured"]["/fc1/Gemm"]
        (1.0, 'agree')
        """
        is_file = isinstance(profile, (str, os.PathLike))
        if is_file:
            label = os.fspath(profile)
        else:
            label = (profile.source if isinstance(profile, Overlay) else None) or "<value>"
        self.status.value = f"reading {html.escape(label)} ..."
        self.compare_button.disabled = True
        try:
            measured = profile if isinstance(profile, Overlay) else read(profile, self.graph)
            agreement = placement_agreement(self.graph, measured, input_shapes=self.input_shapes)
        except Exception as err:  # the user's file: say which and why, keep what is shown
            self.status.value = could_not_read_html(label, err, profile if is_file else None)
            raise
        finally:
            self.compare_button.disabled = False
        self.agreement = agreement
        self.measured_table.value = placement_agreement_html(agreement, with_not_measured=True)
        self.view.hide_overlay()  # a profile compared before
        self.view.show_overlay(agreement.to_overlay())
        self.status.value = html.escape(agreement.summary())
        return agreement

    def _compare_path(self) -> None:
        """The compare button: the path in the box, any error only in the status line."""
        path = self.measured_path.value.strip()
        if not path:
            self.status.value = "<i>give the path of a Qualcomm AI Hub profile, then compare</i>"
            return
        with contextlib.suppress(Exception):  # the reason is in the status line
            self.compare_measured(path)

    def _table_html(self) -> str:
        assert self.report is not None
        rows = []
        for t in self.report.targets:
            agrees = {None: "", True: "yes", False: "<b>no</b>"}[t.agrees_with_runtime]
            rows.append(
                (
                    html.escape(t.target),
                    t.supported_nodes,
                    t.total_nodes,
                    _percent(t.coverage),
                    _percent(t.flops_coverage),
                    t.partitions,
                    agrees,
                    html.escape(t.verdict),
                )
            )
        return html_table(rows, _TARGET_COLUMNS, attrs={"class": "oge-coverage"})

    def _progress(self, step: int, total: int, name: str) -> None:
        self.status.value = f"preparing: step {step} of {total}: {html.escape(name)}"

    def prepare(self) -> PreparedModel:
        """Run the NPU-ready pipeline of the chosen target and step through it.

        Examples
        --------
        >>> panel = CoveragePanel("zoo:mlp")
        >>> panel.prepare_target.value = "nnapi"
        >>> [s.coverage for s in panel.prepare().steps]
        [0.0, 1.0, 1.0]
        """
        self.prepare_button.disabled = True
        try:
            self.prepared = prepare_for_target(
                self.graph,
                self.prepare_target.value,
                input_shapes=self.input_shapes,
                activation_type=self.activations.value,
                progress=self._progress,
            )
        except Exception as err:
            self.status.value = f"<b>failed</b>: {html.escape(type(err).__name__)}: {html.escape(str(err))}"
            raise
        finally:
            self.prepare_button.disabled = False
        self._show_prepared()
        last = self.prepared.steps[-1]
        self.status.value = f"prepared for {html.escape(self.prepared.target)}: {html.escape(last.verdict)}"
        return self.prepared

    def shown_timeline(self) -> Timeline | None:
        """The prepared timeline as the stepper shows it (Q/DQ hidden when asked).

        Examples
        --------
        >>> CoveragePanel("zoo:mlp").shown_timeline() is None
        True
        """
        if self.prepared is None:
            return None
        timeline = self.prepared.timeline
        if not self.hide_qdq.value:
            return timeline
        snapshots = tuple(dataclasses.replace(s, graph=hide_qdq(s.graph)) for s in timeline.snapshots)
        return Timeline(snapshots, timeline.source)  # diffs computed again, between the views shown

    def _show_prepared(self) -> None:
        timeline = self.shown_timeline()
        if timeline is None or self.prepared is None:
            return
        self.stepper.set_timeline(timeline)
        self.steps.value = self._steps_html()
        pipeline = self.children[-1]
        if self.stepper not in pipeline.children:
            pipeline.children = (*pipeline.children, self.stepper)

    def _steps_html(self) -> str:
        assert self.prepared is not None
        rows = []
        for s in self.prepared.steps:
            diff = "" if s.max_abs_diff is None else f"{s.max_abs_diff:.3g}"
            name = html.escape(s.pass_name) + ("" if s.changed or s.index == 0 else " (no change)")
            rows.append(
                (name, _percent(s.coverage), s.partitions, s.total_nodes, diff, _percent(s.relative_diff))
            )
        return html_table(rows, _STEP_COLUMNS, attrs={"class": "oge-coverage-steps"})

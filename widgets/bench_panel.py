"""BenchPanel: choose runtimes and options, run a benchmark with a progress bar, read the results.

Above: which runtimes (ONNX Runtime, TVM, IREE, PyTorch eager), ONNX Runtime's optimisation level and threads,
TVM's tuning budget (trials, 0: untuned), whether TVM starts from the tuning records shipped
for this CPU, an RPC tracker and device key to run TVM on a remote server, a run button and
a progress bar. Below, once it ran: the latency distributions side by side (box or violin),
a table (median, p90, runs, prepare time, agreement with the first runtime, kernels launched
and bytes written between kernels per inference), the slowest kernels, each node against
the machine's roofline, and the graph coloured by where each runtime spends its time
(per-node overlays from :func:`explorer.runtimes.profile.profile`, one entry per runtime in
the graph's colour menu). The measurement is :func:`explorer.runtimes.bench`; the figures
are :mod:`explorer.views.runtime_figures`; this class wires state and events.

Examples
--------
>>> panel = BenchPanel("zoo:mlp", min_runs=3, min_seconds=0.0)
>>> report = panel.run()
>>> [r.runtime for r in report.results], panel.status.value.startswith("done")
(['ort', 'tvm'], True)
"""

from __future__ import annotations

import html
from typing import Any

import ipywidgets as w

from explorer import load
from explorer.core.graph import ModelGraph
from explorer.core.tensors import format_bytes
from explorer.onnx_adapter.inputs import concrete_input_shapes
from explorer.onnx_adapter.ort_run import ORT_LEVELS
from explorer.runtimes import bench, random_feeds
from explorer.runtimes.bench import BenchReport
from explorer.runtimes.cost_model import node_costs
from explorer.runtimes.generation import generation_profiles
from explorer.runtimes.profile import Profile, profile
from explorer.runtimes.registry import RUNTIMES, get_runtime
from explorer.runtimes.roofline import Roofline, roofline
from explorer.runtimes.task_coverage import TaskCoverage, task_coverage
from explorer.views.runtime_figures import (
    kernel_time_figure,
    latency_figure,
    roofline_figure,
    task_coverage_table,
)
from explorer.views.tables import html_table

from .graph_view import GraphView

__all__ = ["BenchPanel"]

_BENCH_COLUMNS = (
    "runtime",
    "median ms",
    "p90 ms",
    "runs",
    "prepare s",
    "max abs err",
    "agrees",
    "kernels",
    "written between kernels",
)


class BenchPanel(w.VBox):
    """Run ONNX Runtime and TVM side by side on one model and show latency, agreement and time per node.

    Parameters
    ----------
    source : ModelGraph or anything :func:`explorer.load` takes
        The model.
    input_shapes : mapping, optional
        Shapes of dynamic inputs.
    min_runs, min_seconds, max_seconds : optional
        The measurement (see :func:`explorer.runtimes.bench`).

    Examples
    --------
    >>> BenchPanel("zoo:mlp").runtimes.value
    ('ort', 'tvm')
    """

    def __init__(
        self,
        source: Any,
        *,
        input_shapes: dict[str, list[int]] | None = None,
        min_runs: int = 10,
        min_seconds: float = 1.0,
        max_seconds: float = 30.0,
    ) -> None:
        self.graph: ModelGraph = source if isinstance(source, ModelGraph) else load(source)
        self.input_shapes = input_shapes
        self.limits = {"min_runs": min_runs, "min_seconds": min_seconds, "max_seconds": max_seconds}
        self.report: BenchReport | None = None
        self.profiles: dict[str, Profile] = {}
        self.task_coverage: dict[str, TaskCoverage] = {}
        self.runtimes = w.SelectMultiple(
            options=[(entry.menu, name) for name, entry in RUNTIMES.items() if entry.menu],
            value=("ort", "tvm"),
            description="runtimes",
            rows=5,
        )
        self.ort_level = w.Dropdown(options=list(ORT_LEVELS), value="all", description="ORT level")
        self.ort_threads = w.BoundedIntText(value=0, min=0, max=256, description="threads")
        self.tune_trials = w.BoundedIntText(value=0, min=0, max=100_000, description="TVM trials")
        self.pretuned = w.Checkbox(value=False, description="TVM shipped records", indent=False)
        self.rpc_tracker = w.Text(value="", placeholder="HOST:PORT", description="RPC tracker")
        self.rpc_key = w.Text(value="", placeholder="device key", description="RPC key")
        self.kind = w.ToggleButtons(options=["box", "violin"], value="box")
        self.run_button = w.Button(description="run", button_style="primary", _dom_classes=("oge-bench-run",))
        self.progress = w.FloatProgress(value=0.0, min=0.0, max=1.0, description="")
        self.status = w.HTML("<i>choose runtimes, then run</i>", _dom_classes=("oge-bench-status",))
        from .figure_widget import GraphFigureWidget  # plotly's widget stack: when a panel is made

        self.latency = GraphFigureWidget()  # made anew with their figure after a run (plotly.js from
        self.table = w.HTML(_dom_classes=("oge-bench-table",))  # the shared bundle, as the graph views)
        self.time_menu = w.Dropdown(options=[], description="colour by time")
        self.kernels = GraphFigureWidget()
        self.tasks = w.HTML()  # a TVM build's tasks: record or default schedule, share, GFLOP/s
        self.roofline = GraphFigureWidget()
        self.rooflines: list[Roofline] = []
        self.results = w.VBox([], _dom_classes=("oge-bench-results",))
        self.view = GraphView(self.graph)
        self.run_button.on_click(lambda _: self.run())
        self.kind.observe(lambda _: self._draw_latency(), names="value")
        self.time_menu.observe(self._on_time_menu, names="value")
        controls = w.VBox(
            [
                w.HBox(
                    [
                        self.runtimes,
                        w.VBox([self.ort_level, self.ort_threads]),
                        w.VBox([self.tune_trials, self.pretuned]),
                        w.VBox([self.rpc_tracker, self.rpc_key]),
                    ],
                    layout=w.Layout(flex_flow="row wrap"),  # narrow output areas: columns wrap
                ),
                w.HBox([self.run_button, self.progress, self.status]),
            ]
        )
        super().__init__([controls, self.results, self.view], _dom_classes=("oge-bench-panel",))

    def _layout_results(self) -> None:
        self.results.children = [
            self.kind,
            self.latency,
            self.table,
            self.time_menu,
            self.kernels,
            self.tasks,
            self.roofline,
        ]

    def chosen(self) -> list[Any]:
        """The runtimes the controls describe, in the order shown.

        Examples
        --------
        >>> [r.label for r in BenchPanel("zoo:mlp").chosen()]
        ['ONNX Runtime CPU (all)', 'TVM llvm untuned (default schedules)']
        """
        tracker, key = self.rpc_tracker.value.strip(), self.rpc_key.value.strip()
        remote = tracker or key  # both or neither: the runtime says so when only one is given
        flags = {
            "optimization": self.ort_level.value,
            "threads": int(self.ort_threads.value) or None,  # ONNX Runtime's, IREE's, PyTorch's
            "tune_trials": int(self.tune_trials.value),
            "pretuned": self.pretuned.value or None,
            "rpc_tracker": tracker if remote else None,
            "rpc_key": key if remote else None,
        }
        names = [name for _, name in self.runtimes.options if name in self.runtimes.value]  # the menu's order
        runtimes: list[Any] = [get_runtime(name, **RUNTIMES[name].flag_options(flags)) for name in names]
        return runtimes

    def _progress(self, label: str, event: Any) -> None:
        if event is None:
            return
        if event.fraction is not None:
            self.progress.value = float(event.fraction)
        if event.message:
            self.status.value = f"{html.escape(label)}: {html.escape(event.message)}"

    def run(self) -> BenchReport:
        """Benchmark the chosen runtimes, then profile each and show everything.

        Examples
        --------
        >>> panel = BenchPanel("zoo:mlp", min_runs=3, min_seconds=0.0)
        >>> panel.runtimes.value = ("ort",)
        >>> panel.run().results[0].runs >= 3
        True
        """
        self.run_button.disabled = True
        self.progress.value = 0.0
        try:
            self.report = bench(
                self.graph,
                self.chosen(),
                input_shapes=self.input_shapes,
                progress=self._progress,
                **self.limits,
            )
            self.status.value = "profiling: where the time goes"
            self.profiles = {}
            self.task_coverage = {}
            generating = {r.label: r.llm for r in self.report.results if r.llm is not None}
            feeds = random_feeds(self.graph.model, concrete_input_shapes(self.graph.model, self.input_shapes))
            for runtime in self.chosen():
                if not runtime.available():
                    continue
                llm = generating.get(runtime.label)
                if llm is not None:  # a decoder: the prompt's call and a decode step's, apart
                    calls = generation_profiles(
                        self.graph,
                        runtime,
                        prompt_tokens=llm.prompt_tokens,
                        context=llm.context,
                        decode_steps=llm.decode_steps,
                    )
                    for call, timed in calls.items():
                        self.profiles[f"{runtime.label} · {call}"] = timed
                    continue
                session = runtime.prepare(self.graph, self.input_shapes)
                timed = self.profiles[runtime.label] = profile(session, feeds, runs=3)
                if getattr(runtime, "keeps_tuning_records", False):  # which kernels have a record, how fast
                    self.task_coverage[runtime.label] = task_coverage(session, timed)
            for label, prof in self.profiles.items():
                self.view.set_overlay(f"time: {label}", prof.node_ms)
            # a decoder's roofline is its decode step's: the call generation repeats
            costs = node_costs(self.graph, self.report.input_shapes if generating else self.input_shapes)
            self.rooflines = [roofline(prof, costs) for prof in self.profiles.values()]
        except Exception as err:  # shown in the panel; the kernel and the panel stay usable
            self.status.value = f"<b>failed</b>: {html.escape(type(err).__name__)}: {html.escape(str(err))}"
            raise
        finally:
            self.run_button.disabled = False
        self.progress.value = 1.0
        from .figure_widget import GraphFigureWidget

        self.roofline = GraphFigureWidget(roofline_figure(self.rooflines))
        self._draw_latency()
        self.table.value = self._table_html()
        labels = list(self.profiles)
        self.time_menu.options = labels
        if labels:
            self.time_menu.value = labels[0]
            self._on_time_menu({"new": labels[0]})
        skipped = f"; skipped: {', '.join(n for n, _ in self.report.skipped)}" if self.report.skipped else ""
        self.status.value = f"done: {len(self.report.results)} runtimes{skipped}"
        return self.report

    def _draw_latency(self) -> None:
        if self.report is None:
            return
        from .figure_widget import GraphFigureWidget

        self.latency = GraphFigureWidget(latency_figure(self.report, kind=self.kind.value))
        self._layout_results()

    def _on_time_menu(self, change: dict[str, Any]) -> None:
        label = change.get("new")
        if not label or label not in self.profiles:
            return
        from .figure_widget import GraphFigureWidget

        self.kernels = GraphFigureWidget(kernel_time_figure(self.profiles[label]))
        coverage = self.task_coverage.get(label)
        self.tasks.value = task_coverage_table(coverage) if coverage is not None else ""
        self._layout_results()
        name = f"time: {label}"
        if self.view.color_menu.value != name:
            self.view.color_menu.value = name

    def _table_html(self) -> str:
        assert self.report is not None
        by_label = {p.label: p for p in self.profiles.values()}  # a decoder's: its decode step's
        generating = any(r.llm is not None for r in self.report.results)
        rows = []
        for r in self.report.results:
            prof = by_label.get(r.label)
            launches = f"{prof.launches:.0f}" if prof else ""
            written = format_bytes(int(prof.written_bytes)) if prof and prof.written_bytes is not None else ""
            rows.append(
                (
                    html.escape(r.label),
                    f"{r.median_ms:.3f}",
                    f"{r.p90_ms:.3f}",
                    r.runs,
                    f"{r.prepare_s:.2f}",
                    f"{r.max_abs_err:.2e}",
                    "yes" if r.agrees else "<b>no</b>",
                    launches,
                    written,
                )
                + (_llm_cells(r.llm) if generating else ())
            )
        columns = _BENCH_COLUMNS + (_LLM_COLUMNS if generating else ())
        return html_table(rows, columns, attrs={"class": "oge-bench"})


_LLM_COLUMNS = ("prefill tok/s", "decode tok/s", "of the bandwidth bound")
"""A decoder's generation (the latency columns are then its decode step's)."""


def _llm_cells(llm: Any) -> tuple[str, ...]:
    if llm is None:
        return ("", "", "")
    return (f"{llm.prefill_tokens_per_s:.1f}", f"{llm.decode_tokens_per_s:.1f}", f"{llm.share_of_bound:.0%}")

"""The Explorer's costly tabs as objects: each builds its panel and describes a node in it.

:class:`~widgets.explorer_app.Explorer` wires them: it builds a tab when it is opened
(:meth:`ExplorerTab.build`, in the background, with the app's progress and stop button) and,
when the user selects a node anywhere, asks every tab built so far what that node became
there (:meth:`ExplorerTab.describe`). A tab reads the app's state (the graph, the shapes, the
menus) and places what it shows through the app; it holds no other state than its panel.

Examples
--------
>>> [tab.title for tab in TAB_TYPES]
['Passes', 'Lowering', 'Runtimes', 'Targets']
"""

from __future__ import annotations

import html
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

import ipywidgets as w

from explorer.core.node_trace import lowered_from
from explorer.lower.compilers import COMPILER_NAMES, LowerOptions, get_compiler

if TYPE_CHECKING:
    from .explorer_app import Explorer

__all__ = ["COMPILERS", "ExplorerTab", "PassesTab", "LoweringTab", "RuntimesTab", "TargetsTab", "TAB_TYPES"]

COMPILERS = {
    name: f"{compiler.label}, {compiler.step_word} by {compiler.step_word}"
    for name, compiler in ((name, get_compiler(name)) for name in COMPILER_NAMES)
}
"""What the Lowering tab lowers with (its compiler menu): name -> label."""


class ExplorerTab(ABC):
    """One costly tab of the Explorer: what it builds, and what it says of a selected node.

    Attributes
    ----------
    title : str
        The tab's title (one of :data:`widgets.explorer_app.TABS`).
    app : Explorer
        The app whose state it reads.
    panel : widget or None
        What :meth:`build` made for the app's current model (None until then).

    Examples
    --------
    >>> from widgets import Explorer
    >>> tab = PassesTab(Explorer("zoo:mlp", pipeline="eliminate_identity"))
    >>> tab.title, tab.panel is None
    ('Passes', True)
    """

    title: ClassVar[str]

    def __init__(self, app: Explorer) -> None:
        self.app = app

    @property
    def panel(self) -> Any:
        """What :meth:`build` made for the app's current model (None until then)."""
        return self.app.panels.get(self.title)

    @abstractmethod
    def build(self) -> Any:
        """Compute the tab for the app's model and return its panel (placed early, to show progress)."""

    @abstractmethod
    def describe(self, node: str) -> str:
        """HTML: what ONNX node ``node`` is in this tab (the panel follows it)."""

    def place(self, *shown: Any) -> None:
        """Show ``shown`` in this tab while it still computes.

        Examples
        --------
        >>> from widgets import Explorer
        >>> app = Explorer(None)
        >>> PassesTab(app).place(w.HTML("computing"))
        >>> app.tabs.children[1].children[0].value
        'computing'
        """
        self.app._place(self.title, *shown)


class PassesTab(ExplorerTab):
    """The Passes tab: the pipeline's steps, each diffed (a :class:`~widgets.stepper.PassStepper`).

    Examples
    --------
    >>> PassesTab.title
    'Passes'
    """

    title = "Passes"

    def build(self) -> Any:
        """Run the pipeline on the app's model; return the panel."""
        from .stepper import PassStepper

        app = self.app
        stepper = PassStepper(app.graph, input_shapes=app.input_shapes, height=app.height)
        self.place(stepper)  # its progress bar shows while the passes run
        stepper.run(app.pipeline)
        return stepper

    def describe(self, node: str) -> str:
        """What the pipeline did to it: kept, rewritten, fused into another node or removed, and when."""
        panel = self.panel
        panel.stepping.follow(node)
        trace = panel.stepping._trace
        return html.escape(trace.fate) if trace is not None else "not in the pipeline's first graph"


class LoweringTab(ExplorerTab):
    """The Lowering tab: the chosen compiler's steps (a :class:`~widgets.timeline_stepper.TimelineStepper`).

    Examples
    --------
    >>> LoweringTab.title
    'Lowering'
    """

    title = "Lowering"

    def build(self) -> Any:
        """Lower with the chosen compiler on the app's model; return the panel."""
        from explorer.core.errors import LoweringError
        from explorer.lower import RelaxImportFailed
        from explorer.lower.import_fix import lower_with_fixes

        from .timeline_stepper import TimelineStepper

        app = self.app
        why: list[str] = []  # the failure each fix answered
        compiler = get_compiler(app.compiler_menu.value)
        options = LowerOptions(passes=app.lowering)  # each compiler reads its own options
        label = COMPILERS[compiler.name]
        self.place(app.compiler_menu, w.HTML(f"<i>{label}: computing ...</i>"))

        def lower(graph: Any, shapes: Any) -> Any:
            try:
                return compiler.lower(graph, shapes, options, progress=app._progress)
            except (RelaxImportFailed, LoweringError) as failed:
                why.append(str(failed))
                raise

        try:
            timeline, fixes = lower_with_fixes(app.graph, app.concrete_shapes(), lower, fix=True)
        except Exception:
            self.place(app.compiler_menu)  # the failure is added below it; another compiler may do
            raise
        app.lowered_note = ""
        if fixes:  # the same fix path as `onnx-explorer lower --fix`
            app.lowered_note = (
                f"<div class='oge-explorer-lowered-note'><b>The importer needed the model rewritten "
                f"first</b> ({html.escape(', '.join(fixes))}); the lowering below starts from "
                f"that model. Why: {html.escape(why[0] if why else '')}</div>"
            )
        stepper = TimelineStepper(timeline, height=app.height)
        note = [w.HTML(app.lowered_note)] if app.lowered_note else []
        self.place(app.compiler_menu, *note, stepper)
        return stepper

    def describe(self, node: str) -> str:
        """How many nodes of the lowered graph came from it at import, and after the last step."""
        panel = self.panel
        panel.follow(node)
        timeline = panel.timeline
        first, last = timeline[0].graph, timeline[len(timeline) - 1]
        imported = lowered_from(first, node)
        final = lowered_from(last.graph, node)
        noun = first.adapter.node_noun
        if not imported:
            return f"no {html.escape(noun)} came from it (folded away at import, or a constant)"
        ops = ", ".join(f"<code>{html.escape(str(first.nx.nodes[n].get('op')))}</code>" for n in imported[:4])
        return (
            f"{len(imported)} {html.escape(noun)}{'s' * (len(imported) != 1)} at import ({ops}"
            f"{' ...' if len(imported) > 4 else ''}); {len(final)} node{'s' * (len(final) != 1)} after "
            f"{html.escape(last.name)}"
        )


class RuntimesTab(ExplorerTab):
    """The Runtimes tab: every runtime timed side by side (a :class:`~widgets.bench_panel.BenchPanel`).

    Examples
    --------
    >>> RuntimesTab.title
    'Runtimes'
    """

    title = "Runtimes"

    def build(self) -> Any:
        """Time the runtimes on the app's model; return the panel."""
        from .bench_panel import BenchPanel

        app = self.app
        panel = BenchPanel(
            app.graph, input_shapes=app.concrete_shapes() or None, min_runs=10, min_seconds=0.5
        )
        panel.view.on_select(app._selected_in_view)
        self.place(panel)  # its progress bar shows while it prepares and times
        panel.run()
        return panel

    def describe(self, node: str) -> str:
        """Each runtime's time on it."""
        panel = self.panel
        if panel.view.selected != node:
            panel.view.select(node)
        times = [
            f"{html.escape(label)}: {prof.node_ms[node]:.3f} ms"
            for label, prof in panel.profiles.items()
            if node in prof.node_ms
        ]
        return "; ".join(times) or "no runtime timed it on its own (fused into a neighbour, or not run)"


class TargetsTab(ExplorerTab):
    """The Targets tab: where each target places each node (a :class:`~widgets.coverage_panel.CoveragePanel`).

    Examples
    --------
    >>> TargetsTab.title
    'Targets'
    """

    title = "Targets"

    def build(self) -> Any:
        """Check the targets on the app's model; return the panel."""
        from .coverage_panel import DEFAULT_TARGETS, CoveragePanel

        app = self.app
        panel = CoveragePanel(
            app.graph,
            targets=app.targets or DEFAULT_TARGETS,
            input_shapes=app.concrete_shapes() or None,
            measured=app.measured,  # the latest AI Hub profile opened in the overlay menu
        )
        panel.view.on_select(app._selected_in_view)
        self.place(panel)
        panel.check()
        return panel

    def describe(self, node: str) -> str:
        """On each target: the device that runs it, or the fallback and why."""
        panel = self.panel
        if panel.view.selected != node:
            panel.view.select(node)
        if panel.report is None:
            return "<i>not checked</i>"
        parts = []
        for target, partitioning in panel.report.partitionings.items():
            support = partitioning.support.get(node)
            if support is None:
                continue
            if support.supported:
                parts.append(f"{html.escape(target)}: {html.escape(partitioning.device)}")
            else:
                why = "; ".join(str(r) for r in support.blocking[:2])
                where = partitioning.fallback or "nowhere"
                parts.append(f"{html.escape(target)}: <b>{html.escape(where)}</b> ({html.escape(why)})")
        return "; ".join(parts)


TAB_TYPES: tuple[type[ExplorerTab], ...] = (PassesTab, LoweringTab, RuntimesTab, TargetsTab)
"""The costly tabs, in the order the Explorer shows them (after the Graph tab)."""

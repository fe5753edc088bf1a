"""Explorer: one model, every view of it, one selection.

A model picker (sample models, a path, a file upload, input shapes) and an overlay menu (another
tool's results, opened from a path or an upload: an ONNX Runtime, AI Hub or TensorRT profile, Model
Explorer's node data) above five tabs that share the model and the selection:

- **Graph**: :class:`~widgets.GraphView` of the model;
- **Passes**: :class:`~widgets.PassStepper`, the model through a pipeline of passes;
- **Lowering**: a :class:`~widgets.TimelineStepper` of the model lowered through TVM Relax
  (:func:`explorer.lower.tvm.relax_pipeline`; a model the importer needs rewritten first is
  lowered through the fix it offers, and says so), or through IREE's MLIR phases
  (:func:`explorer.lower.iree.iree_pipeline.iree_pipeline`), as the compiler menu above it says;
- **Runtimes**: :class:`~widgets.BenchPanel`, ONNX Runtime and TVM side by side;
- **Targets**: :class:`~widgets.CoveragePanel`, op support and partitions per target.

The Graph tab is built with the model; the others cost something (passes, lowering, a
benchmark, coverage checks) and are computed the first time they are opened, with a
progress bar and a stop button (:func:`explorer.isolation.worker.cancel`). Opened by a click they
run in a background thread, so the kernel stays responsive; called from code
(:meth:`Explorer.compute`) they run at once.

A node selected in any ONNX view (a click in the Graph tab, the Runtimes or Targets
graph, or :meth:`Explorer.select`) is selected everywhere: ringed in Graph, followed
through each pass in Passes (the same node before and after each step, or "fused into X
by step N"), shown in Lowering as the Relax bindings and kernels (or the MLIR ops and dispatches) whose
``origin`` is that node, ringed in Runtimes with its time in each runtime, and in Targets with its placement
and the reasons per target. The line under the tabs says all of it at once.

The overlay menu lists "none" and each file opened (:func:`explorer.overlays.read`, onto the model
shown); the one chosen colours the Graph tab and adds its fields to the node's details
(:meth:`~widgets.GraphView.show_overlay`). A Qualcomm AI Hub profile adds a second entry, where each
node ran against where the qnn-htp target predicts it (:func:`explorer.overlays.placement_agreement`),
with its table under the menu. A file that cannot be read is named with the reason, there.

Explorer composes the existing widgets and holds no logic of theirs: the link between IRs
is :mod:`explorer.core.node_trace`.

Examples
--------
>>> app = Explorer("zoo:mlp")
>>> app.select("/fc1/Gemm")
>>> app.graph_view.selected
'/fc1/Gemm'
"""

from __future__ import annotations

import contextlib
import html
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import ipywidgets as w

from explorer import load, zoo
from explorer.core.errors import UsageError, WorkerCancelled
from explorer.core.graph import ModelGraph
from explorer.isolation import worker
from explorer.isolation.io import write_bytes_atomic
from explorer.onnx_adapter.adapter import has_onnx_model
from explorer.onnx_adapter.input_shapes import parse_input_shapes
from explorer.onnx_adapter.inputs import concrete_input_shapes
from explorer.onnx_adapter.model_files import new_model_dir
from explorer.overlays import ai_hub
from explorer.overlays.agreement import PlacementAgreement, placement_agreement
from explorer.overlays.registry import read
from explorer.overlays.value import Overlay
from explorer.views.overlay_view import could_not_read_html, placement_agreement_html
from explorer.views.tables import html_table

from .explorer_tabs import COMPILERS, TAB_TYPES, ExplorerTab
from .graph_view import GraphView
from .recent import load_recent

__all__ = [
    "Explorer",
    "TABS",
    "DEFAULT_PIPELINE",
    "DEFAULT_LOWERING",
    "COMPILERS",
    "NO_OVERLAY",
    "PREDICTED_TARGET",
]

TABS = ("Graph", "Passes", "Lowering", "Runtimes", "Targets")
"""The tabs, in order."""

DEFAULT_PIPELINE = "fuse_and_eliminate,ort:extended"
"""The Passes tab's pipeline unless another is given: onnxoptimizer's fusions, then ONNX Runtime's."""

DEFAULT_LOWERING = "zero"
"""The Lowering tab's Relax pipeline: import to FuseTIR (``"default"`` adds memory planning and the VM)."""

_COSTLY = tuple(tab.title for tab in TAB_TYPES)


NO_OVERLAY = "none"
"""The overlay menu's first entry: the graph without an overlay."""

PREDICTED_TARGET = "qnn-htp"
"""The target an AI Hub profile's measured placement is compared with."""

_CSS = """
<style>
.oge-explorer-selection { font-size: 12px; line-height: 1.5; }
.oge-explorer-selection table { border-collapse: collapse; }
.oge-explorer-selection td { padding: 0 10px 0 0; vertical-align: top; }
.oge-explorer-selection td:first-child { font-weight: bold; white-space: nowrap; }
</style>
"""


class Explorer(w.VBox):
    """Every view of one model in tabs, with one selection across them.

    Parameters
    ----------
    model : anything :func:`explorer.load` accepts, or None
        The model to open (``"zoo:resnet18"``, a path, a ModelProto, a ModelGraph...);
        None opens the picker only.
    input_shapes : mapping, optional
        Fixed shapes for inputs (the picker's "shapes" box): the model is loaded with them, so
        every tab sees them; lowering and benchmarks make dynamic dimensions left out 1.
    pipeline : str
        The Passes tab's pipeline (:data:`DEFAULT_PIPELINE`).
    lowering : str or sequence of str
        The Lowering tab's Relax pipeline (:data:`DEFAULT_LOWERING`).
    targets : sequence of str, optional
        The Targets tab's targets (by default :data:`widgets.coverage_panel.DEFAULT_TARGETS`).
    height : int
        Height of each graph in pixels.

    Attributes
    ----------
    graph : ModelGraph or None
        The model.
    selected : str or None
        The node selected across the tabs.
    panels : dict
        Tab name -> the widget built for the current model (only tabs opened so far).
    overlays : dict
        The overlay menu's entries: name -> :class:`~explorer.overlays.Overlay` on the current model.
    agreements : dict
        Overlay menu name -> :class:`~explorer.overlays.agreement.PlacementAgreement`, for the
        "predicted vs measured" entries an AI Hub profile adds.
    measured : Overlay or None
        The latest AI Hub profile opened; the Targets tab compares it with its prediction too.
    tabs : ipywidgets.Tab
        The tabs.

    Examples
    --------
    >>> app = Explorer("zoo:mlp")
    >>> [app.tabs.get_title(i) for i in range(len(TABS))]
    ['Graph', 'Passes', 'Lowering', 'Runtimes', 'Targets']
    """

    def __init__(
        self,
        model: Any = "zoo:resnet18",
        *,
        input_shapes: Mapping[str, Sequence[int]] | None = None,
        pipeline: str = DEFAULT_PIPELINE,
        lowering: str | Sequence[str] = DEFAULT_LOWERING,
        compiler: str = "tvm",
        targets: Sequence[str] | None = None,
        height: int = 520,
    ) -> None:
        self.graph: ModelGraph | None = None
        self._source: Any = None
        self.selected: str | None = None
        self.panels: dict[str, Any] = {}
        self.tab_views: dict[str, ExplorerTab] = {tab.title: tab(self) for tab in TAB_TYPES}
        """The costly tabs as objects (:mod:`widgets.explorer_tabs`): each builds and describes."""
        self.overlays: dict[str, Overlay] = {}
        self.agreements: dict[str, PlacementAgreement] = {}
        self.measured: Overlay | None = None
        self.pipeline = pipeline
        self.lowering = lowering
        if compiler not in COMPILERS:
            raise UsageError(f"compiler must be one of {', '.join(COMPILERS)}, not {compiler!r}")
        self.targets = tuple(targets) if targets is not None else None
        self.height = height
        self.errors: dict[str, str] = {}
        self.lowered_note = ""
        self._selecting = False
        self._running: threading.Thread | None = None
        self._stopped = False

        self.zoo_menu = w.Dropdown(
            options=[("sample model ...", ""), *[(name, name) for name in zoo.names()]],
            value="",
            description="open",
            layout=w.Layout(width="230px"),
        )
        self.path = w.Text(placeholder="path/to/model.onnx", layout=w.Layout(width="260px"))
        self.open_button = w.Button(description="open path", layout=w.Layout(width="90px"))
        self.upload = w.FileUpload(accept=".onnx", multiple=False, description="upload .onnx")
        self.shapes = w.Text(
            value=_format_shapes(input_shapes),
            placeholder="input=1,3,224,224; mask=1,128",
            description="shapes",
            layout=w.Layout(width="300px"),
        )
        self.overlay_menu = w.Dropdown(
            options=[NO_OVERLAY], value=NO_OVERLAY, description="overlay", layout=w.Layout(width="330px")
        )
        self.overlay_menu.add_class("oge-explorer-overlay-menu")
        self.overlay_path = w.Text(
            placeholder="path/to/profile.json (ORT, AI Hub, TensorRT, Model Explorer)",
            layout=w.Layout(width="330px"),
        )
        self.overlay_button = w.Button(description="open overlay", layout=w.Layout(width="110px"))
        self.overlay_upload = w.FileUpload(accept=".json", multiple=False, description="upload overlay")
        self.overlay_note = w.HTML()
        self.overlay_note.add_class("oge-explorer-overlay-note")
        self.status = w.HTML("<i>open a model</i>")
        self.status.add_class("oge-explorer-status")
        self.progress = w.FloatProgress(value=0.0, min=0.0, max=1.0, layout=w.Layout(width="160px"))
        self.stop_button = w.Button(
            description="stop", button_style="warning", layout=w.Layout(width="60px", display="none")
        )
        self.stop_button.add_class("oge-explorer-stop")
        self.selection = w.HTML()
        self.selection.add_class("oge-explorer-selection")
        self.compiler_menu = w.Dropdown(
            options=[(label, name) for name, label in COMPILERS.items()],
            value=compiler,
            description="compiler",
            layout=w.Layout(width="300px"),
        )
        self.compiler_menu.add_class("oge-explorer-compiler")
        self.tabs = w.Tab(children=[w.VBox() for _ in TABS])
        for index, name in enumerate(TABS):
            self.tabs.set_title(index, name)
            self.tabs.children[index].add_class(f"oge-explorer-{name.lower()}")

        self.zoo_menu.observe(self._zoo_chosen, names="value")
        self.open_button.on_click(lambda _: self._open_path())
        self.upload.observe(self._uploaded, names="value")
        self.shapes.observe(self._shapes_changed, names="value")
        self.stop_button.on_click(lambda _: self.stop())
        self.tabs.observe(self._tab_opened, names="selected_index")
        self.compiler_menu.observe(self._compiler_chosen, names="value")
        self.overlay_menu.observe(self._overlay_chosen, names="value")
        self.overlay_button.on_click(lambda _: self._open_overlay_path())
        self.overlay_upload.observe(self._overlay_uploaded, names="value")

        picker = w.HBox(
            [self.zoo_menu, self.path, self.open_button, self.upload, self.shapes],
            layout=w.Layout(flex_flow="row wrap"),
        )
        overlay_row = w.HBox(
            [self.overlay_menu, self.overlay_path, self.overlay_button, self.overlay_upload],
            layout=w.Layout(flex_flow="row wrap"),
        )
        busy = w.HBox([self.progress, self.stop_button, self.status])
        super().__init__(
            [w.HTML(_CSS), picker, overlay_row, self.overlay_note, busy, self.selection, self.tabs]
        )
        self.add_class("oge-explorer")
        if model is not None:
            self.load(model)

    def __repr__(self) -> str:
        """One line: the model and the tabs computed.

        Examples
        --------
        >>> Explorer("zoo:mlp")
        Explorer(zoo:mlp; computed: Graph)
        """
        what = self.graph.source if self.graph is not None else "no model"
        return f"{type(self).__name__}({what}; computed: {', '.join(self.panels) or 'nothing'})"

    # -- the model -----------------------------------------------------------------------------

    @property
    def input_shapes(self) -> dict[str, list[int]] | None:
        """The shapes box as a mapping (None when empty); a bad entry raises UsageError naming it.

        Examples
        --------
        >>> app = Explorer(None)
        >>> app.shapes.value = "input=1,3,64,64"
        >>> app.input_shapes
        {'input': [1, 3, 64, 64]}
        """
        return parse_input_shapes(self.shapes.value)

    def concrete_shapes(self) -> dict[str, list[int]]:
        """Every input's shape for lowering and benchmarks: the shapes box, dynamic dimensions 1.

        Examples
        --------
        >>> Explorer("zoo:mlp").concrete_shapes()
        {'input': [1, 1, 28, 28]}
        """
        if self.graph is None or not has_onnx_model(self.graph):
            return {}
        return concrete_input_shapes(self.graph.model, self.input_shapes)

    def load(self, source: Any) -> ModelGraph:
        """Open a model: every tab starts again from it (the open tab is computed again).

        Examples
        --------
        >>> app = Explorer("zoo:mlp")
        >>> app.load("zoo:resnet18").source
        'zoo:resnet18'
        """
        self.status.value = f"loading {html.escape(_describe(source))} ..."
        try:
            shapes = self.input_shapes
            if shapes:  # every tab sees the model with these shapes, the graph's too
                named = source.source if isinstance(source, ModelGraph) else None
                model = source.model if isinstance(source, ModelGraph) else source
                graph = load(model, input_shapes=shapes, name=named)
            else:
                graph = source if isinstance(source, ModelGraph) else load_recent(source)
        except Exception as err:  # the user's file or shapes: say what is wrong, keep the model shown
            given = f" with shapes {self.shapes.value.strip()}" if self.shapes.value.strip() else ""
            self._could_not_open(_describe(source) + given, err)
            raise
        self._source = source
        self.graph = graph
        self.selected = None
        self.errors = {}
        self.lowered_note = ""
        self.panels = {}
        self.graph_view = GraphView(graph, height=self.height)
        self.graph_view.on_select(self._selected_in_view)
        self.panels["Graph"] = self.graph_view
        had_overlays = bool(self.overlays)
        self.overlays, self.agreements = {}, {}  # they were read onto the model shown before
        self.measured = None
        self.overlay_menu.options = [NO_OVERLAY]
        self.overlay_note.value = (
            "<i>overlays closed: they were read onto the model before</i>" if had_overlays else ""
        )
        for index, name in enumerate(TABS):
            if name != "Graph":
                self.tabs.children[index].children = [
                    w.HTML(f"<i>{name}: computed when this tab is opened</i>")
                ]
        self.tabs.children[0].children = [self.graph_view]
        self.selection.value = ""
        self.status.value = f"<b>{html.escape(graph.source)}</b>: {len(graph.op_nodes())} nodes"
        current = TABS[self.tabs.selected_index or 0]
        if current != "Graph":
            self.compute(current)
        return graph

    def _could_not_open(self, what: str, err: Exception) -> None:
        self.status.value = f"<b>could not open</b> {html.escape(what)}: {html.escape(str(err))}"

    def load_bytes(self, data: bytes, name: str = "upload.onnx") -> ModelGraph:
        """Open a model given as bytes (an upload): written to a private file first, then opened from it.

        A file on disk is what every step needs (the worker reads it; weights are
        memory-mapped), so a big upload is parsed once, not copied through the kernel again.

        Examples
        --------
        >>> app = Explorer(None)
        >>> graph = app.load_bytes(zoo.build("mlp").SerializeToString(), "my-mlp.onnx")
        >>> graph.source, graph.summary().nodes
        ('my-mlp.onnx', 6)
        """
        path = new_model_dir("upload-") / Path(name).name
        write_bytes_atomic(data, path, fsync=False)
        self.status.value = f"opening {html.escape(Path(name).name)} ..."
        try:
            graph = load(str(path), name=Path(name).name)  # titled by the user's file, not the copy's
        except Exception as err:
            self._could_not_open(Path(name).name, err)
            raise
        return self.load(graph)

    # -- overlays ------------------------------------------------------------------------------

    def open_overlay(self, source: Any, name: str | None = None) -> Overlay:
        """Read another tool's results onto the model (:func:`explorer.overlays.read`), add them to
        the overlay menu and show them; an AI Hub profile also adds its placement against the
        qnn-htp prediction (:data:`PREDICTED_TARGET`). A file that cannot be read is named in the
        overlay note with the reason, and the error raised.

        Parameters
        ----------
        source : path, dict or list
            The file, or its parsed JSON.
        name : str, optional
            How the menu and messages name it (default: the file's name).

        Examples
        --------
        >>> app = Explorer("zoo:mlp")
        >>> overlay = app.open_overlay({"main_graph": {"results": {"/fc1/Gemm": {"value": 2}}}}, "ours.json")
        >>> app.overlay_menu.value, app.graph_view.overlay is overlay
        ('model-explorer (ours.json)', True)
        """
        is_file = isinstance(source, (str, os.PathLike))
        label = name or (os.fspath(source) if is_file else "<value>")  # in messages
        short = name or (Path(source).name if is_file else "<value>")  # in the menu
        if self.graph is None:
            self.overlay_note.value = f"<b>could not read</b> {html.escape(label)}: open a model first"
            raise UsageError("open a model first")
        self.overlay_note.value = f"reading {html.escape(label)} ..."
        try:
            overlay = read(source, self.graph)
            agreement = None
            if overlay.format == ai_hub.FORMAT and overlay.by_node("compute_unit"):
                agreement = placement_agreement(self.graph, overlay, PREDICTED_TARGET)
        except Exception as err:  # the user's file: say which and why, keep what is shown
            self.overlay_note.value = could_not_read_html(label, err, source if is_file else None)
            raise
        key = f"{overlay.name or overlay.format} ({short})"
        self.overlays[key] = overlay
        if agreement is not None:
            compared = f"{agreement.target}: predicted vs measured ({short})"
            self.overlays[compared] = agreement.to_overlay()
            self.agreements[compared] = agreement
            self.measured = overlay
            if "Targets" in self.panels:  # its own comparison follows the latest measured profile
                self.panels["Targets"].compare_measured(overlay)
        self.overlay_menu.options = [NO_OVERLAY, *self.overlays]
        if self.overlay_menu.value == key:
            self._show_overlay(key)
        else:
            self.overlay_menu.value = key
        return overlay

    def open_overlay_bytes(self, data: bytes, name: str) -> Overlay:
        """Read an overlay given as bytes (an upload): written to a private file, then :meth:`open_overlay`.

        Examples
        --------
        >>> app = Explorer("zoo:mlp")
        >>> _ = app.open_overlay_bytes(b'{"execution_detail": []}', "hub.json")
        >>> list(app.overlays)
        ['ai-hub-profile (hub.json)']
        """
        path = new_model_dir("overlay-") / Path(name).name
        write_bytes_atomic(data, path, fsync=False)
        return self.open_overlay(path, Path(name).name)

    def _show_overlay(self, key: str) -> None:
        """Colour the graph by the overlay menu's entry ``key`` (or by nothing: :data:`NO_OVERLAY`)."""
        self.graph_view.hide_overlay()
        if key == NO_OVERLAY or key not in self.overlays:
            self.overlay_note.value = ""
            return
        overlay = self.overlays[key]
        self.graph_view.show_overlay(overlay)
        if key in self.agreements:
            self.overlay_note.value = placement_agreement_html(self.agreements[key])
            return
        facts = [f"{overlay.mapped_nodes} of {len(self.graph.op_nodes())} nodes mapped"]
        if overlay.time_share_mapped is not None:
            facts.append(f"{overlay.time_share_mapped:.1%} of its time on them")
        if overlay.unmapped:
            facts.append(f"{len(overlay.unmapped)} names unmapped")
        self.overlay_note.value = f"<b>{html.escape(key)}</b>: {', '.join(facts)}"

    # -- tabs ----------------------------------------------------------------------------------

    def compute(self, tab: str) -> Any:
        """Build ``tab`` for the current model if it is not built yet (passes run, the lowering,
        the benchmark, the coverage check), with progress; return its widget.

        Examples
        --------
        >>> app = Explorer("zoo:mlp", pipeline="eliminate_identity")
        >>> len(app.compute("Passes").timeline)
        2
        """
        if tab not in TABS:
            raise KeyError(f"no tab {tab!r}: the tabs are {', '.join(TABS)}")
        if self.graph is None:
            raise UsageError("open a model first")
        if tab in self.panels:
            return self.panels[tab]
        box = self.tabs.children[TABS.index(tab)]
        builder: Callable[[], Any] = self.tab_views[tab].build
        self._stopped = False
        self.progress.value = 0.0
        self.stop_button.layout.display = ""
        self.status.value = f"{tab}: computing ..."
        box.children = [w.HTML(f"<i>{tab}: computing ... (stop above)</i>")]
        started = time.monotonic()
        graph = self.graph
        try:
            panel = builder()
        except (WorkerCancelled, KeyboardInterrupt):
            self.status.value = f"{tab}: stopped; open the tab again to start over"
            box.children = [w.HTML(f"<i>{tab}: stopped</i>")]
            if self.tabs.selected_index == TABS.index(tab):
                self.tabs.selected_index = 0
            return None
        except Exception as err:  # shown in the tab; the app stays usable
            self.errors[tab] = f"{type(err).__name__}: {err}"
            self.status.value = f"<b>{tab} failed</b>: {html.escape(self.errors[tab])}"
            box.children = [w.HTML(f"<pre class='oge-explorer-error'>{html.escape(self.errors[tab])}</pre>")]
            raise
        finally:
            self.stop_button.layout.display = "none"
        if graph is not self.graph:  # another model was opened meanwhile
            return None
        self.panels[tab] = panel
        if panel not in box.children:  # a builder that placed it early placed what goes with it
            box.children = [panel]
        self.progress.value = 1.0
        self.status.value = f"{tab}: ready ({time.monotonic() - started:.1f} s)"
        if self.selected is not None:
            self.select(self.selected)
        return panel

    def stop(self) -> None:
        """Stop the tab being computed (its worker call is cancelled).

        Examples
        --------
        >>> Explorer(None).stop()
        """
        self._stopped = True
        worker.cancel()

    def _progress(self, event: Any) -> None:
        if self._stopped:
            raise WorkerCancelled("stopped", step=getattr(event, "step", None))
        if event is None:
            return
        if getattr(event, "fraction", None) is not None:
            self.progress.value = float(event.fraction)
        if getattr(event, "message", None):
            self.status.value = html.escape(event.message)

    def _place(self, tab: str, *shown: Any) -> None:
        """Show a tab's widget (and what goes with it) while it still computes, with its own progress."""
        self.tabs.children[TABS.index(tab)].children = list(shown)

    # -- the one selection ---------------------------------------------------------------------

    def select(self, node: str) -> None:
        """Select ``node`` (an ONNX node id) in every tab built so far, and say where it is in each.

        Examples
        --------
        >>> app = Explorer("zoo:resnet18", pipeline="fuse_bn_into_conv")
        >>> _ = app.compute("Passes")
        >>> app.select("/bn1/BatchNormalization")
        >>> "fused into /conv1/Conv (Conv, with 1 other node) by step 1" in app.selection.value
        True
        """
        if self.graph is None or node not in self.graph.nx:
            raise KeyError(f"no node {node!r} in {self.graph.source if self.graph else 'the explorer'}")
        self._selecting = True
        try:
            self.selected = node
            if self.graph_view.selected != node:
                self.graph_view.select(node)
            rows = [("Graph", self._graph_line(node))]
            for tab in _COSTLY:
                panel = self.panels.get(tab)
                if panel is None:
                    rows.append((tab, "<i>open the tab to compute it</i>"))
                    continue
                rows.append((tab, self.tab_views[tab].describe(node)))
        finally:
            self._selecting = False
        self.selection.value = html_table(rows)

    def _selected_in_view(self, node: str) -> None:
        if not self._selecting and self.graph is not None and node in self.graph.nx:
            self.select(node)

    def _graph_line(self, node: str) -> str:
        data = self.graph.nx.nodes[node]
        op = str(data.get("op_type") or data.get("kind", ""))
        return f"<code>{html.escape(node)}</code> ({html.escape(op)})"

    # -- events --------------------------------------------------------------------------------

    def _run_in_background(self, job: Callable[[], Any]) -> None:
        if self._running is not None and self._running.is_alive():
            self.status.value = "busy: the tab opened last is computed next (or stop the running work)"
            return

        def run() -> None:
            with contextlib.suppress(Exception):  # already shown in the status line and the tab
                job()
            # a tab opened while this ran (it could not start then): compute it now
            opened = TABS[self.tabs.selected_index or 0]
            if self.graph is not None and not self._stopped and opened not in self.panels | self.errors:
                with contextlib.suppress(Exception):
                    self.compute(opened)

        self._running = threading.Thread(target=run, name="explorer-tab", daemon=True)
        self._running.start()

    def _tab_opened(self, change: dict[str, Any]) -> None:
        index = change.get("new")
        if index is None or self.graph is None:
            return
        tab = TABS[index]
        if tab not in self.panels:
            self._run_in_background(lambda: self.compute(tab))

    def _compiler_chosen(self, change: dict[str, Any]) -> None:
        """Another compiler: the Lowering tab starts over with it (at once when it is open)."""
        self.panels.pop("Lowering", None)
        self.errors.pop("Lowering", None)
        if self.graph is not None and TABS[self.tabs.selected_index or 0] == "Lowering":
            self._run_in_background(lambda: self.compute("Lowering"))

    def _zoo_chosen(self, change: dict[str, Any]) -> None:
        if change["new"]:
            self._run_in_background(lambda: self.load(f"zoo:{change['new']}"))

    def _open_path(self) -> None:
        path = self.path.value.strip()
        if path:
            self._run_in_background(lambda: self.load(path))

    def _uploaded(self, change: dict[str, Any]) -> None:
        files = change["new"]
        if not files:
            return
        item = files[0]
        name, content = item["name"], item["content"]
        self.upload.value = ()  # the widget lets go of the bytes; the job writes them to disk

        self._run_in_background(lambda: self.load_bytes(content, name))

    def _overlay_chosen(self, change: dict[str, Any]) -> None:
        if self.graph is not None:
            self._show_overlay(change["new"])

    def _open_overlay_path(self) -> None:
        path = self.overlay_path.value.strip()
        if path:
            self._run_in_background(lambda: self.open_overlay(path))

    def _overlay_uploaded(self, change: dict[str, Any]) -> None:
        files = change["new"]
        if not files:
            return
        item = files[0]
        name, content = item["name"], bytes(item["content"])
        self.overlay_upload.value = ()
        self._run_in_background(lambda: self.open_overlay_bytes(content, name))

    def _shapes_changed(self, change: dict[str, Any]) -> None:
        if self.graph is not None:
            # the model again with these shapes: every tab starts over from it (the open one at once);
            # a malformed entry, a name that is no input, a rank or fixed dimension that differs: load
            # says so (fix_input_shapes) and the model shown stays
            self._run_in_background(lambda: self.load(self._source))


def _format_shapes(shapes: Mapping[str, Sequence[int]] | None) -> str:
    return "; ".join(f"{name}={','.join(map(str, dims))}" for name, dims in (shapes or {}).items())


def _describe(source: Any) -> str:
    if isinstance(source, (str, Path)):
        return str(source)
    return getattr(source, "source", type(source).__name__)

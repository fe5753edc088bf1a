"""Warm-up at ``import widgets`` and the figure widget that ships plotly's bundle once per kernel."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import plotly.graph_objects as go
import pytest

from explorer.isolation import worker
from explorer.onnx_adapter import PRESTART_IMPORTS
from explorer.views.figures import TRACE_COUNT
from widgets import GraphView, warm, warm_up
from widgets.figure_widget import GraphFigureWidget, bundle_widget
from widgets.warm import defer_import

ROOT = Path(__file__).resolve().parents[2]


def test_warm_up_is_idempotent() -> None:
    threads = warm_up()
    assert warm_up() is threads
    for thread in threads:
        thread.join()
    assert warm_up() is threads  # finished threads are not restarted


def test_a_view_built_while_the_worker_starts_works_and_never_loads_nbformat() -> None:
    # A fresh interpreter: ``import widgets`` starts the worker before it imports the rest of
    # the widgets, so the worker starts (and may still be starting) while GraphView loads.
    script = textwrap.dedent(
        """
        import sys
        import widgets
        running = [t.name for t in widgets.warm_up()]
        view = widgets.GraphView("zoo:resnet18")
        print(running)
        print(view.graph.summary().nodes, len(view.figure.data), type(view.figure).__name__)
        print("jsonschema" in sys.modules, type(sys.modules["nbformat"]).__name__)
        import nbformat, plotly.io._renderers as renderers
        notebook = nbformat.v4.new_notebook()  # first real use: the real import, in place
        print(notebook.nbformat, renderers.nbformat is nbformat, type(nbformat).__name__)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    running, summary, deferred, loaded = done.stdout.strip().splitlines()[-4:]
    assert running == "['explorer-worker-prestart']"
    assert summary == f"69 {TRACE_COUNT} GraphFigureWidget"
    assert deferred == "False _Deferred"
    assert loaded == "4 True module"


def test_the_warm_worker_imports_what_load_runs_there_before_its_first_task() -> None:
    # The worker names no module above it: widgets hands in the ONNX adapter's PRESTART_IMPORTS.
    script = textwrap.dedent(
        """
        import widgets
        from explorer.isolation import worker
        from explorer.onnx_adapter import PRESTART_IMPORTS
        for thread in widgets.warm_up():
            thread.join()
        print(worker.run(eval, f"[m in __import__('sys').modules for m in {PRESTART_IMPORTS!r}]", {}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[True]"


def test_warm_up_hands_the_worker_the_onnx_adapter_s_prestart_imports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = []
    monkeypatch.setattr(warm, "_THREADS", None)
    monkeypatch.delenv("EXPLORER_NO_WARMUP", raising=False)
    monkeypatch.setattr(worker, "prestart", lambda imports=(), **_: calls.append(tuple(imports)))
    assert warm.warm_up() == ()
    assert calls == [PRESTART_IMPORTS]


def test_defer_import_leaves_imported_and_missing_modules_alone() -> None:
    assert not defer_import("json")
    assert not defer_import("surely_no_module_has_this_name")


def test_no_warm_up_when_switched_off() -> None:
    script = "import sys, widgets; print(widgets.warm_up(), 'nbformat' in sys.modules)"
    env = {"EXPLORER_NO_WARMUP": "1", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "() False"


def test_figure_widgets_share_one_bundle_and_send_a_small_esm() -> None:
    first, second = GraphView("zoo:mlp").figure, GraphView("zoo:mlp").figure
    assert isinstance(first, go.FigureWidget)
    state = first.get_state()
    shared = f"IPY_MODEL_{bundle_widget().model_id}"
    assert state["_oge_bundle"] == second.get_state()["_oge_bundle"] == shared
    assert (
        len(state["_esm"]) < 10_000 < len(bundle_widget().code) < len(zlib.decompress(bundle_widget().code))
    )
    assert state["_oge_bundle_key"] == bundle_widget().key


def test_a_closed_bundle_is_made_again() -> None:
    old = bundle_widget()
    old.close()
    fresh = GraphFigureWidget()
    assert fresh._oge_bundle is bundle_widget() is not old
    assert fresh._oge_bundle.comm is not None


def test_a_file_opened_again_reuses_its_graph_until_it_changes(tmp_path: Path) -> None:
    import os

    import onnx

    from explorer import zoo
    from widgets.recent import RECENT_MAX, forget_recent, load_recent

    forget_recent()
    path = tmp_path / "mlp.onnx"
    onnx.save(zoo.build("mlp"), path)
    first = GraphView(str(path)).graph
    assert GraphView(path).graph is first
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # the file changed
    changed = load_recent(path)
    assert changed is not first and load_recent(path) is changed
    others = [tmp_path / f"m{i}.onnx" for i in range(RECENT_MAX)]
    for other in others:
        onnx.save(zoo.build("mlp"), other)
        load_recent(other)
    assert load_recent(path) is not changed  # pushed out by newer files
    assert load_recent(path, external_data=False) is not load_recent(path, external_data=False)
    calls: list[int] = []
    again = load_recent(path, while_inferring=lambda: calls.append(1))
    assert load_recent(path, while_inferring=lambda: calls.append(2)) is again  # kept, and called
    assert calls == [1, 2]

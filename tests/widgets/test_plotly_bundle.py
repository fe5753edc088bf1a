"""The partial plotly bundle: built from the pinned plotly.py, and it draws every figure we make."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import zlib
from pathlib import Path

import plotly
import plotly.graph_objects as go
import pytest

from explorer import load
from explorer.views.figures import graph_figure
from widgets import plotly_bundle
from widgets.plotly_bundle import PARTIAL_BUNDLE, PARTIAL_TRACES, bundle_source, bundle_widget

ROOT = Path(__file__).resolve().parents[2]
#: Every module whose functions build the figures the widgets show.
FIGURE_MODULES = [
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "explorer/views/figures").glob("*.py")),
    "explorer/views/runtime_figures.py",
    "explorer/views/target_figures.py",
]


def test_the_partial_bundle_is_the_one_built_for_the_installed_plotly() -> None:
    meta = json.loads(PARTIAL_BUNDLE.with_suffix(".json").read_text())
    code = PARTIAL_BUNDLE.read_bytes()
    assert hashlib.sha256(code).hexdigest() == meta["sha256"]  # the file is what the build wrote
    assert meta["plotly_py"] == plotly.__version__  # pyproject.toml pins the version it was built from
    installed = Path(plotly.__file__).parent / "package_data" / "widgetbundle.js"
    assert hashlib.sha256(installed.read_bytes()).hexdigest() == meta["plotly_py_widgetbundle_sha256"]
    source = bundle_source()
    assert source.partial and source.path == PARTIAL_BUNDLE
    assert len(code) < installed.stat().st_size / 2
    # plotly.py's widget code is kept whole: only the embedded plotly.js differs
    tail = installed.read_text()[-200_000:].split("window.PlotlyConfig", 1)[1]
    assert tail in code.decode()


def test_every_trace_type_our_figures_use_is_in_the_partial_bundle() -> None:
    constructors = set()
    literal_types = set()
    for module in FIGURE_MODULES:
        text = (ROOT / module).read_text()
        constructors |= set(re.findall(r"\bgo\.([A-Z][A-Za-z0-9]*)\(", text))
        literal_types |= set(re.findall(r"\btype=\"([a-z0-9]+)\"", text))
    not_traces = {"Figure", "FigureWidget", "Layout"}
    used = {getattr(go, name)().type for name in constructors - not_traces} | literal_types
    assert {"scatter", "bar", "box", "violin", "heatmap"} <= used  # the scan finds them
    built = {
        trace.type for webgl in (False, True) for trace in graph_figure(load("zoo:mlp"), webgl=webgl).data
    }
    assert built == {"scatter", "scattergl"}
    assert used | built <= PARTIAL_TRACES, "rebuild it: scripts/plotly_bundle/entry.js, build.sh"


def test_figures_with_other_traces_get_plotlys_full_bundle() -> None:
    full = bundle_source(["scatter", "sankey"])
    assert not full.partial and full.path.name == "widgetbundle.js"
    assert full.key != bundle_source(["scatter"]).key
    assert bundle_widget(["sankey"]) is not bundle_widget(["scatter"])
    assert len(zlib.decompress(bundle_widget(["sankey"]).code)) == full.path.stat().st_size


def test_a_bundle_built_for_another_plotly_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    meta = json.loads(PARTIAL_BUNDLE.with_suffix(".json").read_text())
    monkeypatch.setattr(
        plotly_bundle, "_partial_meta", lambda: {**meta, "plotly_py_widgetbundle_sha256": "0"}
    )
    plotly_bundle._sources.cache_clear()
    try:
        assert not bundle_source(["scatter"]).partial
    finally:
        monkeypatch.undo()
        plotly_bundle._sources.cache_clear()
    assert bundle_source(["scatter"]).partial


def test_importing_it_imports_no_plotly_numpy_or_onnx() -> None:
    script = (
        "import sys, widgets.plotly_bundle; print(sorted({'plotly', 'numpy', 'onnx'} & set(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"

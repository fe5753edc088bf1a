"""Our exported node data shows in Model Explorer's own page (issue #40's last check).

The zoo's ResNet-18 gets two of our overlays, written by ``export_overlays``: where CoreML
(ML Program) places each node (categories, each with its partition's colour) and ONNX Runtime's
time per node (numbers, coloured by our Viridis ``gradient``). Model Explorer's own server
(``model-explorer`` with its ONNX adapter ``model_explorer_onnx``, in a subprocess on 127.0.0.1)
serves the model and both files; headless Chromium opens the page at the URL Model Explorer's
config builds for them, with every request off the machine blocked. The test proves that:

- the node-data panel lists both overlays under the names our files give them;
- its node-data table shows, node by node (ids from Model Explorer's ONNX adapter), the placement
  we wrote with our colour and the time we wrote with the colour our gradient gives it;
- the aggregated and per-layer stats are those of our values (min/max time, count per placement);
- the graph itself (WebGL canvas) is drawn in our placement colours once that overlay is picked;
- the web app needs nothing from the internet but a web font (Google Sans Text).

Without our files none of this is on the page: the panel never appears and the test fails.
The screenshot is ``tests/artifacts/browser/model-explorer-page.png``.
"""

from __future__ import annotations

import base64
import json
import math
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib.util import find_spec
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

import onnx
import pytest

from explorer import load, zoo
from explorer.overlays.export import export_overlays
from explorer.overlays.ours import placement_overlay, profile_overlay
from explorer.runtimes import OrtRuntime, random_feeds
from explorer.runtimes.profile import profile
from explorer.targets import get_target, partition
from tests.browser.jupyter import free_port, screenshot, stop_process_group

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        find_spec("model_explorer") is None or find_spec("model_explorer_onnx") is None,
        reason="needs Model Explorer's ai-edge-model-explorer and model-explorer-onnx (the test extra)",
    ),
]

MODEL = "resnet18"
TARGET = "coreml-mlprogram"
#: Model Explorer's node-data panel: one ``.index-row`` (``.run-name``) per node-data file.
PANEL = "node-data-provider-summary-panel"
#: The only request the page makes off the machine: the web font its index.html names.
FONT_HOST = "https://fonts.gstatic.com/"

#: Everything the panel shows, read in one go: the overlays' names, the "Aggregated stats", the
#: "Root-level nodes stats" (counts per category) and the first page of the "Node data" table.
READ_PANEL_JS = """(panel) => {
    const root = document.querySelector(panel);
    const text = (el) => (el ? el.textContent.trim() : null);
    const rows = (table) => Array.from(root.querySelectorAll(table + ' tbody tr'))
        .map((tr) => Array.from(tr.children).map((td) => ({
            text: text(td), bg: td.style.backgroundColor })));
    return {
        runNames: Array.from(root.querySelectorAll('.run-name')).map(text),
        columns: Array.from(root.querySelectorAll('table.results thead th.value-col .stat-label'))
            .map(text),
        childColumns: Array.from(root.querySelectorAll(
            'table.children-stats-results thead th.value-col')).map((th) => [
                text(th.querySelector('.index-number')), text(th.querySelector('.stat-label'))]),
        stats: rows('.table-container:not(.children-stats):not(.results) > table'),
        children: rows('table.children-stats-results'),
        results: rows('table.results'),
    };
}"""

#: Colour -> pixel count of a PNG (a screenshot), decoded by the page's own 2D canvas.
COUNT_COLOURS_JS = """async ([b64, colours]) => {
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const bitmap = await createImageBitmap(new Blob([bytes], { type: 'image/png' }));
    const canvas = new OffscreenCanvas(bitmap.width, bitmap.height);
    const context = canvas.getContext('2d');
    context.drawImage(bitmap, 0, 0);
    const data = context.getImageData(0, 0, bitmap.width, bitmap.height).data;
    const hex = (v) => v.toString(16).padStart(2, '0');
    const counts = Object.fromEntries(colours.map((c) => [c, 0]));
    for (let i = 0; i < data.length; i += 4) {
        const colour = '#' + hex(data[i]) + hex(data[i + 1]) + hex(data[i + 2]);
        if (colour in counts) counts[colour] += 1;
    }
    return counts;
}"""


@dataclass(frozen=True)
class Exported:
    """The model file and our node-data files, with what each file says (its graph's object)."""

    model: Path
    graph_id: str
    files: tuple[Path, ...]
    data: tuple[dict[str, Any], ...]

    @property
    def names(self) -> list[str]:
        """Each file's overlay name, as Model Explorer should list it."""
        return [d["name"] for d in self.data]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Exported:
    """ResNet-18 with its placement on CoreML and its ONNX Runtime profile, exported as node data."""
    folder = tmp_path_factory.mktemp("model-explorer-page")
    path = folder / f"{MODEL}.onnx"
    onnx.save(zoo.build(MODEL), path)
    graph = load(str(path))
    placement = placement_overlay(partition(graph, get_target(TARGET)), graph)
    runtime = OrtRuntime(optimization="disable").prepare(graph)
    timing = profile_overlay(profile(runtime, random_feeds(graph.model), runs=2), graph)
    files = export_overlays([placement, timing], folder / "ours.json", graph)
    contents = [json.loads(f.read_text()) for f in files]
    (graph_id,) = set().union(*contents)
    return Exported(path, graph_id, tuple(files), tuple(c[graph_id] for c in contents))


def _wait_healthy(process: subprocess.Popen[bytes], port: int, log: Path, timeout: float = 60.0) -> None:
    """Wait until Model Explorer's ``/check_health`` answers; fail with the log if it does not."""
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            pytest.fail(f"model-explorer exited with {process.returncode}:\n{log.read_text()}", pytrace=False)
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/check_health", timeout=2) as answer:
                if answer.read() == b"model_explorer_ok":
                    return
        except (OSError, urllib.error.URLError):
            pass
        if time.monotonic() > deadline:
            stop_process_group(process)
            pytest.fail(
                f"model-explorer did not answer in {timeout:.0f} s:\n{log.read_text()}", pytrace=False
            )
        time.sleep(0.25)


@pytest.fixture
def model_explorer_url(browser_requirements: None, exported: Exported, tmp_path: Path) -> Iterator[str]:
    """Model Explorer's server for the model and our files; the URL of its page showing them.

    The server is Model Explorer's own command line, with the ONNX adapter extension and no
    browser; the URL's ``data`` parameter is what Model Explorer's config encodes for the same
    model and files (what its server prints and opens).
    """
    import model_explorer  # here, not at the top: it imports torch (seconds)

    port = free_port()
    log = tmp_path / "model-explorer.log"
    command = [
        sys.executable,
        "-m",
        "model_explorer",
        str(exported.model),
        f"--node_data_paths={','.join(str(f) for f in exported.files)}",
        "--extensions=model_explorer_onnx",
        "--host=127.0.0.1",
        f"--port={port}",
        "--no_open_in_browser",
    ]
    with log.open("wb") as out:
        process = subprocess.Popen(
            command,
            cwd=tmp_path,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_healthy(process, port, log)
        config = model_explorer.config().add_model_from_path(str(exported.model))
        for file in exported.files:
            config.add_node_data_from_path(str(file))
        yield f"http://127.0.0.1:{port}/?data={config.to_url_param_value()}"
    finally:
        stop_process_group(process)


def adapter_node_ids(path: Path, graph_id: str) -> list[str]:
    """The node ids of ``graph_id`` in the order Model Explorer's ONNX adapter gives (the table's #)."""
    from model_explorer_onnx.main import ONNXAdapter

    graphs = ONNXAdapter().convert(str(path), {})["graphs"]
    (graph,) = (g for g in graphs if g.id == graph_id)
    return [n.id for n in graph.nodes]


def rgb(colour: str) -> str:
    """``#2e7d32`` as the browser writes a style's colour: ``rgb(46, 125, 50)``."""
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"


def gradient_colour(value: float, gradient: Sequence[dict[str, Any]], lo: float, hi: float) -> str:
    """The colour Model Explorer gives ``value`` from a node data's ``gradient`` over ``[lo, hi]``:
    each channel interpolated linearly between the two stops around it, rounded down."""
    at = (value - lo) / (hi - lo)
    stops = sorted(gradient, key=lambda s: s["stop"])
    for below, above in pairwise(stops):
        if below["stop"] <= at <= above["stop"]:
            f = (at - below["stop"]) / (above["stop"] - below["stop"])
            a, b = ([int(s["bgColor"][i : i + 2], 16) for i in (1, 3, 5)] for s in (below, above))
            return "rgb({}, {}, {})".format(*(math.floor(x + (y - x) * f) for x, y in zip(a, b, strict=True)))
    raise AssertionError(f"{value} is outside [{lo}, {hi}]")


def wait_for_panel(page: Page, names: Sequence[str], timeout_ms: float = 30_000) -> None:
    """Wait until the node-data panel lists ``len(names)`` overlays and the node-data table has rows."""
    try:
        page.wait_for_function(
            """([panel, n]) => {
                const root = document.querySelector(panel);
                return root !== null && root.querySelectorAll('.run-name').length === n
                    && root.querySelectorAll('table.results tbody tr').length > 1;
            }""",
            arg=[PANEL, len(names)],
            timeout=timeout_ms,
        )
    except Exception as error:
        body = page.evaluate("() => document.body.innerText.slice(0, 500)")
        raise AssertionError(
            f"Model Explorer lists no node data {list(names)}; the page reads:\n{body}"
        ) from error


def graph_colour_counts(page: Page, colours: Sequence[str]) -> dict[str, int]:
    """How many pixels of each colour the graph's WebGL canvas shows (from a screenshot of it)."""
    png = page.locator("webgl-renderer canvas.main").screenshot()
    return page.evaluate(COUNT_COLOURS_JS, [base64.b64encode(png).decode(), list(colours)])


def test_model_explorer_page_shows_our_node_data(
    page: Page, exported: Exported, model_explorer_url: str, blocked_requests: list[str]
) -> None:
    """Model Explorer's page lists our overlays and shows our values and colours, node by node."""
    placement, timing = exported.data
    node_ids = adapter_node_ids(exported.model, exported.graph_id)
    page.goto(model_explorer_url, wait_until="domcontentloaded")
    wait_for_panel(page, exported.names)
    shown = page.evaluate(READ_PANEL_JS, PANEL)

    assert (
        shown["runNames"] == shown["columns"] == exported.names == [f"placement on {TARGET}", timing["name"]]
    )

    # The node-data table, node by node: "#" (the adapter's node order), op, then one cell per file.
    times = [r["value"] for r in timing["results"].values()]
    lo, hi = min(times), max(times)
    checked: Counter[str] = Counter()
    for index, _op, place, took in shown["results"]:
        node = node_ids[int(index["text"])]
        wrote = placement["results"].get(node)
        if wrote is None:
            assert (place["text"], place["bg"]) == ("-", ""), node
        else:
            assert (place["text"], place["bg"]) == (wrote["value"], rgb(wrote["bgColor"])), node
            checked["placement"] += 1
        wrote = timing["results"].get(node)
        if wrote is None:
            assert took["text"] == "-", node
        else:
            assert float(took["text"]) == wrote["value"], node
            assert took["bg"] == gradient_colour(wrote["value"], timing["gradient"], lo, hi), node
            checked["time"] += 1
    assert checked["placement"] >= 40 and checked["time"] >= 40, checked  # a page holds 50 rows

    # Aggregated stats (Stat, placement, time): the time's min and max are ours.
    stats = {row[0]["text"]: row[2]["text"] for row in shown["stats"]}
    assert (float(stats["Min"]), float(stats["Max"])) == (lo, hi)

    # Root-level stats: the model's layer counts each placement as often as our file has it.
    layer = next(row for row in shown["children"] if row[1]["text"] == exported.graph_id)
    counts = Counter(r["value"] for r in placement["results"].values())
    per_label = {
        label.splitlines()[-1].strip().removeprefix("#"): int(cell["text"])  # "[name\n]#CPU"
        for (number, label), cell in zip(shown["childColumns"], layer[2:], strict=True)
        if number == "1"
    }
    assert per_label and all(counts[label] == n for label, n in per_label.items()), (per_label, counts)

    # The graph itself: pick the placement and its colours are drawn on the canvas (the collapsed
    # model layer sums its nodes up by colour, a bar of each under the layer's name).
    page.locator(f"{PANEL} .run-name", has_text=placement["name"]).click()
    page.wait_for_function(
        "(panel) => document.querySelector(panel + ' .index-row').classList.contains('selected')", arg=PANEL
    )
    colours = sorted({r["bgColor"] for r in placement["results"].values()})
    deadline = time.monotonic() + 10
    while True:
        drawn = graph_colour_counts(page, colours)
        if all(n >= 20 for n in drawn.values()) or time.monotonic() > deadline:
            break
        page.wait_for_timeout(250)
    assert all(n >= 20 for n in drawn.values()), f"pixels of each placement colour in the graph: {drawn}"
    screenshot(page, "model-explorer-page")

    assert all(url.startswith(FONT_HOST) for url in blocked_requests), blocked_requests

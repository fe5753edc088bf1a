"""A click on a node until its details are on screen: ours in JupyterLab against Netron, same browser.

In one run this starts a real JupyterLab and headless Debian Chromium (the harness of
``tests/browser/jupyter.py``, as :mod:`benchmarks.lab_benchmark` does), opens each model with
``GraphView(PATH)`` in a notebook, and clicks ``--clicks`` nodes in turn with the real mouse, a
second apart (a user reads the details before the next click). Each click is timed inside the page
(``performance.now()``) from the mouse button's release to the end of the first frame painted
with that node's details (``.oge-details[data-node=NODE]`` in the page, then an animation frame,
then a task: the frame has been painted). Netron serves the same file (``netron --port P`` on
127.0.0.1) in the same browser, and the same clicks are timed until its sidebar shows the node's
properties (anything in ``#sidebar`` changed, then the same frame and task). Netron replaces
``window.eval``, so its page times itself in an init script and writes the times into an
attribute of ``<html>``.

Only nodes drawn inside the visible part of the plot are clicked (ours: items of the ``nodes``
trace that are not collapsed boxes; Netron: ``g.node`` elements left of its sidebar).

``--compare TREE`` also clicks with another source tree (``git archive BASE | tar -x -C
/tmp/base``) in a second server whose kernels have ``PYTHONPATH=TREE``, in the same run.

Models: those of :data:`benchmarks.lab_benchmark.MODELS` (``resnet18``, ``transformer``) and any
``--file NAME=PATH`` (say the int4 decoder of ``benchmarks/llm_benchmark.py``).

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/click_benchmark.py [--models resnet18 transformer]
[--file decoder=build/llm_benchmark/genai-int4/model.onnx] [--clicks 8] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from contextlib import suppress
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.lab_benchmark import DEFAULT_NETRON, MODELS, _context, ensure_models  # noqa: E402
from explorer.views.figures import NODES  # noqa: E402
from explorer.views.layout import GROUP_PREFIX  # noqa: E402
from tests.browser.jupyter import (  # noqa: E402
    CHROMIUM,
    CHROMIUM_ARGS,
    cell_errors,
    click_plot_point,
    free_port,
    open_notebook,
    plot_point_position,
    plotly_data,
    run_all,
    start_lab,
    stop_lab,
    wait_for_outputs,
    write_notebook,
)

__all__ = ["click_ours", "click_netron", "main", "summary"]

#: Times, in the page, from each mouse release to the painted frame that shows the awaited node.
_OURS_JS = """() => {
    const s = window.__ogeClick = { up: null, painted: null, target: null };
    const painted = () => requestAnimationFrame(() => setTimeout(() => {
        s.painted = performance.now() - s.up;
    }, 0));
    const release = () => { s.up = performance.now(); s.painted = null; s.seen = false; };
    window.addEventListener('pointerup', release, true);
    new MutationObserver(() => {
        if (s.up === null || s.seen || s.target === null) return;
        const el = document.querySelector('.oge-details[data-node="' + CSS.escape(s.target) + '"]');
        if (el) { s.seen = true; painted(); }
    }).observe(document.body, { subtree: true, childList: true, attributes: true, characterData: true });
}"""

#: The same for Netron, as an init script (no evaluation in its page): every click's time goes
#: into ``<html data-oge-clicks="[...]">``.
_NETRON_JS = """(() => {
    const times = [];
    let up = null;
    window.addEventListener('pointerup', () => { up = performance.now(); }, true);
    const inSidebar = (node) => {
        const el = node.nodeType === 1 ? node : node.parentElement;
        return el !== null && el.closest('#sidebar') !== null;
    };
    const watch = () => {
        if (!document.body) { requestAnimationFrame(watch); return; }
        new MutationObserver((records) => {
            if (up === null || !records.some((r) => inSidebar(r.target))) return;
            const start = up; up = null;
            requestAnimationFrame(() => setTimeout(() => {
                times.push(performance.now() - start);
                document.documentElement.setAttribute('data-oge-clicks', JSON.stringify(times));
            }, 0));
        }).observe(document.body, { subtree: true, childList: true, characterData: true });
    };
    requestAnimationFrame(watch);
})();"""


def _visible_points(page: Any, items: list[str], limit: int) -> list[int]:
    """Indices of up to ``limit`` node points (not boxes) inside the plot and the viewport."""
    box = page.locator(".oge-graph-view .js-plotly-plot").first.bounding_box()
    view = page.viewport_size
    chosen = []
    for index, item in enumerate(items):
        if item.startswith(GROUP_PREFIX):
            continue
        x, y = plot_point_position(page, 0, NODES, index)
        on_top = page.evaluate(  # not under the details panel or another widget
            "([x, y]) => { const el = document.elementFromPoint(x, y);"
            " return el !== null && el.closest('.js-plotly-plot') !== null; }",
            [x, y],
        )
        inside = (
            box["x"] + 20 < x < box["x"] + box["width"] - 20
            and box["y"] + 20 < y < box["y"] + box["height"] - 80  # above the legend
        )
        if inside and on_top and 0 < y < view["height"] - 10:
            chosen.append(index)
        if len(chosen) >= limit:
            break
    return chosen


def click_ours(
    browser: Any, lab: Any, path: Path, clicks: int, timeout_s: float, expanded: bool = False
) -> list[float]:
    """Open ``GraphView(path)`` (``collapse=None`` when ``expanded``) in a fresh kernel, click ``clicks``
    nodes, return each click's seconds."""
    notebook = write_notebook(
        lab.root_dir / "clicks",
        f"clicks-{time.monotonic_ns()}.ipynb",
        [f"from widgets import GraphView\nGraphView({str(path)!r}{', collapse=None' * expanded})"],
    )
    times: list[float] = []
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    with _context(browser) as page:
        open_notebook(page, lab, notebook, timeout_ms=timeout_s * 1000)
        if not run_all(page, timeout_ms=timeout_s * 1000):
            raise RuntimeError("; ".join(cell_errors(page)) or "the cell did not run")
        wait_for_outputs(page, ".oge-graph-view .js-plotly-plot", timeout_ms=timeout_s * 1000)
        page.wait_for_timeout(1500)  # the kernel's reply and the page settle, as a user reads the graph
        page.evaluate(_OURS_JS)
        items = list(plotly_data(page)[NODES]["customdata"])
        for index in _visible_points(page, items, clicks):
            page.evaluate("(node) => { window.__ogeClick.target = node; }", items[index])
            try:
                click_plot_point(page, 0, NODES, index)
            except AssertionError as error:  # a point under another: not a click a user makes
                print(f"  skipped {items[index]}: {str(error)[:120]}", file=sys.stderr)
                continue
            except PlaywrightTimeout:  # plotly reported no click: said, and counted as no time
                print(f"  plotly reported no click on {items[index]}", file=sys.stderr)
                page.wait_for_timeout(1000)
                continue
            page.wait_for_function("() => window.__ogeClick.painted !== null", timeout=timeout_s * 1000)
            times.append(page.evaluate("() => window.__ogeClick.painted") / 1000)
            page.wait_for_timeout(1000)
    lab.shutdown_kernels()
    return times


def click_netron(browser: Any, netron: Path, path: Path, clicks: int, timeout_s: float) -> list[float]:
    """Serve ``path`` with Netron, click ``clicks`` nodes left of its sidebar, return each click's seconds."""
    port = free_port()
    process = subprocess.Popen(
        [str(netron), str(path), "--port", str(port), "--host", "127.0.0.1", "--verbosity", "quiet"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url, timeout=2).close()
                break
            except (OSError, urllib.error.URLError):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("netron did not start") from None
                time.sleep(0.1)
        with _context(browser) as page:
            page.context.add_cookies([{"name": "consent", "value": str(int(time.time() * 1000)), "url": url}])
            page.add_init_script(_NETRON_JS)
            page.goto(url)
            nodes = page.locator("#canvas g.node")
            nodes.first.wait_for(timeout=timeout_s * 1000)
            page.wait_for_timeout(1500)
            view = page.viewport_size
            deadline = time.monotonic()
            done = 0
            for k in range(nodes.count()):
                if "graph-node" not in (nodes.nth(k).get_attribute("class") or ""):
                    continue  # a graph input or output: Netron shows the graph's properties for it
                box = nodes.nth(k).bounding_box()
                if box is None or not (
                    0 < box["y"] < view["height"] - 40 and 0 < box["x"] < view["width"] * 0.55
                ):
                    continue
                page.mouse.click(box["x"] + min(box["width"] / 2, 20), box["y"] + 8)  # its header: the op
                done += 1
                while len(_netron_times(page)) < done:  # no evaluation in Netron's page: poll
                    if time.monotonic() > deadline + timeout_s * (done + 1):
                        raise RuntimeError(f"Netron showed no details for click {done}")
                    page.wait_for_timeout(50)
                page.wait_for_timeout(1000)
                if done >= clicks:
                    break
            if done == 0:
                raise RuntimeError(f"none of Netron's {nodes.count()} nodes is drawn in view to click")
            return _netron_times(page)
    finally:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, 9)
        process.wait(10)


def _netron_times(page: Any) -> list[float]:
    return [t / 1000 for t in json.loads(page.locator("html").get_attribute("data-oge-clicks") or "[]")]


def summary(times: list[float]) -> dict[str, Any]:
    """Median, fastest and slowest click, in seconds, and how many.

    Examples
    --------
    >>> summary([0.05, 0.07, 0.2])
    {'clicks': 3, 'median': 0.07, 'min': 0.05, 'max': 0.2}
    """
    if not times:
        return {"clicks": 0, "median": None, "min": None, "max": None}
    return {"clicks": len(times), "median": statistics.median(times), "min": min(times), "max": max(times)}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table (and write ``--json``); 1 when a measurement failed."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", nargs="*", choices=sorted(MODELS), default=["resnet18", "transformer"])
    parser.add_argument("--file", action="append", default=[], help="NAME=PATH: another model file")
    parser.add_argument("--clicks", type=int, default=8)
    parser.add_argument(
        "--expanded", action="store_true", help="open every scope (collapse=None): nodes to click, not boxes"
    )
    parser.add_argument("--netron", type=Path, default=DEFAULT_NETRON)
    parser.add_argument("--folder", type=Path, default=Path(tempfile.gettempdir()) / "oge-lab-benchmark")
    parser.add_argument("--timeout", type=float, default=180.0)
    parser.add_argument(
        "--compare", type=Path, help="another source tree (a `git archive` of a base commit) to click too"
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if not CHROMIUM.exists():
        print(f"{CHROMIUM} is missing: run scripts/install_chromium.sh", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    paths = ensure_models(args.folder / "models", args.models)
    for name, path in (item.split("=", 1) for item in args.file):
        paths[name] = Path(path).resolve()  # the notebooks run in the server's folder
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    rows: list[dict[str, Any]] = []
    failed = False
    with tempfile.TemporaryDirectory(prefix="oge-click-") as tmp, sync_playwright() as playwright:
        labs = {"ours": start_lab(Path(tmp) / "notebooks", Path(tmp) / "state", timeout=120)}
        if args.compare is not None:  # its kernels import the other tree first
            labs["baseline"] = start_lab(
                Path(tmp) / "notebooks-base",
                Path(tmp) / "state-base",
                timeout=120,
                env={"PYTHONPATH": str(args.compare.resolve())},
            )
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=list(CHROMIUM_ARGS), headless=True
        )
        try:
            for name, path in paths.items():
                for who in [*labs, "netron"]:
                    if who == "netron" and not args.netron.exists():
                        continue
                    try:
                        if who in labs:
                            times = click_ours(
                                browser, labs[who], Path(path), args.clicks, args.timeout, args.expanded
                            )
                        else:
                            times = click_netron(browser, args.netron, Path(path), args.clicks, args.timeout)
                    except Exception as error:  # a row that says what failed, not a lost run
                        print(f"{name} {who}: {error}", file=sys.stderr)
                        times, failed = [], True
                    rows.append({"model": name, "viewer": who, **summary(times), "times": times})
                    print(f"  {name} {who}: {[round(t, 3) for t in times]}", file=sys.stderr, flush=True)
        finally:
            browser.close()
            for lab in labs.values():
                stop_lab(lab)
    print("| model | viewer | clicks | median | fastest | slowest |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        cells = [f"{row[k]:.3f} s" if row[k] is not None else "-" for k in ("median", "min", "max")]
        print(f"| {row['model']} | {row['viewer']} | {row['clicks']} | " + " | ".join(cells) + " |")
    if args.json:
        args.json.write_text(json.dumps({"load": os.getloadavg(), "rows": rows}, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

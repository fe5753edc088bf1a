"""Opening a model in JupyterLab: cell run -> graph drawn, against Netron drawing the same file.

In one run this starts a real JupyterLab and headless Debian Chromium (the harness of
``tests/browser/jupyter.py``), saves the models to a folder (cached between runs), and for
each model measures:

- ``fresh``: a notebook whose one cell is ``from widgets import GraphView`` /
  ``GraphView("MODEL.onnx")``, opened in a new browser context with a new kernel (the page
  waits until the status bar says the kernel is idle, as a user would); from running the
  cell (``notebook:run-all-cells``) to the graph being drawn;
- ``again``: the same cell run again in the same kernel and page, once the previous run is
  over (its execution finished, the kernel's reply in the page) and ``--pause`` seconds later
  (0.5 by default: a user looks at the graph before running the cell again; 0 clicks at once,
  and a click while the previous run still finishes in the kernel times its tail too);
- ``netron``: when Netron is installed (``/work/netron-venv/bin/netron`` or ``--netron``),
  ``netron MODEL.onnx`` serving on 127.0.0.1 and, in a new browser context, from the page
  navigation (``performance.timeOrigin``) to Netron's graph being drawn.

"Drawn" means, for us: the first animation frame at which the cell's output holds a plotly
plot (``.js-plotly-plot`` that was not there before the run) whose ``nodes`` trace has been
computed (``gd.calcdata`` holds it with at least one point) and its WebGL canvas exists
(graphs drawn with WebGL) or its SVG box fills are in the page (smaller graphs, drawn with
SVG: plotly draws SVG in the same task as the calc); that frame paints it. For Netron: the
first animation frame at which the page shows the graph (``body.default``, Netron's "model
open" page) and its SVG (``#canvas``) holds node elements (``.node``). Both are timed inside
the page (``performance.now()``).

The ``exec`` column is when the kernel's reply to the cell arrived (the Python side is
done), ``plot`` when the plot element appeared; ``drawn - exec`` is widget messages plus
plotly.js in the browser. ``exec`` is empty when the graph was drawn before the reply came
(the view renders from the widget messages, which come before the reply).
``--compare TREE`` also times another source tree (say ``git archive BASE | tar -x -C
/tmp/base``, then ``python -m compileall -q /tmp/base/explorer /tmp/base/widgets``: these machines
set ``PYTHONDONTWRITEBYTECODE``) in a second server of the same environment whose kernels have
``PYTHONPATH=TREE`` (so the kernel's own warm-up imports that tree too), in the same browser,
alternating with this one, so a before/after comparison shares the machine's load.
``--breakdown`` also runs, in a fresh kernel, a cell that times
each step of ``GraphView(path)`` on its own (imports, ``explorer.load``, layout, figure,
plotly's widget stack, the widgets) and the size of the figure widget's state.

Models: ``resnet18`` is ``zoo.build("resnet18")`` (46 MB), ``transformer`` is
``zoo.build("transformer", layers=123)`` (about 10k ONNX nodes, hidden size 256, random
normal weights: about 400 MB).

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/lab_benchmark.py`` (``--help`` for options),
e.g. ``--models resnet18 --repeat 3 --breakdown --json out.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.browser.jupyter import (  # noqa: E402  (needs ROOT on sys.path)
    CHROMIUM,
    CHROMIUM_ARGS,
    LabServer,
    RequestGuard,
    cell_errors,
    free_port,
    open_notebook,
    start_lab,
    stop_lab,
    write_notebook,
)

__all__ = ["MODELS", "Timing", "ensure_models", "main", "netron_open", "run_cell_until_drawn"]

#: Model name -> how to build it (saved once into the benchmark's folder).
MODELS: dict[str, Callable[[], Any]] = {
    "resnet18": lambda: _zoo().build("resnet18"),
    "transformer": lambda: _zoo().build("transformer", layers=123),
}
DEFAULT_NETRON = Path("/work/netron-venv/bin/netron")
VIEWPORT = {"width": 1400, "height": 900}

#: Runs the open notebook's cells and resolves, in page time, when a new plot is drawn.
_RUN_JS = """async (timeoutMs) => {
    const before = new Set(document.querySelectorAll('.js-plotly-plot'));
    const result = { exec: null, plot: null, drawn: null, points: 0, ok: null };
    const t0 = performance.now();
    window.__ogeRun = window.jupyterapp.commands.execute('notebook:run-all-cells');
    window.__ogeRun.then(
        (ok) => { result.exec = performance.now() - t0; result.ok = ok !== false; },
        (err) => { result.exec = performance.now() - t0; result.ok = false; result.error = String(err); },
    );
    const drawnPoints = (gd) => {
        if (!gd.calcdata || !gd._fullData || !gd._fullLayout) return 0;
        const index = gd._fullData.findIndex((t) => t.name === 'nodes');
        const gl = index >= 0 && gd._fullData[index].type === 'scattergl';
        if (gl ? !gd._fullLayout._glcanvas : !gd.querySelector('.scatterlayer .trace path.js-fill')) return 0;
        const cd = index < 0 ? null : gd.calcdata[index];
        return cd && cd.length ? gd._fullData[index]._length || 0 : 0;
    };
    return await new Promise((resolve) => {
        const tick = () => {
            const now = performance.now() - t0;
            const plots = [...document.querySelectorAll('.jp-NotebookPanel .js-plotly-plot')];
            const gd = plots.find((el) => !before.has(el));
            if (gd && result.plot === null) result.plot = now;
            const points = gd ? drawnPoints(gd) : 0;
            if (points > 0) { result.drawn = now; result.points = points; resolve(result); return; }
            if (result.ok === false || now > timeoutMs) { resolve(result); return; }
            requestAnimationFrame(tick);
        };
        requestAnimationFrame(tick);
    });
}"""

#: Init script for Netron's page: Netron replaces ``window.eval`` (so Playwright cannot evaluate
#: there), so the page itself watches every animation frame and writes the drawn time (ms since
#: navigation) and the node count into attributes of ``<html>``.
_NETRON_INIT_JS = """(() => {
    const tick = () => {
        const svg = document.getElementById('canvas');
        const drawn = document.body && document.body.classList.contains('default')
            && svg !== null && svg.querySelector('.node') !== null;
        if (drawn) {
            const root = document.documentElement;
            root.setAttribute('data-oge-nodes', String(svg.querySelectorAll('g.node').length));
            root.setAttribute('data-oge-drawn', String(performance.now()));
            return;
        }
        requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
})();"""


@dataclass(frozen=True)
class Timing:
    """One cell run (or one Netron page load), in seconds from its start.

    Attributes
    ----------
    model : str
        The model's name.
    what : str
        ``"fresh"``, ``"again"`` or ``"netron"``.
    drawn : float or None
        When the graph was drawn; None if it was not within the time limit.
    exec : float or None
        When the kernel's reply to the cell arrived (ours only).
    plot : float or None
        When the plot element appeared (ours only).
    points : int
        Points of the nodes trace (ours) or node elements (Netron) when drawn.

    Examples
    --------
    >>> Timing("resnet18", "fresh", 2.5, 1.5, 2.0, 71).to_dict()["drawn"]
    2.5
    """

    model: str
    what: str
    drawn: float | None
    exec: float | None = None
    plot: float | None = None
    points: int = 0
    error: str | None = field(default=None)

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict."""
        return asdict(self)


def _zoo() -> Any:
    from explorer import zoo

    return zoo


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def ensure_models(folder: Path, names: list[str]) -> dict[str, Path]:
    """Build and save each model to ``folder/NAME.onnx`` unless it is there already.

    Examples
    --------
    >>> import tempfile
    >>> paths = ensure_models(Path(tempfile.mkdtemp()), ["resnet18"])  # doctest: +SKIP
    >>> paths["resnet18"].stat().st_size > 40e6  # doctest: +SKIP
    True
    """
    from explorer.isolation.io import save_model_atomic

    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name in names:
        path = folder / f"{name}.onnx"
        if not path.exists():
            _log(f"building {name} ...")
            started = time.perf_counter()
            save_model_atomic(MODELS[name](), path)
            _log(
                f"  saved {path} ({path.stat().st_size / 1e6:.0f} MB)"
                f" in {time.perf_counter() - started:.1f} s"
            )
        paths[name] = path
    return paths


#: Waits until the last run of :data:`_RUN_JS` in this page has finished (its execute promise),
#: at most ``timeoutMs``; resolves to whether it finished.
_LAST_RUN_OVER_JS = """async (timeoutMs) => {
    if (!window.__ogeRun) { return true; }
    const over = window.__ogeRun.then(() => true, () => true);
    return Promise.race([over, new Promise((done) => setTimeout(() => done(false), timeoutMs))]);
}"""


def run_cell_until_drawn(page: Any, model: str, what: str, timeout_s: float) -> Timing:
    """Run the open notebook's cells and time them until a new plot is drawn (see the module doc).

    Examples
    --------
    >>> run_cell_until_drawn(page, "resnet18", "again", 120).drawn  # doctest: +SKIP
    1.02
    """
    result = page.evaluate(_RUN_JS, timeout_s * 1000)

    def sec(key: str) -> float | None:
        return None if result.get(key) is None else result[key] / 1000

    error = None
    if result.get("drawn") is None:
        error = result.get("error") or "; ".join(cell_errors(page)) or f"not drawn within {timeout_s:g} s"
    return Timing(model, what, sec("drawn"), sec("exec"), sec("plot"), int(result.get("points") or 0), error)


@contextmanager
def _context(browser: Any) -> Iterator[Any]:
    """A fresh browser context (empty cache) and page; every request off 127.0.0.1 is aborted."""
    context = browser.new_context(viewport=VIEWPORT, service_workers="block")
    context.set_default_timeout(120_000)
    context.route("**/*", RequestGuard())
    try:
        yield context.new_page()
    finally:
        context.close()


def measure_lab(
    browser: Any,
    lab: LabServer,
    model: str,
    path: Path,
    again: int,
    timeout_s: float,
    tree: Path | None = None,
    label: str | None = None,
    settle: float = 0.0,
    pause: float = 0.5,
) -> list[Timing]:
    """One fresh kernel: the cell run once, then ``again`` more times in the same kernel.

    ``settle`` is how long the notebook stays open, its kernel idle, before the first run (a
    user reading it); 0 runs it as soon as the kernel is idle. Each run again waits for the
    previous one to finish, then ``pause`` seconds (the user looks at the graph).

    With ``tree``, the cell first puts that source tree at the front of ``sys.path`` (worker
    children inherit it), so another checkout (a baseline) runs in the same server and browser;
    ``label`` then names its rows.
    """
    folder = lab.root_dir / "runs"
    prefix = "" if tree is None else f"import sys; sys.path.insert(0, {str(tree)!r})\n"
    notebook = write_notebook(
        folder,
        f"{model}-{time.monotonic_ns()}.ipynb",
        [f"{prefix}from widgets import GraphView\nGraphView({str(path)!r})"],
    )
    model = label or model
    timings = []
    with _context(browser) as page:
        open_notebook(page, lab, notebook, timeout_ms=timeout_s * 1000)
        page.wait_for_timeout(settle * 1000)
        for index in range(1 + again):
            if index:
                if not page.evaluate(_LAST_RUN_OVER_JS, timeout_s * 1000):
                    _log(f"  {model}: the previous run did not finish within {timeout_s:g} s")
                page.wait_for_timeout(pause * 1000)
            timing = run_cell_until_drawn(page, model, "again" if index else "fresh", timeout_s)
            _log(f"  {model} {timing.what}: {_fmt(timing.drawn)} (exec {_fmt(timing.exec)})")
            timings.append(timing)
            if timing.error:
                _log(f"    error: {timing.error[:2000]}")
                break
    lab.shutdown_kernels()
    return timings


_BREAKDOWN_CELL = """\
import json, time
_t = time.perf_counter(); _laps = {{}}
def _lap(name):
    global _t
    now = time.perf_counter(); _laps[name] = round(now - _t, 3); _t = now
import widgets
_lap("import widgets")
from explorer import load
from explorer.views.layout import auto_collapse, layered
from explorer.views.figures import graph_figure
_g = load({path!r})
_lap("explorer.onnx_adapter.load")
_layout = layered(_g, collapse=auto_collapse(_g))
_lap("layout")
_fig = graph_figure(_g, _layout)
_lap("figure")
import plotly.basewidget
_lap("import plotly.basewidget")
from widgets import GraphView
_view = GraphView(_g)
_lap("GraphView(graph) (layout, figure, widgets again)")
_state = _view.figure.get_state()
from ipywidgets.widgets.widget import _remove_buffers
_plain, _paths, _buffers = _remove_buffers(_state)
_laps["figure state bytes"] = len(json.dumps(_plain, default=str)) + sum(len(b) for b in _buffers)
print("BREAKDOWN " + json.dumps(_laps))
_view"""


def measure_breakdown(
    browser: Any, lab: LabServer, model: str, path: Path, timeout_s: float
) -> dict[str, Any]:
    """Run the step-by-step cell in a fresh kernel; its laps (seconds) plus the browser's times."""
    notebook = write_notebook(
        lab.root_dir / "runs",
        f"{model}-breakdown-{time.monotonic_ns()}.ipynb",
        [_BREAKDOWN_CELL.format(path=str(path))],
    )
    with _context(browser) as page:
        open_notebook(page, lab, notebook, timeout_ms=timeout_s * 1000)
        timing = run_cell_until_drawn(page, model, "breakdown", timeout_s)
        text = page.evaluate(
            """() => window.jupyterapp.shell.currentWidget.content.model.toJSON().cells[0].outputs
                .filter((o) => o.output_type === 'stream').map((o) => o.text).join('')"""
        )
    lab.shutdown_kernels()
    laps: dict[str, Any] = {}
    for line in text.splitlines():
        if line.startswith("BREAKDOWN "):
            laps = json.loads(line[len("BREAKDOWN ") :])
    laps["cell exec (kernel reply)"] = timing.exec
    laps["cell run -> drawn"] = timing.drawn
    return laps


def netron_open(browser: Any, netron: Path, model: str, path: Path, timeout_s: float) -> Timing:
    """Serve ``path`` with ``netron`` on 127.0.0.1 and time a fresh page until the graph is drawn.

    Examples
    --------
    >>> netron_open(browser, DEFAULT_NETRON, "resnet18", Path("resnet18.onnx"), 120).drawn  # doctest: +SKIP
    2.2
    """
    port = free_port()
    command = [str(netron), str(path), "--port", str(port), "--host", "127.0.0.1", "--verbosity", "quiet"]
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                return Timing(
                    model, "netron", None, error=f"netron exited: {process.stderr.read().decode()[-500:]}"
                )
            try:
                urllib.request.urlopen(url, timeout=2).close()
                break
            except (OSError, urllib.error.URLError):
                if time.monotonic() > deadline:
                    return Timing(model, "netron", None, error="netron did not answer within 60 s")
                time.sleep(0.1)
        with _context(browser) as page:
            # A returning user: Netron's cookie banner (asked once per browser) is already accepted.
            page.context.add_cookies([{"name": "consent", "value": str(int(time.time() * 1000)), "url": url}])
            page.add_init_script(_NETRON_INIT_JS)
            page.goto(url, wait_until="commit")
            root = page.locator("html[data-oge-drawn]")
            try:
                root.wait_for(state="attached", timeout=timeout_s * 1000)
            except Exception as error:  # playwright's TimeoutError; report it as a row
                return Timing(model, "netron", None, error=f"not drawn within {timeout_s:g} s: {error}"[:500])
            value = {
                "drawn": float(root.get_attribute("data-oge-drawn")),
                "nodes": root.get_attribute("data-oge-nodes"),
            }
        timing = Timing(model, "netron", value["drawn"] / 1000, points=int(value["nodes"]))
        _log(f"  {model} netron: {_fmt(timing.drawn)}")
        return timing
    finally:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, 9)
        process.wait(10)


def _settled(settle: float) -> str:
    """How a row names the time its notebook stayed open before the fresh run ("" for none)."""
    return f", opened {settle:g} s before" if settle else ""


def _fmt(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.2f} s"


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def summarize(timings: list[Timing], models: list[str]) -> list[dict[str, Any]]:
    """One row per model: medians of fresh, again, exec and Netron, and the ratios to Netron.

    Examples
    --------
    >>> runs = [Timing("m", "fresh", 2.0), Timing("m", "again", 0.5), Timing("m", "netron", 2.0)]
    >>> rows = summarize(runs, ["m"])
    >>> rows[0]["fresh / netron"], rows[0]["again / netron"]
    (1.0, 0.25)
    """
    rows = []
    for model in models:
        mine = [t for t in timings if t.model == model]

        def med(what: str, key: str = "drawn", mine: list[Timing] = mine) -> float | None:
            return _median([getattr(t, key) for t in mine if t.what == what])

        fresh, again, netron = med("fresh"), med("again"), med("netron")
        rows.append(
            {
                "model": model,
                "fresh": fresh,
                "fresh exec": med("fresh", "exec"),
                "again": again,
                "again exec": med("again", "exec"),
                "netron": netron,
                "fresh / netron": round(fresh / netron, 2) if fresh and netron else None,
                "again / netron": round(again / netron, 2) if again and netron else None,
                "runs": sum(1 for t in mine if t.what == "fresh"),
            }
        )
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    """Print the rows as a markdown table (seconds, ratios)."""
    keys = list(rows[0]) if rows else []
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for row in rows:
        cells = []
        for key in keys:
            value = row[key]
            if isinstance(value, float) and "/" not in key:
                cells.append(f"{value:.2f} s")
            elif value is None:
                cells.append("-")
            else:
                cells.append(str(value))
        print("| " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the table (and write ``--json``).

    Examples
    --------
    >>> main(["--models", "resnet18", "--repeat", "1"])  # doctest: +SKIP
    0
    """
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", nargs="+", choices=sorted(MODELS), default=["resnet18", "transformer"])
    parser.add_argument("--repeat", type=int, default=2, help="fresh kernels per model (median)")
    parser.add_argument(
        "--again", type=int, default=2, help="runs again in the same kernel, per fresh kernel"
    )
    parser.add_argument("--netron", type=Path, default=DEFAULT_NETRON, help="the netron executable")
    parser.add_argument("--no-netron", dest="use_netron", action="store_false")
    parser.add_argument("--breakdown", action="store_true", help="also time each step in a fresh kernel")
    parser.add_argument(
        "--folder",
        type=Path,
        default=Path(tempfile.gettempdir()) / "oge-lab-benchmark",
        help="models (cached)",
    )
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per measurement")
    parser.add_argument(
        "--compare", type=Path, help="another source tree (e.g. `git archive` of a base commit) to time too"
    )
    parser.add_argument("--compare-label", default="baseline", help="how its rows are named")
    parser.add_argument(
        "--settle",
        type=float,
        nargs="+",
        default=[0.0],
        help="seconds the notebook stays open (kernel idle) before the fresh run; several: each, in turn",
    )
    parser.add_argument(
        "--pause",
        type=float,
        default=0.5,
        help="seconds between a run's end (drawn, the kernel's reply in) and the next run again",
    )
    parser.add_argument(
        "--without-kernel-warm",
        action="store_true",
        help="also time kernels without widgets.kernel_warm (a second JupyterLab, EXPLORER_NO_KERNEL_WARM=1)",
    )
    parser.add_argument("--json", type=Path, help="write every timing and the table here")
    args = parser.parse_args(argv)
    if not CHROMIUM.exists():
        print(f"{CHROMIUM} is missing: run scripts/install_chromium.sh", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    paths = ensure_models(args.folder / "models", args.models)
    netron = args.netron if args.use_netron and args.netron.exists() else None
    if netron is None:
        _log(f"no Netron ({args.netron}): its column stays empty")
    timings: list[Timing] = []
    breakdowns: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="oge-lab-") as tmp:
        labs = {"": start_lab(Path(tmp) / "notebooks", Path(tmp) / "state", timeout=120)}
        labs_compare: LabServer | None = None
        try:
            if args.compare is not None:  # its kernels, warm-up included, import the other tree
                labs_compare = start_lab(
                    Path(tmp) / "notebooks-compare",
                    Path(tmp) / "state-compare",
                    timeout=120,
                    env={"PYTHONPATH": str(args.compare.resolve())},
                )
            if args.without_kernel_warm:
                labs[" (no kernel warm-up)"] = start_lab(
                    Path(tmp) / "notebooks-cold",
                    Path(tmp) / "state-cold",
                    timeout=120,
                    env={"EXPLORER_NO_KERNEL_WARM": "1"},
                )
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=str(CHROMIUM), args=list(CHROMIUM_ARGS), headless=True
                )
                try:
                    for model in args.models:
                        for run in range(args.repeat):
                            _log(f"{model}: fresh kernel {run + 1} of {args.repeat}")
                            for suffix, lab in labs.items():
                                for settle in args.settle:
                                    timings += measure_lab(
                                        browser,
                                        lab,
                                        model,
                                        paths[model],
                                        args.again,
                                        args.timeout,
                                        label=f"{model}{suffix}{_settled(settle)}",
                                        settle=settle,
                                        pause=args.pause,
                                    )
                            for settle in args.settle if args.compare is not None else ():
                                timings += measure_lab(
                                    browser,
                                    labs_compare,
                                    model,
                                    paths[model],
                                    args.again,
                                    args.timeout,
                                    tree=args.compare,
                                    label=f"{model} ({args.compare_label}){_settled(settle)}",
                                    settle=settle,
                                    pause=args.pause,
                                )
                            if netron is not None:
                                timings.append(
                                    netron_open(browser, netron, model, paths[model], args.timeout)
                                )
                        if args.breakdown:
                            _log(f"{model}: breakdown in a fresh kernel")
                            breakdowns[model] = measure_breakdown(
                                browser, labs[""], model, paths[model], args.timeout
                            )
                finally:
                    browser.close()
        finally:
            for lab in [*labs.values(), *([labs_compare] if labs_compare is not None else [])]:
                stop_lab(lab)
    variants = [f"{suffix}{_settled(settle)}" for suffix in labs for settle in args.settle]
    if args.compare:
        variants += [f" ({args.compare_label}){_settled(settle)}" for settle in args.settle]
    for timing in [t for t in timings if t.what == "netron"]:  # the same Netron time for every variant
        timings += [dataclasses.replace(timing, model=timing.model + v) for v in variants if v]
    names = [m + v for m in args.models for v in variants]
    rows = summarize(timings, names)
    print_table(rows)
    for model, laps in breakdowns.items():
        print(f"\nbreakdown, {model}, fresh kernel:")
        for name, value in laps.items():
            print(f"  {name}: {value}")
    errors = [t for t in timings if t.error]
    for timing in errors:
        print(f"error: {timing.model} {timing.what}: {timing.error[:300]}", file=sys.stderr)
    if args.json:
        payload = {"rows": rows, "timings": [t.to_dict() for t in timings], "breakdown": breakdowns}
        args.json.write_text(json.dumps(payload, indent=2))
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())

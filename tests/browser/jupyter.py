"""Helpers for browser tests: run JupyterLab, write and open notebooks, drive plotly plots.

Everything here runs against a real ``jupyter lab`` server (see `start_lab`) and a Playwright
``Page`` on headless Chromium; the fixtures in ``conftest.py`` wire them together. Playwright is
only imported for type hints, so this module imports (and its doctests run) without it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

import nbformat

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page, Route

__all__ = [
    "ARTIFACTS",
    "CHROMIUM",
    "CHROMIUM_ARGS",
    "KERNEL_IDLE_TEXT",
    "LabServer",
    "RequestGuard",
    "cell_errors",
    "click_plot_point",
    "copy_log",
    "emit_plot_click",
    "export_html_page",
    "free_port",
    "stop_process_group",
    "kernel_execute",
    "open_notebook",
    "plot_point_position",
    "plotly_data",
    "run_all",
    "screenshot",
    "start_lab",
    "step_slider",
    "stop_lab",
    "wait_for_outputs",
    "wait_for_plot_edits",
    "wait_for_text",
    "wait_kernel_idle",
    "write_notebook",
]

ROOT = Path(__file__).resolve().parents[2]
#: Where screenshots and the server log go; ``tests/artifacts/`` is git-ignored and kept by CI.
ARTIFACTS = ROOT / "tests" / "artifacts" / "browser"
#: Debian's Chromium, installed by ``scripts/install_chromium.sh`` (never ``playwright install``).
CHROMIUM = Path("/usr/bin/chromium")
#: Launch flags: no sandbox (root), no GPU (scattergl still renders through SwiftShader), no
#: background traffic to Google services.
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
)
#: Status-bar text once the notebook's kernel is up. Running cells before this opens a
#: "Select Kernel" dialog and nothing runs (the execution indicator says idle too early).
KERNEL_IDLE_TEXT = "Python 3 (ipykernel) | Idle"
#: Lab settings overrides: no news toast, no update check (both would reach the internet).
SETTINGS_OVERRIDES = {
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
}
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
LOCAL_SCHEMES = frozenset({"data", "blob", "file", "about"})
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now.

    Examples
    --------
    >>> 1024 <= free_port() <= 65535
    True
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class LabServer:
    """A running ``jupyter lab`` on 127.0.0.1, with its token, notebook folder and log.

    Examples
    --------
    >>> lab = LabServer(port=8888, token="abc", root_dir=Path("/tmp/nb"), log_path=Path("/tmp/lab.log"))
    >>> lab.url("lab/tree/a b.ipynb")
    'http://127.0.0.1:8888/lab/tree/a%20b.ipynb?token=abc'
    """

    port: int
    token: str
    root_dir: Path
    log_path: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``, without a trailing slash."""
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str = "lab", **query: str) -> str:
        """Absolute URL of ``path`` (relative to the server root) with the token in the query."""
        params = "&".join(f"{quote(k)}={quote(v)}" for k, v in {**query, "token": self.token}.items())
        return f"{self.base_url}/{quote(path.lstrip('/'))}?{params}"

    def api(self, method: str, path: str, timeout: float = 10.0) -> Any:
        """Call the REST API (``path`` like ``api/sessions``); the decoded JSON, or None if empty."""
        request = urllib.request.Request(self.url(path), method=method)
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read()
        return json.loads(body) if body else None

    def log_tail(self, lines: int = 60) -> str:
        """The last ``lines`` lines of the server log (stdout and stderr together)."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "<no server log>"
        return "\n".join(text.splitlines()[-lines:])

    def shutdown_kernels(self) -> None:
        """Shut down every session and kernel, so kernels do not pile up between tests."""
        try:
            for session in self.api("GET", "api/sessions"):
                self.api("DELETE", f"api/sessions/{session['id']}")
            for kernel in self.api("GET", "api/kernels"):
                self.api("DELETE", f"api/kernels/{kernel['id']}")
        except (OSError, urllib.error.URLError):
            pass  # the server is going away anyway; stop_lab copes


def _lab_env(state_dir: Path) -> dict[str, str]:
    """Environment for the server: every per-user Jupyter/IPython folder under ``state_dir``.

    The venv's ``share/jupyter`` (kernelspec, prebuilt lab extensions) stays on the data path:
    Jupyter always lists ``sys.prefix``'s data folder, whatever ``JUPYTER_DATA_DIR`` says.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER_", "JPY_"))}
    dirs = {
        "HOME": state_dir / "home",
        "IPYTHONDIR": state_dir / "ipython",
        "JUPYTER_CONFIG_DIR": state_dir / "config",
        "JUPYTER_DATA_DIR": state_dir / "data",
        "JUPYTER_RUNTIME_DIR": state_dir / "runtime",
        "XDG_CACHE_HOME": state_dir / "cache",
    }
    for name, path in dirs.items():
        path.mkdir(parents=True, exist_ok=True)
        env[name] = str(path)
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", "")])
    env["JUPYTER_PLATFORM_DIRS"] = "1"
    return env


def start_lab(
    root_dir: Path, state_dir: Path, timeout: float = 90.0, env: Mapping[str, str] | None = None
) -> LabServer:
    """Start ``jupyter lab`` from this venv on a free port and wait until it answers.

    Parameters
    ----------
    root_dir
        The server's notebook folder: paths given to `open_notebook` are relative to it.
    state_dir
        Scratch folder for HOME, IPYTHONDIR, the JUPYTER_* folders, app settings and the log.
    timeout
        Seconds to wait for ``GET /api/status`` to answer.
    env
        Extra environment variables for the server and its kernels.

    Raises
    ------
    RuntimeError
        The server exited or did not answer in time; the message holds the log tail.

    Examples
    --------
    Needs a free port and a few seconds (the ``lab`` fixture does this once per session):

    >>> lab = start_lab(Path("/tmp/nb"), Path("/tmp/lab-state"))  # doctest: +SKIP
    >>> lab.api("GET", "api/status")["kernels"]  # doctest: +SKIP
    0
    """
    root_dir.mkdir(parents=True, exist_ok=True)
    settings_dir = state_dir / "app-settings"
    settings_dir.mkdir(parents=True, exist_ok=True)
    (settings_dir / "overrides.json").write_text(json.dumps(SETTINGS_OVERRIDES, indent=2))
    port, token = free_port(), uuid.uuid4().hex
    jupyter = Path(sys.executable).with_name("jupyter")
    command = [
        str(jupyter),
        "lab",
        "--no-browser",
        "--allow-root",
        f"--port={port}",
        "--ServerApp.port_retries=0",
        "--ServerApp.ip=127.0.0.1",
        f"--IdentityProvider.token={token}",
        "--ServerApp.disable_check_xsrf=True",
        f"--ServerApp.root_dir={root_dir}",
        "--ServerApp.terminals_enabled=False",
        "--LabApp.expose_app_in_browser=True",
        "--LabApp.extension_manager=readonly",
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        f"--LabApp.app_settings_dir={settings_dir}",
    ]
    log_path = state_dir / "jupyterlab.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command,
            cwd=root_dir,
            env={**_lab_env(state_dir), **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    lab = LabServer(port=port, token=token, root_dir=root_dir, log_path=log_path, process=process)
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with {process.returncode}:\n{lab.log_tail()}")
        try:
            lab.api("GET", "api/status", timeout=2.0)
            return lab
        except (OSError, urllib.error.URLError):
            pass
        if time.monotonic() > deadline:
            stop_lab(lab)
            raise RuntimeError(f"jupyter lab did not answer within {timeout:.0f} s:\n{lab.log_tail()}")
        time.sleep(0.25)


def stop_lab(lab: LabServer, timeout: float = 15.0) -> None:
    """Shut down kernels, then SIGTERM the server's process group (SIGKILL if it lingers).

    Examples
    --------
    >>> stop_lab(LabServer(port=1, token="t", root_dir=Path("."), log_path=Path("x.log")))  # no process
    """
    process = lab.process
    if process is None or process.poll() is not None:
        return
    lab.shutdown_kernels()
    stop_process_group(process, timeout)


def stop_process_group(process: subprocess.Popen[Any], timeout: float = 10.0) -> None:
    """SIGTERM a server started in its own process group, then SIGKILL if it lingers.

    Examples
    --------
    >>> done = subprocess.Popen(["true"], start_new_session=True)
    >>> _ = done.wait()
    >>> stop_process_group(done)  # gone already: nothing to do
    """
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=timeout)
            return
        except subprocess.TimeoutExpired:
            continue


def write_notebook(folder: Path, name: str, cells: list[str]) -> Path:
    """Write an nbformat-4 notebook of code ``cells`` with the ``python3`` kernelspec.

    Examples
    --------
    >>> import tempfile
    >>> path = write_notebook(Path(tempfile.mkdtemp()), "demo.ipynb", ["x = 1", "x + 1"])
    >>> nb = nbformat.read(path, as_version=4)
    >>> [c.source for c in nb.cells], nb.metadata.kernelspec.name
    (['x = 1', 'x + 1'], 'python3')
    """
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
    }
    nb.metadata["language_info"] = {"name": "python"}
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    nbformat.write(nb, path)
    return path


def open_notebook(page: Page, lab: LabServer, path: Path | str, timeout_ms: float = 90_000) -> None:
    """Open a notebook in Lab and wait until its kernel is idle (ready to run cells).

    ``path`` is absolute under ``lab.root_dir`` or relative to it. Each call uses a fresh
    workspace, so Lab does not reopen notebooks that earlier tests left open.

    Examples
    --------
    >>> path = write_notebook(lab.root_dir, "demo.ipynb", ["1 + 1"])  # doctest: +SKIP
    >>> open_notebook(page, lab, path)  # doctest: +SKIP
    """
    path = Path(path)
    relative = path.relative_to(lab.root_dir) if path.is_absolute() else path
    workspace = f"test-{uuid.uuid4().hex[:12]}"
    page.goto(
        lab.url(f"lab/workspaces/{workspace}/tree/{relative.as_posix()}"), wait_until="domcontentloaded"
    )
    page.wait_for_function("() => window.jupyterapp !== undefined", timeout=timeout_ms)
    page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(state="visible", timeout=timeout_ms)
    wait_kernel_idle(page, timeout_ms=timeout_ms)


def wait_kernel_idle(page: Page, timeout_ms: float = 90_000) -> None:
    """Wait until the status bar reads ``Python 3 (ipykernel) | Idle`` (see `KERNEL_IDLE_TEXT`).

    Examples
    --------
    >>> wait_kernel_idle(page)  # after a kernel restart, say  # doctest: +SKIP
    """
    page.wait_for_function(
        """(text) => {
            const bar = document.querySelector('#jp-main-statusbar');
            return bar !== null && bar.textContent.includes(text);
        }""",
        arg=KERNEL_IDLE_TEXT,
        timeout=timeout_ms,
    )


def run_all(page: Page, timeout_ms: float = 120_000) -> bool:
    """Run every cell of the current notebook and wait until the run finishes.

    Returns Lab's verdict: False if a cell raised (see `cell_errors` for the tracebacks).
    Call `open_notebook` first: it waits for the kernel, which this relies on.

    Examples
    --------
    >>> assert run_all(page), cell_errors(page)  # doctest: +SKIP
    """
    page.evaluate(
        """() => {
            window.__testRunAll = undefined;
            window.jupyterapp.commands.execute('notebook:run-all-cells').then(
                (ok) => { window.__testRunAll = { ok: ok !== false }; },
                (err) => { window.__testRunAll = { ok: false, error: String(err) }; },
            );
        }"""
    )
    handle = page.wait_for_function("() => window.__testRunAll", timeout=timeout_ms)
    return bool(handle.json_value()["ok"])


def kernel_execute(page: Page, code: str, timeout_ms: float = 30_000) -> str:
    """Run ``code`` in the open notebook's kernel, not as a cell, and return what it printed.

    An exception comes back as ``"Name: message"`` in the text. For checks of the kernel's state
    after an interaction (a cell run would wait behind the page's widget messages all the same).

    Examples
    --------
    >>> kernel_execute(page, "print(1 + 1)").strip()  # doctest: +SKIP
    '2'
    """
    return page.evaluate(
        """async ([code, timeoutMs]) => {
            const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
            const future = kernel.requestExecute({ code, store_history: false });
            let out = '';
            future.onIOPub = (msg) => {
                if (msg.header.msg_type === 'stream') out += msg.content.text;
                if (msg.header.msg_type === 'error') out += msg.content.ename + ': ' + msg.content.evalue;
            };
            const late = new Promise((_, reject) => {
                setTimeout(() => reject(new Error('timed out')), timeoutMs);
            });
            await Promise.race([future.done, late]);
            return out;
        }""",
        [code, timeout_ms],
    )


def cell_errors(page: Page) -> list[str]:
    """Errors raised by the open notebook's cells: ``"Name: value"`` plus the traceback each.

    Read from the notebook model (``error`` outputs only; stderr text is not an error), with
    ANSI colours stripped. Empty when no cell raised.

    Examples
    --------
    >>> cell_errors(page)[0].splitlines()[0]  # doctest: +SKIP
    'ZeroDivisionError: division by zero'
    """
    errors = page.evaluate(
        """() => {
            const panel = window.jupyterapp.shell.currentWidget;
            const cells = panel && panel.content && panel.content.model
                ? panel.content.model.toJSON().cells : [];
            return cells.flatMap((cell) => (cell.outputs || [])
                .filter((out) => out.output_type === 'error')
                .map((out) => [out.ename + ': ' + out.evalue, ...(out.traceback || [])].join('\\n')));
        }"""
    )
    return [_ANSI.sub("", text) for text in errors]


def wait_for_outputs(page: Page, selector: str, timeout_ms: float = 60_000, count: int = 1) -> Locator:
    """Wait until at least ``count`` elements match ``selector`` and the first is visible.

    Examples
    --------
    >>> wait_for_outputs(page, ".js-plotly-plot").count()  # doctest: +SKIP
    1
    """
    page.wait_for_function(
        "([sel, n]) => document.querySelectorAll(sel).length >= n",
        arg=[selector, count],
        timeout=timeout_ms,
    )
    locator = page.locator(selector)
    locator.first.wait_for(state="visible", timeout=timeout_ms)
    return locator


def wait_for_text(page: Page, selector: str, text: str, timeout_ms: float = 15_000) -> None:
    """Wait until the first element matching ``selector`` has exactly ``text`` as its text.

    Handy after an interaction whose effect goes through the kernel and back (a Python
    callback setting a Label's value, say).

    Examples
    --------
    >>> wait_for_text(page, ".graph-selected", "selected: /fc/MatMul")  # doctest: +SKIP
    """
    try:
        page.wait_for_function(
            """([sel, text]) => {
                const el = document.querySelector(sel);
                return el !== null && el.textContent.trim() === text;
            }""",
            arg=[selector, text],
            timeout=timeout_ms,
        )
    except Exception as error:
        now = page.evaluate(
            "(sel) => { const el = document.querySelector(sel); return el && el.textContent.trim(); }",
            selector,
        )
        raise AssertionError(f"{selector} reads {now!r}, not {text!r}, after {timeout_ms:.0f} ms") from error


def screenshot(page: Page, name: str, target: Locator | None = None) -> Path:
    """Save a PNG to ``tests/artifacts/browser/NAME.png`` and return its path.

    The viewport by default; with ``target``, just that element (scrolled into view), which
    also captures an output taller than the viewport.

    Examples
    --------
    >>> screenshot(page, "graph-view")  # doctest: +SKIP
    PosixPath('.../tests/artifacts/browser/graph-view.png')
    """
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    if target is None:
        page.screenshot(path=str(path))
    else:
        target.screenshot(path=str(path))
    return path


def step_slider(slider: Locator, steps: int) -> None:
    """Move an ipywidgets slider by ``steps`` (negative: left/down) with the keyboard.

    ``slider`` is the widget (``.widget-slider``) or anything containing its
    ``.noUi-handle``; each arrow key press is one ``step``, exactly as a user would do it, so
    Python observers see every intermediate value.

    Examples
    --------
    >>> step_slider(page.locator(".widget-slider").first, 2)  # doctest: +SKIP
    """
    handle = slider.locator(".noUi-handle").first
    handle.focus()
    key = "ArrowRight" if steps > 0 else "ArrowLeft"
    for _ in range(abs(steps)):
        handle.press(key)


_PLOT_JS = "document.querySelectorAll('.js-plotly-plot')"
_PLAIN_JS = """(value) => JSON.parse(JSON.stringify(value, (key, v) =>
    ArrayBuffer.isView(v) ? Array.from(v) : v))"""


def wait_for_plot_edits(page: Page, timeout_ms: float = 10_000) -> None:
    """Wait until no figure edit is held in the page (a graph figure applies the kernel's edits once
    the page has painted what came with them: ``widgets.figure_widget``'s ``paintFirst``).

    Examples
    --------
    >>> wait_for_plot_edits(page)  # doctest: +SKIP
    """
    page.wait_for_function("() => !(globalThis.__oge_held_edits > 0)", timeout=timeout_ms)


def plotly_data(page: Page, index: int = 0) -> list[dict[str, Any]]:
    """The traces (``gd.data``) of the ``index``-th plotly plot in the page, as plain JSON, once
    the page holds no figure edit back (`wait_for_plot_edits`).

    Typed arrays become lists; base64 ``{"dtype", "bdata"}`` arrays, if the figure was sent
    that way, are returned as sent.

    Examples
    --------
    >>> plotly_data(page)[0]["type"]  # doctest: +SKIP
    'scattergl'
    """
    wait_for_plot_edits(page)
    return page.evaluate(
        f"""(index) => {{
            const gd = {_PLOT_JS}[index];
            if (!gd) throw new Error('no plotly plot number ' + index);
            const plain = {_PLAIN_JS};
            return plain(gd.data || []);
        }}""",
        index,
    )


def plot_point_position(
    page: Page, plot_index: int, trace_index: int, point_index: int
) -> tuple[float, float]:
    """Viewport pixel position of one point of a cartesian trace (scatter or scattergl).

    The plot is scrolled into view first. The position comes from the trace's axes:
    ``axis._offset + axis.c2p(calcdata value)`` plus the plot's bounding rectangle.

    Examples
    --------
    >>> plot_point_position(page, 0, 0, 3)  # doctest: +SKIP
    (712.5, 523.0)
    """
    page.locator(".js-plotly-plot").nth(plot_index).scroll_into_view_if_needed()
    x, y = page.evaluate(
        f"""([plotIndex, traceIndex, pointIndex]) => {{
            const gd = {_PLOT_JS}[plotIndex];
            if (!gd) throw new Error('no plotly plot number ' + plotIndex);
            const trace = gd._fullData.find((t) => t.index === traceIndex);
            if (!trace) throw new Error('no trace number ' + traceIndex);
            const layout = gd._fullLayout;
            const xa = layout['xaxis' + (trace.xaxis || 'x').slice(1)];
            const ya = layout['yaxis' + (trace.yaxis || 'y').slice(1)];
            const xs = xa.makeCalcdata(trace, 'x');
            const ys = ya.makeCalcdata(trace, 'y');
            if (!(pointIndex < xs.length)) throw new Error('no point number ' + pointIndex);
            const rect = gd.getBoundingClientRect();
            return [rect.left + xa._offset + xa.c2p(xs[pointIndex]),
                    rect.top + ya._offset + ya.c2p(ys[pointIndex])];
        }}""",
        [plot_index, trace_index, point_index],
    )
    return float(x), float(y)


def click_plot_point(
    page: Page, plot_index: int, trace_index: int, point_index: int, timeout_ms: float = 10_000
) -> dict[str, Any]:
    """Click one point with the real mouse and return plotly's ``plotly_click`` point.

    Moves the mouse onto the point, waits until plotly's hover picked that very point (hover
    is what a click reports), then presses and releases. Works for scattergl in headless
    Chromium (SwiftShader WebGL). Raises ``AssertionError`` if plotly hovers another point or
    emits no click: points drawn on top of each other, a point hidden under a legend, or a
    ``hovermode`` that picks by x only. `emit_plot_click` is the fallback for those cases.

    Returns
    -------
    dict
        ``curveNumber``, ``pointNumber``, ``x`` and ``y`` of the clicked point, as plotly
        reported them in ``plotly_click`` (FigureWidget sends these to Python ``on_click``).

    Examples
    --------
    >>> click_plot_point(page, plot_index=0, trace_index=0, point_index=3)  # doctest: +SKIP
    {'curveNumber': 0, 'pointNumber': 3, 'x': 3, 'y': 3}
    """
    x, y = plot_point_position(page, plot_index, trace_index, point_index)
    # Forget the last hover and arm a one-shot listener; plotly counts a press within
    # doubleClickDelay (500 ms) of the previous one as a double click (zoom reset, no
    # plotly_click), so also say how long to wait before pressing.
    wait_ms = page.evaluate(
        f"""(plotIndex) => {{
            const gd = {_PLOT_JS}[plotIndex];
            gd._hoverdata = undefined;
            window.__testPlotClick = undefined;
            gd.once('plotly_click', (event) => {{
                window.__testPlotClick = event.points.map((p) => ({{
                    curveNumber: p.curveNumber, pointNumber: p.pointNumber, x: p.x, y: p.y }}));
            }});
            const delay = (gd._context && gd._context.doubleClickDelay) || 500;
            return Math.max(0, delay + 50 - (Date.now() - (gd._mouseDownTime || 0)));
        }}""",
        plot_index,
    )
    page.mouse.move(x - 3, y - 3)
    page.mouse.move(x, y, steps=3)
    hover_js = f"""(plotIndex) => {{
        const hover = {_PLOT_JS}[plotIndex]._hoverdata;
        return hover ? hover.map((p) => [p.curveNumber, p.pointNumber]) : [];
    }}"""
    try:
        page.wait_for_function(
            f"""([plotIndex, t, p]) => ({hover_js})(plotIndex).some(([c, n]) => c === t && n === p)""",
            arg=[plot_index, trace_index, point_index],
            timeout=min(timeout_ms, 5_000),
        )
    except Exception as error:
        hovered = page.evaluate(hover_js, plot_index)
        under = page.evaluate(
            "([x, y]) => { const el = document.elementFromPoint(x, y); "
            "return el ? el.tagName + '.' + (el.getAttribute('class') || '') : null; }",
            [x, y],
        )
        raise AssertionError(
            f"plotly hovers {hovered} at ({x:.0f}, {y:.0f}), not trace {trace_index} point "
            f"{point_index} (element there: {under}); overlapping points? use emit_plot_click"
        ) from error
    if wait_ms:
        page.wait_for_timeout(wait_ms)
    page.mouse.down()
    page.mouse.up()
    clicked = page.wait_for_function("() => window.__testPlotClick", timeout=timeout_ms).json_value()
    match = [p for p in clicked if (p["curveNumber"], p["pointNumber"]) == (trace_index, point_index)]
    assert match, f"plotly_click reported {clicked}, not trace {trace_index} point {point_index}"
    return match[0]


def emit_plot_click(page: Page, plot_index: int, trace_index: int, point_index: int) -> None:
    """Fire ``plotly_click`` for one point through plotly's event API, without the mouse.

    Same payload shape as a real click (``points[].curveNumber/pointNumber/x/y``), so a
    FigureWidget forwards it to its Python ``on_click`` callbacks. Use it when a mouse click
    cannot hit the point (overlapping points, a point off screen).

    Examples
    --------
    >>> emit_plot_click(page, plot_index=0, trace_index=0, point_index=3)  # doctest: +SKIP
    """
    page.evaluate(
        f"""([plotIndex, traceIndex, pointIndex]) => {{
            const gd = {_PLOT_JS}[plotIndex];
            if (!gd) throw new Error('no plotly plot number ' + plotIndex);
            const trace = gd._fullData.find((t) => t.index === traceIndex);
            if (!trace) throw new Error('no trace number ' + traceIndex);
            const at = (arr) => (arr && pointIndex < arr.length ? arr[pointIndex] : undefined);
            const point = {{
                curveNumber: traceIndex, pointNumber: pointIndex, pointIndex: pointIndex,
                x: at(trace.x), y: at(trace.y), data: gd.data[traceIndex], fullData: trace,
            }};
            gd.emit('plotly_click', {{ points: [point] }});
        }}""",
        [plot_index, trace_index, point_index],
    )


def export_html_page(page: Page, path: Path | str, timeout_ms: float = 30_000) -> None:
    """Open a local, self-contained HTML file (e.g. an exported report) as a ``file://`` page.

    The page fixture's request guard lets ``file://`` through and still blocks any request
    leaving the machine, so a report that needs a CDN shows up in the blocked list.

    Examples
    --------
    >>> export_html_page(page, tmp_path / "report.html")  # doctest: +SKIP
    """
    page.goto(Path(path).resolve().as_uri(), wait_until="load", timeout=timeout_ms)


class RequestGuard:
    """Playwright route handler: lets local requests through, aborts and records the rest.

    Local means ``127.0.0.1``/``localhost``/``::1`` or a ``data:``/``blob:``/``file:``/
    ``about:`` URL.

    Examples
    --------
    >>> guard = RequestGuard()
    >>> guard.is_local("http://127.0.0.1:8888/lab"), guard.is_local("https://cdn.plot.ly/x.js")
    (True, False)
    >>> guard.is_local("file:///tmp/report.html")
    True
    """

    def __init__(self) -> None:
        self.blocked: list[str] = []

    @staticmethod
    def is_local(url: str) -> bool:
        """Whether ``url`` stays on this machine."""
        parts = urlsplit(url)
        return parts.scheme in LOCAL_SCHEMES or (parts.hostname or "") in LOCAL_HOSTS

    def __call__(self, route: Route) -> None:
        """Continue a local request; abort any other and record its URL in `blocked`."""
        url = route.request.url
        if self.is_local(url):
            route.continue_()
        else:
            self.blocked.append(url)
            route.abort("blockedbyclient")


def copy_log(lab: LabServer) -> Path | None:
    """Copy the server log to ``tests/artifacts/browser/jupyterlab.log`` (for CI), if any.

    Examples
    --------
    >>> copy_log(LabServer(port=1, token="t", root_dir=Path("."), log_path=Path("/nonexistent.log")))
    """
    if not lab.log_path.exists():
        return None
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    target = ARTIFACTS / "jupyterlab.log"
    shutil.copyfile(lab.log_path, target)
    return target

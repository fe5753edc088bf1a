"""The Explorer app in a real browser: JupyterLab (the tour too), Notebook 7 and Voila.

In Lab: the tour runs top to bottom; the Explorer's tabs compute when clicked (a stepped
pass diff, the lowering, a benchmark plot, the graph coloured by partition); a node clicked
in the Graph tab is selected in Lowering as the Relax bindings lowered from it. In Notebook 7
and Voila the same Explorer renders and answers a click.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from explorer.views.figures import NODES
from tests.browser.jupyter import (
    ROOT,
    LabServer,
    _lab_env,
    cell_errors,
    click_plot_point,
    emit_plot_click,
    free_port,
    open_notebook,
    plotly_data,
    run_all,
    screenshot,
    wait_for_outputs,
    wait_kernel_idle,
    write_notebook,
)

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser

EXPLORER_PLOT = """(scope) => Array.from(document.querySelectorAll('.js-plotly-plot')).indexOf(
    document.querySelector(scope + ' .js-plotly-plot'))"""


def _open_tab(page: Page, name: str) -> None:
    page.locator(".oge-explorer .lm-TabBar-tab", has_text=name).first.click()


def _shot(page: Page, name: str, anchor: str = ".oge-explorer .lm-TabBar") -> None:
    """A viewport screenshot with ``anchor`` scrolled into view (what a user sees there)."""
    page.locator(anchor).first.scroll_into_view_if_needed()
    page.wait_for_timeout(800)
    screenshot(page, name)


def _graph_plot_index(page: Page, scope: str = ".oge-explorer-graph") -> int:
    page.wait_for_function(f"() => ({EXPLORER_PLOT})({scope!r}) >= 0", timeout=60_000)
    return int(page.evaluate(EXPLORER_PLOT, scope))


def _click_node(page: Page, node: str, scope: str = ".oge-explorer-graph", mouse: bool = True) -> None:
    """Click ``node`` in the graph under ``scope``: with the mouse, or by plotly's click event."""
    index = _graph_plot_index(page, scope)
    items = list(plotly_data(page, index)[NODES]["customdata"])
    if mouse:
        click_plot_point(page, plot_index=index, trace_index=NODES, point_index=items.index(node))
    else:
        emit_plot_click(page, index, NODES, items.index(node))


def test_the_tour_runs_top_to_bottom_in_lab(
    page: Page, lab: LabServer, notebook_dir: Path, blocked_requests: list[str]
) -> None:
    path = notebook_dir / "00_tour.ipynb"
    shutil.copy(ROOT / "notebooks" / "00_tour.ipynb", path)
    open_notebook(page, lab, path)
    assert run_all(page, timeout_ms=300_000), cell_errors(page)
    wait_for_outputs(page, ".oge-graph-view .js-plotly-plot")
    page.wait_for_timeout(1000)
    screenshot(page, "tour-in-lab")
    assert blocked_requests == []


def test_explorer_tabs_compute_when_opened_and_share_the_selection_in_lab(
    page: Page, lab: LabServer, notebook_dir: Path, blocked_requests: list[str]
) -> None:
    cells = [
        'from widgets import Explorer\napp = Explorer("zoo:resnet18", pipeline="fuse_bn_into_conv")\napp',
    ]
    path = write_notebook(notebook_dir, "explorer.ipynb", cells)
    open_notebook(page, lab, path)
    assert run_all(page, timeout_ms=180_000), cell_errors(page)
    wait_for_outputs(page, ".oge-explorer-graph .js-plotly-plot")
    _shot(page, "explorer-graph-resnet18", ".oge-explorer")

    # Passes: computed on the click, a stepped diff before and after
    _open_tab(page, "Passes")
    wait_for_outputs(page, ".oge-explorer-passes .oge-timeline-stepper .js-plotly-plot", 120_000, count=2)
    page.wait_for_selector(".oge-explorer-passes .oge-step-title >> text=fuse_bn_into_conv", timeout=60_000)
    assert "BatchNormalization" in page.locator(".oge-explorer-passes .oge-steps").inner_text()
    _shot(page, "explorer-passes-resnet18", ".oge-explorer-passes .oge-step-title")

    # Lowering: the model through TVM Relax, step by step
    _open_tab(page, "Lowering")
    page.wait_for_selector(".oge-explorer-lowering .oge-step-title", timeout=240_000)

    # a node clicked in the Graph tab: its Relax bindings in Lowering, its fate in Passes
    _open_tab(page, "Graph")
    page.wait_for_timeout(500)
    _click_node(page, "/conv1/Conv")
    page.wait_for_selector(".oge-explorer-selection >> text=Relax binding", timeout=60_000)
    selection = page.locator(".oge-explorer-selection").inner_text()
    assert "/conv1/Conv" in selection and "kept through all 1 step" in selection
    _open_tab(page, "Lowering")
    note = page.locator(".oge-explorer-lowering .oge-follow")
    note.wait_for(state="visible", timeout=30_000)
    assert "lowered from it" in note.inner_text() and "/conv1/Conv" in note.inner_text()
    lowering_plot = _graph_plot_index(page, ".oge-explorer-lowering .oge-timeline-stepper")
    after = plotly_data(page, lowering_plot + 1)[NODES]
    assert max(after["marker"]["line"]["width"]) == 2.5  # the bindings are ringed in the graph
    _shot(page, "explorer-lowering-selected-conv", ".oge-explorer-lowering .oge-follow")
    assert blocked_requests == []


def test_explorer_runtimes_and_targets_render_in_lab(
    page: Page, lab: LabServer, notebook_dir: Path, blocked_requests: list[str]
) -> None:
    cells = ['from widgets import Explorer\nExplorer("zoo:mlp")']
    path = write_notebook(notebook_dir, "explorer-mlp.ipynb", cells)
    open_notebook(page, lab, path)
    assert run_all(page, timeout_ms=180_000), cell_errors(page)
    wait_for_outputs(page, ".oge-explorer-graph .js-plotly-plot")
    _open_tab(page, "Runtimes")
    page.wait_for_selector(".oge-explorer-runtimes .oge-bench-status >> text=done", timeout=240_000)
    wait_for_outputs(page, ".oge-explorer-runtimes .oge-bench-results .js-plotly-plot")
    latency = plotly_data(page, _graph_plot_index(page, ".oge-explorer-runtimes .oge-bench-results"))
    assert {t["type"] for t in latency} & {"box", "violin"}
    _shot(page, "explorer-runtimes-mlp", ".oge-explorer-runtimes .oge-bench-results")

    _open_tab(page, "Targets")
    page.wait_for_selector(".oge-explorer-targets .oge-coverage-status >> text=done", timeout=240_000)
    scope = ".oge-explorer-targets .oge-graph-view"
    page.wait_for_function(
        f"""() => {{
            const gd = document.querySelectorAll('.js-plotly-plot')[({EXPLORER_PLOT})({scope!r})];
            return gd && gd.data && gd.data.some((t) => t.name === 'CPU');  // the fallback's colour
        }}""",
        timeout=60_000,
    )
    _click_node(page, "/fc1/Gemm", scope, mouse=False)
    page.wait_for_selector(".oge-explorer-selection >> text=qnn-htp", timeout=60_000)
    assert " ms" in page.locator(".oge-explorer-selection").inner_text()  # its time, from Runtimes
    _shot(page, "explorer-targets-mlp", ".oge-explorer-targets .oge-graph-view")
    assert blocked_requests == []


def test_explorer_renders_and_answers_a_click_in_notebook_7(
    page: Page, lab: LabServer, notebook_dir: Path, blocked_requests: list[str]
) -> None:
    cells = ['from widgets import Explorer\nExplorer("zoo:mlp")']
    path = write_notebook(notebook_dir, "explorer-nb7.ipynb", cells)
    relative = path.relative_to(lab.root_dir).as_posix()
    page.goto(lab.url(f"notebooks/{relative}"), wait_until="domcontentloaded")
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(state="visible", timeout=90_000)
    page.wait_for_function(
        "() => document.body.textContent.includes('Idle') || !!document.querySelector('.jp-KernelStatus')",
        timeout=90_000,
    )
    page.wait_for_timeout(2000)  # the kernel connects
    page.locator(".jp-Notebook .jp-Cell .jp-InputArea-editor").first.click()
    page.keyboard.press("Shift+Enter")
    wait_for_outputs(page, ".oge-explorer-graph .js-plotly-plot", timeout_ms=120_000)
    _click_node(page, "/fc2/Gemm")
    page.wait_for_selector('.oge-explorer-selection >> text="/fc2/Gemm"', timeout=60_000)
    page.wait_for_timeout(800)
    screenshot(page, "explorer-notebook7-mlp")
    assert blocked_requests == []


def _wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"voila exited with {process.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.25)
    raise RuntimeError(f"voila did not listen on {port} within {timeout:.0f} s")


@pytest.fixture
def voila(lab: LabServer, tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """``voila notebooks/explorer.ipynb`` on a free loopback port (its own state folders)."""
    port = free_port()
    log_path = tmp_path / "voila.log"
    voila_bin = Path(sys.executable).with_name("voila")
    command = [
        str(voila_bin),
        str(ROOT / "notebooks" / "explorer.ipynb"),
        "--no-browser",
        f"--port={port}",
        "--Voila.ip=127.0.0.1",
    ]
    env = _lab_env(tmp_path / "state")
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_for_port(port, process)
        yield port, log_path
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, 15)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=15)


def test_explorer_renders_through_voila_and_answers_a_click(
    page: Page, voila: tuple[int, Path], blocked_requests: list[str]
) -> None:
    port, log_path = voila
    page.goto(f"http://127.0.0.1:{port}/", wait_until="domcontentloaded", timeout=120_000)
    try:
        wait_for_outputs(page, ".oge-explorer-graph .js-plotly-plot", timeout_ms=180_000)
    except Exception as error:
        raise AssertionError(
            f"voila did not render the Explorer; log:\n{log_path.read_text()[-3000:]}"
        ) from error
    assert page.locator(".cm-editor, .CodeMirror").count() == 0  # a page of results, no code
    _click_node(page, "/conv1/Conv")
    page.wait_for_selector('.oge-explorer-selection >> text="/conv1/Conv"', timeout=60_000)
    _shot(page, "explorer-voila-resnet18", ".oge-explorer")
    # a tab opened by a click computes in the background; the selection lands in it
    _open_tab(page, "Lowering")
    page.wait_for_selector(".oge-explorer-lowering .oge-follow >> text=lowered from it", timeout=180_000)
    _shot(page, "explorer-voila-lowering-resnet18", ".oge-explorer-selection")
    assert [url for url in blocked_requests if "font" not in url.lower()] == []  # Voila asks a CDN for icons


def test_an_upload_over_tornados_10_mib_message_limit_opens(
    page: Page, lab: LabServer, notebook_dir: Path, blocked_requests: list[str], tmp_path: Path
) -> None:
    import onnx

    from explorer import zoo

    model_path = tmp_path / "my-resnet18.onnx"
    onnx.save(zoo.build("resnet18"), model_path)
    assert model_path.stat().st_size > 40 * 2**20  # far above tornado's default of 10 MiB a message
    cells = ["from widgets import Explorer\napp = Explorer(None)\napp"]
    path = write_notebook(notebook_dir, "explorer-upload.ipynb", cells)
    open_notebook(page, lab, path)
    assert run_all(page, timeout_ms=120_000), cell_errors(page)
    with page.expect_file_chooser() as chooser:  # as a user does: the button opens the file dialog
        page.locator(".oge-explorer .widget-upload").first.click()
    chooser.value.set_files(str(model_path))
    page.wait_for_selector('.oge-explorer-status >> text="my-resnet18.onnx"', timeout=120_000)
    wait_for_outputs(page, ".oge-explorer-graph .js-plotly-plot", timeout_ms=60_000)
    assert "69 nodes" in page.locator(".oge-explorer-status").inner_text()
    # the kernel is still there: it may be busy a moment longer with what the upload starts in the background
    wait_kernel_idle(page, timeout_ms=60_000)
    assert blocked_requests == []

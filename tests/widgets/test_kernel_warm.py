"""The kernel extension that warms the first GraphView: in real IPython kernels of this environment."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.manager import start_new_kernel

from widgets import kernel_warm

ROOT = Path(__file__).resolve().parents[2]

#: What a kernel reports, once its warm-up (if any) is over: did it warm, import the widgets,
#: send plotly's bundle, start the warm worker.
_STATE = textwrap.dedent(
    """
    import sys
    warm = sys.modules.get("widgets.kernel_warm")
    if warm is not None and warm._THREAD is not None:
        warm._THREAD.join(240)
    bundle, worker = sys.modules.get("widgets.plotly_bundle"), sys.modules.get("explorer.isolation.worker")
    print(repr({
        "warmed": warm is not None and warm._THREAD is not None and warm.failure is None,
        "graph_view": "widgets.graph_view" in sys.modules,
        "bundle": bundle is not None and bool(bundle._BUNDLES),
        "worker": worker is not None and bool(worker.pool._PRESTARTED),
        "steps": [step for step, _ in warm.steps] if warm is not None else [],
    }))
    """
)


@contextmanager
def _kernel(env: dict[str, str]) -> Iterator[Any]:
    manager, client = start_new_kernel(kernel_name="python3", env=env, cwd=str(ROOT))
    try:
        yield client
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def _run(client: Any, code: str) -> str:
    out: list[str] = []

    def hook(message: dict[str, Any]) -> None:
        if message["msg_type"] == "stream":
            out.append(message["content"]["text"])
        elif message["msg_type"] == "error":
            out.append("\n".join(message["content"]["traceback"]))

    client.execute_interactive(code, timeout=300, output_hook=hook)
    return "".join(out)


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JPY_", "EXPLORER_NO_"))}
    return {**env, **extra}


def test_the_environment_loads_the_extension_in_its_kernels() -> None:
    installed = Path(sys.prefix) / "etc" / "ipython" / "ipython_kernel_config.py"
    assert installed.read_text() == (ROOT / "scripts" / "ipython_kernel_config.py").read_text()


@pytest.mark.parametrize(
    ("extra", "warms"),
    [
        ({"JPY_SESSION_NAME": str(ROOT / "notebooks" / "00_tour.ipynb")}, True),
        ({}, False),  # nbclient, a console: left alone
        ({"JPY_SESSION_NAME": "x.ipynb", "EXPLORER_NO_KERNEL_WARM": "1"}, False),
    ],
)
def test_a_jupyterlab_documents_kernel_warms_the_first_graph_view(extra: dict[str, str], warms: bool) -> None:
    with _kernel(_clean_env(**extra)) as client:
        state = eval(_run(client, _STATE).strip().splitlines()[-1])
        steps = state.pop("steps")
        assert state == {"warmed": warms, "graph_view": warms, "bundle": warms, "worker": warms}
        # the bundle goes first: the page evaluates plotly.js while the kernel imports the rest
        # (the cell that asks stops the optional steps: "cell" comes in somewhere after "start")
        warm_steps = [step for step in steps if step != "cell"]
        assert warm_steps[:3] == (["start", "bundle", "imports"] if warms else [])
        # the cell works either way, and after a warm-up shares its worker and bundle
        shown = _run(
            client, 'from widgets import GraphView\nprint(GraphView("zoo:mlp").graph.summary().nodes)'
        )
        assert shown.strip().splitlines()[-1] == "6"


def test_import_widgets_alone_imports_and_starts_nothing() -> None:
    script = (
        "import sys, threading, widgets\n"
        "print('widgets.graph_view' in sys.modules, 'plotly' in sys.modules,"
        " 'explorer' in sys.modules, 'onnx' in sys.modules,"
        " [t.name for t in threading.enumerate() if t.name.startswith('explorer')])\n"
        "widgets.GraphView\n"
        "print('widgets.graph_view' in sys.modules, widgets.warm_up() != ())"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split("\n")[:2] == ["False False False False []", "True True"]


def test_warming_twice_starts_one_thread() -> None:
    thread = kernel_warm.start_warming()
    assert kernel_warm.start_warming() is thread
    thread.join(240)
    assert not thread.is_alive()

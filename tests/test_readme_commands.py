"""The README's commands: the main job (headless form) runs, and the test command is what CI calls."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_demo_headless_writes_the_report(tmp_path: Path) -> None:
    env = {**os.environ, "DEMO_OUT": str(tmp_path)}
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "demo.sh"), "--headless", "zoo:mlp"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = tmp_path / "report.html"
    assert report.stat().st_size > 1_000_000  # plotly.js is inline: no network needed
    assert "Gemm" in done.stdout  # the model summary


def test_readme_names_the_commands_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "bash scripts/test.sh" in readme and "bash scripts/demo.sh" in readme
    ci = (ROOT / ".ci" / "run").read_text()
    assert "scripts/test.sh" in ci

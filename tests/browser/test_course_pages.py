"""The rendered course (``scripts/build_course.sh``) shows its widgets and figures offline.

The script runs the tour in a fresh kernel and renders it; the page is then opened as a
``file://`` page in headless Chromium with every request off the machine blocked: each widget
output is drawn (no widget manager, no CDN), the graph views' figures have their boxes, and
nothing but MathJax (for markdown formulas, which read as TeX offline) is asked of the network.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.browser.jupyter import export_html_page, screenshot, wait_for_outputs

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]


def test_the_rendered_tour_draws_its_widgets_offline(
    page: Page, blocked_requests: list[str], tmp_path: Path
) -> None:
    out = tmp_path / "course"
    env = {**os.environ, "COURSE_OUT": str(out)}
    run = subprocess.run(
        ["bash", "scripts/build_course.sh", "00_tour"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    html = (out / "00_tour.html").read_text(encoding="utf-8")
    assert "application/vnd.jupyter.widget-view+json" not in html
    assert "html-manager" not in html and "require.min.js" not in html
    assert 'class="oge-static-figure"' in html

    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    export_html_page(page, out / "00_tour.html")
    wait_for_outputs(page, ".oge-static-figure .js-plotly-plot .main-svg")
    drawn = page.evaluate(
        """() => [...document.querySelectorAll('.oge-static-figure .js-plotly-plot')]
                 .map(plot => plot.querySelectorAll('.scatterlayer .trace path').length)"""
    )
    assert drawn and all(count > 0 for count in drawn), drawn
    figure = page.locator(".oge-static-figure").first
    figure.scroll_into_view_if_needed()
    screenshot(page, "course-tour-offline", target=figure)
    assert errors == []
    assert all("mathjax" in url.lower() for url in blocked_requests), blocked_requests

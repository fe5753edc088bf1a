"""Fixtures for browser tests: one JupyterLab server and one headless Chromium per session.

``lab``      session: a ``jupyter lab`` server (`tests.browser.jupyter.LabServer`).
``browser``  session: Playwright's Chromium (``/usr/bin/chromium``).
``page``     function: a fresh context and page, every non-local request blocked.
``blocked_requests`` function: the URLs the page's guard blocked (a list, filled as it goes).
``notebook_dir`` function: an empty folder under ``lab.root_dir`` for the test's notebooks.

Without Chromium or Playwright the browser tests skip, unless ``CI`` is set: then they fail,
so a broken install shows. On failure the page is saved as
``tests/artifacts/browser/FAILED-<test>.png``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.browser.jupyter import (
    CHROMIUM,
    CHROMIUM_ARGS,
    LabServer,
    RequestGuard,
    copy_log,
    screenshot,
    start_lab,
    stop_lab,
)

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

VIEWPORT = {"width": 1400, "height": 900}
DEFAULT_TIMEOUT_MS = 60_000


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.fixture(scope="session")
def browser_requirements() -> None:
    """Skip (or, with ``CI`` set, fail) when Chromium or the playwright package is missing."""
    missing = []
    if not CHROMIUM.exists():
        missing.append(f"{CHROMIUM} (run scripts/install_chromium.sh)")
    if importlib.util.find_spec("playwright") is None:
        missing.append("the playwright package (pip install -e '.[test]')")
    if missing:
        reason = "browser tests need " + " and ".join(missing)
        if _in_ci():
            pytest.fail(f"{reason}; CI is set, so this is an error, not a skip", pytrace=False)
        pytest.skip(reason)


@pytest.fixture(scope="session")
def lab(browser_requirements: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    """One JupyterLab server for the whole session, rooted in a temporary folder."""
    base = tmp_path_factory.mktemp("jupyterlab")
    try:
        server = start_lab(root_dir=base / "notebooks", state_dir=base / "state")
    except RuntimeError as error:
        pytest.fail(str(error), pytrace=False)
    try:
        yield server
    finally:
        stop_lab(server)
        copy_log(server)


@pytest.fixture(scope="session")
def browser(browser_requirements: None) -> Iterator[Browser]:
    """One headless Chromium for the whole session (Debian's, never a downloaded one)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=list(CHROMIUM_ARGS), headless=True
        )
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def blocked_requests() -> list[str]:
    """URLs that the page's request guard aborted because they leave the machine."""
    return []


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Iterator[Any]:
    """Remember each phase's report on the item, so `page` can screenshot failed tests."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture
def page(browser: Browser, blocked_requests: list[str], request: pytest.FixtureRequest) -> Iterator[Page]:
    """A fresh context and page (1400x900); every request off 127.0.0.1 is aborted and recorded."""
    context = browser.new_context(viewport=VIEWPORT, service_workers="block")
    context.set_default_timeout(DEFAULT_TIMEOUT_MS)
    guard = RequestGuard()
    guard.blocked = blocked_requests
    context.route("**/*", guard)
    new_page = context.new_page()
    try:
        yield new_page
    finally:
        report = getattr(request.node, "report_call", None)
        if report is not None and report.failed:
            name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
            # The page may be gone; the test's own error matters more.
            with contextlib.suppress(Exception):
                screenshot(new_page, f"FAILED-{name}")
        context.close()
        lab_server = request.node.funcargs.get("lab")
        if isinstance(lab_server, LabServer):
            lab_server.shutdown_kernels()


@pytest.fixture
def notebook_dir(lab: LabServer, request: pytest.FixtureRequest) -> Path:
    """An empty folder under the server's root for this test's notebooks."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    folder = lab.root_dir / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder

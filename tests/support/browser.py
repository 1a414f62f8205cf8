"""A real headless browser for the console's tests: Debian's Chromium (installed by the test
set-up, :mod:`metastore.dev.browser`), driven by Playwright through its executable, one per test
module. Screenshots go to ``.cache/console-screenshots/`` for docs/console.md."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from metastore.dev.browser import FLAGS, chromium

SCREENSHOTS = Path(__file__).resolve().parents[2] / ".cache" / "console-screenshots"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Chromium for one test module: Playwright's sync API keeps an event loop running in the
    thread while it is open, which would refuse a later test's ``asyncio.run``."""
    from playwright.sync_api import sync_playwright

    executable = chromium()
    if executable is None:
        pytest.fail("Chromium is not installed: python3 -m metastore.dev.browser (as root)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=list(FLAGS))
        try:
            yield launched
        finally:
            launched.close()


def screenshot(page: Any, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path

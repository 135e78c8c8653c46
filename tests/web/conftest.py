"""The page's fixtures: headless Chromium (Debian's package, driven by Playwright) for the session.

Without ``/usr/bin/chromium`` (or ``MEMORYD_CHROMIUM``) every browser test skips, saying how to install it.
"""

from __future__ import annotations

import pytest

from support.fixtures import pytest_runtest_makereport  # noqa: F401  (hook)
from support.web import CHROMIUM, CHROMIUM_ARGS


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium for the session (Debian's package, never a download)."""
    if not CHROMIUM.exists():
        pytest.skip(
            f"no Chromium at {CHROMIUM}: the page's browser tests need Debian's package "
            "(apt-get install -y chromium; .ci/run installs it), or MEMORYD_CHROMIUM=<path>"
        )
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is a test dependency: make setup"
    )
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()

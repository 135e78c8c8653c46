"""Fixtures for the ``sessions`` and ``memo`` tool tests: one real daemon (keyword-only) per module,
spoken to through the real shim with the official MCP SDK client (helpers in :mod:`sessions_e2e`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

from sessions_e2e import SHIM  # noqa: E402

from support.daemon import DaemonProcess, short_tmpdir  # noqa: E402


@pytest.fixture(scope="module")
def served():
    """One daemon on an empty board for the module (tests use their own session ids and memo texts)."""
    from support.briefs import wait_engine_ready

    if not SHIM.exists():
        pytest.skip("no .venv/bin/memoryd-shim (run make setup)")
    root = short_tmpdir()
    daemon = None
    try:
        daemon = DaemonProcess(root, env={"MEMORYD_TOOL_TIMEOUT_MS": "20000"})
        daemon.start()
        wait_engine_ready(daemon)
        yield daemon
    finally:
        if daemon is not None:
            daemon.kill()
        shutil.rmtree(root, ignore_errors=True)

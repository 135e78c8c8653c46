"""Fixtures for the ``sessions`` and ``memo`` tool tests: one keyword-only daemon per module, served
in-process (:mod:`support.inprocess_daemon`), spoken to with the official MCP SDK client (helpers in
:mod:`sessions_e2e`); ``served_process``: a real daemon, for what must cross the real shim and socket."""

from __future__ import annotations

import shutil

import pytest

from support.daemon import DaemonProcess, short_tmpdir
from support.inprocess_daemon import InprocessDaemon


@pytest.fixture(scope="module")
def served():
    """One in-process daemon on an empty board for the module (tests use their own session ids and memo
    texts)."""
    root = short_tmpdir()
    daemon = InprocessDaemon(root, env={"MEMORYD_TOOL_TIMEOUT_MS": "20000"})
    try:
        yield daemon.start()
    finally:
        daemon.kill()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def served_process():
    """One real keyword-only daemon for the module, spoken to through the real shim."""
    from sessions_e2e import SHIM

    from support.briefs import wait_engine_ready

    if not SHIM.exists():
        pytest.skip("no .venv/bin/memoryd-shim (run make setup)")
    root = short_tmpdir()
    daemon = DaemonProcess(root, env={"MEMORYD_TOOL_TIMEOUT_MS": "20000"})
    try:
        daemon.start()
        wait_engine_ready(daemon)
        yield daemon
    finally:
        daemon.kill()
        shutil.rmtree(root, ignore_errors=True)

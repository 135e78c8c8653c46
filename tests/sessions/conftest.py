"""Fixtures for the ``sessions`` and ``memo`` tool tests: one keyword-only daemon per module, served
in-process (:mod:`support.inprocess_daemon`), spoken to with the official MCP SDK client (helpers in
:mod:`sessions_e2e`); ``test_exchange.py`` runs real daemons and the real shim."""

from __future__ import annotations

import shutil

import pytest

from support.daemon import short_tmpdir
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

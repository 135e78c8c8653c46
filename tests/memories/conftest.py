"""Fixtures for the ``memories`` tool tests: one keyword-only daemon per module, served in-process
(:mod:`support.inprocess_daemon`: the daemon's engine, app and session code, no socket or shim), spoken to
in raw lines like the real shim (``--tools memories``); helpers live in :mod:`support.memories`. Restarts,
signals and the real shim are in the tests that start real daemons (``DaemonProcess``, ``MemShim``)."""

from __future__ import annotations

import shutil

import pytest

from support.daemon import short_tmpdir
from support.inprocess_daemon import InprocessDaemon, InprocessMemShim


@pytest.fixture(scope="module")
def served():
    """One keyword-only in-process daemon for a module (tests use unique content)."""
    root = short_tmpdir()
    daemon = InprocessDaemon(root)
    try:
        yield daemon.start()
    finally:
        daemon.kill()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def shim(served):
    s = InprocessMemShim(served).initialize()
    yield s
    s.close()

"""Fixtures for the ``memories`` tool tests: real daemons on temporary boards, spoken to through the real
shim (``memoryd-shim --tools memories``); helpers live in :mod:`support.memories`."""

from __future__ import annotations

import shutil
import sys

import pytest

from support.daemon import DaemonProcess, short_tmpdir  # noqa: E402


@pytest.fixture(scope="module")
def served(request):
    """One keyword-only daemon for a module (starting one costs seconds); tests use unique content."""
    from support.memories import wait_engine_ready

    root = short_tmpdir()
    daemon = DaemonProcess(root)
    try:
        daemon.start()
        wait_engine_ready(daemon)
        yield daemon
    finally:
        daemon.kill()
        failed = any(getattr(i, "rep_call", None) and i.rep_call.failed for i in request.session.items)
        if failed:
            print(f"\n--- daemon log ---\n{daemon.log()[-20000:]}", file=sys.stderr)
        shutil.rmtree(root, ignore_errors=True)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


@pytest.fixture
def shim(served):
    from support.memories import MemShim

    s = MemShim(served.socket, served.env).initialize()
    yield s
    s.close()

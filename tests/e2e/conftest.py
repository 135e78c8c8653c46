"""Fixtures for end-to-end tests: real daemon processes (see :mod:`support.daemon`), never left running."""

from __future__ import annotations

import shutil
import sys

import pytest

from support.briefs import wait_engine_ready
from support.daemon import DaemonProcess, short_tmpdir
from support.fixtures import make_daemon, pytest_runtest_makereport  # noqa: F401  (fixture and hook)


@pytest.fixture(scope="module")
def daemon(request):
    """One daemon shared by a module's protocol tests (starting one costs seconds); 3 s tool timeout, so
    its engine is loaded first (on a busy machine loading alone can take longer than that)."""
    root = short_tmpdir()
    proc = DaemonProcess(root, env={"MEMORYD_TOOL_TIMEOUT_MS": "3000"})
    try:
        proc.start()
        wait_engine_ready(proc, timeout=180)
        yield proc
    finally:
        proc.kill()
        if any(getattr(item, "rep_call", None) and item.rep_call.failed for item in request.session.items):
            print(f"\n--- shared daemon log ---\n{proc.log()[-20000:]}", file=sys.stderr)
        shutil.rmtree(root, ignore_errors=True)

"""Fixtures for end-to-end tests: real daemon processes (see :mod:`support.daemon`), never left running."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from support.daemon import DaemonProcess, short_tmpdir


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


@pytest.fixture
def make_daemon(request):
    """Factory: ``make_daemon(root, **kwargs)`` -> an unstarted :class:`DaemonProcess`; all are killed after
    the test, and their logs printed if it failed."""
    made: list[DaemonProcess] = []
    roots: list[Path] = []

    def factory(root: Path | None = None, **kwargs: Any) -> DaemonProcess:
        if root is None:
            root = short_tmpdir()
            roots.append(root)
        daemon = DaemonProcess(root, **kwargs)
        made.append(daemon)
        return daemon

    yield factory
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    for daemon in made:
        daemon.kill()
        if failed:
            print(f"\n--- daemon log {daemon.log_path} ---\n{daemon.log()}", file=sys.stderr)
    for root in roots:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def daemon(request):
    """One daemon shared by a module's protocol tests (starting one costs seconds); 3 s tool timeout."""
    root = short_tmpdir()
    proc = DaemonProcess(root, env={"MEMORYD_TOOL_TIMEOUT_MS": "3000"})
    try:
        proc.start()
        yield proc
    finally:
        proc.kill()
        if any(getattr(item, "rep_call", None) and item.rep_call.failed for item in request.session.items):
            print(f"\n--- shared daemon log ---\n{proc.log()[-20000:]}", file=sys.stderr)
        shutil.rmtree(root, ignore_errors=True)

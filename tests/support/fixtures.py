"""Fixtures that several test folders share; a folder's ``conftest.py`` imports the ones it uses."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from support.daemon import DaemonProcess, short_tmpdir


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report on the item, so fixtures can tell whether the test failed."""
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

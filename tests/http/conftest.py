"""The module-scoped HTTP daemon of tests/http (:mod:`support.httpd`); its log is printed when a test failed."""

from __future__ import annotations

import shutil
import sys

import pytest

from support.briefs import wait_engine_ready
from support.fixtures import make_daemon  # noqa: F401  (fixture)
from support.httpd import start_http_daemon


@pytest.fixture(scope="module")
def hd(request):
    daemon = start_http_daemon()
    try:
        wait_engine_ready(daemon.proc, timeout=180)
        yield daemon
    finally:
        daemon.proc.kill()
        if any(getattr(item, "rep_call", None) and item.rep_call.failed for item in request.session.items):
            print(f"\n--- http daemon log ---\n{daemon.proc.log()[-20000:]}", file=sys.stderr)
        shutil.rmtree(daemon.proc.root, ignore_errors=True)

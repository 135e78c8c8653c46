"""Fixtures for the capture tests: real daemon processes (see :mod:`support.daemon`), never left running."""

from __future__ import annotations

import shutil

import pytest

from support.briefs import wait_engine_ready
from support.daemon import short_tmpdir
from support.fixtures import make_daemon, pytest_runtest_makereport  # noqa: F401  (fixture and hook)
from support.hooks import install, make_repo


@pytest.fixture
def hooked(make_daemon):  # noqa: F811  (the fixture imported above)
    """``hooked(tokens=None)`` -> ``(daemon, home, {agent: {event: command}}, repo)``: a started daemon, the
    hooks ``memoryd connect`` writes for every agent installed into a temporary HOME that reaches it
    (``tokens``: the session-start digest's budget), and a git work tree to run them in."""
    roots = []

    def make(tokens: int | None = None):
        root = short_tmpdir()
        roots.append(root)
        daemon = make_daemon(root).start()
        wait_engine_ready(daemon)
        home = root / "agent-home"
        env = {"MEMORYD_HOME": daemon.env["MEMORYD_HOME"], "MEMORYD_SOCKET": str(daemon.socket)}
        return daemon, home, install(home, env, tokens=tokens), make_repo(root)

    yield make
    for root in roots:
        shutil.rmtree(root, ignore_errors=True)

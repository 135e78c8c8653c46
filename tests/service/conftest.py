"""Fixtures for the service tests: the recording stubs of ``launchctl``/``systemctl`` (see ``stubbin/``).

Neither launchd nor a systemd user manager runs in CI, so the ``memoryd service`` commands are run against
stub executables that only record their arguments (and keep a tiny loaded/enabled state so idempotency
and status can be checked). The real daemon is used wherever a daemon is involved.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
STUBBIN = HERE / "stubbin"


class Stubs:
    """The recording stubs on ``PATH``: :meth:`calls` returns each recorded argv (program name first)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.log = root / "calls.jsonl"
        self.state = root / "state"
        self.state.mkdir(parents=True)

    def calls(self, program: str | None = None) -> list[list[str]]:
        if not self.log.exists():
            return []
        rows = [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]
        return [r["argv"] for r in rows if program is None or r["argv"][0] == program]

    def clear(self) -> None:
        self.log.unlink(missing_ok=True)


@pytest.fixture
def stubs(tmp_path, monkeypatch, isolated_home):
    """A HOME under tmp_path, the stubs first on PATH, and the manager forced by the test (env var
    ``MEMORYD_SERVICE_MANAGER``, documented as for tests in :mod:`memoryd.cli.service.manager`)."""
    home = tmp_path / "userhome"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("PATH", f"{STUBBIN}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}")
    stubs = Stubs(tmp_path / "stub")
    monkeypatch.setenv("MEMORYD_STUB_LOG", str(stubs.log))
    monkeypatch.setenv("MEMORYD_STUB_STATE", str(stubs.state))
    return stubs

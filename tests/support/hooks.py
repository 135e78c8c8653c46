"""Capture-hook helpers: install the hooks ``memoryd connect`` writes into a temporary HOME, then run each
hook command exactly as its agent does (``sh -c <command>`` with the agent's JSON on stdin, a minimal
environment, the project folder as working directory)."""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from memoryd.cli.connect import capturehooks, manage
from memoryd.cli.connect.agents import known_agents, server_entry

AGENTS = ("claude-code", "codex", "gemini")


def make_repo(root: Path, name: str = "shopfront") -> Path:
    """A folder that is a git work tree (a ``.git`` folder with an ``origin`` remote named ``name``)."""
    repo = root / f"{name}-checkout"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/fix/login-redirect\n")
    (repo / ".git" / "config").write_text(f'[remote "origin"]\n\turl = git@example.com:team/{name}.git\n')
    return repo


def install(home: Path, daemon_env: dict[str, str], tokens: int | None = None) -> dict[str, dict[str, str]]:
    """``memoryd connect claude-code codex gemini`` into ``home``; ``{agent: {event: command}}``."""
    for folder in (".claude", ".codex", ".gemini"):
        (home / folder).mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in daemon_env.items() if k in ("MEMORYD_HOME", "MEMORYD_SOCKET")}
    server = server_entry(env=env)
    agents = {a.name: a for a in known_agents(home=home, env={"HOME": str(home)})}
    commands = {}
    for name in AGENTS:
        outcomes = manage.connect(agents[name], server, tokens=tokens)
        assert all(o.ok for o in outcomes), outcomes
        text = capturehooks.hooks_file(name, agents[name].folder).read_text()
        commands[name] = capturehooks.read(text)
    return commands


@dataclass
class HookRun:
    code: int
    stdout: str
    stderr: str
    seconds: float

    def json(self):
        return json.loads(self.stdout) if self.stdout.strip() else None


def run_hook(command: str, payload: dict | bytes, home: Path, cwd: Path) -> HookRun:
    """Run one installed hook command through a shell, as the agents do (``payload``: the JSON input, or
    the raw bytes of stdin)."""
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin"}
    started = time.monotonic()
    proc = subprocess.run(
        ["/bin/sh", "-c", command],
        input=payload if isinstance(payload, bytes) else json.dumps(payload).encode(),
        capture_output=True,
        env=env,
        cwd=cwd,
        timeout=30,
    )
    return HookRun(proc.returncode, proc.stdout.decode(), proc.stderr.decode(), time.monotonic() - started)


def board_bytes(board: Path) -> bytes:
    """Every byte of every file on the board, concatenated (for "never reaches the board" checks)."""
    return b"".join(p.read_bytes() for p in sorted(board.rglob("*")) if p.is_file())


def wait_for(predicate, timeout: float = 30.0, step: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError("condition not met in time")

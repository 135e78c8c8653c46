"""End to end: the entry ``memoryd connect`` writes is a command an agent can really run.

``connect`` writes Cursor's config in a temporary HOME; the test reads the entry back and spawns exactly
its command and args the way an agent does: a minimal environment (HOME, ``PATH=/usr/bin:/bin`` where no
virtualenv is on PATH, plus the entry's own ``env``), working directory ``/``. The official MCP SDK client
completes ``initialize``, ``tools/list`` and a ``search_briefs`` call through it, served by a real daemon.

Also: the Stop hook command ``connect`` installs runs (through a shell, as Claude Code runs it) and blocks.
And ``memoryd doctor`` with and without that daemon.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memoryd.cli.connect import manage
from memoryd.cli.connect.agents import SHIM_MAIN, claude_settings, known_agents, server_entry
from support.daemon import DaemonProcess, short_tmpdir

TASK = "t-20261129-c0ffee"
BRIEF = "b-20261129-5eed42"


def make_board(root: Path) -> Path:
    board = root / "board"
    (board / "tasks").mkdir(parents=True)
    (board / "briefs" / BRIEF).mkdir(parents=True)
    task = {"id": TASK, "title": "Checkout double charge", "project": "shopfront", "status": "open",
            "created_at": "2026-11-29T09:00:00Z"}  # fmt: skip
    brief = {"id": BRIEF, "task": TASK, "project": "shopfront", "created_at": "2026-11-29T09:01:00Z",
             "title": "Find why retries charge twice", "summary": "The idempotency key is lost on retry."}  # fmt: skip
    (board / "tasks" / f"{TASK}.json").write_text(json.dumps(task))
    (board / "briefs" / BRIEF / "brief.json").write_text(json.dumps(brief))
    (board / "briefs" / BRIEF / "said.txt").write_text("customers get charged twice when the payment retries")
    (board / "briefs" / BRIEF / "prompt.md").write_text("## Ask\nFind why the idempotency key is dropped.\n")
    return board


@pytest.fixture
def served(monkeypatch):
    """A daemon on the socket the shim computes from ``MEMORYD_HOME`` (short paths: sun_path limit)."""
    root = short_tmpdir()
    memoryd_home = root / "mh"
    monkeypatch.setenv("MEMORYD_HOME", str(memoryd_home))
    daemon = DaemonProcess(root, socket_path=memoryd_home / "state" / "memoryd.sock", board=make_board(root))
    try:
        daemon.start()
        yield daemon, root
    finally:
        daemon.kill()
        shutil.rmtree(root, ignore_errors=True)


def agent_env(home: Path, entry: dict) -> dict[str, str]:
    return {"HOME": str(home), "PATH": "/usr/bin:/bin", **entry.get("env", {})}


def test_the_written_entry_runs_under_an_agents_minimal_environment(served):
    daemon, root = served
    home = root / "h"
    (home / ".cursor").mkdir(parents=True)
    (home / ".cursor" / "mcp.json").write_text(
        '{\n  "mcpServers": {\n    "other": {"command": "npx"}\n  }\n}\n'
    )
    cursor = next(a for a in known_agents(home=home, env={"HOME": str(home)}) if a.name == "cursor")
    [outcome] = manage.connect(cursor, server_entry(tools="briefs"))
    assert outcome.state == manage.CONNECTED

    entry = json.loads(cursor.config.read_text())["mcpServers"]["memoryd"]
    assert os.path.isabs(entry["command"]) and entry["args"][:2] == ["-S", SHIM_MAIN]
    assert entry["env"]["MEMORYD_HOME"] == os.environ["MEMORYD_HOME"]
    assert not any(Path(p, "memoryd-shim").exists() for p in ("/usr/bin", "/bin")), (
        "PATH must not find memoryd"
    )

    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    server = StdioServerParameters(
        command=entry["command"], args=entry["args"], env=agent_env(home, entry), cwd="/"
    )

    async def main() -> None:
        async with Client(server) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"search_briefs", "save_outcome"} <= names
            result = await client.call_tool("search_briefs", {"query": "charged twice on retry", "limit": 3})
            assert result.is_error is False, result
            assert result.structured_content["results"][0]["brief_id"] == BRIEF

    asyncio.run(main())
    assert daemon.proc.poll() is None


def test_the_installed_stop_hook_command_runs_and_blocks(served, tmp_path):
    _daemon, root = served
    home = root / "h2"
    (home / ".claude").mkdir(parents=True)
    claude = next(a for a in known_agents(home=home, env={"HOME": str(home)}) if a.name == "claude-code")
    manage.connect(claude, server_entry(), capture=False)  # with capture, the capture Stop hook asks instead
    command = json.loads(claude_settings(home).read_text())["hooks"]["Stop"][0]["hooks"][0]["command"]
    transcript = tmp_path / "t.jsonl"
    line = {"type": "user", "timestamp": "2026-11-29T09:02:00.000Z",
            "message": {"role": "user", "content": f"memoryd brief {BRIEF}\n\n## Ask\nFind why the "
                        "idempotency key is dropped."}}  # fmt: skip
    transcript.write_text(json.dumps(line) + "\n")
    stdin = json.dumps({"session_id": "s", "transcript_path": str(transcript), "stop_hook_active": False})
    # the agent's own environment: memoryd's variables reach the hook only through the command line
    assert f"MEMORYD_HOME={os.environ['MEMORYD_HOME']}" in command
    env = {k: v for k, v in agent_env(home, {}).items() if not k.startswith("MEMORYD_")}
    result = subprocess.run(["/bin/sh", "-c", command], input=stdin, capture_output=True, text=True, env=env,
                            timeout=60, cwd="/")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["decision"] == "block"  # the board came from the running daemon


def user_env(home: Path) -> dict[str, str]:
    """A person's shell: this checkout's ``.venv/bin`` is not on PATH unless they put it there."""
    venv_bin = str(Path(sys.executable).parent)
    path = os.pathsep.join(
        p for p in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep) if p != venv_bin
    )
    return {**os.environ, "HOME": str(home), "PATH": path}


def doctor(home: Path, *agents: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memoryd", "doctor", "--json", *agents], capture_output=True,
                          text=True, env=user_env(home), timeout=120, cwd="/")  # fmt: skip


def checks_of(result: subprocess.CompletedProcess) -> dict[str, dict]:
    return {c["name"]: c for c in json.loads(result.stdout)["checks"]}


def run_fix(home: Path, check: dict) -> None:
    """Run a printed fix exactly as a person pastes it into their shell; it must succeed."""
    assert check["command"] and check["fix"].startswith(check["command"]), check
    done = subprocess.run(["/bin/sh", "-c", check["command"]], capture_output=True, text=True,
                          env=user_env(home), timeout=120, cwd="/")  # fmt: skip
    assert done.returncode == 0, (check, done.stdout, done.stderr)


def test_doctor_names_each_problem_with_a_fix_that_works(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMORYD_HOME", str(tmp_path / "mh"))
    home = tmp_path / "h"
    (home / ".cursor").mkdir(parents=True)
    (home / ".cursor" / "mcp.json").write_text('{"mcpServers": {"memoryd": {"command": "/gone/bin/python"}}}')
    (home / ".claude").mkdir()
    (home / ".claude.json").write_text(
        json.dumps({"mcpServers": {"memoryd": server_entry()}})
    )  # no Stop hook
    result = doctor(home)
    assert result.returncode == 1, result.stdout + result.stderr
    checks = checks_of(result)
    # no service is installed: a daemon that is not running yet is how it should be, not a failure
    assert checks["daemon"]["state"] == "info" and checks["daemon"]["fix"] is None
    assert "service start" not in result.stdout
    assert checks["agent cursor"]["state"] == "problem" and "entry stale" in checks["agent cursor"]["detail"]
    assert (
        checks["agent claude-code"]["state"] == "problem"
        and "Stop hook missing" in checks["agent claude-code"]["detail"]
    )
    problems = [c for c in checks.values() if c["state"] == "problem"]
    assert {c["name"] for c in problems} == {"agent cursor", "agent claude-code"}
    for check in problems:
        run_fix(home, check)
    assert doctor(home).returncode == 0
    assert {checks_of(doctor(home))[n]["state"] for n in ("agent cursor", "agent claude-code")} == {"ok"}


def test_doctor_after_a_deliberate_disconnect_reports_no_failure(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMORYD_HOME", str(tmp_path / "mh"))
    home = tmp_path / "h"
    (home / ".cursor").mkdir(parents=True)
    for command in ("connect", "disconnect"):
        subprocess.run([sys.executable, "-m", "memoryd", command], env=user_env(home), check=True, timeout=120,
                       capture_output=True, cwd="/")  # fmt: skip
    result = doctor(home)
    assert result.returncode == 0, result.stdout
    assert checks_of(result)["agent cursor"]["state"] == "info"
    text = subprocess.run([sys.executable, "-m", "memoryd", "doctor"], env=user_env(home), capture_output=True,
                          text=True, timeout=120, cwd="/")  # fmt: skip
    assert text.returncode == 0 and "FAIL" not in text.stdout, text.stdout
    # asking for the agent makes "not connected" a problem, with a fix that connects it
    asked = doctor(home, "cursor")
    assert asked.returncode == 1 and checks_of(asked)["agent cursor"]["state"] == "problem"
    run_fix(home, checks_of(asked)["agent cursor"])
    assert doctor(home, "cursor").returncode == 0


def test_doctor_fixes_for_a_running_daemon_work_without_a_service(monkeypatch):
    """With a daemon a shim (or a person) started and no service installed, a restart is ``memoryd stop``
    (the next agent call starts it again), never ``memoryd service restart``; a socket folder others can enter gets a chmod that works."""
    root = short_tmpdir()
    memoryd_home = root / "mh"
    monkeypatch.setenv("MEMORYD_HOME", str(memoryd_home))
    daemon = DaemonProcess(root, socket_path=memoryd_home / "state" / "memoryd.sock", board=make_board(root),
                           model=str(root / "no-such-model"))  # fmt: skip
    home = root / "h"
    home.mkdir()
    try:
        daemon.start()
        from support.briefs import wait_engine_ready

        wait_engine_ready(daemon)
        os.chmod(daemon.socket.parent, 0o755)
        checks = checks_of(doctor(home))
        model = checks["model"]
        assert model["state"] == "problem" and "service" not in model["fix"], model
        assert model["command"].endswith("memoryd stop") and "kill" not in model["fix"], model
        assert checks["socket"]["state"] == "problem", checks["socket"]
        run_fix(home, checks["socket"])
        assert checks_of(doctor(home))["socket"]["state"] == "ok"
        run_fix(home, model)
        assert daemon.wait_exit(30) == 0  # a clean stop: the next agent call starts it again
    finally:
        daemon.kill()
        shutil.rmtree(root, ignore_errors=True)


def test_doctor_with_a_running_daemon_and_a_connected_agent(served):
    daemon, root = served
    from support.briefs import wait_engine_ready

    wait_engine_ready(daemon)
    home = root / "h3"
    (home / ".cursor").mkdir(parents=True)
    cursor = next(a for a in known_agents(home=home, env={"HOME": str(home)}) if a.name == "cursor")
    manage.connect(cursor, server_entry())
    report = json.loads(doctor(home).stdout)
    checks = {c["name"]: c for c in report["checks"]}
    for name in ("daemon", "socket", "versions", "index", "agent cursor"):
        assert checks[name]["state"] == "ok", checks[name]
    assert checks["model"]["state"] == "info"  # --model none: keyword-only, said, not a problem
    assert "in step with 1 brief" in checks["index"]["detail"]


def test_doctor_names_a_board_file_the_daemon_could_not_load(monkeypatch):
    """A memory file with broken front matter is left out of every search: doctor says which file and why,
    not "no problems"; once the file is fixed the check goes away."""
    import hashlib

    from support.briefs import wait_engine_ready

    root = short_tmpdir()
    memoryd_home = root / "mh"
    monkeypatch.setenv("MEMORYD_HOME", str(memoryd_home))
    board = make_board(root)
    text = "Deploys go out blue-green behind the load balancer"
    name = f"{hashlib.sha256(text.encode()).hexdigest()}.md"
    (board / "memories").mkdir()
    (board / "memories" / name).write_text(f"---\ntags: [unclosed\nimportance: 3\n---\n{text}\n")
    daemon = DaemonProcess(root, socket_path=memoryd_home / "state" / "memoryd.sock", board=board)
    home = root / "h"
    home.mkdir()
    try:
        daemon.start()
        wait_engine_ready(daemon)
        result = doctor(home)
        check = checks_of(result)["board files"]
        assert check["state"] == "problem", check
        assert f"memories/{name}" in check["detail"] and "YAML" in check["detail"], check
        status = json.loads(
            subprocess.run(
                [sys.executable, "-m", "memoryd", "status", "--json"],
                env=user_env(home),
                capture_output=True,
                text=True,
                timeout=60,
            ).stdout  # fmt: skip
        )
        assert status["skipped_files"] == 1 and status["skipped"][0]["path"] == f"memories/{name}", status
        (board / "memories" / name).write_text(f"---\ntags: [deploy]\nimportance: 3\n---\n{text}\n")
        deadline = time.monotonic() + 30
        while "board files" in checks_of(doctor(home)) and time.monotonic() < deadline:
            time.sleep(0.3)
        assert "board files" not in checks_of(doctor(home))
    finally:
        daemon.kill()
        shutil.rmtree(root, ignore_errors=True)


def test_a_plain_connect_gives_agents_the_briefs_and_the_memories(served):
    """``memoryd connect`` as a person runs it: the entry names ``--tools briefs,memories``, and the shim it
    starts serves both groups (18 tools), so an agent can store a memory as the README promises."""
    daemon, root = served
    home = root / "h"
    (home / ".cursor").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CONFIG_HOME", "CODEX_HOME")} | {
        "HOME": str(home)
    }
    done = subprocess.run([sys.executable, "-m", "memoryd", "connect", "cursor", "--no-capture"],
                          capture_output=True, text=True, env=env, timeout=120, cwd="/")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    entry = json.loads((home / ".cursor" / "mcp.json").read_text())["mcpServers"]["memoryd"]
    assert entry["args"] == ["-S", SHIM_MAIN, "--tools", "briefs,memories"], entry
    helped = subprocess.run([sys.executable, "-m", "memoryd", "connect", "--help"], capture_output=True,
                            text=True, env=env, timeout=120, cwd="/")  # fmt: skip
    assert "default: briefs,memories" in " ".join(helped.stdout.split()), helped.stdout

    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    server = StdioServerParameters(
        command=entry["command"], args=entry["args"], env=agent_env(home, entry), cwd="/"
    )

    async def main() -> None:
        async with Client(server) as client:
            names = {t.name for t in (await client.list_tools()).tools if not t.name.startswith("diag_")}
            assert len(names) == 18 and {"search_briefs", "store_memory", "memory_stats"} <= names, names
            stored = await client.call_tool(
                "store_memory", {"content": "Retries reuse the idempotency key.", "tags": ["payments"]}
            )
            assert stored.is_error is False and stored.structured_content["ok"] is True, stored

    asyncio.run(main())

    again = subprocess.run([sys.executable, "-m", "memoryd", "connect", "cursor", "--no-capture"],
                           capture_output=True, text=True, env=env, timeout=120, cwd="/")  # fmt: skip
    assert "already connected" in again.stdout and "keeps --tools" not in again.stdout, again.stdout

"""The MCP clients agents really run, against a real daemon, after the real ``memoryd connect``.

* the official TypeScript SDK (``Client`` + ``StdioClientTransport``, what Claude Code, Gemini CLI and the
  MCP Inspector are built on) spawns exactly the command ``connect`` wrote and calls every tool of every
  group with valid arguments, invalid ones and ids that do not exist, at the protocol version it asks
  for (its latest) and at an older one: every answer must pass the SDK's own checks (its outputSchema
  validation included) and every error's text must reach the caller (``ts_sdk_calls.mjs``);
* ``claude mcp list`` / ``claude mcp get memoryd`` and ``gemini mcp list`` report memoryd connected;
* ``codex mcp list`` / ``codex mcp get memoryd --json`` (Codex is built on Rust's rmcp) read the entry.

Versions are pinned by ``package-lock.json`` (``npm ci``, see ``conftest.py``); each CLI call is bounded.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from support.board import BRIEF, TASK
from support.daemon import PYTHON
from support.npm import npm_ci, registry_unreachable

HERE = Path(__file__).resolve().parent
pytestmark = pytest.mark.timeout(1200)  # the first test may run npm ci
CLI_TIMEOUT_S = 120
#: What the pinned TypeScript SDK speaks: its latest version, and one before argument errors became
#: tool execution errors (it forces the older one by rewriting its own initialize request).
VERSIONS = ["2025-11-25", "2025-06-18"]
ALL_TOOLS = 30


def run_cli(world, node: Path, node_modules: Path, name: str, *args: str, cwd: Path | None = None):
    done = subprocess.run(
        [str(node_modules / ".bin" / name), *args], env=world.cli_env(node), cwd=str(cwd or world.project),
        capture_output=True, text=True, timeout=CLI_TIMEOUT_S, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, (
        f"{name} {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    )
    return done.stdout if name != "gemini" else done.stdout + done.stderr  # gemini writes its list to stderr


def daemon_problems(world) -> list[str]:
    return [
        line
        for line in world.daemon.log().splitlines()
        if '"level": "error"' in line or '"level": "critical"' in line or "Traceback" in line
    ]


def test_typescript_sdk_client_calls_every_tool_and_reads_every_error(world, node, node_modules, tmp_path):
    entry = world.entries["claude-code"]
    spec = {
        "server": {
            "command": entry["command"],
            "args": entry["args"],
            "env": {"HOME": str(world.home), "PATH": "/usr/bin:/bin", **entry.get("env", {})},
            "cwd": str(world.project),
        },
        "board": {"task_id": TASK, "brief_id": BRIEF},
        "versions": VERSIONS,
    }
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec))
    done = subprocess.run(
        [str(node), str(HERE / "ts_sdk_calls.mjs"), str(spec_path)], cwd=HERE, env=world.cli_env(node),
        capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {}
    assert "versions" in report, done.stdout[-3000:] + done.stderr[-3000:]
    assert (
        report["sdk"]
        == json.loads((HERE / "package.json").read_text())["dependencies"]["@modelcontextprotocol/sdk"]
    )
    for version in VERSIONS:
        run = report["versions"][version]
        assert run["failures"] == [], json.dumps(run["failures"], indent=1)
        assert run["negotiated"] == version
        assert len(run["tools"]) == ALL_TOOLS, run["tools"]
        assert run["calls"] > 2 * ALL_TOOLS
    assert daemon_problems(world) == []


def test_claude_code_reports_memoryd_connected(world, node, node_modules):
    listed = run_cli(world, node, node_modules, "claude", "mcp", "list")
    [line] = [line for line in listed.splitlines() if line.startswith("memoryd:")]
    assert "Connected" in line and world.entries["claude-code"]["command"] in line, listed
    got = run_cli(world, node, node_modules, "claude", "mcp", "get", "memoryd")
    assert "Connected" in got and "Failed" not in got, got
    assert f"Command: {world.entries['claude-code']['command']}" in got, got


def test_gemini_cli_reports_memoryd_connected_in_a_trusted_folder(world, node, node_modules):
    listed = run_cli(world, node, node_modules, "gemini", "mcp", "list")
    lines = [line for line in listed.splitlines() if "memoryd:" in line]
    assert len(lines) == 1 and lines[0].rstrip().endswith("Connected"), listed


def test_doctor_says_where_gemini_cli_runs_memoryd(world, node, node_modules):
    """Gemini CLI disables every MCP server in a folder it does not trust; memoryd doctor says so there (a
    warning) and not in the trusted project, and reads the pinned Gemini CLI's version."""
    elsewhere = world.root / "untrusted"
    elsewhere.mkdir(exist_ok=True)
    listed = run_cli(world, node, node_modules, "gemini", "mcp", "list", cwd=elsewhere)
    lines = [line for line in listed.splitlines() if "memoryd:" in line]
    assert len(lines) == 1 and lines[0].rstrip().endswith("Disabled"), listed
    env = {**world.cli_env(node), "PATH": f"{node_modules / '.bin'}:{node.parent}:/usr/bin:/bin",
           "MEMORYD_HOME": str(world.root / "mh"), "MEMORYD_SOCKET": str(world.socket)}  # fmt: skip
    verdicts = {}
    for folder in (elsewhere, world.project):
        done = subprocess.run([PYTHON, "-m", "memoryd", "doctor", "--json"], env=env, cwd=folder,
                              capture_output=True, text=True, timeout=CLI_TIMEOUT_S)  # fmt: skip
        verdicts[folder] = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    trust = verdicts[elsewhere]["gemini folder trust"]
    assert trust["state"] == "warn" and "MCP server disabled" in trust["detail"], trust
    assert verdicts[world.project]["gemini folder trust"]["state"] == "ok"
    enabled = verdicts[world.project]["capture gemini enabled"]
    assert enabled["state"] == "ok" and "Gemini CLI 0.61.0" in enabled["detail"], enabled


def test_codex_reads_the_entry(world, node, node_modules):
    entry = world.entries["codex"]
    listed = run_cli(world, node, node_modules, "codex", "mcp", "list")
    [row] = [line.split() for line in listed.splitlines() if line.startswith("memoryd ")]
    assert row[1] == entry["command"] and "enabled" in row, listed
    got = json.loads(run_cli(world, node, node_modules, "codex", "mcp", "get", "memoryd", "--json"))
    assert got["name"] == "memoryd" and got["enabled"] is True, got
    transport = got["transport"]
    assert transport["type"] == "stdio" and transport["command"] == entry["command"], got
    assert transport["args"] == entry["args"] and transport["env"] == entry["env"], got


def test_only_an_unreachable_registry_counts_as_unreachable(tmp_path):
    """The install skips (off CI) only for a registry it cannot reach; any other npm failure fails."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "npm_config_cache": str(tmp_path / "cache"),
           "npm_config_registry": "http://127.0.0.1:9/", "npm_config_fetch_retries": "0"}  # fmt: skip
    offline = tmp_path / "offline"  # the pinned packages from a registry nobody listens for
    offline.mkdir()
    for name in ("package.json", "package-lock.json"):
        (offline / name).write_bytes((HERE / name).read_bytes())
    done = npm_ci(offline, env)
    assert done.returncode != 0 and registry_unreachable(done.stdout + done.stderr), done.stderr[-2000:]
    broken = tmp_path / "broken"  # no lock file: npm's usage error, not the network
    broken.mkdir()
    (broken / "package.json").write_text(json.dumps({"name": "x", "version": "0.0.0"}))
    done = npm_ci(broken, env)
    assert done.returncode != 0 and not registry_unreachable(done.stdout + done.stderr), done.stderr[-2000:]

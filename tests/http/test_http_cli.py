"""``memoryd connect --http`` writes each agent's HTTP entry (URL + bearer header) and disconnect restores
the file byte for byte; ``memoryd service install --http --print`` sets MEMORYD_HTTP_PORT."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tomllib

from support.daemon import PYTHON, free_port, short_tmpdir


def memoryd(home, *args: str, **more: str) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "MEMORYD_HOME": str(home / "md"), **more}
    return subprocess.run(
        [PYTHON, "-m", "memoryd", *args], capture_output=True, text=True, env=env, timeout=120, cwd="/"
    )


def test_connect_http_writes_each_agent_s_http_entry_and_disconnect_restores_the_bytes(tmp_path):
    home = tmp_path
    for folder in (".claude", ".codex", ".gemini", ".cursor", ".config/Code/User"):
        (home / folder).mkdir(parents=True)
    claude, codex = home / ".claude.json", home / ".codex" / "config.toml"
    claude.write_text('{\n  "theme": "dark"\n}\n')
    codex.write_text('model = "o3"\n')
    for path in (claude, codex):
        path.chmod(0o644)
    before = {p: p.read_bytes() for p in (claude, codex)}
    # systemd forced: where PID 1 is not systemd the advice is `memoryd serve --http` (tests/service)
    done = memoryd(home, "connect", "--http", "--tools", "briefs,memo", "--no-capture",
                   "claude-code", "codex", "gemini", "cursor", "vscode",
                   MEMORYD_SERVICE_MANAGER="systemd")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no daemon serves HTTP now" in done.stderr and "readable by others" in done.stdout
    assert "HTTP entries need a daemon that serves HTTP all the time" in done.stderr
    assert "service install --http 7077`" in done.stderr
    token = (home / "md" / "state" / "http.token").read_text().strip()
    url = "http://127.0.0.1:7077/mcp?tools=briefs,memo"
    bearer = {"Authorization": f"Bearer {token}"}
    assert json.loads(claude.read_text())["mcpServers"]["memoryd"] == {
        "type": "http",
        "url": url,
        "headers": bearer,
    }
    assert tomllib.loads(codex.read_text())["mcp_servers"]["memoryd"] == {"url": url, "http_headers": bearer}
    gemini = json.loads((home / ".gemini" / "settings.json").read_text())["mcpServers"]["memoryd"]
    assert gemini == {"httpUrl": url, "headers": bearer}
    cursor = json.loads((home / ".cursor" / "mcp.json").read_text())["mcpServers"]["memoryd"]
    assert cursor == {"url": url, "headers": bearer}
    vscode = json.loads((home / ".config/Code/User/mcp.json").read_text())["servers"]["memoryd"]
    assert vscode == {"type": "http", "url": url, "headers": bearer}
    status = memoryd(home, "connect", "--status")
    assert "connected - over HTTP, http://127.0.0.1:7077/mcp" in status.stdout, status.stdout
    done = memoryd(home, "disconnect", "claude-code", "codex")
    assert done.returncode == 0, done.stdout + done.stderr
    assert {p: p.read_bytes() for p in (claude, codex)} == before


def test_service_install_http_sets_the_port_in_the_definitions(tmp_path):
    forced = {"MEMORYD_SERVICE_MANAGER": "systemd"}  # --print renders the units even where none runs
    done = memoryd(tmp_path, "service", "install", "--print", "--http", "7123", **forced)
    assert done.returncode == 0, done.stderr
    assert "MEMORYD_HTTP_PORT=7123" in done.stdout
    plain = memoryd(tmp_path, "service", "install", "--print", **forced)
    assert "MEMORYD_HTTP_PORT" not in plain.stdout


def _http_check(home, socket) -> dict:
    done = memoryd(home, "doctor", "--json", MEMORYD_SOCKET=str(socket))
    (check,) = [c for c in json.loads(done.stdout)["checks"] if c["name"] == "http claude-code"]
    return check


def test_doctor_finds_http_entries_no_daemon_serves(tmp_path, request, make_daemon):
    """An HTTP entry works only while a daemon serves HTTP on its port: doctor says so, with the fix."""
    root = short_tmpdir()
    request.addfinalizer(lambda: shutil.rmtree(root, ignore_errors=True))  # after make_daemon's kills
    socket = root / "s.sock"
    (tmp_path / ".claude").mkdir()
    done = memoryd(tmp_path, "connect", "--http", "--no-capture", "claude-code", MEMORYD_SOCKET=str(socket))
    assert done.returncode == 0, done.stdout + done.stderr

    check = _http_check(tmp_path, socket)  # nothing runs
    assert check["state"] == "problem" and "no daemon runs" in check["detail"], check
    assert "--http 7077" in check["fix"]

    plain = make_daemon(root, socket_path=socket).start()  # what a shim starts: no HTTP
    check = _http_check(tmp_path, socket)
    assert check["state"] == "problem", check
    assert f"the running daemon (pid {plain.proc.pid}) serves no HTTP" in check["detail"]
    assert "--http 7077" in check["fix"]
    assert memoryd(tmp_path, "stop", MEMORYD_SOCKET=str(socket)).returncode == 0 and plain.wait_exit(10) == 0

    port = free_port()  # serving HTTP, on another port than the entry's
    served = make_daemon(root, socket_path=socket, args=["--http", str(port)]).start()
    while served.status().get("http") is None:
        assert served.proc.poll() is None, served.log()
    check = _http_check(tmp_path, socket)
    assert check["state"] == "problem" and f"serves HTTP on port {port}" in check["detail"], check
    assert check["command"].endswith("connect --http claude-code")
    again = memoryd(tmp_path, "connect", "--http", "--no-capture", "claude-code", MEMORYD_SOCKET=str(socket))
    assert again.returncode == 0, again.stdout + again.stderr
    assert _http_check(tmp_path, socket)["state"] == "ok"


def test_a_symlinked_token_file_is_named_as_such(tmp_path):
    state = tmp_path / "md" / "state"
    state.mkdir(parents=True, mode=0o700)
    real = tmp_path / "elsewhere"
    real.write_text("x" * 43)
    real.chmod(0o600)
    (state / "http.token").symlink_to(real)
    done = memoryd(tmp_path, "connect", "--http", "--dry-run", "claude-code")
    assert f"{state / 'http.token'} is a symlink; remove it" in done.stderr, done.stdout + done.stderr
    assert "Too many levels" not in done.stderr and "Traceback" not in done.stderr

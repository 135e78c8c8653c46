"""The daemon as a service would run it: its rotating JSON log (``MEMORYD_LOG_FILE``), and the versions
on the wire and in ``memoryd status`` (an incompatible shim or daemon gets a clear message).

One real daemon serves the module (``memoryd serve`` with the variables the plist/unit set). The
incompatible peers in the shim tests are test-only stand-ins for a daemon of another version: a real
one of another wire version does not exist to run.
"""

from __future__ import annotations

import json
import logging
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import memoryd_shim
from memoryd import __version__, logs
from memoryd.cli.main import main
from support.daemon import INIT, PYTHON, DaemonProcess, short_tmpdir
from support.sockets import RawConnection


@pytest.fixture(scope="module")
def served():
    root = short_tmpdir()
    log_file = root / "home" / "logs" / "memoryd.log"
    daemon = DaemonProcess(root, env={"MEMORYD_LOG_FILE": str(log_file)})
    try:
        daemon.start()
        yield daemon, log_file
    finally:
        daemon.kill()
        shutil.rmtree(root, ignore_errors=True)


def test_run_as_a_service_the_daemon_writes_its_json_log_file(served, monkeypatch, capsys):
    daemon, log_file = served
    lines = [json.loads(line) for line in log_file.read_text().splitlines()]
    events = [line["event"] for line in lines]
    assert "starting" in events and "listening" in events
    assert all("timestamp" in line and "level" in line for line in lines)
    assert '"event": "listening"' not in daemon.log()  # stderr keeps warnings and errors only
    assert daemon.status()["log_file"] == str(log_file)
    # `memoryd service logs` prints the end of that file
    monkeypatch.setenv("MEMORYD_HOME", str(daemon.root / "home"))
    monkeypatch.setenv("MEMORYD_SERVICE_MANAGER", "systemd")
    assert main(["service", "logs", "-n", "2"]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown == log_file.read_text().splitlines()[-2:]


def test_the_log_file_rotates_at_its_size_cap_and_keeps_a_few(tmp_path, monkeypatch):
    monkeypatch.setattr(logs, "MAX_LOG_BYTES", 4000)
    path = tmp_path / "logs" / "memoryd.log"
    try:
        logs.configure(log_file=path)
        log = logs.get_logger("test.rotation")
        for n in range(400):
            log.info("line", n=n, padding="x" * 40)
        logging.getLogger().handlers[-1].flush()
    finally:
        logs.configure()  # back to stderr only, closing the file
    files = sorted(p.name for p in path.parent.iterdir())
    assert files == ["memoryd.log", "memoryd.log.1", "memoryd.log.2", "memoryd.log.3"]
    for name in files:
        text = (path.parent / name).read_text()
        assert len(text.encode()) <= 4000
        assert all(json.loads(line)["event"] == "line" for line in text.splitlines())
    assert json.loads(path.read_text().splitlines()[-1])["n"] == 399


# --- versions -------------------------------------------------------------------------------------------


def test_a_hello_of_another_wire_version_gets_an_incompatible_error(served):
    daemon, _ = served
    hello = {"memoryd": "hello", "v": 2, "tools": ["briefs"], "cwd": "/", "pid": 1, "shim_version": "9.0.0"}
    with RawConnection(daemon.socket, hello=hello) as conn:
        answer = conn.ready
    assert answer["memoryd"] == "error" and answer["code"] == "incompatible"
    assert answer["v"] == 1 and answer["version"] == __version__
    assert "wire version 2 (memoryd-shim 9.0.0) is not supported" in answer["message"]


def test_memoryd_status_shows_the_daemon_and_installed_versions(served):
    daemon, log_file = served
    out = subprocess.run(
        [PYTHON, "-m", "memoryd", "status", "--socket", str(daemon.socket)],
        capture_output=True,
        text=True,
        timeout=60,
        env=daemon.env,
    )
    assert out.returncode == 0, out.stderr
    assert (
        f"versions  daemon memoryd {__version__} (wire v1); installed memoryd {__version__}, "
        f"memoryd-shim {memoryd_shim.__version__} (wire v1)"
    ) in out.stdout
    assert f"service   own socket; log {log_file}" in out.stdout
    assert "memoryd service restart" not in out.stdout  # same versions: nothing to do
    as_json = subprocess.run(
        [PYTHON, "-m", "memoryd", "status", "--json", "--socket", str(daemon.socket)],
        capture_output=True,
        text=True,
        timeout=60,
        env=daemon.env,
    )
    status = json.loads(as_json.stdout)
    assert status["wire"] == 1 and status["installed"]["memoryd_shim"] == memoryd_shim.__version__
    assert status["restart_needed"] is False


class OtherVersionPeer:
    """Test-only stand-in for a daemon of another version: answers each hello with ``answer`` and closes."""

    def __init__(self, path: Path, answer: dict) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(8)
        self.answer = (json.dumps(answer) + "\n").encode()
        self.hellos: list[dict] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                self.hellos.append(json.loads(conn.makefile("rb").readline()))
                conn.sendall(self.answer)

    def close(self) -> None:
        self.sock.close()


@pytest.mark.parametrize(
    "answer",
    [
        {"memoryd": "error", "code": "incompatible", "v": 2, "version": "9.0.0", "message": "wire version 1"},
        {"memoryd": "ready", "v": 2, "version": "9.0.0"},
    ],
    ids=["newer daemon refuses", "newer daemon says ready"],
)
def test_the_shim_turns_an_incompatible_daemon_into_a_clear_message(answer):
    root = short_tmpdir()
    peer = OtherVersionPeer(root / "s.sock", answer)
    try:
        shim = subprocess.run(
            [sys.executable, "-m", "memoryd_shim", "--socket", str(root / "s.sock"), "--no-start"],
            input=(json.dumps(INIT) + "\n").encode(),
            capture_output=True,
            timeout=30,
            env={"HOME": str(root), "PATH": "/usr/bin:/bin"},
        )
    finally:
        peer.close()
        shutil.rmtree(root, ignore_errors=True)
    assert shim.returncode == 1
    hello = peer.hellos[0]
    assert hello["v"] == 1 and hello["shim_version"] == memoryd_shim.__version__
    [line] = shim.stdout.splitlines()  # stdout: exactly one JSON-RPC error for the one request
    error = json.loads(line)
    assert error["id"] == 1
    message = error["error"]["message"]
    assert "memoryd 9.0.0, wire v2" in message
    assert f"memoryd-shim {memoryd_shim.__version__} (wire v1)" in message
    assert "memoryd service restart" in message
    assert message.encode() in shim.stderr

"""``memoryd stop`` stops a daemon that is not the service's, and the commands that meet a running daemon
(``memoryd serve``, ``memoryd serve --http``, ``memoryd open``) name it; ``memoryd status`` shows HTTP."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import time

import pytest

from memoryd.cli.stop import alive, process_uid, terminate
from memoryd.errors import EXIT_ALREADY_RUNNING
from support.briefs import Shim
from support.daemon import PYTHON, REPO, DaemonProcess, free_port, short_tmpdir

STUBBIN = REPO / "tests" / "service" / "stubbin"  # the service tests' systemctl stand-in


def wait_until(predicate, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "not within the time allowed"
        time.sleep(0.1)


def memoryd(daemon: DaemonProcess, *args: str, **more: str) -> subprocess.CompletedProcess:
    """``memoryd ARGS --socket <the daemon's>`` in the daemon's environment (plus ``more``)."""
    env = {**daemon.env, "PATH": os.environ["PATH"], **more}
    return subprocess.run(
        [PYTHON, "-m", "memoryd", *args, "--socket", str(daemon.socket)],
        capture_output=True, text=True, env=env, timeout=120, cwd="/",
    )  # fmt: skip


def serve(daemon: DaemonProcess, *more: str) -> subprocess.CompletedProcess:
    """A second ``memoryd serve`` for the same socket and board."""
    env = {**daemon.env, "PATH": os.environ["PATH"]}
    argv = [*daemon.argv, "--index", str(daemon.index), "--model", "none", *more]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, cwd="/")


def test_stop_stops_the_daemon_cleanly_and_then_says_none_runs(make_daemon):
    daemon = make_daemon().start()
    pid = daemon.proc.pid
    done = memoryd(daemon, "stop")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"stopped memoryd (pid {pid}" in done.stdout
    assert daemon.wait_exit(10) == 0  # SIGTERM: a clean stop
    assert not daemon.socket.exists() and daemon.events("stopped")
    again = memoryd(daemon, "stop")
    assert again.returncode == 0 and "memoryd is not running" in again.stdout, again.stderr


@pytest.mark.parametrize("manager", ["systemd", "none"])
def test_stop_says_connected_agents_start_it_again_and_how_to_stop_for_good(make_daemon, manager):
    daemon = make_daemon().start()
    with Shim(daemon.socket, daemon.env).initialize():  # --no-start: this shim starts nothing again
        wait_until(lambda: json.loads(memoryd(daemon, "status", "--json").stdout)["sessions"] == 1)
        done = memoryd(daemon, "stop", **_manager_env(manager))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("stopped memoryd (pid ") and len(lines) == 2, done.stdout
    assert lines[1].startswith(
        "1 agent session was connected: its shim starts memoryd again within a second"
    ), lines[1]
    assert " disconnect`" in lines[1], lines[1]
    assert (" service stop`" in lines[1]) == (manager == "systemd"), lines[1]  # none: no service to name
    assert daemon.wait_exit(10) == 0


def _manager_env(manager: str) -> dict[str, str]:
    """``systemd`` forced, or a machine whose PID 1 is not systemd (the service tests' systemctl stand-in
    says "offline")."""
    if manager == "systemd":
        return {"MEMORYD_SERVICE_MANAGER": "systemd"}
    stub = short_tmpdir()
    (stub / "no-init").touch()
    return {
        "PATH": f"{STUBBIN}{os.pathsep}{os.environ['PATH']}",
        "MEMORYD_STUB_LOG": str(stub / "calls.jsonl"),
        "MEMORYD_STUB_STATE": str(stub),
    }


def test_a_refused_serve_at_a_terminal_says_it_once(make_daemon):
    """``make run`` beside a running daemon: the person at the terminal reads one sentence, not the JSON
    log line too; through a pipe (a shim, a service) the JSON line stays."""
    daemon = make_daemon().start()
    env = {**daemon.env, "PATH": os.environ["PATH"], "MEMORYD_LOG_LEVEL": "warning"}  # as `make run` sets it
    argv = [*daemon.argv, "--index", str(daemon.index), "--model", "none"]
    main, terminal = pty.openpty()
    try:
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=terminal, env=env, timeout=120, cwd="/")
        os.close(terminal)
        terminal = -1
        said = b""
        while chunk := _read(main):
            said += chunk
    finally:
        os.close(main)
        if terminal >= 0:
            os.close(terminal)
    assert done.returncode == EXIT_ALREADY_RUNNING
    lines = [ln for ln in said.decode().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("memoryd: memoryd is already running"), lines
    piped = serve(daemon)
    assert any(ln.startswith("{") and "startup_failed" in ln for ln in piped.stderr.splitlines()), (
        piped.stderr
    )


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, 4096)
    except OSError:  # EIO: the terminal's other end is closed and everything was read
        return b""


def test_a_refused_serve_and_open_name_memoryd_stop_and_status_shows_http(make_daemon):
    daemon = make_daemon().start()
    pid = daemon.proc.pid

    text = memoryd(daemon, "status")
    assert text.returncode == 0 and "http      off" in text.stdout, text.stdout
    assert json.loads(memoryd(daemon, "status", "--json").stdout)["http"] is None

    plain = serve(daemon)
    assert plain.returncode == EXIT_ALREADY_RUNNING
    assert f"stop it (pid {pid}) with `" in plain.stderr and " stop`, then run `" in plain.stderr
    assert plain.stderr.rstrip().endswith(" serve`"), plain.stderr

    port = free_port()
    http = serve(daemon, "--http", str(port))
    assert http.returncode == EXIT_ALREADY_RUNNING
    assert "it does not serve HTTP: stop it" in http.stderr and f" serve --http {port}`" in http.stderr

    opened = memoryd(daemon, "open", "--print")
    assert opened.returncode == 3 and "not serving HTTP" in opened.stderr
    assert f"(pid {pid}) was started without HTTP: stop it with `" in opened.stderr
    assert " stop`, then run `" in opened.stderr and " serve --http`" in opened.stderr

    # The advice, followed: stop, then serve with HTTP on the same socket.
    assert memoryd(daemon, "stop").returncode == 0
    assert daemon.wait_exit(10) == 0
    served = DaemonProcess(
        daemon.root, socket_path=daemon.socket, board=daemon.board, args=["--http", str(port)]
    )
    try:
        served.start()
        while served.status().get("http") is None:  # HTTP starts right after the socket answers
            assert served.proc.poll() is None, served.log()
        shown = json.loads(memoryd(served, "status", "--json").stdout)["http"]
        url = f"http://127.0.0.1:{port}"
        assert shown == {"url": url, "mcp": f"{url}/mcp", "port": port, "sessions": 0}
        text = memoryd(served, "status")
        assert f"http      {url} (MCP at {url}/mcp, 0 sessions)" in text.stdout, text.stdout
        token = (served.socket.parent / "http.token").read_text().strip()
        assert token not in text.stdout and token not in json.dumps(shown)
        refused = serve(served, "--http", str(port))
        assert refused.returncode == EXIT_ALREADY_RUNNING
        assert f"it already serves HTTP at {url}" in refused.stderr, refused.stderr
        assert memoryd(served, "stop").returncode == 0 and served.wait_exit(10) == 0
    finally:
        served.kill()


def test_terminate_reports_a_process_that_outlives_the_wait():
    # A process that ignores SIGTERM stands for a daemon stuck in native code.
    stubborn = subprocess.Popen(
        [sys.executable, "-c", "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
         "print('ready', flush=True); time.sleep(120)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert stubborn.stdout.readline().strip() == "ready"
        assert process_uid(stubborn.pid) == os.getuid()
        assert terminate(stubborn.pid, 0.3) is False and alive(stubborn.pid)
    finally:
        stubborn.kill()
        stubborn.wait(10)
        stubborn.stdout.close()
    assert not alive(stubborn.pid) and terminate(stubborn.pid, 0.3) is True


def test_open_with_agents_connected_names_the_service_since_their_shims_would_start_it_again(make_daemon):
    daemon = make_daemon().start()
    with Shim(daemon.socket, daemon.env).initialize():
        wait_until(lambda: json.loads(memoryd(daemon, "status", "--json").stdout)["sessions"] == 1)
        opened = memoryd(daemon, "open", "--print", **_manager_env("systemd"))
        bare = memoryd(daemon, "open", "--print", **_manager_env("none"))  # no service to name
    assert opened.returncode == 3 and "not serving HTTP" in opened.stderr, opened.stderr
    assert "start one without HTTP again as soon as it stops" in opened.stderr, opened.stderr
    assert " service install --http`" in opened.stderr, opened.stderr
    assert bare.returncode == 3 and "service install" not in bare.stderr, bare.stderr
    assert " serve --http` in a terminal you keep open" in bare.stderr, bare.stderr

"""``memoryd stop`` stops a daemon that is not the service's, and the commands that meet a running daemon
(``memoryd serve``, ``memoryd serve --http``, ``memoryd open``) name it; ``memoryd status`` shows HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from memoryd.cli.stop import alive, process_uid, terminate
from memoryd.errors import EXIT_ALREADY_RUNNING
from support.daemon import PYTHON, DaemonProcess, free_port


def memoryd(daemon: DaemonProcess, *args: str) -> subprocess.CompletedProcess:
    """``memoryd ARGS --socket <the daemon's>`` in the daemon's environment."""
    env = {**daemon.env, "PATH": os.environ["PATH"]}
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

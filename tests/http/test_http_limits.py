"""Clients that never finish a request cannot take the daemon down: a cap on HTTP connections, a deadline
for request heads, a raised descriptor limit and a quiet log when descriptors run out anyway; and a
shutdown with the page's event streams open logs no error."""

from __future__ import annotations

import contextlib
import json
import logging
import resource
import shutil
import signal
import socket
import time
from pathlib import Path

import pytest

from memoryd.http.protocol import HEAD_TIMEOUT_S
from memoryd.logs import AcceptErrorThrottle
from support.httpd import start_http_daemon

SLOW_HEAD = "GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"  # no blank line: the head never ends


@pytest.fixture
def many_fds():
    """Lets this process hold a few thousand sockets."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 4096 if hard == resource.RLIM_INFINITY else min(hard, 4096)
    if want < 1400:
        pytest.skip(f"this process may open only {hard} files")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _open_slow(port: int, count: int) -> list[socket.socket]:
    """``count`` connections that each send a request head without its end (some may be refused)."""
    held = []
    for _ in range(count):
        sock = socket.socket()
        sock.settimeout(5)
        try:
            sock.connect(("127.0.0.1", port))
            sock.sendall(SLOW_HEAD.format(port=port).encode())
        except OSError:
            sock.close()
            continue
        held.append(sock)
    return held


def _closed_by_peer(sock: socket.socket, deadline: float) -> bool:
    sock.settimeout(max(0.1, deadline - time.monotonic()))
    try:
        return sock.recv(1024) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def _lines(daemon) -> list[dict]:
    out = []
    for line in daemon.proc.log().splitlines():
        with contextlib.suppress(ValueError):
            out.append(json.loads(line))
    return out


def _stop(daemon) -> int:
    daemon.proc.signal(signal.SIGTERM)
    return daemon.proc.wait_exit(30)


def _wait_status(daemon, timeout: float = 20.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return daemon.proc.status(timeout=5)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _soft_and_hard_fd_limit(pid: int) -> list[str] | None:
    limits = Path(f"/proc/{pid}/limits")
    if not limits.exists():
        return None
    line = next(line for line in limits.read_text().splitlines() if line.startswith("Max open files"))
    return line.split()[3:5]


def test_slow_clients_without_the_token_cannot_starve_the_socket(many_fds):
    daemon = start_http_daemon(nofile=(512, 1024))
    held: list[socket.socket] = []
    try:
        assert _soft_and_hard_fd_limit(daemon.proc.proc.pid) in (None, ["1024", "1024"])  # raised at start
        held = _open_slow(daemon.port, 1100)
        status = _wait_status(daemon)  # the socket still answers while HTTP is full
        assert status["running"] is True and status["http"]["port"] == daemon.port
        deadline = time.monotonic() + HEAD_TIMEOUT_S + 30
        still_open = [s for s in held if not _closed_by_peer(s, deadline)]
        assert still_open == []  # refused at once, or closed once their head was overdue
        assert _wait_status(daemon)["running"] is True
        assert daemon.request("GET", "/mcp", headers=daemon.auth())[0] != 401  # HTTP serves again
        assert _stop(daemon) == 0
        lines = _lines(daemon)
        limited = [r for r in lines if r.get("event") == "http_connections_limited"]
        refused, timed_out = (sum(r[k] for r in limited) for k in ("refused", "head_timeouts"))
        assert refused >= 1 and timed_out >= 1 and refused + timed_out >= len(held), limited
        assert not [r for r in lines if r.get("level") == "error"], daemon.proc.log()[-3000:]
        assert len(lines) < 60, f"{len(lines)} log lines"
    finally:
        for sock in held:
            sock.close()
        daemon.proc.kill()
        shutil.rmtree(daemon.proc.root, ignore_errors=True)


def test_running_out_of_descriptors_logs_a_few_lines_and_the_daemon_recovers(many_fds):
    daemon = start_http_daemon(nofile=(160, 160))  # below the connection cap: accept itself fails
    held: list[socket.socket] = []
    try:
        held = _open_slow(daemon.port, 400)
        time.sleep(2)  # let the accept errors pile up
        deadline = time.monotonic() + HEAD_TIMEOUT_S + 30
        for sock in held:
            _closed_by_peer(sock, deadline)
            sock.close()
        held = []
        assert _wait_status(daemon, timeout=HEAD_TIMEOUT_S + 30)["running"] is True
        assert _stop(daemon) == 0
        lines = _lines(daemon)
        out_of_fds = [r for r in lines if "out of system resource" in json.dumps(r)]
        assert 1 <= len(out_of_fds) <= 3, len(out_of_fds)
        assert len(lines) < 60, f"{len(lines)} log lines"
    finally:
        for sock in held:
            sock.close()
        daemon.proc.kill()
        shutil.rmtree(daemon.proc.root, ignore_errors=True)


def test_the_accept_error_throttle_passes_one_per_window_and_counts_the_rest():
    records: list[str] = []
    logger = logging.getLogger("memoryd.test.throttle")
    logger.propagate = False
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())
    logger.addHandler(handler)
    throttle = AcceptErrorThrottle(every_s=3600)
    logger.addFilter(throttle)
    try:
        for _ in range(1000):
            logger.error("socket.accept() out of system resource\nsocket: <x>")
        logger.error("something else")
        throttle._passed_at -= 3600  # the window has passed
        logger.error("socket.accept() out of system resource\nsocket: <x>")
    finally:
        logger.removeHandler(handler)
        logger.removeFilter(throttle)
    assert records[1] == "something else" and len(records) == 3
    assert records[2].endswith("(999 more dropped since the last one)")
    assert any(isinstance(f, AcceptErrorThrottle) for f in logging.getLogger("asyncio").filters)


def test_a_shutdown_with_event_streams_open_logs_no_error():
    daemon = start_http_daemon()
    streams: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 60
        while daemon.proc.status().get("engine_state") != "ready":
            assert time.monotonic() < deadline
            time.sleep(0.1)
        head = (
            f"GET /events HTTP/1.1\r\nHost: 127.0.0.1:{daemon.port}\r\n"
            f"Authorization: Bearer {daemon.token}\r\n\r\n"
        ).encode()
        for _ in range(30):
            sock = socket.create_connection(("127.0.0.1", daemon.port), timeout=30)
            sock.sendall(head)
            streams.append(sock)
        for sock in streams:  # each has its hello event: the stream is open
            got = b""
            while b"event: hello" not in got:
                chunk = sock.recv(4096)
                assert chunk, got
                got += chunk
            assert got.startswith(b"HTTP/1.1 200")
        assert _stop(daemon) == 0
        for sock in streams:  # each stream was ended by the daemon, not cut
            sock.settimeout(10)
            rest = b""
            while chunk := sock.recv(4096):
                rest += chunk
            assert rest.endswith(b"0\r\n\r\n"), rest[-200:]  # the chunked body's last chunk
        lines = _lines(daemon)
        errors = [r for r in lines if r.get("level") in ("error", "critical")]
        assert errors == [], errors[:3]
        assert not any("Cancel" in str(r.get("event")) for r in lines)
    finally:
        for sock in streams:
            sock.close()
        daemon.proc.kill()
        shutil.rmtree(daemon.proc.root, ignore_errors=True)

"""Daemon lifecycle with real processes: one instance per socket and board, stale sockets, signals, peers.

Each test starts its own daemons (``make_daemon``) on short socket paths; every process is killed in
teardown. Losing daemons exit fast: they check the locks before importing the MCP SDK.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memoryd.errors import EXIT_ALREADY_RUNNING, EXIT_STARTUP_FAILED
from memoryd.serve import lock
from support.briefs import wait_engine_ready
from support.sockets import RawConnection


def test_second_daemon_on_the_same_socket_or_board_is_refused(make_daemon):
    first = make_daemon().start()
    same_socket = make_daemon(first.root, board=first.root / "other-board").launch()
    # a lock wait longer than the exit wait below: the holder is named at once, not waited for
    same_board = make_daemon(
        first.root, socket_path=first.root / "s2.sock", env={"MEMORYD_LOCK_WAIT_MS": "60000"}
    ).launch()
    assert same_socket.wait_exit(30) == EXIT_ALREADY_RUNNING
    assert "already running" in same_socket.log()
    assert same_board.wait_exit(30) == EXIT_ALREADY_RUNNING
    refusal = same_board.events("startup_failed")[0]["reason"]
    assert f"board {first.board}" in refusal and f"pid {first.proc.pid}" in refusal, refusal
    assert f"point MEMORYD_SOCKET at {first.socket}" in refusal, refusal
    assert not (first.root / "s2.sock").exists()
    # The first one never noticed: still serving sessions.
    with RawConnection(first.socket) as c:
        assert c.initialize()["result"]["protocolVersion"] == "2025-11-25"
    assert first.status()["pid"] == first.proc.pid
    first.signal(signal.SIGINT)  # SIGINT stops as cleanly as SIGTERM
    assert first.wait_exit(10) == 0
    assert not first.socket.exists()


def test_a_refused_start_leaves_nothing_behind_and_the_running_daemon_keeps_its_lock(make_daemon):
    """``<socket>.lock`` beside a running daemon is that daemon's own lock (its ``flock`` is the one-daemon rule):
    a refused start leaves it as it was, and leaves nothing of its own: on another socket (refused at the
    board lock) neither its lock file nor the folder it made for its socket. A third start is still refused."""
    first = make_daemon().start()
    wait_engine_ready(first)
    root = first.root
    lock_file = Path(f"{first.socket}.lock")
    held = (lock_file.stat().st_ino, lock_file.read_text())
    assert f"pid {first.proc.pid}" in held[1]

    def files() -> set[Path]:  # the running daemon's own index and the logs change as it serves
        return {
            p for p in root.rglob("*") if not p.name.startswith("daemon-") and first.index not in p.parents
        }

    before = files()
    same_socket = make_daemon(root, board=root / "b2" / "board")
    other_socket = make_daemon(root, socket_path=root / "new" / "dir" / "s2.sock")  # the same board
    for refused in (same_socket, other_socket):
        assert refused.launch().wait_exit(30) == EXIT_ALREADY_RUNNING, refused.log()
    assert "already running" in same_socket.log()
    assert f"board {first.board}" in other_socket.events("startup_failed")[0]["reason"]
    assert files() == before
    assert (lock_file.stat().st_ino, lock_file.read_text()) == held
    third = make_daemon(root, board=root / "b3").launch()
    assert third.wait_exit(30) == EXIT_ALREADY_RUNNING and "already running" in third.log()
    assert files() == before
    assert first.status()["pid"] == first.proc.pid


def test_five_daemons_started_at_once_leave_exactly_one(make_daemon):
    first = make_daemon()
    daemons = [first, *(make_daemon(first.root) for _ in range(4))]
    for daemon in daemons:
        daemon.launch()
    deadline = time.monotonic() + 60
    while sum(d.proc.poll() is None for d in daemons) > 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = [d for d in daemons if d.proc.poll() is None]
    assert len(alive) == 1, [d.log() for d in daemons]
    assert all(d.proc.returncode == EXIT_ALREADY_RUNNING for d in daemons if d is not alive[0])
    assert alive[0].wait_ready()["pid"] == alive[0].proc.pid


@pytest.mark.parametrize("kind", ["file", "symlink", "directory"])
def test_something_that_is_not_a_socket_is_never_deleted(make_daemon, kind):
    daemon = make_daemon()
    root = daemon.root
    path = daemon.socket
    if kind == "file":
        path.write_text("precious")
    elif kind == "symlink":
        (root / "target").write_text("precious")
        path.symlink_to(root / "target")
    else:
        path.mkdir()
        (path / "inside").write_text("precious")
    daemon.launch()
    assert daemon.wait_exit(30) == EXIT_STARTUP_FAILED
    assert "will not remove it" in daemon.log()
    if kind == "file":
        assert path.read_text() == "precious"
    elif kind == "symlink":
        assert path.is_symlink() and (root / "target").read_text() == "precious"
    else:
        assert (path / "inside").read_text() == "precious"


def test_a_second_daemon_with_its_own_socket_and_index_names_the_one_serving_the_board(make_daemon):
    """The daemon serving the board is named at once (not waited for as if it were starting), with its pid,
    socket and index: from the note it keeps in the board, or, for one that keeps none, from this
    install's default socket."""
    from memoryd_shim import rendezvous

    first = make_daemon()
    first.socket = Path(rendezvous.socket_path_str(first.env))  # the install's default socket
    first.start()
    second = make_daemon(
        first.root,
        socket_path=first.root / "s2.sock",
        index=first.root / "index-2",
        env={"MEMORYD_LOCK_WAIT_MS": "60000"},
    ).launch()
    assert second.wait_exit(30) == EXIT_ALREADY_RUNNING
    refusal = second.events("startup_failed")[0]["reason"]
    assert f"pid {first.proc.pid}" in refusal and f"point MEMORYD_SOCKET at {first.socket}" in refusal, (
        refusal
    )

    # a holder on a socket and index of its own, the default socket silent: named at once all the same
    other = make_daemon(first.root, socket_path=first.root / "s3.sock", index=first.root / "index-3")
    first.signal(signal.SIGTERM)
    assert first.wait_exit(15) == 0
    assert not (first.board / lock.BOARD_NOTE).exists()  # a clean stop takes its note away
    holder = make_daemon(first.root, socket_path=first.root / "s4.sock", index=first.root / "index-4").start()
    other.env["MEMORYD_LOCK_WAIT_MS"] = "60000"
    other.launch()
    assert other.wait_exit(30) == EXIT_ALREADY_RUNNING
    refusal = other.events("startup_failed")[0]["reason"]
    assert (
        f"memoryd serve (pid {holder.proc.pid}) serving board {holder.board} on socket {holder.socket} "
        in (refusal)
    )
    assert f"with the index {holder.index}" in refusal, refusal
    assert f"point MEMORYD_SOCKET at {holder.socket}" in refusal, refusal


def test_the_board_holder_is_named_from_another_home_and_a_killed_ones_note_misleads_no_one(make_daemon):
    """Two real daemons of different MEMORYD_HOMEs, sockets and indexes on one board: the second is
    refused naming the first's pid, socket and index. Once the first is killed (its note stays behind), the
    next daemon is not refused, and its note replaces the dead one's."""
    first = make_daemon().start()
    note = json.loads((first.board / lock.BOARD_NOTE).read_text())
    assert note["pid"] == first.proc.pid and note["socket"] == str(first.socket), note
    assert note["index"] == str(first.index), note
    second = make_daemon(board=first.board, env={"MEMORYD_LOCK_WAIT_MS": "60000"}).launch()
    assert second.root != first.root and second.env["MEMORYD_HOME"] != first.env["MEMORYD_HOME"]
    assert second.wait_exit(30) == EXIT_ALREADY_RUNNING
    refusal = second.events("startup_failed")[0]["reason"]
    assert f"(pid {first.proc.pid})" in refusal and f"on socket {first.socket}" in refusal, refusal
    assert f"with the index {first.index}" in refusal, refusal
    assert json.loads((first.board / lock.BOARD_NOTE).read_text()) == note  # the refused start left it

    os.killpg(first.proc.pid, signal.SIGKILL)
    first.proc.wait(10)
    assert json.loads((first.board / lock.BOARD_NOTE).read_text())["pid"] == first.proc.pid  # left behind
    third = make_daemon(board=first.board).start()
    assert json.loads((first.board / lock.BOARD_NOTE).read_text())["pid"] == third.proc.pid
    third.signal(signal.SIGTERM)
    assert third.wait_exit(15) == 0
    assert not (first.board / lock.BOARD_NOTE).exists()


def test_kill_9_leaves_a_stale_socket_that_a_fresh_daemon_replaces_then_sigterm_is_clean(make_daemon):
    first = make_daemon().start()
    os.killpg(first.proc.pid, signal.SIGKILL)
    first.proc.wait(10)
    assert stat.S_ISSOCK(first.socket.lstat().st_mode)  # left behind, nobody listening
    probe = socket.socket(socket.AF_UNIX)
    with pytest.raises(ConnectionRefusedError):
        probe.connect(str(first.socket))
    probe.close()

    fresh = make_daemon(first.root).start()
    assert "stale_socket_replaced" in fresh.log()
    with RawConnection(fresh.socket) as busy, RawConnection(fresh.socket) as idle:
        busy.initialize()
        idle.initialize()
        busy.send(
            {
                "jsonrpc": "2.0",
                "id": "long",
                "method": "tools/call",
                "params": {"name": "diag_sleep", "arguments": {"seconds": 60}},
            }
        )
        time.sleep(0.3)
        started = time.monotonic()
        fresh.signal(signal.SIGTERM)
        # the daemon's own budget is 5 s; the bound here only catches a hang (shared CI cores are slow)
        assert fresh.wait_exit(15) == 0
        elapsed = time.monotonic() - started
        # The in-flight call is cancelled and answered with the error agents get for any restart, never
        # left hanging.
        answer = busy.recv()
        assert answer["id"] == "long" and answer["error"] == {
            "code": -32000,
            "message": "memoryd restarted; please retry",
        }
        assert busy.at_eof() and idle.at_eof()
    assert elapsed < 15
    assert not fresh.socket.exists()
    assert '"event": "stopped"' in fresh.log()
    released = lock.FileLock(fresh.root / "s.sock.lock")
    assert released.try_acquire()  # the lock file stays, unheld
    released.release()


# Connect with effective uid "nobody" (what SO_PEERCRED reports) while the filesystem uid stays 0, so the
# path lookup still passes the daemon's 0700 directory: only the daemon's own peer check can refuse us.
FOREIGN_PEER = """
import ctypes, json, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
os.seteuid(65534)
libc.setfsuid(0)
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.settimeout(10)
sock.connect(sys.argv[1])
try:  # the daemon may refuse (write its error line and close) before our hello lands
    sock.sendall(json.dumps({"memoryd": "hello", "v": 1, "tools": ["briefs"], "cwd": "/", "pid": 1}).encode() + b"\\n")
except BrokenPipeError:
    pass
reader = sock.makefile("rb")
print(json.dumps({"answer": reader.readline().decode(), "then": reader.readline().decode()}))
"""


@pytest.mark.skipif(os.geteuid() != 0 or not sys.platform.startswith("linux"), reason="needs root on Linux")
def test_a_peer_with_another_uid_is_refused(make_daemon):
    daemon = make_daemon().start()
    out = subprocess.run(
        [sys.executable, "-c", FOREIGN_PEER, str(daemon.socket)], capture_output=True, timeout=30
    )
    assert out.returncode == 0, out.stderr.decode()
    seen = json.loads(out.stdout)
    answer = json.loads(seen["answer"])
    assert answer["memoryd"] == "error" and "peer uid 65534" in answer["message"]
    assert seen["then"] == ""  # and the connection is closed
    assert "peer_refused" in daemon.log()
    with RawConnection(daemon.socket) as c:  # our own uid is still welcome
        assert c.ready["memoryd"] == "ready"

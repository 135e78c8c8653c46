"""Socket activation through ``LISTEN_FDS``/``LISTEN_PID`` (systemd's protocol, sd_listen_fds(3)) with a
real passed socket: the test plays the service manager. It binds and listens on the socket, then starts
the real ``memoryd serve`` with the socket as fd 3 and ``LISTEN_PID`` set to the daemon's own pid (through
``bash -c 'LISTEN_PID=$$ exec ... 3<&N'``: ``exec`` keeps the shell's pid; bash, because dash's
redirections only reach fd 9).

What it shows: a connection made before any daemon runs waits in the backlog and is answered once the
daemon starts; the daemon never unlinks the manager's socket file; a restart refuses no connection.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from memoryd.errors import EXIT_ALREADY_RUNNING
from support.daemon import PYTHON, daemon_env, short_tmpdir
from support.sockets import RawConnection

START_TIMEOUT_S = 60.0
BASH = shutil.which("bash") or "/bin/bash"


class Manager:
    """The test's stand-in for systemd's socket unit: it owns the listening socket for the whole test."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = root / "s.sock"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(self.path))
        os.chmod(self.path, 0o600)
        self.sock.listen(64)
        self.procs: list[subprocess.Popen] = []
        self.logs: list[Path] = []

    def start_service(self, listen_pid: str = "$$") -> subprocess.Popen:
        """``memoryd serve`` with our socket as fd 3, ``LISTEN_FDS=1`` and ``LISTEN_PID`` (default: its pid)."""
        fd = self.sock.fileno()
        argv = [
            PYTHON,
            "-m",
            "memoryd",
            "serve",
            "--socket",
            str(self.path),
            "--board",
            str(self.root / "board"),
            "--index",
            str(self.root / "index"),
            "--model",
            "none",
        ]
        moves = f" 3<&{fd} {fd}<&-" if fd != 3 else ""  # the socket must arrive as fd 3 (SD_LISTEN_FDS_START)
        script = f"LISTEN_PID={listen_pid} exec {shlex.join(argv)}{moves}"
        log = self.root / f"daemon-{len(self.logs)}.log"
        self.logs.append(log)
        with open(log, "wb") as err:
            proc = subprocess.Popen(
                [BASH, "-c", script],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                env=daemon_env(self.root / "home", LISTEN_FDS="1"),
                pass_fds=(fd,),
                cwd="/",
                start_new_session=True,
            )
        self.procs.append(proc)
        return proc

    def log(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')}" for p in self.logs if p.exists())

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
            proc.stdout.close()
        self.sock.close()


@pytest.fixture
def manager():
    root = short_tmpdir()
    mgr = Manager(root)
    yield mgr
    mgr.close()
    shutil.rmtree(root, ignore_errors=True)


def wait_status(path: Path, proc: subprocess.Popen, mgr: Manager) -> dict:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"daemon exited with {proc.returncode}:\n{mgr.log()}"
        try:
            with RawConnection(path, hello=False, timeout=5) as conn:
                conn.send({"memoryd": "status", "v": 1})
                return __import__("json").loads(conn.readline())["status"]
        except (OSError, EOFError):
            time.sleep(0.05)
    raise AssertionError(f"no status within {START_TIMEOUT_S} s:\n{mgr.log()}")


def answer(conn: RawConnection, mgr: Manager) -> dict:
    try:
        return conn.recv()
    except (OSError, EOFError) as exc:
        raise AssertionError(f"no answer ({exc!r}):\n{mgr.log()}") from None


def test_a_passed_socket_is_served_and_survives_restarts_without_refusals(manager):
    # Before any daemon runs, a client connects (the manager's backlog accepts it) and says hello.
    early = RawConnection(manager.path, hello=False, timeout=START_TIMEOUT_S)
    early.send({"memoryd": "hello", "v": 1, "tools": ["briefs"], "cwd": "/", "pid": os.getpid()})

    first = manager.start_service()
    assert answer(early, manager)["memoryd"] == "ready"  # answered by the activated daemon
    assert early.initialize()["result"]["protocolVersion"] == "2025-11-25"
    status = wait_status(manager.path, first, manager)
    assert status["activation"] == "systemd" and status["pid"] == first.pid
    assert status["socket"]["path"] == str(manager.path)
    assert '"event": "socket_activated"' in manager.log()

    # A graceful stop: the daemon exits 0 and leaves the manager's socket file in place.
    inode = manager.path.lstat().st_ino
    first.send_signal(signal.SIGTERM)
    assert first.wait(15) == 0, manager.log()
    assert early.at_eof()
    early.close()
    assert manager.path.is_socket() and manager.path.lstat().st_ino == inode

    # During the restart gap a connection is accepted, not refused, and the next daemon answers it.
    waiting = RawConnection(manager.path, hello=False, timeout=START_TIMEOUT_S)
    waiting.send({"memoryd": "hello", "v": 1, "tools": ["briefs"], "cwd": "/", "pid": os.getpid()})
    second = manager.start_service()
    assert answer(waiting, manager)["memoryd"] == "ready"
    waiting.initialize()
    echoed = waiting.call("diag_echo", {"value": "after restart"})
    assert echoed["result"]["structuredContent"]["value"] == "after restart"
    waiting.close()
    assert wait_status(manager.path, second, manager)["pid"] == second.pid
    second.send_signal(signal.SIGTERM)
    assert second.wait(15) == 0
    assert first.stdout.read() == b"" and second.stdout.read() == b""  # stdout stays protocol-free


def test_listen_fds_meant_for_another_process_is_ignored(manager):
    # LISTEN_PID names another process (here: pid 1), so the daemon must not take fd 3; it binds as
    # usual and finds our live listener on the path: another process is serving, it refuses to start.
    proc = manager.start_service(listen_pid="1")
    assert proc.wait(START_TIMEOUT_S) == EXIT_ALREADY_RUNNING, manager.log()
    assert "another process is listening" in manager.log()
    assert manager.path.is_socket()


def test_memoryd_stop_leaves_the_service_s_daemon_to_the_service(manager):
    proc = manager.start_service()
    status = wait_status(manager.path, proc, manager)
    assert status["activation"] == "systemd"
    env = {**daemon_env(manager.root / "home"), "PATH": os.environ["PATH"]}
    done = subprocess.run(
        [PYTHON, "-m", "memoryd", "stop", "--socket", str(manager.path)],
        capture_output=True, text=True, env=env, timeout=120, cwd="/",
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"(pid {proc.pid}) runs as the systemd service" in done.stderr and " service stop`" in done.stderr
    assert proc.poll() is None and wait_status(manager.path, proc, manager)["pid"] == proc.pid

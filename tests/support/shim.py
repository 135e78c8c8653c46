"""Helpers for the shim's tests: a test-only socket peer and the one shim subprocess class.

``EchoPeer`` is NOT memoryd: it is a stand-in for the daemon's socket side that speaks the hello and
answers requests mechanically, so the shim's framing, exits and reconnects can be tested without
``memoryd serve``. Tests against the real daemon live in ``test_shim_daemon.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

SHIM_SCRIPT = Path(sys.executable).with_name("memoryd-shim")


def wait_until(predicate, timeout: float = 5.0, interval: float = 0.01, what: str = "condition"):
    """Poll ``predicate`` until it returns a truthy value; fails the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


class EchoPeer:
    """Test-only stand-in for the daemon's socket side (not the daemon).

    After the hello it answers every JSON-RPC request with
    ``{"jsonrpc":"2.0","id":<id>,"result":{"method":<method>,"echo":<params.echo>,"conn":<n>}}``,
    never answers methods listed in ``hold``, and records everything: ``hellos`` (dicts, one per
    connection), ``received`` (``(conn, raw line)``), ``closed`` (connections whose other side closed).
    ``refuse`` answers the hello with an error line instead; ``dribble`` sends answers a few bytes at a time.
    """

    def __init__(self, path: str, refuse: str | None = None, dribble: bool = False, hold=("test/hold",)):
        self.path = path
        self.refuse = refuse
        self.dribble = dribble
        self.hold = set(hold)
        self.hellos: list[dict] = []
        self.received: list[tuple[int, bytes]] = []
        self.closed: set[int] = set()
        self.conns: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self._stopping = False
        self._lock = threading.Lock()

    def start(self) -> EchoPeer:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.path)
        listener.listen(64)
        listener.settimeout(0.05)
        self._listener = listener
        self._stopping = False
        threading.Thread(target=self._accept_loop, daemon=True).start()
        return self

    def _accept_loop(self) -> None:
        listener = self._listener
        while not self._stopping:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(None)
            with self._lock:
                self.conns.append(conn)
                index = len(self.conns) - 1
            threading.Thread(target=self._serve, args=(conn, index), daemon=True).start()

    def _serve(self, conn: socket.socket, index: int) -> None:
        try:
            rfile = conn.makefile("rb")
            hello = rfile.readline()
            if not hello:
                return
            self.hellos.append(json.loads(hello))
            if self.refuse:
                conn.sendall(json.dumps({"memoryd": "error", "message": self.refuse}).encode() + b"\n")
                conn.close()
                return
            conn.sendall(b'{"memoryd":"ready","v":1,"version":"echo-peer"}\n')
            for line in rfile:
                self.received.append((index, line))
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(msg, dict) or "method" not in msg or "id" not in msg:
                    continue
                if msg["method"] in self.hold:
                    continue
                params = msg.get("params") or {}
                result = {"method": msg["method"], "echo": params.get("echo"), "conn": index}
                self.send(index, {"jsonrpc": "2.0", "id": msg["id"], "result": result})
        except OSError:
            pass
        finally:
            self.closed.add(index)

    def send(self, index: int, message) -> None:
        """Send one line (a dict, or raw bytes ending in a newline) on connection ``index``."""
        data = message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n"
        conn = self.conns[index]
        if self.dribble:
            for i in range(0, len(data), 5):
                conn.sendall(data[i : i + 5])
                time.sleep(0.001)
        else:
            conn.sendall(data)

    def messages(self, conn: int | None = None) -> list[dict]:
        """Parsed lines received (after the hello), optionally from one connection only."""
        return [json.loads(line) for index, line in list(self.received) if conn is None or index == conn]

    def crash(self) -> None:
        """Drop every connection and the listener at once, like a daemon killed with SIGKILL."""
        self._stopping = True
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        for conn in self.conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    stop = crash


def _default_signals() -> None:
    for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


class ShimProc:
    """A ``memoryd-shim`` subprocess (``args``: its command-line flags) with line access to its stdout, every
    stdout line kept (:attr:`raw`, :attr:`output`) and a copy of its stderr.

    ``script`` runs the console script instead of ``python -m memoryd_shim``; ``command`` replaces both.
    ``pump=False`` (the benchmarks) reads stdout in the calling thread instead of a reader thread: no
    timeout, no thread hand-off per answer, nothing kept, stderr dropped.
    """

    def __init__(
        self,
        args: list[str],
        env: dict | None = None,
        cwd: str | None = None,
        script: bool = False,
        command: list[str] | None = None,
        pump: bool = True,
        default_signals: bool = False,
    ):
        cmd = command or ([str(SHIM_SCRIPT)] if script else [sys.executable, "-m", "memoryd_shim"])
        self.started = time.monotonic()
        self.pump = pump
        self.proc = subprocess.Popen(
            [*cmd, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if pump else subprocess.DEVNULL,
            env=env,
            cwd=cwd,
            # a runner under nohup (or a shell's background job) hands its children SIGHUP/SIGINT ignored
            preexec_fn=_default_signals if default_signals else None,
        )
        self.raw: list[bytes] = []
        self._lines: queue.Queue = queue.Queue()
        self.stderr = bytearray()
        if pump:
            threading.Thread(target=self._read_stdout, daemon=True).start()
            threading.Thread(target=self._read_stderr, daemon=True).start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def output(self) -> bytes:
        """Every byte the shim printed on stdout so far."""
        return b"".join(self.raw)

    def _read_stdout(self) -> None:
        for line in iter(self.proc.stdout.readline, b""):
            self.raw.append(line)
            self._lines.put(line)
        self._lines.put(None)

    def _read_stderr(self) -> None:
        for chunk in iter(lambda: self.proc.stderr.read1(65536), b""):
            self.stderr += chunk

    def _next(self, timeout: float) -> bytes:
        """The next stdout line; ``queue.Empty`` after ``timeout`` s (reader thread only), ``EOFError`` at EOF."""
        if not self.pump:
            line = self.proc.stdout.readline()
        else:
            line = self._lines.get(timeout=timeout)
            if line is None:
                self._lines.put(None)
        if not line:
            raise EOFError("the shim closed its stdout")
        return line

    def send(self, message) -> None:
        data = message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n"
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def recv(self, timeout: float = 5.0) -> dict:
        """The next stdout line, parsed; fails on timeout, EOF or a line that is not a JSON-RPC message."""
        try:
            line = self._next(timeout)
        except queue.Empty:
            pytest.fail(f"no stdout line within {timeout} s; stderr: {self.stderr.decode(errors='replace')}")
        except EOFError:
            pytest.fail(f"shim stdout closed; stderr: {self.stderr.decode(errors='replace')}")
        msg = json.loads(line)
        assert isinstance(msg, dict) and msg.get("jsonrpc") == "2.0", line[:200]
        return msg

    def expect_silence(self, seconds: float = 0.3) -> None:
        """Nothing more arrives on stdout within ``seconds`` (EOF is fine)."""
        try:
            line = self._lines.get(timeout=seconds)
        except queue.Empty:
            return
        if line is not None:
            pytest.fail(f"unexpected stdout line: {line[:300]!r}")
        self._lines.put(None)

    def close_stdin(self) -> float:
        self.proc.stdin.close()
        return time.monotonic()

    def wait(self, timeout: float = 5.0) -> int:
        return self.proc.wait(timeout=timeout)

    def stdout_is_only_jsonrpc(self) -> bool:
        for line in self.raw:
            msg = json.loads(line)
            if not (
                isinstance(msg, dict)
                and msg.get("jsonrpc") == "2.0"
                and ("result" in msg or "error" in msg or "method" in msg)
            ):
                return False
        return True

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=5)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.close()

    def close(self) -> None:
        """Close stdin (the shim's cue to exit) and reap it; killed when still running after 5 s."""
        self.proc.stdin.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        if not self.pump:
            self.proc.stdout.close()


def kill_session(pid: int) -> None:
    """SIGKILL a detached process's whole session group (daemons run in their own session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)

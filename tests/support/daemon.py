"""End-to-end helpers: the real ``memoryd serve`` as a subprocess, and clients that speak to its socket.

* :class:`DaemonProcess` starts ``python -m memoryd serve --socket <short path> --board <tmp> --index <tmp>
  --model none`` (``model=""``: the default model instead; ``index=""``: no ``--index``, the board's own
  default index; test tools on: ``MEMORYD_TEST_TOOLS=1``) and waits until its
  socket answers a status request. The fixtures in ``conftest.py`` always kill it in teardown and print its
  stderr log when the test failed. The benchmarks use the same class as a context manager
  (:meth:`DaemonProcess.temporary`): launch, :meth:`~DaemonProcess.wait_until` a readiness predicate over
  the ``memoryd status --json`` object (seconds since launch), RSS from ``/proc``, SIGTERM at the end.
* :data:`INIT` / :data:`INITIALIZED`: the first two messages every MCP client sends.
* Clients that speak to the socket without a shim are in :mod:`support.sockets`.

Socket paths are kept short (``/tmp/md-XXXX/s.sock``): macOS limits ``sun_path`` to 104 bytes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

from support.measure import peak_rss_mb, rss_mb

REPO = Path(__file__).resolve().parents[2]
VENV_PYTHON = REPO / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else Path(sys.executable))
START_TIMEOUT_S = 60.0  # importing the MCP SDK takes seconds on a loaded 2-core machine
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def free_port() -> int:
    """A TCP port free on both 127.0.0.1 and ::1 right now (the daemon binds both)."""
    for _ in range(20):
        with socket.socket() as v4:
            v4.bind(("127.0.0.1", 0))
            port = v4.getsockname()[1]
            try:
                with socket.socket(socket.AF_INET6) as v6:
                    v6.bind(("::1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port on both loopback addresses")


def short_tmpdir() -> Path:
    """A fresh 0700 directory under /tmp with a short name (socket paths stay far below 104 bytes)."""
    return Path(tempfile.mkdtemp(dir="/tmp", prefix="md-"))


def daemon_env(home: Path, **extra: str) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "MEMORYD_HOME": str(home),
        "MEMORYD_TEST_TOOLS": "1",
        "LANCEDB_LOG": "error",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env.update(extra)
    return env


class DaemonProcess:
    """One real daemon. ``start()`` returns once it answers (or raises with its log)."""

    def __init__(
        self,
        root: Path,
        *,
        socket_path: Path | None = None,
        board: Path | None = None,
        env: dict[str, str] | None = None,
        user: int | None = None,
        model: str = "none",
        index: Path | str | None = None,
        args: list[str] | None = None,
    ) -> None:
        self.root = root
        self.args = list(args or [])  # more `memoryd serve` flags (e.g. ["--http", "7123"])
        self.model = model  # "none": keyword-only (fast); "" : the daemon's default model
        self.socket = socket_path or root / "s.sock"
        self.board = board or root / "board"
        self.index = root / "index" if index is None else index  # "": the board's default index
        self.log_path = root / f"daemon-{time.monotonic_ns()}.log"
        self.env = daemon_env(root / "home", **(env or {}))
        self.user = user
        self.proc: subprocess.Popen | None = None
        self.launched_at = 0.0  # time.perf_counter() at launch
        self.owns_root = False  # close() removes root (temporary())
        self.keep_log_in: Path | None = None  # close(failed=True) copies the log into this folder

    @classmethod
    def temporary(cls, *, keep_log_in: Path | None = None, **kwargs: Any) -> DaemonProcess:
        """A daemon in a fresh short folder under /tmp that :meth:`close` removes; after a failure its log is
        first copied into ``keep_log_in`` (when given)."""
        daemon = cls(short_tmpdir(), **kwargs)
        daemon.owns_root, daemon.keep_log_in = True, keep_log_in
        return daemon

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def argv(self) -> list[str]:
        return [PYTHON, "-m", "memoryd", "serve", "--socket", str(self.socket), "--board", str(self.board)]

    def launch(self) -> DaemonProcess:
        """Start the process without waiting for it."""
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in kill() / stop()
        self.launched_at = time.perf_counter()
        self.proc = subprocess.Popen(
            [
                *self.argv,
                *(["--index", str(self.index)] if self.index else []),
                *(["--model", self.model] if self.model else []),
                *self.args,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,  # must stay empty: the daemon never writes stdout
            stderr=self._log,
            env=self.env,
            cwd="/",
            user=self.user,
            start_new_session=True,
        )
        return self

    def start(self, timeout: float = START_TIMEOUT_S) -> DaemonProcess:
        self.launch()
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"daemon exited with {self.proc.returncode}:\n{self.log()}")
            try:
                return self.status()
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"daemon did not answer on {self.socket} within {timeout} s:\n{self.log()}")

    def status(self, timeout: float = 5.0) -> dict[str, Any]:
        """Ask the daemon for its status over the control line; raises ``OSError`` when nobody answers."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(str(self.socket))
            sock.sendall(b'{"memoryd":"status","v":1}\n')
            line = sock.makefile("rb").readline()
        if not line:
            raise ConnectionResetError("daemon closed the status connection without answering")
        answer = json.loads(line)
        assert answer["memoryd"] == "status", answer
        return answer["status"]

    def wait_exit(self, timeout: float) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def signal(self, signum: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(signum)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"

    def events(self, event: str) -> list[dict[str, Any]]:
        """The daemon's JSON log lines (stderr) whose ``"event"`` is ``event``, oldest first."""
        out = []
        for line in self.log().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("event") == event:
                out.append(record)
        return out

    def stdout(self) -> bytes:
        assert self.proc is not None and self.proc.stdout is not None
        return self.proc.stdout.read()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._release()

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (the daemon's own shutdown), SIGKILL when it is still running after ``timeout`` s."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._release()

    def _release(self) -> None:
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()
        if getattr(self, "_log", None) is not None:
            self._log.close()

    def close(self, failed: bool = False) -> None:
        """:meth:`stop`; after a failure the log is copied into :attr:`keep_log_in` first; an owned root is
        removed."""
        if failed and self.keep_log_in is not None:
            with suppress(OSError):
                self.keep_log_in.mkdir(parents=True, exist_ok=True)
                kept = self.keep_log_in / f"daemon-{time.strftime('%Y%m%dT%H%M%S')}.log"
                shutil.copyfile(self.log_path, kept)
                print(f"daemon log kept in {kept}", file=sys.stderr, flush=True)
        self.stop()
        if self.owns_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> DaemonProcess:
        return self.launch()

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.close(failed=exc_type is not None)

    # --- what the benchmarks read -------------------------------------------------------------------

    def summary(self) -> dict[str, Any] | None:
        """What ``memoryd status --json`` prints, plus ``"raw"`` (the control-line answer, epoch times);
        None while nothing answers."""
        from memoryd.cli.status import summarize

        try:
            raw = self.status()
        except (OSError, ValueError):
            return None
        return {**summarize(raw), "raw": raw}

    def wait_until(
        self, ready: Callable[[dict[str, Any]], bool], timeout: float = 300.0, poll: float = 0.05
    ) -> float:
        """Seconds from launch until ``ready(self.summary())`` holds; raises ``AssertionError`` with the log
        tail when the daemon exits or ``timeout`` passes."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"daemon exited with {self.proc.returncode}:\n{self.log()[-4000:]}")
            status = self.summary()
            if status is not None and ready(status):
                return time.perf_counter() - self.launched_at
            time.sleep(poll)
        raise AssertionError(f"daemon not ready within {timeout:.0f} s:\n{self.log()[-4000:]}")

    def rss_mb(self) -> float:
        return rss_mb(self.pid)

    def peak_rss_mb(self) -> float:
        return peak_rss_mb(self.pid)

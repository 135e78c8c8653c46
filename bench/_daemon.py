"""A real ``memoryd serve`` for the benchmarks: a subprocess on a short socket path, always stopped.

    with Daemon(board, index) as d:          # spawns .venv/bin/memoryd serve, logs to a file
        d.wait(lambda s: s["search_mode"] == "hybrid")     # polls the status answer
        ... d.socket, d.pid, d.rss_mb() ...
    # SIGTERM (then SIGKILL after 10 s); its temporary folder removed

The readiness checks read the same object ``memoryd status --json`` prints (``memoryd.cli.status.summarize``
of the control-line answer), asked directly over the socket so polling costs no interpreter start-up.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _util import MODELS, REPO, VENV_BIN, rss_mb

OUT = REPO / "bench" / "out"


class Daemon:
    def __init__(
        self, board: Path, index: Path, *, model: str | None = None, env: dict | None = None
    ) -> None:
        self.root = Path(tempfile.mkdtemp(dir="/tmp", prefix="md-b-"))  # short: sun_path is 104 bytes
        self.socket = self.root / "d.sock"
        self.board, self.index, self.model = board, index, model
        self.log_path = self.root / "daemon.log"
        self.env = {
            **os.environ,
            "MEMORYD_HOME": str(self.root / "home"),
            "MEMORYD_MODELS": str(MODELS),
            "MEMORYD_LOG_LEVEL": "info",
            "LANCEDB_LOG": "error",
            **(env or {}),
        }
        self.env.pop("MEMORYD_SOCKET", None)
        self.proc: subprocess.Popen | None = None
        self.started_at = 0.0

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> Daemon:
        argv = [str(VENV_BIN / "memoryd"), "serve", "--board", str(self.board), "--index", str(self.index)]
        argv += ["--socket", str(self.socket)]
        if self.model:
            argv += ["--model", self.model]
        self._log = open(self.log_path, "wb")  # noqa: SIM115 -- closed in stop()
        self.started_at = time.perf_counter()
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
            env=self.env,
            cwd="/",
            start_new_session=True,
        )
        return self

    def status(self) -> dict | None:
        """What ``memoryd status --json`` shows (plus ``"raw"``: the control-line answer, with epoch
        times), or None while nothing answers."""
        from memoryd.cli.status import summarize
        from memoryd.serve.control import ask_status

        try:
            raw = ask_status(self.socket, timeout=5.0)
        except ValueError:
            return None
        return {**summarize(raw), "raw": raw} if raw is not None else None

    def wait(self, ready: Callable[[dict], bool], timeout: float = 300.0, poll: float = 0.05) -> float:
        """Seconds from :meth:`start` until ``ready(status)`` holds; raises with the log tail otherwise."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"memoryd serve exited with {self.proc.returncode}:\n{self.log_tail()}")
            status = self.status()
            if status is not None and ready(status):
                return time.perf_counter() - self.started_at
            time.sleep(poll)
        raise RuntimeError(f"memoryd serve not ready within {timeout:.0f} s:\n{self.log_tail()}")

    def rss_mb(self) -> float:
        return rss_mb(self.pid)

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    def stop(self, keep_log: bool = False) -> None:
        """SIGTERM (SIGKILL after 10 s), then remove the temporary folder; ``keep_log`` first copies the
        daemon's log to ``bench/out/`` (after a failure)."""
        if keep_log:
            with contextlib.suppress(OSError):
                OUT.mkdir(parents=True, exist_ok=True)
                kept = OUT / f"daemon-{time.strftime('%Y%m%dT%H%M%S')}.log"
                shutil.copyfile(self.log_path, kept)
                print(f"daemon log kept in {kept}", flush=True)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if getattr(self, "_log", None) is not None:
            self._log.close()
        with contextlib.suppress(OSError):
            shutil.rmtree(self.root)

    def __enter__(self) -> Daemon:
        return self.start()

    def __exit__(self, exc_type, *exc: object) -> None:
        self.stop(keep_log=exc_type is not None)


def hybrid_ready(status: dict) -> bool:
    """The engine is ready and searches run hybrid (model loaded)."""
    model = status.get("model") or {}
    return status.get("search_mode") == "hybrid" and model.get("state") == "ready"


def engine_ready(status: dict) -> bool:
    """The board is reconciled with the index (searches answer, keyword-only until the model is warm)."""
    return (status.get("engine") or {}).get("state") == "ready"


def wait_post_model_pass(d: Daemon, first_indexed_at: float | None, timeout: float = 600.0) -> float | None:
    """Seconds from start until the daemon's pass over the index after the model got warm (a rescan, or a
    backfill of keyword-only records) is over: ``last_indexed_at`` moved past ``first_indexed_at`` (its value
    when the engine became ready) or the log says ``index_backfilled``. None if neither shows in time."""

    def done(status: dict) -> bool:
        if status["raw"]["engine"].get("last_indexed_at") != first_indexed_at:
            return True
        return '"index_backfilled"' in d.log_tail(1 << 20)

    try:
        return d.wait(done, timeout=timeout, poll=0.1)
    except RuntimeError:
        if d.proc is not None and d.proc.poll() is not None:
            raise
        return None

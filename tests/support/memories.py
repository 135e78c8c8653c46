"""Helpers for the ``memories`` tool tests: the real shim with ``--tools memories``, memdb's envelope checks,
and polling for what the watcher does in the background.

:class:`MemShim` is :class:`support.briefs.Shim` started with ``--tools memories`` in a chosen working directory
(the session's project is the git root folder around it). ``ok`` returns the ``result`` of
``{"ok": true, "result": ...}`` after checking the text block is the same JSON; ``err`` returns the
``error`` of an ``isError`` answer.
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from support.briefs import SHIM, Shim, wait_engine_ready

__all__ = ["SHIM", "MemShim", "poll", "unique", "wait_engine_ready", "wait_hybrid", "warm_daemon"]


#: Memories a paraphrase search must rank below its target: everyday facts sharing no topic with it.
DISTRACTORS = [
    "Frontend code is formatted with prettier before each commit",
    "Our Postgres backups are kept for thirty days",
    "Invoices are emailed to customers on the first business day of each month",
    "The office coffee machine is descaled every Friday",
    "Production deploys happen on Tuesdays right after standup",
]


def unique(prefix: str = "m") -> str:
    """A word no other test uses (keyword searches find exactly the memories of one test)."""
    return f"{prefix}{uuid.uuid4().hex[:10]}"


def poll(check, what: str, timeout: float = 20.0, interval: float = 0.05):
    """Wait until ``check()`` is truthy; the bound catches hangs, it is not a speed assertion."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(interval)


class MemShim(Shim):
    def __init__(
        self, socket_path: Path, env: dict[str, str] | None = None, cwd: str = "/", tools: str = "memories"
    ) -> None:
        super().__init__(socket_path, env, cwd, tools)

    def answer(self, name: str, **arguments: Any) -> dict:
        """The ``tools/call`` result (``isError`` either way), text and structured content checked equal."""
        reply = self.call(name, **arguments)
        assert "result" in reply, reply
        result = reply["result"]
        assert json.loads(result["content"][0]["text"]) == result["structuredContent"], result
        return result

    def ok(self, name: str, **arguments: Any) -> Any:
        result = self.answer(name, **arguments)
        assert result.get("isError") is False, result
        assert result["structuredContent"]["ok"] is True
        return result["structuredContent"]["result"]

    def full(self, name: str, **arguments: Any) -> dict:
        """The whole success envelope (with ``note``, ``mode``, ``redacted``...)."""
        result = self.answer(name, **arguments)
        assert result.get("isError") is False, result
        return result["structuredContent"]

    def err(self, name: str, **arguments: Any) -> dict:
        result = self.answer(name, **arguments)
        assert result["isError"] is True, result
        body = result["structuredContent"]
        assert body["ok"] is False and set(body["error"]) == {"code", "message"}, body
        return body["error"]

    def invalid(self, name: str, **arguments: Any) -> str:
        """An argument error's message: memdb's ``E_INVALID_ARG`` envelope from MCP 2025-11-25 on, JSON-RPC
        -32602 before it."""
        if self.version < "2025-11-25":
            return super().invalid(name, **arguments)
        error = self.err(name, **arguments)
        assert error["code"] == "E_INVALID_ARG", error
        return error["message"]

    def request_line(self, line: str, timeout: float = 20.0) -> dict:
        """Send one raw JSON-RPC line (e.g. with ``\\ud800`` escapes) and return the answer to its id."""
        message_id = json.loads(line.replace("\\ud800", "").replace("\\udfff", ""))["id"]
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()
        while True:
            answer = json.loads(self._next(timeout))
            if answer.get("id") == message_id:
                return answer


@contextmanager
def warm_daemon(
    models_dir: Path, *, board: Callable[[Path], object] | None = None, process: type | None = None
) -> Iterator[Any]:
    """A daemon on a fresh short root with the real model from ``models_dir``, handed over once its search
    is hybrid; killed and its root removed after.

    ``board(path)`` writes the board folder before the start; ``process`` is the daemon class
    (default :class:`support.inprocess_daemon.InprocessDaemon`; :class:`support.daemon.DaemonProcess` for a
    real ``memoryd serve`` process)."""
    from support.daemon import short_tmpdir
    from support.inprocess_daemon import InprocessDaemon

    root = short_tmpdir()
    daemon = None
    try:
        if board is not None:
            board(root / "board")
        daemon = (process or InprocessDaemon)(root, model="", env={"MEMORYD_MODELS": str(models_dir)})
        daemon.start()
        wait_hybrid(daemon)
        yield daemon
    finally:
        if daemon is not None:
            daemon.kill()
        shutil.rmtree(root, ignore_errors=True)


def wait_hybrid(daemon: Any, timeout: float = 180.0) -> None:
    """Wait for ``daemon``'s engine to be ready and its search hybrid (the model loaded)."""
    wait_engine_ready(daemon)
    poll(lambda: daemon.status()["engine"]["search_mode"] == "hybrid", "the model warm", timeout=timeout)

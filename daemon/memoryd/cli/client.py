"""A small MCP client over the daemon's socket, standard library only (what ``memoryd search`` uses).

It speaks exactly what a shim relays (contract §4): the hello line, then MCP JSON-RPC lines —
``initialize``, ``notifications/initialized``, one ``tools/call`` per :meth:`DaemonClient.call_tool`.

Example::

    with DaemonClient(socket_path) as client:          # DaemonUnavailable when nothing answers
        answer = client.call_tool("search_briefs", {"query": "checkout bug"})   # structuredContent
"""

from __future__ import annotations

import errno
import json
import os
import socket
from pathlib import Path
from typing import Any

from memoryd import __version__
from memoryd_shim import rendezvous

PROTOCOL_VERSION = "2025-11-25"
DEFAULT_TIMEOUT_S = 30.0  # above the daemon's default 15 s tool timeout, so its own answer arrives first
_NOT_RUNNING = {errno.ENOENT, errno.ECONNREFUSED, errno.ENOTSOCK, errno.ENOTDIR}


class DaemonUnavailable(Exception):
    """No daemon answers on the socket (no socket file, or connection refused): it is not running."""


class DaemonError(Exception):
    """The daemon answered, but not with a result: a refused hello, a JSON-RPC error, a broken line,
    or a tool error (``isError``). ``code`` is the JSON-RPC error code when there is one."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class DaemonGone(DaemonError):
    """The daemon went away before answering: it closed or reset the connection, or answered "memoryd
    restarted; please retry" (a call it cancelled while stopping). A transient state: asking again reaches
    the next daemon, or finds none running."""


class DaemonClient:
    """One MCP session with the running daemon. Use as a context manager; not thread-safe."""

    def __init__(
        self,
        socket_path: str | os.PathLike[str],
        *,
        tools: tuple[str, ...] = ("briefs",),
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.socket_path = Path(socket_path)
        self.tools = list(tools)
        self.timeout = timeout
        self.daemon_version: str | None = None
        self.daemon_board: str | None = None  # the board the daemon serves, from its ready line
        self._sock: socket.socket | None = None
        self._reader: Any = None
        self._next_id = 0

    def __enter__(self) -> DaemonClient:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def connect(self) -> None:
        """Hello + MCP handshake. Raises :class:`DaemonUnavailable` or :class:`DaemonError`."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(os.fsencode(self.socket_path))
        except OSError as exc:
            sock.close()
            if exc.errno in _NOT_RUNNING:
                raise DaemonUnavailable(f"no memoryd daemon answers on {self.socket_path}") from None
            raise DaemonError(f"cannot connect to {self.socket_path}: {exc.strerror or exc}") from None
        self._sock, self._reader = sock, sock.makefile("rb")
        try:
            cwd = os.getcwd()
        except OSError:  # the working directory was deleted
            cwd = "/"
        self._send_raw(rendezvous.hello_line(self.tools, cwd, os.getpid(), __version__))
        try:
            answer = rendezvous.parse_answer(self._readline())
        except ValueError as exc:
            raise DaemonError(f"unexpected hello answer: {exc}") from None
        if answer["memoryd"] == "error":
            raise DaemonError(f"the daemon refused the connection: {answer['message']}")
        self.daemon_version = answer.get("version")
        self.daemon_board = answer.get("board") if isinstance(answer.get("board"), str) else None
        self.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "memoryd-cli", "version": __version__},
            },
        )
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Send one request and return its ``result``; raises :class:`DaemonError` for an error answer
        (:class:`DaemonGone` when the daemon went away before answering)."""
        self._next_id += 1
        request_id = self._next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self._send(message)
        while True:  # skip notifications (logging, progress) until our answer arrives
            try:
                answer = json.loads(self._readline())
            except ValueError:
                raise DaemonError("the daemon sent a line that is not JSON") from None
            if not isinstance(answer, dict) or answer.get("id") != request_id or "method" in answer:
                continue
            if "error" in answer:
                error = answer["error"] if isinstance(answer["error"], dict) else {}
                message = str(error.get("message", "unknown error"))
                gone = message == rendezvous.RESTARTED_MESSAGE
                raise (DaemonGone if gone else DaemonError)(message, error.get("code"))
            return answer.get("result")

    def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The tool's ``structuredContent`` (its text when there is none, as ``{"text": ...}``).

        Raises :class:`DaemonError` for a JSON-RPC error or a tool error (``isError``: its text).
        """
        result = self.request("tools/call", {"name": name, "arguments": arguments})
        if not isinstance(result, dict):
            raise DaemonError(f"{name}: the daemon answered without a result object")
        text = "\n".join(
            block.get("text", "") for block in result.get("content") or () if isinstance(block, dict)
        )
        if result.get("isError"):
            raise DaemonError(text or f"{name} failed")
        structured = result.get("structuredContent")
        return structured if isinstance(structured, dict) else {"text": text}

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
        if self._sock is not None:
            self._sock.close()
        self._sock = self._reader = None

    def _send(self, message: dict[str, Any]) -> None:
        self._send_raw((json.dumps(message, ensure_ascii=False) + "\n").encode())

    def _send_raw(self, data: bytes) -> None:
        assert self._sock is not None
        try:
            self._sock.sendall(data)
        except OSError as exc:
            raise DaemonGone(f"the daemon closed the connection: {exc.strerror or exc}") from None

    def _readline(self) -> bytes:
        try:
            line = self._reader.readline(rendezvous.MAX_LINE_BYTES + 1)
        except TimeoutError:
            raise DaemonError(f"the daemon did not answer within {self.timeout:g} s") from None
        except OSError as exc:
            raise DaemonGone(f"the daemon closed the connection: {exc.strerror or exc}") from None
        if not line:
            raise DaemonGone("the daemon closed the connection")
        return line

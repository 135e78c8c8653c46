"""Accepted connections: peer-uid check, the hello line (contract §4), then one MCP session each.

Per connection, in order:

1. the peer's uid (``SO_PEERCRED`` on Linux, ``LOCAL_PEERCRED`` on macOS) must be the daemon's; otherwise
   one ``{"memoryd":"error",...}`` line and close;
2. the first line, within :data:`HELLO_TIMEOUT_S`, is either

   * a **hello** ``{"memoryd":"hello","v":1,"tools":[...],"cwd":...,"pid":...}`` validated by
     ``rendezvous.parse_hello``: answered ``{"memoryd":"ready","v":1,"version":...,"board":...}`` (the
     board this daemon serves; or an error line and close), after which every line is MCP JSON-RPC
     (:mod:`memoryd.serve.session`); or
   * a **status request** ``{"memoryd":"status","v":1}``: answered with exactly one line
     ``{"memoryd":"status","v":1,"status":{...}}``, then the daemon closes the connection
     (:mod:`memoryd.serve.control`; ``memoryd status`` uses :func:`memoryd.serve.control.ask_status`); or
   * a **forget request** ``{"memoryd":"forget","v":1}`` (``memoryd forget --now``): answered with one
     line once the index has been purged (:func:`memoryd.serve.control.forget_answer`), then closed.

   * a **capture request** ``{"memoryd":"capture","v":1,"request":{...}}`` (an agent's hook, ``memoryd
     brief``): answered with one line (:func:`memoryd.serve.control.capture_answer`), then closed.

The tool groups a session sees come from the hello's ``tools`` (``briefs`` by default).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import socket
import struct
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from memoryd.errors import peer_gone
from memoryd.logs import get_logger
from memoryd.serve import control
from memoryd.serve.app import McpApp, SessionState
from memoryd.serve.session import LineTooLong, LineWriter, McpConnection, read_line
from memoryd.tools.registry import ToolRegistry
from memoryd_shim import rendezvous

HELLO_TIMEOUT_S = 10.0
MAX_HELLO_BYTES = 64 * 1024
LINGER_S = 0.5  # after our last line: how long to drain the peer's input before closing
LINGER_MAX_BYTES = 4 * 1024 * 1024

log = get_logger("memoryd.serve.listener")


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end of a connected Unix socket; ``None`` if unknown."""
    try:
        if hasattr(socket, "SO_PEERCRED"):  # Linux: struct ucred {pid_t pid; uid_t uid; gid_t gid;}
            raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            return struct.unpack("3i", raw)[1]
        if sys.platform == "darwin":  # struct xucred {u_int cr_version; uid_t cr_uid; short cr_ngroups; ...}
            sol_local, local_peercred = 0, getattr(socket, "LOCAL_PEERCRED", 0x001)
            raw = sock.getsockopt(sol_local, local_peercred, 76)
            return struct.unpack_from("=Ii", raw)[1]
    except OSError:
        return None
    return None


class Listener:
    """The accept callback for ``asyncio.start_unix_server`` plus the set of live sessions."""

    def __init__(
        self,
        app: McpApp,
        registry: ToolRegistry,
        *,
        version: str,
        status: Callable[[], Awaitable[dict[str, Any]]],
        board: str | None = None,
    ) -> None:
        self.app = app
        self.registry = registry
        self.version = version
        self.board = board  # named in every ready line
        self._status = status
        self._ids = itertools.count(1)
        self.sessions: dict[int, SessionState] = {}
        self._connections: dict[int, McpConnection] = {}
        self._scopes: set[anyio.CancelScope] = set()
        self._closing = False

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve one connection to its end; never raises (asyncio would only log it)."""
        conn_id = next(self._ids)
        clog = log.bind(conn=conn_id)
        with anyio.CancelScope() as scope:
            self._scopes.add(scope)
            try:
                if self._closing:
                    return
                await self._serve(conn_id, reader, writer, clog)
            except Exception as exc:
                reason = f"peer went away ({type(exc).__name__})"
                if peer_gone(exc) and conn_id in self.sessions:  # left mid-answer: routine, not our failure
                    clog.info("session_closed", reason=reason, **self._counts(conn_id))
                elif peer_gone(exc):  # before its hello was answered (a liveness probe, a client giving up)
                    clog.debug("connection_closed", reason=reason)
                else:
                    clog.error("connection_failed", exc_info=exc)
            finally:
                self._scopes.discard(scope)
                self.sessions.pop(conn_id, None)
                self._connections.pop(conn_id, None)
        await _lingering_close(reader, writer)

    async def _serve(self, conn_id: int, reader, writer, clog) -> None:
        out = LineWriter(writer)
        uid = peer_uid(writer.get_extra_info("socket"))
        if uid != os.getuid():
            clog.warning("peer_refused", peer_uid=uid, daemon_uid=os.getuid())
            await out.send(
                rendezvous.error_line(f"connection refused: peer uid {uid} is not the daemon's user")
            )
            return
        try:
            with anyio.fail_after(HELLO_TIMEOUT_S):
                line = await read_line(reader)
        except TimeoutError:
            clog.info("hello_timeout", timeout_s=HELLO_TIMEOUT_S)
            await out.send(rendezvous.error_line(f"no hello line within {HELLO_TIMEOUT_S:g} s"))
            return
        except LineTooLong:
            line = b"x" * (MAX_HELLO_BYTES + 1)
        if line is None:
            return  # connected and left (a liveness probe)
        op = first_line_op(line)
        if op == "capture":  # an agent's hook, or `memoryd brief`
            await out.send(await control.capture_answer(self.app.engine, line))
            return
        if len(line) > MAX_HELLO_BYTES:
            clog.info("hello_too_long", bytes=len(line))
            await out.send(rendezvous.error_line(f"hello line longer than {MAX_HELLO_BYTES} bytes"))
            return
        if op == "status":
            await out.send(control.status_line(await self._status()))
            return
        if op == "forget":  # memoryd forget --now
            clog.info("forget_requested")
            await out.send(await control.forget_answer(self.app.engine))
            return
        try:
            hello = rendezvous.parse_hello(line)
        except ValueError as exc:
            clog.info("hello_refused", reason=str(exc))
            await out.send(rendezvous.refusal_line(exc, self.version))
            return
        groups = tuple(hello["tools"])
        state = SessionState(
            id=conn_id,
            groups=groups,
            tools=self.registry.visible(groups),
            resources=self.registry.visible_resources(groups),
            templates=self.registry.visible_templates(groups),
            cwd=hello.get("cwd") if isinstance(hello.get("cwd"), str) else None,
            client_pid=hello.get("pid") if isinstance(hello.get("pid"), int) else None,
            log=clog,
        )
        self.sessions[conn_id] = state
        await out.send(rendezvous.ready_line(self.version, self.board))
        clog.info(
            "session_open", groups=list(groups), tools=len(state.tools), cwd=state.cwd, pid=state.client_pid
        )
        connection = McpConnection(self.app, state, reader, out)
        self._connections[conn_id] = connection
        ended = await connection.run()
        clog.info("session_closed", reason=ended, **self._counts(conn_id))

    def _counts(self, conn_id: int) -> dict[str, int]:
        """What a session's closing line counts: its ignored notifications, when it had any."""
        connection = self._connections.get(conn_id)
        return {"ignored_notifications": connection.ignored} if connection and connection.ignored else {}

    async def close_all(self, timeout: float) -> None:
        """End every connection within ``timeout`` s: sessions stop reading, let their in-flight calls
        finish for up to half the time and cancel the rest (each answered with an error saying to retry:
        the shim holds the agent's next call until it reaches the next daemon); whatever is still running
        after three quarters of the time, or has not said hello yet, is cancelled outright."""
        self._closing = True
        for connection in list(self._connections.values()):
            connection.stop(drain_s=timeout / 2)
        with anyio.move_on_after(timeout * 3 / 4):
            while self._connections:
                await anyio.sleep(0.02)
        for scope in list(self._scopes):
            scope.cancel()
        with anyio.move_on_after(timeout / 4):
            while self._scopes:
                await anyio.sleep(0.02)


_CAPTURE_PREFIXES = (b'{"memoryd": "capture"', b'{"memoryd":"capture"')
_HELLO_PREFIXES = (b'{"memoryd": "hello"', b'{"memoryd":"hello"')


def first_line_op(line: bytes) -> str:
    """What a connection's first line asks for: ``"capture"``, ``"status"`` or ``"forget"`` (control
    requests, answered by :mod:`memoryd.serve.control`), else ``"hello"`` (validated by
    ``rendezvous.parse_hello``, which refuses anything that is not one).

    A capture request is known by its prefix (it may be long: it is never parsed here); a shim's hello
    (``rendezvous.hello_line``) by its own, so it is parsed once, by ``parse_hello``; any other line of
    at most :data:`MAX_HELLO_BYTES` is a status or forget request when it is the JSON object
    ``{"memoryd": op, "v": 1}``, whatever its spacing or key order."""
    if line.startswith(_CAPTURE_PREFIXES):
        return "capture"
    if line.startswith(_HELLO_PREFIXES) or len(line) > MAX_HELLO_BYTES:
        return "hello"
    try:
        msg = json.loads(line)
    except (ValueError, RecursionError):  # parse_hello answers it as the bad hello it is
        return "hello"
    if (
        isinstance(msg, dict)
        and msg.get("v") == rendezvous.WIRE_VERSION
        and msg.get("memoryd") in CONTROL_OPS
    ):
        return msg["memoryd"]
    return "hello"


#: The control requests other than capture (parsed in full by :func:`first_line_op`).
CONTROL_OPS = ("status", "forget")


async def _lingering_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Close so that our last line (an error, a status) reaches the peer.

    Closing a Unix socket with unread input makes the peer's next read fail with ECONNRESET, and the
    line we just wrote is lost with it (a shim that pipelines its first requests behind the hello would
    never see why it was refused). So: send EOF first, discard what the peer still sends for a moment
    (bounded in time and bytes), then close.
    """
    with contextlib.suppress(ConnectionError, OSError, RuntimeError):
        if writer.can_write_eof() and not writer.is_closing():
            writer.write_eof()
    with (
        anyio.move_on_after(LINGER_S, shield=True),
        contextlib.suppress(ConnectionError, OSError, ValueError),
    ):
        discarded = 0
        while discarded < LINGER_MAX_BYTES and (chunk := await reader.read(1 << 16)):
            discarded += len(chunk)
    writer.close()
    with anyio.move_on_after(1.0, shield=True), contextlib.suppress(ConnectionError, OSError):
        await writer.wait_closed()

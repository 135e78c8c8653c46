"""MCP over Streamable HTTP at ``/mcp``: the SDK's session manager in front of the daemon's one ``McpApp``.

The transport is the SDK's own (:class:`mcp.server.streamable_http_manager.StreamableHTTPSessionManager`):
a request whose ``MCP-Protocol-Version`` header names a 2026-era revision is one stateless exchange
(``server/discover``, ``tools/list``, ``tools/call`` each a self-contained POST); anything else is the
2025-11-25 handshake era with a session (``initialize`` opens it, the answer carries ``Mcp-Session-Id``,
``DELETE`` ends it, and it expires after :data:`SESSION_IDLE_S` without requests). Answers stream as SSE.

What this module adds in front of it, so HTTP behaves as the socket does:

* **tool groups**: ``?tools=briefs,memo`` or the header ``X-Memoryd-Tools: briefs,memo`` (the query wins;
  default ``briefs``; parsed by :func:`memoryd_shim.rendezvous.parse_tool_groups`, an unknown group is a
  400 with a ``-32602`` error). A handshake-era session keeps the groups it was opened with. The groups
  become a :class:`memoryd.serve.app.SessionState` put in the ASGI scope under :data:`SCOPE_KEY`, where
  ``McpApp``'s handlers find it (``ctx.request.scope``), so the tool boundary, its error shapes, timeouts
  and metrics are the socket's, unchanged;
* **JSON-RPC hygiene**: every POST body passes :func:`memoryd.serve.jsonrpc.classify` first. An answer
  it makes there (``-32700`` for malformed JSON, ``-32600`` for a batch, a non-object or a bad id,
  ``-32602`` for positional params; ``-32700`` for an empty body too, which the socket would drop as a
  blank line) is sent as a 400 with that JSON-RPC error as its body; a malformed
  notification or response is acknowledged 202 and dropped. A request reusing the id of a request still
  in flight in the same session is refused ``-32600`` (the SDK keys in-flight requests by ``str(id)`` and
  would mix up their answers);
* a body over :data:`memoryd_shim.rendezvous.MAX_LINE_BYTES` (the socket's line cap) is a 413; a body of
  :data:`memoryd.serve.jsonrpc.OFFLOAD_BYTES` or more is classified in a worker thread, and its size put in
  the scope under :data:`memoryd.serve.app.HTTP_BODY_BYTES_KEY`, so the tool boundary checks its
  arguments there too: a big call holds up no other request.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
import mcp_types as types
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import Message, Receive, Scope, Send

from memoryd.errors import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR
from memoryd.logs import get_logger
from memoryd.serve import jsonrpc
from memoryd.serve.app import HTTP_BODY_BYTES_KEY, HTTP_SCOPE_KEY, McpApp, SessionState
from memoryd.tools.registry import ToolRegistry
from memoryd_shim import rendezvous

#: Where ``McpApp`` finds the per-request :class:`SessionState` (see ``memoryd.serve.app.session_of``).
SCOPE_KEY = HTTP_SCOPE_KEY
GROUPS_HEADER = b"x-memoryd-tools"
SESSION_HEADER = b"mcp-session-id"
SESSION_IDLE_S = 30 * 60.0
MAX_BODY_BYTES = rendezvous.MAX_LINE_BYTES

log = get_logger("memoryd.http.mcp")


@dataclass
class _Session:
    """A handshake-era HTTP session as this module tracks it (the SDK tracks its transport)."""

    state: SessionState
    last_used: float = field(default_factory=time.monotonic)
    in_flight: set[str] = field(default_factory=set)


class McpHttp:
    """The ASGI app mounted at ``/mcp``. Enter :meth:`run` (once) around serving."""

    def __init__(self, app: McpApp, registry: ToolRegistry) -> None:
        self.app = app
        self.registry = registry
        self.manager = StreamableHTTPSessionManager(
            app.server,
            session_idle_timeout=SESSION_IDLE_S,
            max_request_body_size=MAX_BODY_BYTES,
        )
        self._ids = itertools.count(1)
        self._sessions: dict[str, _Session] = {}

    @property
    def sessions(self) -> int:
        """Handshake-era sessions open now (as far as this side knows)."""
        return len(self._sessions)

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """The session manager's lifetime (its task group holds every session); ends them all on exit."""
        async with self.manager.run():
            yield
        self._sessions.clear()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            groups = tuple(rendezvous.parse_tool_groups(_groups_spec(scope)))
        except ValueError as exc:
            await _json_answer(
                send, 400, jsonrpc.error_line(None, INVALID_PARAMS, str(exc)[:300]).rstrip(b"\n")
            )
            return
        session_id = _header(scope, SESSION_HEADER)
        modern = _is_modern(scope)
        tracked = None if modern or session_id is None else self._sessions.get(session_id)
        body = b""
        if scope.get("method") == "POST":
            read = await _read_body(receive)
            if read is None:
                error = jsonrpc.error_line(None, INVALID_REQUEST, f"body over {MAX_BODY_BYTES} bytes")
                await _json_answer(send, 413, error.rstrip(b"\n"))
                return
            body = read
            if not body.strip():  # a line protocol drops blank lines; an HTTP body must hold a message
                error = jsonrpc.error_line(None, PARSE_ERROR, "Parse error: the request body is empty")
                await _json_answer(send, 400, error.rstrip(b"\n"))
                return
            if len(body) >= jsonrpc.OFFLOAD_BYTES:  # parsed, and its arguments checked, off the event loop
                scope[HTTP_BODY_BYTES_KEY] = len(body)
                verdict = await anyio.to_thread.run_sync(jsonrpc.classify, body)
            else:
                verdict = jsonrpc.classify(body)
            match verdict:
                case jsonrpc.Reply(answer, reason):
                    log.info("rejected_body", reason=reason, bytes=len(body))
                    await _json_answer(send, 400, answer.rstrip(b"\n"))
                    return
                case jsonrpc.Drop(reason):
                    log.debug("dropped_body", reason=reason, bytes=len(body))
                    await _empty(send, 202)
                    return
                case jsonrpc.Forward(message):
                    request_id = message.id if isinstance(message, types.JSONRPCRequest) else None
        else:
            request_id = None
        request_key = None if request_id is None else str(request_id)
        state = tracked.state if tracked is not None else self._new_state(groups, modern)
        scope[SCOPE_KEY] = state
        if tracked is not None and request_key is not None:
            if request_key in tracked.in_flight:
                text = jsonrpc.DUPLICATE_ID_MESSAGE.format(id=json.dumps(request_id)[:80])
                await _json_answer(
                    send, 400, jsonrpc.error_line(request_id, INVALID_REQUEST, text).rstrip(b"\n")
                )
                return
            tracked.in_flight.add(request_key)
        try:
            await self.manager.handle_request(scope, _replay(body, receive), self._watch(scope, state, send))
        finally:
            if tracked is not None:
                tracked.last_used = time.monotonic()
                if request_key is not None:
                    tracked.in_flight.discard(request_key)
            if session_id is not None and scope.get("method") == "DELETE":
                self._sessions.pop(session_id, None)

    def _new_state(self, groups: tuple[str, ...], modern: bool) -> SessionState:
        conn = next(self._ids)
        return SessionState(
            id=conn,
            groups=groups,
            tools=self.registry.visible(groups),
            resources=self.registry.visible_resources(groups),
            templates=self.registry.visible_templates(groups),
            log=log.bind(http=conn, era="modern" if modern else "handshake"),
        )

    def _watch(self, scope: Scope, state: SessionState, send: Send) -> Send:
        """``send``, noting the session id the SDK hands out when it opens a session (and forgetting one it
        answers 404 for)."""
        asked = _header(scope, SESSION_HEADER)

        async def watched(message: Message) -> None:
            if message["type"] == "http.response.start":
                given = next(
                    (v.decode("latin-1") for k, v in message.get("headers", ()) if k == SESSION_HEADER), None
                )
                if asked is None and given is not None and given not in self._sessions:
                    self._forget_idle()
                    self._sessions[given] = _Session(state)
                    state.log.info("http_session_open", groups=list(state.groups), tools=len(state.tools))
                elif asked is not None and message["status"] == 404:
                    self._sessions.pop(asked, None)
            await send(message)

        return watched

    def _forget_idle(self) -> None:
        """Drop sessions the SDK has expired by now (it ends them after the same idle time)."""
        horizon = time.monotonic() - SESSION_IDLE_S
        for sid in [s for s, t in self._sessions.items() if t.last_used < horizon and not t.in_flight]:
            del self._sessions[sid]


def _header(scope: Scope, name: bytes) -> str | None:
    return next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k == name), None)


def _groups_spec(scope: Scope) -> str | None:
    from urllib.parse import parse_qs

    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    if "tools" in query:
        return ",".join(query["tools"])
    return _header(scope, GROUPS_HEADER)


def _is_modern(scope: Scope) -> bool:
    """The SDK's own routing rule: a protocol-version header that is not a handshake-era version."""
    version = _header(scope, b"mcp-protocol-version")
    return version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS


async def _read_body(receive: Receive) -> bytes | None:
    """The whole request body, or ``None`` once it passes :data:`MAX_BODY_BYTES`."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that yields the already-read body once, then the client's further messages
    (``http.disconnect``)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _json_answer(send: Send, status: int, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _empty(send: Send, status: int) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-length", b"0")]})
    await send({"type": "http.response.body", "body": b""})

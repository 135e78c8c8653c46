"""memoryd's small error tree, and the one boundary that maps it onto the wire.

Tool logic raises these (or any plain exception; the board's and index's own errors subclass them:
``InvalidId`` is an :class:`InvalidParams`, ``BriefNotFound`` a :class:`NotFound`); only :func:`tool_failure_result` and
:func:`to_mcp_error` turn them into protocol shapes, so no tool ever builds a JSON-RPC error itself.

Two kinds of failure exist on the wire (MCP spec, "Tools" -> "Error Handling"):

* **protocol errors**, a JSON-RPC ``error`` answer: an unknown tool, a malformed ``tools/call``; and, for
  sessions negotiated below 2025-11-25, arguments that break the input schema (``-32602`` invalid params);
* **tool execution errors**, a normal ``CallToolResult`` with ``isError: true`` whose text the model can
  read and act on: a timeout, the index still warming up, a board that cannot be read, a missing id, and
  from 2025-11-25 on (spec: "Input validation errors" are tool execution errors) arguments that break the
  input schema.

A tool execution error is ``{"content": [{"type": "text", "text": <message>}], "isError": true}`` with no
``structuredContent``: the TypeScript SDK client validates any ``structuredContent`` against the tool's
``outputSchema`` even on an error (and throws ``-32602`` when it does not match), the Python SDK skips
that check for errors, and Codex shows the model ``structuredContent`` instead of the text whenever it is
present, so an error object of our own would either be refused or hide the message. A tool whose
``outputSchema`` itself describes its failures (the memories group's memdb envelope) names an
:data:`Envelope`; its error is then that object, as ``structuredContent`` and as the text.

Unexpected exceptions become a tool execution error with a generic message and a reference; the
traceback goes to the daemon log only (exception text can carry paths or stored data).

Startup failures (:class:`StartupError`) carry the process exit code ``memoryd serve`` should use.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the SDK costs seconds to import; start-up checks (locks, socket) must not wait for it
    import mcp_types as types
    from mcp.shared.exceptions import MCPError

# JSON-RPC 2.0 codes (https://www.jsonrpc.org/specification#error_object).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

#: ``memoryd serve`` exit codes (0 is a clean stop after SIGTERM/SIGINT).
EXIT_STARTUP_FAILED = 1
EXIT_ALREADY_RUNNING = 4


class MemorydError(Exception):
    """Base of every error memoryd raises on purpose; ``str(exc)`` is safe to show to a model."""


# --- protocol errors: a JSON-RPC error answer --------------------------------------------------------


class ProtocolError(MemorydError):
    """A request the server refuses at the protocol level; ``code`` is the JSON-RPC error code."""

    code: int = INVALID_PARAMS

    def __init__(self, message: str, data: object = None) -> None:
        super().__init__(message)
        self.data = data


class InvalidParams(ProtocolError):
    """Arguments that break the tool's input schema or a pattern (ids, paths): JSON-RPC ``-32602``."""

    code = INVALID_PARAMS


class UnknownTool(InvalidParams):
    """A tool name this session does not expose (MCP spec example: ``-32602 Unknown tool: x``)."""

    def __init__(self, name: str) -> None:
        # A real name has at most 64 characters; a longer one (a pasted file, a key) is not echoed whole.
        shown = repr(name) if len(name) <= 64 else f"{name[:40]!r}… ({len(name):,} characters)"
        super().__init__(f"Unknown tool: {shown}")
        self.name = name


# --- tool execution errors: CallToolResult(isError=True) ------------------------------------------------


class ToolFailed(MemorydError):
    """A tool ran and could not do its job; the message is written for the model (what happened, what to do).

    ``code``: an optional machine-readable code for tools whose answers carry one (memdb's ``E_...``)."""

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


class NotFound(ToolFailed):
    """A well-formed id that names nothing on the board."""


class BoardUnreadable(ToolFailed):
    """The board cannot be read: say so, never answer an empty list that reads as "no history"."""


class WarmingUp(ToolFailed):
    """The engine (index, model) is still loading; the daemon answers the handshake before it is ready."""


class EngineUnavailable(ToolFailed):
    """The engine failed to start or is not configured in this daemon."""


class ToolTimeout(ToolFailed):
    """A tool call ran past its deadline (``MEMORYD_TOOL_TIMEOUT_MS``, default 15 s) and was stopped."""


# --- startup ----------------------------------------------------------------------------------------


class StartupError(MemorydError):
    """``memoryd serve`` cannot start; ``exit_code`` is what the process should exit with."""

    exit_code = EXIT_STARTUP_FAILED


class AlreadyRunning(StartupError):
    """Another daemon holds this socket's (or board's) lock and is serving; the first one keeps serving."""

    exit_code = EXIT_ALREADY_RUNNING


class SocketPathError(StartupError):
    """The socket path or its directory is unsafe or unusable (not a socket, wrong owner, loose mode)."""


# --- the boundary -------------------------------------------------------------------------------------


def failure_kind(exc: BaseException) -> str:
    """The wire name of a failure: the nearest class of this module (``InvalidId`` -> ``"InvalidParams"``)."""
    for cls in type(exc).__mro__:
        if cls.__module__ == __name__:
            return cls.__name__
    return type(exc).__name__


def peer_gone(exc: BaseException) -> bool:
    """Whether ``exc`` only says the peer went away mid-exchange (a reset or closed socket or pipe, or a
    stream the SDK closed behind it), for every exception of a group: an event to log at info level,
    never an error with a traceback."""
    import anyio

    if isinstance(exc, BaseExceptionGroup):
        return all(peer_gone(e) for e in exc.exceptions)
    return isinstance(exc, ConnectionError | anyio.BrokenResourceError | anyio.ClosedResourceError)


def to_mcp_error(exc: ProtocolError) -> MCPError:
    """The SDK exception that makes the dispatcher answer with ``{"code", "message", "data"}``."""
    from mcp.shared.exceptions import MCPError

    return MCPError(code=exc.code, message=str(exc), data=exc.data)


def error_text(message: str, **details: object) -> str:
    """The text block of an ``isError`` result: the message, then any details as compact JSON."""
    if not details:
        return message
    return f"{message}\n{json.dumps(details, ensure_ascii=False, default=str)}"


#: ``envelope(exc, kind, message, tool) -> dict``: the structured answer of a failed call for a tool whose
#: ``outputSchema`` admits it. ``kind`` is the failure's class name (``"InternalError"`` for a crash).
Envelope = Callable[[BaseException, str, str, str], dict[str, Any]]


def argument_errors_are_results(protocol_version: str | None) -> bool:
    """Whether input-validation errors are tool execution errors at this negotiated version (MCP
    2025-11-25 and later, the stateless 2026-07-28 era included); before it they are ``-32602``."""
    return (protocol_version or "") >= "2025-11-25"


def tool_failure_result(
    exc: BaseException, tool: str, log: Any, *, envelope: Envelope | None = None
) -> types.CallToolResult:
    """Map an exception raised by a tool handler to ``CallToolResult(isError=True)``.

    :class:`ToolFailed` (and :class:`InvalidParams`, for sessions where argument errors are results)
    messages pass through verbatim. Anything else is a bug or an environment failure: it is logged with
    its traceback under a short reference, and the model sees only the reference (exception text may
    hold paths or stored data). Without ``envelope`` the result is the text alone (module docstring).
    """
    if isinstance(exc, ToolFailed | InvalidParams):
        kind = failure_kind(exc)
        text = str(exc)
        log.info("tool_failed", tool=tool, kind=kind, reason=text)
    else:
        kind = "InternalError"
        ref = secrets.token_hex(4)
        log.error("tool_crashed", tool=tool, ref=ref, exc_info=exc)
        text = f"{tool} failed with an internal error (daemon log reference {ref}); try again or report it."
    import mcp_types as types

    if envelope is None:
        return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
    structured = envelope(exc, kind, text, tool)
    return types.CallToolResult(
        content=[types.TextContent(text=json.dumps(structured, ensure_ascii=False))],
        structured_content=structured,
        is_error=True,
    )

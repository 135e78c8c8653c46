"""Line framing and JSON-RPC 2.0 hygiene, applied to every inbound line before the MCP SDK sees it.

The SDK silently drops lines it cannot parse into a message (``jsonrpc_message_adapter``); a client then
waits forever. :func:`classify` decides, per line, between passing the message on, answering it here,
or dropping it (JSON-RPC 2.0 §4-§6, https://www.jsonrpc.org/specification; MCP "Base Protocol" 2025-06-18
and later: ids are strings or integers, never null; batches are removed):

============================================================  =============================================
line                                                          outcome
============================================================  =============================================
not UTF-8 / not JSON / ``NaN`` / out-of-range number           answer ``-32700`` with ``id: null``
``null``, ``42``, ``"str"``, ``true``                          answer ``-32600`` with ``id: null``
``[]``                                                         answer ``-32600`` with ``id: null``
``[...]`` (a batch)                                            answer an array of ``-32600``, one per element
                                                              that is not a notification (or one ``id:null``
                                                              error when none is)
object without ``"jsonrpc": "2.0"`` or with a non-string       answer ``-32600``; the id is echoed when it is
``method``, or with neither ``method`` nor ``result/error``    a string or an integer, else ``null``
request whose id is not a string/integer (``null``, ``1.5``)   answer ``-32600`` with ``id: null``
request whose params is an array                               answer ``-32602`` (MCP params are named)
request whose params is a scalar                               answer ``-32600``
request whose params the SDK would refuse (``tools/call``,     answer ``-32602`` naming the parameter and what
``initialize``, ``*/list``, ``logging/setLevel``)              is accepted (:mod:`memoryd.serve.params`)
request whose method is not UTF-8 text (a lone surrogate)      answer ``-32601``, the method's name in ``data``
                                                              with U+FFFD for each lone surrogate
well-formed request / notification / response                  forward to the SDK
malformed notification or response                             drop (a notification is never answered, and
                                                              answering a response would start a ping-pong)
blank line                                                     drop (NDJSON keep-alive)
============================================================  =============================================

Ids are echoed with their JSON type and value preserved (``0``, ``"0"``, ``1``, ``"1"`` differ; big
integers and long strings round-trip exactly). The SDK dispatcher treats ``"7"`` and ``7`` as one id for
in-flight bookkeeping and lets a duplicate id overwrite an in-flight one, so :class:`IdMap` gives every
inbound request a private id before the SDK sees it and restores the client's id on the way out. A request
whose id is already in flight on the connection (JSON-RPC 2.0 §4: an id identifies one request; MCP "Base
Protocol": "The request ID MUST NOT have been previously used by the requestor within the same session")
is answered ``-32600`` with that id and never reaches the SDK; the first request is answered normally, and
the id may be used again once that answer is out.

In the handshake era a request other than ``initialize`` or ``ping`` before ``initialize`` is answered
here, ``-32600`` with :data:`NOT_INITIALIZED_MESSAGE` (:func:`before_initialize_refusal`), instead of
the SDK's bare "Invalid request parameters".
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from memoryd.errors import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR
from memoryd.serve.params import params_problem
from memoryd.textcheck import has_lone_surrogate
from memoryd_shim.textrules import replace_lone_surrogates

BATCH_MESSAGE = (
    "JSON-RPC batches are not supported (removed from MCP in 2025-06-18); send one message per line"
)
NOT_INITIALIZED_MESSAGE = (
    "Session not initialized: send an initialize request (and then notifications/initialized) before "
    "{method}; only ping is answered before initialize"
)
DUPLICATE_ID_MESSAGE = "Invalid Request: id {id} is already in use by a request in flight on this session"

#: A line at least this long (bytes) is classified in a worker thread, and its tool call's arguments are
#: checked in one: 16 KiB parses in ~0.1 ms, but a schema check of its small values can take 50 ms (a
#: 0.85 MB list of tags took 2.6 s), which on the event loop would stall every other session.
OFFLOAD_BYTES = 16 * 1024


@dataclass(frozen=True, slots=True)
class LineSize:
    """The size in bytes of the line a request came in, for a line of :data:`OFFLOAD_BYTES` or more. The
    session hands it to the SDK as the message's transport context (``ServerMessageMetadata``
    ``request_context``), which the tool boundary reads back as ``ctx.request``."""

    bytes: int


@dataclass(frozen=True, slots=True)
class Forward:
    """A well-formed message for the SDK."""

    message: types.JSONRPCMessage


@dataclass(frozen=True, slots=True)
class Reply:
    """Answer the peer with ``line`` (one newline-terminated JSON value) without involving the SDK."""

    line: bytes
    reason: str


@dataclass(frozen=True, slots=True)
class Drop:
    """Ignore the line; ``reason`` is for the log."""

    reason: str


Inbound = Forward | Reply | Drop


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} is out of range")
    return value


_decoders = threading.local()  # one per thread: big lines are parsed in worker threads


def loads_strict(data: bytes) -> Any:
    """Parse one JSON text: UTF-8 only, no ``NaN``/``Infinity``, finite numbers. Raises ``ValueError``."""
    text = data.decode("utf-8")  # UnicodeDecodeError is a ValueError
    if text.startswith("\ufeff"):  # what json.loads says of it
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    decoder = getattr(_decoders, "strict", None)
    if decoder is None:  # built once: json.loads with hooks builds one per call (half its time on a ping)
        decoder = _decoders.strict = json.JSONDecoder(
            parse_constant=_reject_constant, parse_float=_finite_float
        )
    try:
        return decoder.decode(text)
    except RecursionError:
        raise ValueError("JSON nesting is too deep") from None


def encode_line(value: Any) -> bytes:
    """One newline-terminated JSON line. Falls back to ASCII escapes for strings that are not valid
    UTF-8 (lone surrogates read from ``\\ud800`` escapes), so such an id still round-trips exactly."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        return json.dumps(value, ensure_ascii=True, separators=(",", ":")).encode("ascii") + b"\n"


def error_object(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    """A JSON-RPC 2.0 error response object (``id`` may be ``None`` when it could not be read)."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def error_line(request_id: Any, code: int, message: str, data: Any = None) -> bytes:
    """:func:`error_object` as a line."""
    return encode_line(error_object(request_id, code, message, data))


def encode_message(message: types.JSONRPCMessage) -> bytes:
    """Serialise an SDK message as one line (the shape ``mcp.server.stdio`` writes)."""
    try:
        return types.jsonrpc_message_adapter.dump_json(message, by_alias=True, exclude_unset=True) + b"\n"
    except (PydanticSerializationError, ValueError):
        # Lone surrogates cannot be UTF-8 encoded; json's ASCII escapes keep them exact.
        plain = types.jsonrpc_message_adapter.dump_python(
            message, by_alias=True, exclude_unset=True, mode="json"
        )
        return encode_line(plain)


def valid_id(value: Any) -> bool:
    """MCP request ids: a string or an integer (``bool`` is not an integer here)."""
    return isinstance(value, str | int) and not isinstance(value, bool)


class IdMap:
    """Per-connection translation between client request ids and private SDK-side ids (ints 1, 2, ...).

    Keys keep the JSON type (``("s", "1")`` vs ``("i", 1)``), so ``notifications/cancelled`` cancels
    exactly the request the client named, and a cancel naming no request in flight is dropped rather than
    matched by the SDK's lenient ``"7" == 7`` rule against another request. Every answer the SDK writes
    is to a mapped request; an answer whose mapping is gone belongs to a request the client cancelled
    (a late answer the spec lets us drop), so a private id never reaches the client.
    """

    def __init__(self) -> None:
        self._next = 0
        self._original: dict[int, Any] = {}  # private -> client id
        self._private: dict[tuple[str, Any], int] = {}  # client id key -> latest private id

    @staticmethod
    def _key(request_id: Any) -> tuple[str, Any]:
        return ("s" if isinstance(request_id, str) else "i", request_id)

    def __len__(self) -> int:
        return len(self._original)

    def in_flight(self, request_id: Any) -> bool:
        """Whether a request with this client id (same JSON type) is mapped and not yet answered."""
        return self._key(request_id) in self._private

    def inbound(self, message: types.JSONRPCMessage) -> types.JSONRPCMessage | Reply | None:
        """The message to hand the SDK (a request gets a private id); a :class:`Reply` refusing a request
        whose id is already in flight; ``None`` to drop it."""
        if isinstance(message, types.JSONRPCRequest):
            if self.in_flight(message.id):
                text = DUPLICATE_ID_MESSAGE.format(id=json.dumps(message.id)[:80])
                return Reply(error_line(message.id, INVALID_REQUEST, text), "duplicate request id")
            self._next += 1
            self._original[self._next] = message.id
            self._private[self._key(message.id)] = self._next
            return message.model_copy(update={"id": self._next})
        if isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
            params = dict(message.params or {})
            target = params.get("requestId")
            private = self._private.pop(self._key(target), None) if valid_id(target) else None
            if private is None:
                return None  # nothing of ours in flight under that id
            del self._original[private]  # the cancelled request is never answered
            params["requestId"] = private
            return message.model_copy(update={"params": params})
        return message

    def outbound(self, message: types.JSONRPCMessage) -> types.JSONRPCMessage | None:
        """Restore the client's id on an answer; ``None`` for an answer to a cancelled request."""
        if not isinstance(message, types.JSONRPCResponse | types.JSONRPCError) or message.id is None:
            return message
        original = self._original.pop(message.id, _MISSING) if isinstance(message.id, int) else _MISSING
        if original is _MISSING:
            return None
        key = self._key(original)
        if self._private.get(key) == message.id:
            del self._private[key]
        return message.model_copy(update={"id": original})


_MISSING = object()


UNSUPPORTED_PROTOCOL_VERSION = -32022  # MCP 2026-07-28
_PROTOCOL_VERSION_META_KEY = "io.modelcontextprotocol/protocolVersion"


def era_probe_rejection(message: types.JSONRPCMessage) -> Reply | None:
    """For a connection whose protocol era is not decided yet: refuse a request stamped with a
    2026-era envelope of a version we do not serve, *before* the SDK sees it.

    The SDK would lock the connection to the stateless era and answer ``-32022`` listing only the
    modern versions, which a client probing with a newer revision reads as "modern-only, no common
    version" and gives up. We answer ``-32022`` listing every version we serve, handshake ones
    included, and leave the era open, so the client can fall back to ``initialize`` on the same
    connection (the fallback rule in ``mcp.client._probe``).
    """
    if not isinstance(message, types.JSONRPCRequest) or message.method == "initialize":
        return None
    meta = (message.params or {}).get("_meta")
    requested = meta.get(_PROTOCOL_VERSION_META_KEY) if isinstance(meta, dict) else None
    if not isinstance(requested, str) or requested in MODERN_PROTOCOL_VERSIONS:
        return None
    data = {"supported": [*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS], "requested": requested}
    line = error_line(message.id, UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version", data)
    return Reply(line, f"unsupported protocol version {requested[:40]!r}")


def opens_stateless_era(message: types.JSONRPCMessage) -> bool:
    """A request carrying the 2026-07-28 ``_meta`` envelope (other than ``initialize``): the SDK's rule for
    opening a stateless connection (``mcp.server.runner._has_modern_envelope``)."""
    if not isinstance(message, types.JSONRPCRequest) or message.method == "initialize":
        return False
    meta = (message.params or {}).get("_meta")
    return isinstance(meta, dict) and _PROTOCOL_VERSION_META_KEY in meta


def before_initialize_refusal(message: types.JSONRPCMessage, served: Callable[[str], bool]) -> Reply | None:
    """For a handshake-era connection that has not sent ``initialize`` yet: the ``-32600`` answer to a
    request of a method the server serves (``served(method)``) other than ``initialize`` and ``ping``
    (MCP "Lifecycle": the client SHOULD NOT send requests other than pings before the server has
    responded to ``initialize``). ``None`` lets the message through: notifications, ``initialize``,
    ``ping``, a stateless-era request, and unknown methods (the SDK answers those ``-32601``)."""
    if not isinstance(message, types.JSONRPCRequest) or message.method in ("initialize", "ping"):
        return None
    if opens_stateless_era(message) or not served(message.method):
        return None
    text = NOT_INITIALIZED_MESSAGE.format(method=message.method[:80])
    data = {"method": message.method[:80], "expected": "initialize"}
    return Reply(
        error_line(message.id, INVALID_REQUEST, text, data), f"{message.method[:80]} before initialize"
    )


def _reply(request_id: Any, code: int, message: str, data: Any = None) -> Reply:
    return Reply(error_line(request_id, code, message, data), message)


def _batch_reply(items: list[Any]) -> Reply:
    errors = []
    for item in items:
        is_notification = isinstance(item, dict) and isinstance(item.get("method"), str) and "id" not in item
        if is_notification:
            continue  # JSON-RPC 2.0 §6: notifications in a batch get no response object
        rid = item.get("id") if isinstance(item, dict) else None
        errors.append(error_object(rid if valid_id(rid) else None, INVALID_REQUEST, BATCH_MESSAGE))
    if not errors:
        return _reply(None, INVALID_REQUEST, BATCH_MESSAGE)
    return Reply(encode_line(errors), BATCH_MESSAGE)


def classify(line: bytes) -> Inbound:
    """Decide what to do with one inbound line (without its ``\\n``); see the module table."""
    if not line.strip():
        return Drop("blank line")
    try:
        obj = loads_strict(line)
    except ValueError as exc:
        return _reply(None, PARSE_ERROR, f"Parse error: {exc}"[:300])
    if isinstance(obj, list):
        if not obj:
            return _reply(None, INVALID_REQUEST, "Invalid Request: empty array")
        return _batch_reply(obj)
    if not isinstance(obj, dict):
        return _reply(
            None,
            INVALID_REQUEST,
            f"Invalid Request: a message must be a JSON object, not {type(obj).__name__}",
        )
    has_id = "id" in obj
    rid = obj.get("id")
    echo = rid if valid_id(rid) else None
    if "method" not in obj:
        if "result" in obj or "error" in obj:
            return _forward_response(obj)
        return _reply(echo, INVALID_REQUEST, "Invalid Request: no method")
    method = obj["method"]
    if not isinstance(method, str):
        return _reply(echo, INVALID_REQUEST, "Invalid Request: method must be a string")
    if obj.get("jsonrpc") != "2.0":
        return _reply(echo, INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"')
    params = obj.get("params")
    if not has_id:
        if params is not None and not isinstance(params, dict):
            return Drop(f"notification {method[:80]!r} with non-object params")
        if has_lone_surrogate(method):
            return Drop("notification whose method is not UTF-8 text")
        return _validated(obj, echo=None)
    if not valid_id(rid):
        return _reply(None, INVALID_REQUEST, "Invalid Request: id must be a string or an integer")
    if isinstance(params, list):
        return _reply(rid, INVALID_PARAMS, "Invalid params: params must be an object (MCP uses named params)")
    if params is not None and not isinstance(params, dict):
        return _reply(rid, INVALID_REQUEST, "Invalid Request: params must be an object")
    if has_lone_surrogate(method):  # no method is named so; the SDK's answer would echo it as it is
        data = replace_lone_surrogates(method)[:200]
        return _reply(rid, METHOD_NOT_FOUND, "Method not found", data)
    if problem := params_problem(method, params or {}):
        return _reply(rid, INVALID_PARAMS, f"Invalid params: {problem}")
    return _validated(obj, echo=rid)


def _forward_response(obj: dict[str, Any]) -> Inbound:
    # A response to a request the server sent (ping, sampling...). Never answered, even when malformed.
    if obj.get("jsonrpc") != "2.0":
        return Drop('response without "jsonrpc": "2.0"')
    try:
        return Forward(types.jsonrpc_message_adapter.validate_python(obj, by_name=False))
    except ValidationError:
        return Drop("malformed response")


def _validated(obj: dict[str, Any], *, echo: Any) -> Inbound:
    try:
        message = types.jsonrpc_message_adapter.validate_python(obj, by_name=False)
    except ValidationError:
        if echo is None:
            return Drop("malformed notification")
        return _reply(echo, INVALID_REQUEST, "Invalid Request")
    if echo is not None and not isinstance(message, types.JSONRPCRequest):
        return _reply(echo, INVALID_REQUEST, "Invalid Request")
    return Forward(message)

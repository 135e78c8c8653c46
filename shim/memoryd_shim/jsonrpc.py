"""Just enough JSON-RPC for the relay: classify a line, key its id, write the shim's own errors.

The relay forwards lines verbatim; it parses them only to know which requests are in flight (so a
lost daemon connection can answer each of them exactly once) and to recognise ``initialize``.
"""

from __future__ import annotations

from memoryd_shim import wirejson

REQUEST = "request"  # has "method" and "id"
NOTIFICATION = "notification"  # has "method", no "id"
RESPONSE = "response"  # has "id" and "result" or "error", no "method"
OTHER = "other"  # valid JSON, but none of the above (arrays, scalars, odd objects)
INVALID = "invalid"  # not JSON at all

#: JSON-RPC codes the shim itself answers with.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
#: Server-defined range; the mcp SDK uses -32000 for "connection closed", which is what the shim reports.
CONNECTION_CLOSED = -32000


class Message:
    """What the relay needs to know about one line: ``kind``, ``id`` (any JSON value), ``key``, ``method``.

    ``key`` is a hashable, type-preserving form of the id (``1``, ``"1"`` and ``1.0`` differ), or
    ``None`` when the message has no id.
    """

    __slots__ = ("kind", "id", "key", "method")

    def __init__(self, kind: str, id: object = None, key: str | None = None, method: str | None = None):
        self.kind = kind
        self.id = id
        self.key = key
        self.method = method

    def __repr__(self) -> str:
        return f"Message({self.kind}, id={self.id!r}, method={self.method!r})"


def id_key(id: object) -> str:
    """A dict key for a JSON-RPC id that keeps its JSON type: ``1`` -> ``"1"``, ``"1"`` -> ``'"1"'``."""
    return wirejson.dumps(id)


def classify(line: bytes) -> Message:
    """Parse one line (bytes, newline optional) into a :class:`Message`; never raises."""
    try:
        msg = wirejson.loads(line)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return Message(INVALID)
    if not isinstance(msg, dict):
        return Message(OTHER)
    method = msg.get("method")
    has_id = "id" in msg
    ident = msg.get("id")
    if isinstance(method, str):
        if has_id:
            return Message(REQUEST, ident, id_key(ident), method)
        return Message(NOTIFICATION, method=method)
    if has_id and ("result" in msg or "error" in msg):
        return Message(RESPONSE, ident, id_key(ident))
    return Message(OTHER)


def error_line(id: object, code: int, message: str) -> bytes:
    """``{"jsonrpc":"2.0","id":<id>,"error":{"code":<code>,"message":<message>}}`` plus a newline."""
    body = {"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}
    return (wirejson.dumps(body) + "\n").encode()


def with_id(line: bytes, new_id: object) -> bytes:
    """The same JSON object with its ``id`` replaced, newline-terminated (used to replay ``initialize``)."""
    msg = wirejson.loads(line)
    msg["id"] = new_id
    return (wirejson.dumps(msg) + "\n").encode()


def head_id(head: bytes) -> object:
    """The top-level ``id`` of a JSON object from only its first bytes, or ``None`` when not found cheaply.

    Used for a line too long to parse: walks the top-level members in order and stops at ``"id"``; gives
    up (``None``) on the first member it cannot decode within ``head``. Nested ``"id"`` keys never match.
    Only string and integer ids are returned.
    """
    text = head.decode("utf-8", "ignore")
    ws = " \t\r\n"
    try:
        i = len(text) - len(text.lstrip(ws))
        if text[i] != "{":
            return None
        i += 1
        while True:
            while text[i] in ws:
                i += 1
            key, i = wirejson.raw_decode(text, i)
            while text[i] in ws:
                i += 1
            if not isinstance(key, str) or text[i] != ":":
                return None
            i += 1
            while text[i] in ws:
                i += 1
            value, i = wirejson.raw_decode(text, i)
            if key == "id":
                return value if isinstance(value, str | int) and not isinstance(value, bool) else None
            while text[i] in ws:
                i += 1
            if text[i] != ",":
                return None
            i += 1
    except (ValueError, IndexError, RecursionError):
        return None

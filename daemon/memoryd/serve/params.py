"""What is wrong with a request's params, said before the MCP SDK answers its bare "Invalid request
parameters": the parameter's name, what it got and what is accepted. The JSON-RPC code stays ``-32602``
(:func:`memoryd.serve.jsonrpc.classify` answers with it).

Only the shapes the SDK would refuse are named here (a value that passes is still checked by the SDK,
and a tool's own arguments by its schema):

=====================================================  ==================================================
request                                                problem named
=====================================================  ==================================================
``tools/call``                                         ``name`` not a string, ``arguments`` not an object
``initialize``                                         ``protocolVersion`` not a string, ``capabilities``
                                                       not an object, ``clientInfo`` without ``name`` and
                                                       ``version`` strings
``tools/list``, ``resources/list``, ``prompts/list``,  ``cursor`` not a string
``resources/templates/list``
``logging/setLevel``                                   ``level`` not one of the eight syslog levels
=====================================================  ==================================================
"""

from __future__ import annotations

import json
from typing import Any, get_args

import mcp_types as types
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

#: The levels ``logging/setLevel`` takes, most verbose first.
LOG_LEVELS: tuple[str, ...] = get_args(types.LoggingLevel)
PAGED = ("tools/list", "resources/list", "resources/templates/list", "prompts/list")
_JSON_TYPES = {str: "a string", list: "an array", dict: "an object", bool: "a boolean", int: "a number"}


def _shown(value: Any) -> str:
    """``value`` as the message names it: its JSON type and, for a short scalar, the value."""
    kind = "null" if value is None else _JSON_TYPES.get(type(value), "a number")
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        text = json.dumps(value, ensure_ascii=True)  # a lone surrogate is escaped, never echoed raw
        return f"{kind} ({text[:40]}{'…' if len(text) > 40 else ''})"
    return kind


def params_problem(method: str, params: dict[str, Any]) -> str | None:
    """Why the SDK would refuse ``params`` of ``method`` (the sentence after "Invalid params: "), or None
    when their shape is right or the method is not one of the table's."""
    if method == "tools/call":
        return _tool_call(params)
    if method == "initialize":
        return _initialize(params)
    if method in PAGED and "cursor" in params and not isinstance(params["cursor"], str):
        return (
            f"{method} params.cursor must be a string, the nextCursor of the previous page (or left out for "
            f"the first page), not {_shown(params['cursor'])}"
        )
    if method == "logging/setLevel" and params.get("level") not in LOG_LEVELS:
        got = f", not {_shown(params['level'])}" if "level" in params else "; it is missing"
        return f"logging/setLevel params.level must be one of {', '.join(LOG_LEVELS)}{got}"
    return None


def _tool_call(params: dict[str, Any]) -> str | None:
    name = params.get("name")
    if not isinstance(name, str):
        return "tools/call needs params.name, the tool's name as a string"
    arguments = params.get("arguments")
    if arguments is not None and not isinstance(arguments, dict):
        return f"params.arguments must be an object of named arguments, not {_shown(arguments)}"
    return None


def _initialize(params: dict[str, Any]) -> str | None:
    version = params.get("protocolVersion")
    if not isinstance(version, str):
        got = f", not {_shown(version)}" if "protocolVersion" in params else "; it is missing"
        return (
            "initialize params.protocolVersion must be a protocol version string (this server speaks "
            f"{', '.join(HANDSHAKE_PROTOCOL_VERSIONS)}; another is answered with the newest){got}"
        )
    if not isinstance(params.get("capabilities"), dict):
        got = f", not {_shown(params['capabilities'])}" if "capabilities" in params else "; it is missing"
        return f"initialize params.capabilities must be an object (may be empty: {{}}){got}"
    info = params.get("clientInfo")
    if not isinstance(info, dict) or not all(isinstance(info.get(k), str) for k in ("name", "version")):
        return 'initialize params.clientInfo must be an object with "name" and "version" strings'
    return None

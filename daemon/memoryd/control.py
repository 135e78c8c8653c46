"""The daemon's control line: ``memoryd status`` asks a running daemon over its socket (standard library only,
so the CLI answers without importing the MCP SDK).

Wire (contract §4 terms; the connection carries exactly one exchange, then the daemon closes it)::

    client -> {"memoryd":"status","v":1}
    daemon -> {"memoryd":"status","v":1,"status":{...}}

``status`` is :meth:`memoryd.server.Daemon.full_status`: ``running``, ``pid``, ``version``, ``started_at``
(ISO-8601 UTC), ``uptime_s``, ``sessions`` (MCP sessions connected now), ``socket`` (``path``, ``exists``,
``mode`` like ``"0600"``, ``owner_uid``, ``owner``), ``board``, ``index``, ``tool_groups``,
``tool_timeout_ms``, ``engine_state``, and ``engine`` (the engine slot's ``state``/``since_s``/``error``
merged with ``engine.status()`` once it is ready).
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

from memoryd_shim import rendezvous

STATUS_REQUEST = {"memoryd": "status", "v": rendezvous.WIRE_VERSION}


def is_status_request(line: bytes) -> bool:
    """Whether a connection's first line is the status request (instead of a shim's hello)."""
    try:
        msg = json.loads(line)
    except ValueError:
        return False
    return (
        isinstance(msg, dict) and msg.get("memoryd") == "status" and msg.get("v") == rendezvous.WIRE_VERSION
    )


def status_line(status: dict[str, Any]) -> bytes:
    """The daemon's one-line answer."""
    answer = {"memoryd": "status", "v": rendezvous.WIRE_VERSION, "status": status}
    return (json.dumps(answer, ensure_ascii=False, default=str) + "\n").encode()


def ask_status(socket_path: str | os.PathLike[str] | Path, timeout: float = 3.0) -> dict[str, Any] | None:
    """The running daemon's status, or ``None`` when nothing answers on ``socket_path`` (not running).

    Raises ``ValueError`` when something answers but not with a status line (another program, or a
    daemon speaking another wire version).
    """
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        try:
            sock.connect(os.fsencode(socket_path))
        except OSError:
            return None
        sock.sendall((json.dumps(STATUS_REQUEST) + "\n").encode())
        with sock.makefile("rb") as reader:
            line = reader.readline(1 << 20)
    except (TimeoutError, ConnectionError) as exc:
        raise ValueError(f"the daemon on {socket_path} did not answer the status request: {exc}") from exc
    finally:
        sock.close()
    try:
        answer = json.loads(line)
    except ValueError:
        answer = None
    if (
        not isinstance(answer, dict)
        or answer.get("memoryd") != "status"
        or not isinstance(answer.get("status"), dict)
    ):
        raise ValueError(f"unexpected answer from {socket_path}: {line[:200]!r}")
    return answer["status"]

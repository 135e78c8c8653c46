"""The shim <-> daemon wire contract (contract §2 and §4), standard library only.

The daemon imports this module; this module never imports the daemon. It holds:

* the socket-path rule, computable from ``HOME`` alone (agents start the shim with a
  reduced environment), mirroring platformdirs' user *state* dir for app ``memoryd``;
* the hello / ready / error lines exchanged once per connection;
* the line cap and the tool-group names.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path

APP_NAME = "memoryd"
WIRE_VERSION = 1
SOCKET_NAME = "memoryd.sock"
#: macOS ``sun_path`` holds 104 bytes including the NUL; Linux 108. We keep the stricter one.
MAX_SOCKET_PATH_BYTES = 103
#: A single JSON-RPC line larger than this ends only the connection that sent it.
MAX_LINE_BYTES = 32 * 1024 * 1024
TOOL_GROUPS = ("briefs", "memories", "sessions", "memo")
DEFAULT_TOOL_GROUPS = ("briefs",)


def state_dir(env: Mapping[str, str] | None = None, platform: str | None = None) -> Path:
    """The user state dir for memoryd, as platformdirs computes it when no XDG variable is set.

    ``MEMORYD_HOME`` wins (``<home>/state``). The socket deliberately ignores ``XDG_STATE_HOME``: the
    agents that spawn the shim pass only ``HOME LOGNAME PATH SHELL TERM USER``, so a socket placed by an
    XDG variable could not be found by the shim.
    """
    env = os.environ if env is None else env
    platform = sys.platform if platform is None else platform
    if env.get("MEMORYD_HOME"):
        return Path(env["MEMORYD_HOME"]).expanduser() / "state"
    home = Path(env.get("HOME") or Path.home())
    if platform == "darwin":
        return home / "Library" / "Application Support" / APP_NAME
    return home / ".local" / "state" / APP_NAME


def fallback_socket_path(uid: int | None = None) -> Path:
    """``/tmp/memoryd-<uid>/memoryd.sock``, used when the normal path exceeds ``sun_path``."""
    uid = os.getuid() if uid is None else uid
    return Path("/tmp") / f"{APP_NAME}-{uid}" / SOCKET_NAME


def socket_path(env: Mapping[str, str] | None = None, platform: str | None = None) -> Path:
    """Where the daemon listens: ``MEMORYD_SOCKET``, else ``<state>/memoryd.sock``.

    A path longer than :data:`MAX_SOCKET_PATH_BYTES` falls back to :func:`fallback_socket_path`
    (a 0700 directory owned by the user, created by whoever binds).
    """
    env = os.environ if env is None else env
    if env.get("MEMORYD_SOCKET"):
        return Path(env["MEMORYD_SOCKET"]).expanduser()
    path = state_dir(env, platform) / SOCKET_NAME
    if len(os.fsencode(str(path))) > MAX_SOCKET_PATH_BYTES:
        return fallback_socket_path()
    return path


def parse_tool_groups(spec: str | None) -> list[str]:
    """``"briefs,memo"`` -> ``["briefs", "memo"]``; ``"all"`` -> every group; raises ``ValueError``."""
    if not spec:
        return list(DEFAULT_TOOL_GROUPS)
    groups: list[str] = []
    for part in spec.split(","):
        name = part.strip()
        if not name:
            continue
        if name == "all":
            return list(TOOL_GROUPS)
        if name not in TOOL_GROUPS:
            raise ValueError(f"unknown tool group {name!r}; choose from {', '.join(TOOL_GROUPS)} or all")
        if name not in groups:
            groups.append(name)
    return groups or list(DEFAULT_TOOL_GROUPS)


def hello_line(tools: list[str], cwd: str, pid: int, version: str) -> bytes:
    """The shim's first line on a new connection (contract §4), newline-terminated."""
    msg = {"memoryd": "hello", "v": WIRE_VERSION, "tools": tools, "cwd": cwd, "pid": pid, "shim_version": version}
    return (json.dumps(msg, separators=(",", ":")) + "\n").encode()


def ready_line(version: str) -> bytes:
    """The daemon's answer to a good hello."""
    return (json.dumps({"memoryd": "ready", "v": WIRE_VERSION, "version": version}) + "\n").encode()


def error_line(message: str) -> bytes:
    """The daemon's answer to a hello it refuses; the connection closes after it."""
    return (json.dumps({"memoryd": "error", "message": message}) + "\n").encode()


def parse_hello(line: bytes) -> dict:
    """Validate a hello line; returns the dict or raises ``ValueError`` with a reason."""
    try:
        msg = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"hello is not JSON: {exc}") from None
    if not isinstance(msg, dict) or msg.get("memoryd") != "hello":
        raise ValueError('first line must be {"memoryd":"hello",...}')
    if msg.get("v") != WIRE_VERSION:
        raise ValueError(f"wire version {msg.get('v')!r} is not supported (this daemon speaks v{WIRE_VERSION})")
    tools = msg.get("tools", list(DEFAULT_TOOL_GROUPS))
    if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
        raise ValueError("hello.tools must be a list of group names")
    msg["tools"] = parse_tool_groups(",".join(tools))
    return msg

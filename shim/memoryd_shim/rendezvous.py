"""The shim <-> daemon wire contract (contract §2 and §4), standard library only.

The daemon imports this module; this module never imports the daemon. It holds:

* the socket-path rule, computable from ``HOME`` alone (agents start the shim with a
  reduced environment), mirroring platformdirs' user *state* dir for app ``memoryd``;
* the hello / ready / error lines exchanged once per connection;
* the line cap and the tool-group names;
* the command line a shim uses to start the daemon.

``pathlib`` is imported lazily: the shim computes the path as a ``str`` (``*_str`` functions) to stay
inside its start-up budget; the ``Path`` functions wrap those, so both sides decide from one rule.
"""

from __future__ import annotations

import os
import sys

from memoryd_shim import wirejson

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: importing typing costs the shim milliseconds
if TYPE_CHECKING:
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
#: Hex digits of the fallback socket's name (64 bits: distinct environments never share a socket).
FALLBACK_HASH_CHARS = 16
#: stderr of a daemon started by a shim goes here, under the state dir.
SPAWN_LOG_NAME = "memoryd-spawned.log"
#: Hook events no daemon could take go here, under the state dir, one JSON request a line; the daemon
#: takes them in when its engine starts (:mod:`memoryd.core.spool`).
CAPTURE_SPOOL_NAME = "capture-spool.jsonl"
#: A spool past this size takes no more lines (a daemon that never comes back must not fill the disk).
CAPTURE_SPOOL_MAX_BYTES = 16 * 1024 * 1024
#: The error a request in flight gets when its daemon goes away (a restart, a crash, a stop): the shim
#: says it when the connection drops, the daemon when it stops mid-call; the next request reconnects.
RESTARTED_MESSAGE = "memoryd restarted; please retry"
_SPACED = (", ", ": ")  # the separators json.dumps uses by default, kept for the daemon's lines


def state_dir_str(env: Mapping[str, str] | None = None, platform: str | None = None) -> str:
    """:func:`state_dir` as a ``str`` (no pathlib import)."""
    env = os.environ if env is None else env
    platform = sys.platform if platform is None else platform
    if env.get("MEMORYD_HOME"):
        return os.path.join(os.path.expanduser(env["MEMORYD_HOME"]), "state")
    home = env.get("HOME") or os.path.expanduser("~")
    if platform == "darwin":
        return os.path.join(home, "Library", "Application Support", APP_NAME)
    return os.path.join(home, ".local", "state", APP_NAME)


def state_dir(env: Mapping[str, str] | None = None, platform: str | None = None) -> Path:
    """The user state dir for memoryd, as platformdirs computes it when no XDG variable is set.

    ``MEMORYD_HOME`` wins (``<home>/state``). The socket deliberately ignores ``XDG_STATE_HOME``: the
    agents that spawn the shim pass only ``HOME LOGNAME PATH SHELL TERM USER``, so a socket placed by an
    XDG variable could not be found by the shim.
    """
    from pathlib import Path

    return Path(state_dir_str(env, platform))


def fallback_dir_str(uid: int | None = None) -> str:
    """``/tmp/memoryd-<uid>``: the 0700 directory that holds every fallback socket of this user."""
    uid = os.getuid() if uid is None else uid
    return f"/tmp/{APP_NAME}-{uid}"


def fallback_socket_path_str(replaces: str, uid: int | None = None) -> str:
    """:func:`fallback_socket_path` as a ``str``."""
    import hashlib  # only here: a shim whose socket path fits never pays for the import

    key = hashlib.sha256(os.fsencode(os.path.abspath(replaces))).hexdigest()[:FALLBACK_HASH_CHARS]
    return f"{fallback_dir_str(uid)}/{key}.sock"


def fallback_socket_path(replaces: str | os.PathLike[str], uid: int | None = None) -> Path:
    """``/tmp/memoryd-<uid>/<hash>.sock``, used when the normal path ``replaces`` exceeds ``sun_path``.

    ``<hash>`` is the first :data:`FALLBACK_HASH_CHARS` hex digits of the SHA-256 of the absolute path
    it replaces, so each environment (each ``MEMORYD_HOME`` or ``HOME``) gets its own socket, and the
    shim and the daemon, computing from the same environment, find the same one.
    """
    from pathlib import Path

    return Path(fallback_socket_path_str(os.fspath(replaces), uid))


def socket_path_str(env: Mapping[str, str] | None = None, platform: str | None = None) -> str:
    """:func:`socket_path` as a ``str``; the one place the rule (and its length check) is decided."""
    env = os.environ if env is None else env
    if env.get("MEMORYD_SOCKET"):
        return os.path.expanduser(env["MEMORYD_SOCKET"])
    path = os.path.join(state_dir_str(env, platform), SOCKET_NAME)
    if len(os.fsencode(path)) > MAX_SOCKET_PATH_BYTES:
        return fallback_socket_path_str(path)
    return path


def socket_path(env: Mapping[str, str] | None = None, platform: str | None = None) -> Path:
    """Where the daemon listens: ``MEMORYD_SOCKET``, else ``<state>/memoryd.sock``.

    A path longer than :data:`MAX_SOCKET_PATH_BYTES` falls back to :func:`fallback_socket_path` of that
    path (one socket per environment, in a 0700 directory owned by the user, created by whoever binds).
    """
    from pathlib import Path

    return Path(socket_path_str(env, platform))


def socket_dir_problem(directory: str, uid: int | None = None) -> str | None:
    """Why ``directory`` is unsafe to hold the socket, or ``None`` when it is fine or absent.

    Safe means: a real directory (not a symlink), owned by ``uid``, no group/other permissions. Matters
    for the shared ``/tmp`` fallback, where another user could otherwise pre-create the directory.
    """
    uid = os.getuid() if uid is None else uid
    try:
        st = os.lstat(directory)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot inspect {directory}: {exc.strerror}"
    import stat

    if not stat.S_ISDIR(st.st_mode):
        return f"{directory} is not a directory"
    if st.st_uid != uid:
        return f"{directory} is owned by uid {st.st_uid}, not {uid}"
    if st.st_mode & 0o077:
        return f"{directory} has mode {stat.S_IMODE(st.st_mode):04o}; it must be 0700"
    return None


def serve_argv(python: str, socket: str | None = None) -> list[str]:
    """The daemon's command line: ``[python, "-m", "memoryd", "serve"]`` plus ``--socket`` when given.

    ``python`` must be an absolute interpreter path (the shim passes ``sys.executable``), never a
    name looked up on ``PATH``: agents and launchd run with a minimal ``PATH``.
    """
    argv = [python, "-m", APP_NAME, "serve"]
    if socket:
        argv += ["--socket", socket]
    return argv


def spawn_log_path_str(env: Mapping[str, str] | None = None, platform: str | None = None) -> str:
    """``<state>/memoryd-spawned.log``: the stderr of a daemon a shim started."""
    return os.path.join(state_dir_str(env, platform), SPAWN_LOG_NAME)


def capture_spool_path_str(env: Mapping[str, str] | None = None, platform: str | None = None) -> str:
    """``<state>/capture-spool.jsonl``: where hooks leave what they could not deliver."""
    return os.path.join(state_dir_str(env, platform), CAPTURE_SPOOL_NAME)


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


class IncompatibleWire(ValueError):
    """The other side speaks another wire version (``theirs``; ours is :data:`WIRE_VERSION`)."""

    def __init__(self, message: str, theirs: object):
        super().__init__(message)
        self.theirs = theirs


def hello_line(tools: list[str], cwd: str, pid: int, version: str) -> bytes:
    """The shim's first line on a new connection (contract §4), newline-terminated.

    Besides the contract's fields it carries ``shim_version``, the shim's package version (``v`` is its
    wire version), so a daemon can log and refuse what it cannot serve."""
    msg = {
        "memoryd": "hello",
        "v": WIRE_VERSION,
        "tools": tools,
        "cwd": cwd,
        "pid": pid,
        "shim_version": version,
    }
    return (wirejson.dumps(msg) + "\n").encode()


def ready_line(version: str, board: str | None = None) -> bytes:
    """The daemon's answer to a good hello: contract §4's fields, plus ``board`` (the absolute path of
    the board this daemon serves) when given, so a shim can say which board answered."""
    msg: dict = {"memoryd": "ready", "v": WIRE_VERSION, "version": version}
    if board is not None:
        msg["board"] = board
    return (wirejson.dumps(msg, separators=_SPACED) + "\n").encode()


def error_line(message: str) -> bytes:
    """The daemon's answer to a hello it refuses; the connection closes after it."""
    return (wirejson.dumps({"memoryd": "error", "message": message}, separators=_SPACED) + "\n").encode()


def refusal_line(exc: ValueError, version: str) -> bytes:
    """The daemon's answer to a hello :func:`parse_hello` refused with ``exc``.

    For another wire version (:class:`IncompatibleWire`) the error line also says
    ``"code":"incompatible"``, the daemon's wire version ``v`` and package ``version``, so the shim can
    tell the person which side is old and what to run (:func:`incompatible_message`).
    """
    if not isinstance(exc, IncompatibleWire):
        return error_line(str(exc))
    msg = {
        "memoryd": "error",
        "code": "incompatible",
        "v": WIRE_VERSION,
        "version": version,
        "message": str(exc),
    }
    return (wirejson.dumps(msg, separators=_SPACED) + "\n").encode()


def incompatible_message(socket_path: str, daemon_wire: object, daemon_version: object) -> str:
    """What a shim says when the daemon speaks another wire version: both versions and the fix."""
    from memoryd_shim import __version__

    daemon = f"memoryd {daemon_version}" if daemon_version else "an unknown memoryd version"
    return (
        f"the memoryd daemon on {socket_path} ({daemon}, wire v{daemon_wire}) cannot serve this "
        f"memoryd-shim {__version__} (wire v{WIRE_VERSION}): they come from different installs. "
        "After upgrading memoryd, restart the daemon with `memoryd service restart` (or stop the old "
        "`memoryd serve`), and make agents run the memoryd-shim of the same install"
    )


def parse_hello(line: bytes) -> dict:
    """Validate a hello line; returns the dict or raises ``ValueError`` with a reason
    (:class:`IncompatibleWire` for another wire version)."""
    try:
        msg = wirejson.loads(line)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"hello is not JSON: {exc}") from None
    if not isinstance(msg, dict) or msg.get("memoryd") != "hello":
        raise ValueError('first line must be {"memoryd":"hello",...}')
    if msg.get("v") != WIRE_VERSION:
        shim = f" (memoryd-shim {msg['shim_version']})" if isinstance(msg.get("shim_version"), str) else ""
        raise IncompatibleWire(
            f"wire version {msg.get('v')!r}{shim} is not supported (this daemon speaks v{WIRE_VERSION})",
            msg.get("v"),
        )
    tools = msg.get("tools", list(DEFAULT_TOOL_GROUPS))
    if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
        raise ValueError("hello.tools must be a list of group names")
    msg["tools"] = parse_tool_groups(",".join(tools))
    return msg


def parse_answer(line: bytes) -> dict:
    """Validate the daemon's answer to a hello.

    Returns ``{"memoryd": "ready", "version": str, ...}`` (a daemon of this version adds ``board``) or ``{"memoryd": "error", "message": str}``
    (an incompatible daemon's error also has ``"code": "incompatible"``, ``v`` and ``version``);
    raises ``ValueError`` for anything else (not JSON, another shape), :class:`IncompatibleWire` for a
    ready line of another wire version.
    """
    try:
        msg = wirejson.loads(line)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise ValueError(f"daemon answer is not JSON: {exc}") from None
    if not isinstance(msg, dict):
        raise ValueError("daemon answer is not a JSON object")
    kind = msg.get("memoryd")
    if kind == "error":
        msg["message"] = str(msg.get("message") or "the daemon refused the connection")
        return msg
    if kind != "ready":
        raise ValueError(f'daemon answer must be {{"memoryd":"ready"|"error"}}, got {kind!r}')
    if msg.get("v") != WIRE_VERSION:
        raise IncompatibleWire(
            f"daemon speaks wire version {msg.get('v')!r}; this shim speaks v{WIRE_VERSION}", msg.get("v")
        )
    return msg

"""The shim's command line, parsed by hand: argparse costs milliseconds the shim's start-up budget lacks."""

from __future__ import annotations

import os
import sys

from memoryd_shim import rendezvous

USAGE = "usage: memoryd-shim [--socket PATH] [--tools GROUPS] [--no-start]"

HELP = f"""{USAGE}

Relays an MCP client's stdio (newline-delimited JSON-RPC) to the memoryd daemon and back.
Starts the daemon when none answers. Diagnostics go to stderr; stdout carries only JSON-RPC lines.

options:
  --socket PATH    the daemon's socket (default: $MEMORYD_SOCKET, else <state dir>/memoryd.sock
                   computed from $HOME or $MEMORYD_HOME; now {{socket}})
  --tools GROUPS   comma-separated tool groups: {", ".join(rendezvous.TOOL_GROUPS)} or all
                   (default: {",".join(rendezvous.DEFAULT_TOOL_GROUPS)})
  --no-start       never start the daemon; also MEMORYD_NO_START=1
  --version        print the shim's version
  -h, --help       show this help
"""


class UsageError(ValueError):
    """A bad command line; the message says what."""


class Options:
    """``socket_path`` (str), ``socket_arg`` (str or None: passed on to a spawned daemon), ``tools``, ``may_start``."""

    __slots__ = ("socket_path", "socket_arg", "tools", "may_start")

    def __init__(self, socket_path: str, socket_arg: str | None, tools: list[str], may_start: bool):
        self.socket_path = socket_path
        self.socket_arg = socket_arg
        self.tools = tools
        self.may_start = may_start


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def parse(argv: list[str]) -> Options | None:
    """Parse ``argv`` (without the program name); ``None`` after printing help/version; raises UsageError."""
    socket_opt: str | None = None
    tools_opt: str | None = None
    no_start = False
    args = list(argv)
    while args:
        arg = args.pop(0)
        name, eq, value = arg.partition("=")
        if name in ("--socket", "--tools"):
            if not eq:
                if not args:
                    raise UsageError(f"{name} needs a value")
                value = args.pop(0)
            if name == "--socket":
                if not value:
                    raise UsageError("--socket needs a path")
                socket_opt = value
            else:
                tools_opt = value
        elif arg == "--no-start":
            no_start = True
        elif arg in ("-h", "--help"):
            sys.stdout.write(HELP.format(socket=rendezvous.socket_path_str()))
            return None
        elif arg == "--version":
            from memoryd_shim import __version__

            sys.stdout.write(f"memoryd-shim {__version__} (wire v{rendezvous.WIRE_VERSION})\n")
            return None
        else:
            raise UsageError(f"unrecognized argument {arg!r}")
    try:
        tools = rendezvous.parse_tool_groups(tools_opt)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if socket_opt is not None:
        path = os.path.abspath(os.path.expanduser(socket_opt))
        socket_arg: str | None = path
    else:
        path = rendezvous.socket_path_str()
        # A relative MEMORYD_SOCKET would mean another file for a daemon started with cwd "/".
        socket_arg = os.path.abspath(path) if os.environ.get("MEMORYD_SOCKET") else None
        path = os.path.abspath(path)
    may_start = not no_start and not _truthy(os.environ.get("MEMORYD_NO_START"))
    return Options(path, socket_arg, tools, may_start)

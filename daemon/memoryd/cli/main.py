"""``memoryd`` command line (contract §5): one module per command, listed in :data:`COMMAND_MODULES`.

A command module exposes ``register(sub)``: it adds its parser(s) to the ``argparse`` sub-parsers ``sub``
and sets ``func`` (``args -> exit code``) with ``set_defaults`` (``logs_at_info=True`` for the daemon,
which logs its life; every other command shows warnings and errors only). Modules are imported only to
build the parser; heavy imports belong inside ``func``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from memoryd import __version__

#: Modules adding sub-commands through ``register(sub)`` (one line per module; order = help order).
COMMAND_MODULES: tuple[str, ...] = (
    "memoryd.cli.serve",
    "memoryd.cli.status",
    "memoryd.cli.stop",
    "memoryd.cli.search",
    "memoryd.cli.eval",
    "memoryd.cli.import_",
    "memoryd.cli.connect.command",
    "memoryd.cli.forget",
    "memoryd.cli.export",
    "memoryd.cli.service.command",
    "memoryd.cli.brief",
    "memoryd.cli.tasks",
    "memoryd.cli.open_",
)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="memoryd", description="A shared, always-warm memory for coding agents.")
    p.add_argument("--version", action="version", version=f"memoryd {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    for module in COMMAND_MODULES:
        importlib.import_module(module).register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    for stream in (sys.stdout, sys.stderr):
        # A terminal that cannot show a character (a Latin-1 locale, PYTHONIOENCODING=ascii) gets "?" for
        # it: Japanese text or a curly quote in an answer must not end the command with a traceback.
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")
    args = _parser().parse_args(argv)
    from memoryd.logs import configure

    # The daemon logs its life at info, in JSON; a command run at a terminal shows only warnings and errors,
    # as sentences of its own (a command that lists a problem itself hushes its log line: logs.hush).
    daemon = getattr(args, "logs_at_info", False)
    configure(
        None if daemon else os.environ.get("MEMORYD_LOG_LEVEL") or "warning",
        plain=None if daemon else f"memoryd {args.command}",
    )
    from memoryd.settings import SettingsError

    try:
        return args.func(args)
    except SettingsError as exc:  # an unusable MEMORYD_* value: say which, no traceback
        print(f"memoryd: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `memoryd ... | head`: the reader left; no traceback, and none at exit either
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141

"""What the commands' parsers share: a command's parser with the function it runs, the location options
(``--board``, ``--index``, ``--socket``) with the help most commands give them, and the exit codes of the
commands that change the board."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

#: Done (also when nothing needed to change), a problem (the message says which), usage.
EXIT_OK, EXIT_PROBLEM, EXIT_USAGE = 0, 1, 2

BOARD_HELP = "board folder (default: <data>/board, or MEMORYD_BOARD)"
INDEX_HELP = "index folder (default: MEMORYD_INDEX, else the board's own: <data>/index for <data>/board)"
SOCKET_HELP = "the daemon's socket (default: <state>/memoryd.sock, or MEMORYD_SOCKET)"
#: For the commands that only talk to a running daemon.
SERVED_SOCKET_HELP = "the daemon's socket (default: as memoryd serve)"


def command(
    sub: Any, name: str, func: Callable[[argparse.Namespace], int], help: str, description: str | None = None
) -> argparse.ArgumentParser:
    """Add the sub-command ``name`` to the ``argparse`` sub-parsers ``sub``; ``func(args)`` runs it and
    returns the exit code. ``help`` is its line in ``memoryd --help``, ``description`` heads its own help."""
    parser = sub.add_parser(name, help=help, description=description)
    parser.set_defaults(func=func)
    return parser


def locations(
    parser: argparse.ArgumentParser,
    *,
    board: str | None = None,
    index: str | None = None,
    socket: str | None = None,
) -> None:
    """Add ``--board``, ``--index`` and ``--socket`` (in that order) to ``parser``, each only when given its
    help text (:data:`BOARD_HELP`, :data:`INDEX_HELP`, :data:`SOCKET_HELP` or the command's own)."""
    for option, help in (("--board", board), ("--index", index), ("--socket", socket)):
        if help is not None:
            parser.add_argument(option, help=help)

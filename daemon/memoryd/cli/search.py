"""``memoryd search``: the agents' ``search_briefs`` for a person at a terminal.

It asks the running daemon (its warm index and model, through :mod:`memoryd.cli.client`); with ``--board``
or ``--index`` only a daemon serving that board (its ready line names its board). Otherwise, or when no
daemon runs, it searches in-process (:mod:`memoryd.core.local`) on that board's own index, saying so on stderr:
never on the index of a daemon serving another board. When a daemon serving that board on another socket
writes that index, the search goes to that daemon. Both paths print the same answer: ``--json`` is the
tool's ``structuredContent`` plus ``"via"`` (``"daemon"`` | ``"in-process"``) and ``"board"`` (the board
that answered).

Exit codes: 0 answered (possibly with no match), 1 the daemon answered with an error (board unreadable,
still loading, ...) or the index cannot be written here (another process writes it, it belongs to another
board), 2 bad arguments.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from memoryd.cli.client import DaemonClient, DaemonError, DaemonUnavailable
from memoryd.cli.options import SOCKET_HELP, command, locations
from memoryd.errors import StartupError
from memoryd.settings import Settings
from memoryd.wording import redaction_line

LIMIT_MAX = 50  # search_briefs' own bound


def register(sub) -> None:
    """Add the ``search`` sub-command to the ``argparse`` sub-parsers ``sub``."""
    q = command(
        sub,
        "search",
        run,
        help="the same search agents get, for a person at a terminal (through the running daemon; "
        "in-process when none runs)",
    )
    q.add_argument("query")
    q.add_argument("--project", help="only this project")
    q.add_argument("--limit", type=limit_arg, default=10, help="results to show, 1-50 (default 10)")
    q.add_argument("--json", action="store_true", help="print the search_briefs answer as one JSON object")
    locations(
        q,
        board="search this board (in-process unless the running daemon serves it)",
        index="index folder for the in-process search (default: the board's own)",
        socket=SOCKET_HELP,
    )
    q.add_argument("--model", help="embedding model for the in-process fallback, or 'none'")


def limit_arg(value: str) -> int:
    """argparse type for ``--limit``: an integer in 1-50 (the tool's bound)."""
    import argparse

    try:
        limit = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not an integer") from None
    if not 1 <= limit <= LIMIT_MAX:
        raise argparse.ArgumentTypeError(f"must be between 1 and {LIMIT_MAX}")
    return limit


def _arguments(query: str, project: str | None, limit: int) -> dict[str, Any]:
    arguments: dict[str, Any] = {"query": query, "limit": limit}
    if project:
        arguments["project"] = project
    return arguments


class OtherBoard(Exception):
    """The daemon that answered serves another board (``board``; ``None`` when it did not say)."""

    def __init__(self, board: str | None) -> None:
        super().__init__(board)
        self.board = board


def via_daemon(
    socket_path: Path, query: str, project: str | None, limit: int, board: str | None = None
) -> dict[str, Any]:
    """``search_briefs`` through the daemon, plus ``"board"``: the board it serves. With ``board``, only a
    daemon serving that board answers.

    Raises DaemonUnavailable (not running), OtherBoard, or DaemonError."""
    with DaemonClient(socket_path) as client:
        if board is not None and client.daemon_board != board:
            raise OtherBoard(client.daemon_board)
        answer = client.call_tool("search_briefs", _arguments(query, project, limit))
        return {**answer, "board": client.daemon_board}


def in_process(settings: Settings, query: str, project: str | None, limit: int) -> dict[str, Any]:
    """The same answer computed here, on the board's own index under its writer lock (slower, no warm
    model). Raises :class:`~memoryd.errors.StartupError` when that index cannot be written here."""
    from memoryd.core.local import local_search
    from memoryd.kinds.briefs.render import listing_scope, search_answer, search_query

    result = local_search(settings, search_query(query, project))
    state = "disabled" if settings.model == "none" else "failed"
    return search_answer(result, limit=limit, project=listing_scope(result, project), model_state=state)


def _through_index_owner(exc: Exception, board: str, args: Any) -> dict[str, Any] | None:
    """When the index is written by a daemon serving ``board`` (on another socket), its answer."""
    holder = getattr(exc, "holder", None) or {}
    socket_path = holder.get("socket")
    if not socket_path or holder.get("board") != board:
        return None
    try:
        answer = via_daemon(Path(socket_path), args.query, args.project, args.limit, board=board)
    except (DaemonUnavailable, DaemonError, OtherBoard):
        return None
    print(
        f"memoryd search: the daemon on {socket_path} (pid {holder.get('pid')}) serves {board} and writes its "
        "index; searched through it",
        file=sys.stderr,
    )
    return answer


def run(args: Any) -> int:
    """``args``: ``query``, ``project``, ``limit``, ``json``, ``board``, ``index``, ``socket``, ``model``."""
    settings = Settings.load(board=args.board, index=args.index, socket=args.socket, model=args.model)
    loc = settings.locations
    board = str(loc.board)
    # --board/--index name a board explicitly: the daemon is used only when it serves that same board.
    wanted = board if (args.board or args.index) else None
    answer: dict[str, Any] | None = None
    try:
        answer = {**via_daemon(loc.socket, args.query, args.project, args.limit, wanted), "via": "daemon"}
    except DaemonUnavailable:
        print(
            f"memoryd search: no daemon is running on {loc.socket}; searching in-process instead "
            "(slower; start one with `memoryd serve`)",
            file=sys.stderr,
        )
    except OtherBoard as exc:
        print(
            f"memoryd search: the daemon on {loc.socket} serves {exc.board or 'another board'}; searching "
            f"{board} in-process on its own index {loc.index}",
            file=sys.stderr,
        )
    except DaemonError as exc:
        print(f"memoryd search: {exc}", file=sys.stderr)
        return 2 if exc.code == -32602 else 1
    if answer is None:
        try:
            found = in_process(settings, args.query, args.project, args.limit)
            answer = {**found, "via": "in-process", "board": board}
        except StartupError as exc:  # the index: written by another process, or another board's
            owner = _through_index_owner(exc, board, args)
            if owner is None:
                print(f"memoryd search: {exc}", file=sys.stderr)
                return 1
            answer = {**owner, "via": "daemon"}
    if args.json:
        print(json.dumps(answer, ensure_ascii=False))
    else:
        print_human(answer)
    return 0


def print_human(answer: dict[str, Any]) -> None:
    """Results on stdout (score, date, project, task, brief, title, said); notes about the mode on stderr."""
    # Not memoryd.tools.answers.of_total: importing memoryd.tools costs the MCP types (about a second).
    matched = f"{answer['matched']}{'+' if answer.get('matched_at_least') else ''}"
    if answer["results"]:
        noun = "matching brief" if matched == "1" else "matching briefs"
        print(f"{answer['shown']} of {matched} {noun} (via {answer['via']})")
    else:
        print("no brief matches that query")
    for r in answer["results"]:
        print(
            f"{r['score']:.2f}  {r['date']}  {r['project']:<14} {r['task_id']}  {r['brief_id']}\n"
            f"      {r['title']}\n      “{r['said']}”"
        )
    if answer.get("mode_note"):
        print(f"({answer['mode_note']})", file=sys.stderr)
    if answer.get("redacted"):
        print(f"({redaction_line(answer['redacted'])})", file=sys.stderr)

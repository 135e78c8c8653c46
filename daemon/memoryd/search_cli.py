"""``memoryd search``: the agents' ``search_briefs`` for a person at a terminal.

It asks the running daemon (its warm index and model, through :mod:`memoryd.client`) and falls back to
an in-process search (:mod:`memoryd.local`) only when no daemon is running, saying so on stderr. Both
paths print the same answer: ``--json`` is the tool's ``structuredContent`` plus ``"via"``
(``"daemon"`` | ``"in-process"``).

Exit codes: 0 answered (possibly with no match), 1 the daemon answered with an error (board unreadable,
still loading, ...), 2 bad arguments.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from memoryd.client import DaemonClient, DaemonError, DaemonUnavailable
from memoryd.settings import Settings

LIMIT_MAX = 50  # search_briefs' own bound


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


def via_daemon(socket_path: Path, query: str, project: str | None, limit: int) -> dict[str, Any]:
    """``search_briefs`` through the daemon. Raises DaemonUnavailable (not running) or DaemonError."""
    with DaemonClient(socket_path) as client:
        return client.call_tool("search_briefs", _arguments(query, project, limit))


def in_process(settings: Settings, query: str, project: str | None, limit: int) -> dict[str, Any]:
    """The same answer computed here (opens and refreshes the index itself: slower, no warm model)."""
    from memoryd.local import local_search
    from memoryd.tools.briefs_render import SEARCH_POOL, search_answer

    result = local_search(settings, query, project=project, limit=SEARCH_POOL)
    state = "disabled" if settings.model == "none" else "failed"
    return search_answer(result, limit=limit, project=project, model_state=state)


def _daemon_board(socket_path: Path) -> str | None:
    from memoryd.control import ask_status

    try:
        status = ask_status(socket_path)
    except ValueError:
        return None
    return status.get("board") if status else None


def run(args: Any) -> int:
    """``args``: ``query``, ``project``, ``limit``, ``json``, ``board``, ``index``, ``socket``, ``model``."""
    settings = Settings.load(board=args.board, index=args.index, socket=args.socket, model=args.model)
    socket_path = settings.locations.socket
    answer: dict[str, Any] | None = None
    # --board/--index name a board explicitly: the daemon is used only when it serves that same board.
    other_board = bool(args.board or args.index) and _daemon_board(socket_path) not in (
        None,
        str(settings.locations.board),
    )
    if not other_board:
        try:
            answer = {**via_daemon(socket_path, args.query, args.project, args.limit), "via": "daemon"}
        except DaemonUnavailable:
            print(
                f"memoryd search: no daemon is running on {socket_path}; searching in-process instead "
                "(slower; start one with `memoryd serve`)",
                file=sys.stderr,
            )
        except DaemonError as exc:
            print(f"memoryd search: {exc}", file=sys.stderr)
            return 2 if exc.code == -32602 else 1
    else:
        print(
            f"memoryd search: the running daemon serves another board; searching {settings.locations.board} "
            "in-process",
            file=sys.stderr,
        )
    if answer is None:
        answer = {**in_process(settings, args.query, args.project, args.limit), "via": "in-process"}
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
        print(f"{answer['shown']} of {matched} matching briefs (via {answer['via']})")
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
        print(f"(secrets redacted: {answer['redacted']})", file=sys.stderr)

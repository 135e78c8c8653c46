"""``memoryd search``: the agents' ``search_briefs`` and ``search_memories`` for a person at a terminal.

``--kind`` picks what is searched: ``all`` (default: briefs, then memories, each listed under its own
heading), ``briefs`` or ``memories``; each kind keeps its own ranking, as the two tools do. Through the
daemon the memories shown get their ``accessed_at`` stamped, as for an agent; in-process they do not (the
command writes no memory file).

It asks the running daemon (its warm index and model, through :mod:`memoryd.cli.client`); with ``--board``,
``--index``, ``MEMORYD_BOARD`` or ``MEMORYD_INDEX`` only a daemon serving that board (its ready line names it). Otherwise, or when no
daemon runs, it searches in-process (:mod:`memoryd.core.local`) on that board's own index, saying so on stderr:
never on the index of a daemon serving another board. When a daemon serving that board on another socket
writes that index, the search goes to that daemon. A daemon that goes away before answering (it is stopping
or restarting: it closes the connection, or says "please retry") is asked again, as a shim holds an agent's
call, until the next daemon answers or none runs (then the search is in-process, the index waited for
while the stopping daemon still holds it). Both paths print the same answer: ``--json`` is the
tool's ``structuredContent`` plus ``"via"`` (``"daemon"`` | ``"in-process"``) and ``"board"`` (the board
that answered); with memories searched, ``"memories"`` is ``search_memories``' result list (memdb's
``Memory`` shape plus ``relevance``). With ``--kind memories`` the briefs' keys are absent. The text output
names where the answer came from in words, shows a memory's relevance on the briefs' 0-1 scale, and under a
brief whose outcome holds query words its title and said line lack, that outcome's item (read from the board).

Exit codes: 0 answered (possibly with no match), 1 the daemon answered with an error (board unreadable,
still loading, ...) or the index cannot be written here (another process writes it, it belongs to another
board), or there is no readable board, 2 bad arguments (as the tools would refuse them: a query over
1,000 characters, a blank or over-long --project, text that is not UTF-8).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from memoryd.cli.client import DaemonClient, DaemonError, DaemonGone, DaemonUnavailable
from memoryd.cli.options import SOCKET_HELP, command, locations
from memoryd.cli.searchview import print_human
from memoryd.errors import BoardUnreadable, MemorydError, StartupError
from memoryd.paths import board_named
from memoryd.settings import Settings

LIMIT_MAX = 50  # search_briefs' own bound
KINDS = {"all": ("briefs", "memories"), "briefs": ("briefs",), "memories": ("memories",)}


def register(sub) -> None:
    """Add the ``search`` sub-command to the ``argparse`` sub-parsers ``sub``."""
    q = command(
        sub,
        "search",
        run,
        help="the same search agents get, over briefs and memories, for a person at a terminal (through "
        "the running daemon; directly on the board's index when none runs)",
    )
    q.add_argument("query")
    q.add_argument(
        "--kind",
        choices=tuple(KINDS),
        default="all",
        help="what to search: briefs and memories (all, the default), or one of them",
    )
    q.add_argument("--project", help="only this project")
    q.add_argument("--limit", type=limit_arg, default=10, help="results of each kind, 1-50 (default 10)")
    q.add_argument(
        "--json",
        action="store_true",
        help='one JSON object: the search_briefs answer, with search_memories\' results as "memories"',
    )
    locations(
        q,
        board="search this board (directly, unless the running daemon serves it)",
        index="index folder for a search without the daemon (default: the board's own)",
        socket=SOCKET_HELP,
    )
    q.add_argument("--model", help="embedding model for a search without the daemon, or 'none'")


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
    socket_path: Path,
    query: str,
    project: str | None,
    limit: int,
    board: str | None = None,
    kinds: tuple[str, ...] = ("briefs",),
) -> dict[str, Any]:
    """``search_briefs`` (its answer's keys) and ``search_memories`` (``"memories"``) through the daemon, as
    ``kinds`` asks, in one session, plus ``"board"``: the board it serves. With ``board``, only a daemon
    serving that board answers.

    Raises DaemonUnavailable (not running), OtherBoard, or DaemonError."""
    with DaemonClient(socket_path, tools=kinds) as client:
        if board is not None and not _same_folder(client.daemon_board, board):
            raise OtherBoard(client.daemon_board)
        answer: dict[str, Any] = {}
        if "briefs" in kinds:
            answer.update(client.call_tool("search_briefs", _arguments(query, project, limit)))
        if "memories" in kinds:
            _add_memories(answer, client.call_tool("search_memories", _arguments(query, project, limit)))
        return {**answer, "board": client.daemon_board}


#: How long a search keeps asking a daemon that went away mid-answer (stopping or restarting): past a
#: stopping daemon's shutdown budget (4.5 s), so that it has either come back or gone.
GONE_RETRY_S = 8.0
GONE_PAUSE_S = 0.2


def _via_daemon_retrying(
    socket_path: Path,
    query: str,
    project: str | None,
    limit: int,
    board: str | None,
    kinds: tuple[str, ...],
    retry_s: float = GONE_RETRY_S,
) -> dict[str, Any]:
    """:func:`via_daemon`, asked again while the daemon goes away before answering (:class:`DaemonGone`: it
    is stopping or restarting), as a shim holds an agent's call for the next daemon. Ends with that next
    daemon's answer, or :class:`DaemonUnavailable` once none runs (the caller then searches in-process);
    after ``retry_s`` seconds of a daemon that keeps going away, its last :class:`DaemonGone`."""
    deadline = time.monotonic() + retry_s
    told = False
    while True:
        try:
            return via_daemon(socket_path, query, project, limit, board, kinds)
        except DaemonGone as exc:
            if time.monotonic() >= deadline:
                raise
            if not told:
                print(
                    f"memoryd search: the daemon went away before answering ({exc}: it is stopping or "
                    "restarting); asking again",
                    file=sys.stderr,
                )
                told = True
            time.sleep(GONE_PAUSE_S)


def _same_folder(served: str | None, board: str) -> bool:
    """Whether the daemon's board ``served`` is the folder ``board`` names (a symlink to it included)."""
    if served is None:
        return False
    try:
        return served == board or os.path.samefile(served, board)
    except OSError:  # one of them is gone
        return False


def _add_memories(answer: dict[str, Any], envelope: dict[str, Any]) -> None:
    """Put the result list of a ``search_memories`` answer (memdb's ``{"ok", "result", "note"}``
    envelope) in ``answer["memories"]``, and its note that stored text is data when ``answer`` has none.
    Raises DaemonError for a failed search."""
    if not envelope.get("ok", False):
        error = envelope.get("error") or {}
        raise DaemonError(f"search_memories: {error.get('message') or envelope.get('text') or 'failed'}")
    answer["memories"] = list(envelope.get("result") or [])
    if envelope.get("hint"):  # a --project no memory is filed under, and the projects that have memories
        answer["memories_hint"] = envelope["hint"]
        answer["memories_projects"] = list(envelope.get("projects") or [])
    if envelope.get("note"):
        answer.setdefault("note", envelope["note"])


def in_process(
    settings: Settings, query: str, project: str | None, limit: int, kinds: tuple[str, ...] = ("briefs",)
) -> dict[str, Any]:
    """The same answer computed here, on the board's own index under its writer lock (slower, no warm
    model). Raises :class:`~memoryd.errors.StartupError` when that index cannot be written here."""
    from memoryd.core.local import local_searches
    from memoryd.kinds.briefs.render import listing_scope, search_answer, search_query

    briefs = search_query(query, project) if "briefs" in kinds else None
    memories = _arguments(query, project, limit) if "memories" in kinds else None
    result, found = local_searches(settings, briefs, memories)
    answer: dict[str, Any] = {}
    if result is not None:
        state = "disabled" if settings.model == "none" else "failed"
        answer = search_answer(
            result,
            limit=limit,
            project=listing_scope(result, project),
            model_state=state,
            projects=_board_projects(settings.locations.board) if project is not None else (),
        )
    if found is not None:
        _add_memories(answer, found)
    return answer


def _board_projects(board: Path) -> set[str]:
    """The projects of the board's tasks, as search_briefs lists them for a project it found nothing in."""
    from memoryd.kinds.briefs.reader import BoardReader

    try:
        return {task.project for task in BoardReader(board).load().tasks.values()}
    except (OSError, MemorydError):
        return set()


def _through_index_owner(exc: Exception, board: str, args: Any) -> dict[str, Any] | None:
    """When the index is written by a daemon serving ``board`` (on another socket), its answer."""
    holder = getattr(exc, "holder", None) or {}
    socket_path = holder.get("socket")
    if not socket_path or holder.get("board") != board:
        return None
    try:
        answer = via_daemon(Path(socket_path), args.query, args.project, args.limit, board, KINDS[args.kind])
    except (DaemonUnavailable, DaemonError, OtherBoard):
        return None
    print(
        f"memoryd search: the daemon on {socket_path} (pid {holder.get('pid')}) serves {board} and writes its "
        "index; searched through it",
        file=sys.stderr,
    )
    return answer


def run(args: Any) -> int:
    """``args``: ``query``, ``kind``, ``project``, ``limit``, ``json``, ``board``, ``index``, ``socket``,
    ``model``."""
    kinds = KINDS[args.kind]
    if not args.query.strip():
        example = 'memoryd search "checkout bug"'
        print(f"memoryd search: the query is empty; give the words to look for: {example}", file=sys.stderr)
        return 2
    if problem := _bad_text(args.query, args.project):
        print(f"memoryd search: {problem}", file=sys.stderr)
        return 2
    settings = Settings.load(board=args.board, index=args.index, socket=args.socket, model=args.model)
    loc = settings.locations
    board = str(loc.board)
    # --board/--index (or MEMORYD_BOARD/MEMORYD_INDEX) name a board: the daemon answers only when it serves it.
    wanted = board if board_named(args.board, args.index) else None
    answer: dict[str, Any] | None = None
    direct = "daemon not running: searched the board directly"
    try:
        found = _via_daemon_retrying(loc.socket, args.query, args.project, args.limit, wanted, kinds)
        answer = {**found, "via": "daemon"}
    except DaemonUnavailable:
        print(
            f"memoryd search: no daemon is running on {loc.socket}; searching the board directly instead "
            "(slower; start one with `memoryd serve`)",
            file=sys.stderr,
        )
    except OtherBoard as exc:
        direct = "the daemon serves another board: searched this one directly"
        print(
            f"memoryd search: the daemon on {loc.socket} serves {exc.board or 'another board'}; searching "
            f"{board} directly, on its own index {loc.index}",
            file=sys.stderr,
        )
    except DaemonGone as exc:  # it kept going away: what still holds the index is told below, if anything
        direct = "the daemon kept going away: searched the board directly"
        print(f"memoryd search: {exc}; searching the board directly instead", file=sys.stderr)
    except DaemonError as exc:
        print(f"memoryd search: {exc}", file=sys.stderr)
        return 2 if exc.code == -32602 else 1
    if answer is None:
        try:
            found = in_process(settings, args.query, args.project, args.limit, kinds)
            answer = {**found, "via": "in-process", "board": board}
        except BoardUnreadable as exc:  # no board there, not a folder, not readable
            print(f"memoryd search: {exc}", file=sys.stderr)
            return 1
        except StartupError as exc:  # the index: written by another process, or another board's
            owner = _through_index_owner(exc, board, args)
            if owner is None:
                print(f"memoryd search: {exc}", file=sys.stderr)
                return 1
            answer = {**owner, "via": "daemon"}
    from memoryd.cli.matchline import add_snippets

    add_snippets(answer, args.query)
    if args.json:
        print(json.dumps(answer, ensure_ascii=False))
    else:
        print_human(answer, args.query, "via daemon" if answer["via"] == "daemon" else direct)
    return 0


def _bad_text(query: str, project: str | None) -> str | None:
    """Why the tools would refuse ``query`` or ``project`` as typed, so that the daemon and the in-process
    search refuse alike: bytes that are not UTF-8 (argv decodes them to lone surrogates), a query over the
    tools' length bound. None when both are fine."""
    from memoryd.kinds.briefs.schemas import PROJECT_CHARS, QUERY_CHARS
    from memoryd.textcheck import has_lone_surrogate

    for name, text in (("query", query), ("--project", project)):
        if text is not None and has_lone_surrogate(text):
            return f"the {name} is not valid UTF-8 text; type it again in a UTF-8 terminal"
    if len(query) > QUERY_CHARS:
        return f"the query is {len(query):,} characters, more than the {QUERY_CHARS:,} allowed"
    if project and (len(project) > PROJECT_CHARS or not project.strip()):
        return f"--project must name a project (1-{PROJECT_CHARS} characters, not only spaces)"
    return None

"""``memoryd brief``: a person files a brief, filed like a captured prompt; prints its id.

``brief`` goes through the running daemon (the capture control request, :mod:`memoryd.core.capture`), so
the brief is redacted, filed into the task it continues and searchable when the id is printed. With no
daemon it files the brief the same way in this process (:func:`memoryd.core.local.file_brief`: keyword-only
search over the board's index, or a new task when there is none) and says so on stderr; the daemon indexes
it when it next starts. A board named by ``MEMORYD_BOARD`` (or ``MEMORYD_INDEX``) that the running daemon
does not serve is filed the same way in this process, never into the daemon's board.

A daemon that stops under the request (it closes the connection unanswered) may or may not have filed it:
the request carries a ``rid``, is asked again of the next daemon that answers, or filed here once that
daemon has exited; a brief on the board naming the ``rid`` is that request's brief, so it is filed once.

On stderr it names the task the brief went to (id, title, joined or new), its project, and its board when
that is not the default one (``<data>/board``): a brief filed somewhere unexpected is seen at once.

Filed from ``$HOME`` or ``/`` without ``--project`` the brief has no project (:func:`memoryd.project.project_of`):
every unrelated thing typed there would otherwise be one project. The command says so on stderr, with how to
name one.

``--task`` naming a done task opens that task again and says so on stderr: a brief is work wanted, and a
done task holding it would keep it out of every list of open work.
"""

from __future__ import annotations

import os
import sys

from memoryd.cli.options import EXIT_OK, EXIT_PROBLEM, EXIT_USAGE, command

#: How long a brief waits out a daemon that stopped under its request: past a stopping daemon's shutdown
#: budget (4.5 s), so that it has either come back or exited.
STOPPED_WAIT_S = 10.0
_PAUSE_S = 0.2


def register(sub) -> None:
    b = command(sub, "brief", cmd_brief, help="file a brief (what you want done); prints its id")
    b.add_argument("text", help="what you want, in your own words (<private>...</private> is never stored)")
    b.add_argument("--project", help="default: the project of the current folder")
    where = b.add_mutually_exclusive_group()
    where.add_argument(
        "--task",
        metavar="T",
        help="add it to this task, reopening it if done (default: the task it continues)",
    )
    where.add_argument("--new-task", metavar="TITLE", help="start a new task with this title")
    b.add_argument("--screen", metavar="PNG", help="a screenshot to attach")
    b.add_argument(
        "--screen-text",
        metavar="FILE",
        help="a text file holding that screenshot's text (searchable, never handed out)",
    )


def cmd_brief(args) -> int:
    from memoryd.paths import resolve
    from memoryd.project import no_project_reason
    from memoryd.textcheck import without_lone_surrogates

    if args.screen_text and not args.screen:
        print("memoryd brief: --screen-text needs --screen", file=sys.stderr)
        return EXIT_USAGE
    for option, value in (("--task", args.task), ("--new-task", args.new_task), ("--project", args.project)):
        if value is not None and not value.strip():  # ignored, it would file elsewhere than asked
            print(f"memoryd brief: {option} is blank; give it a value or leave it out", file=sys.stderr)
            return EXIT_USAGE
    screens = []
    if args.screen:
        for path in filter(None, (args.screen, args.screen_text)):
            if not os.path.exists(path):
                print(f"memoryd brief: no file {path}", file=sys.stderr)
                return EXIT_USAGE
        screens.append(
            [os.path.abspath(args.screen), os.path.abspath(args.screen_text) if args.screen_text else None]
        )
    request = {"event": "brief", "text": args.text, "cwd": os.getcwd(), "screens": screens}
    for key, value in (("project", args.project), ("task", args.task), ("new_task", args.new_task)):
        if value:
            request[key] = value
    # argv bytes that are not UTF-8 arrive as lone surrogates: mended as a hook mends them (U+FFFD), the
    # same with or without a daemon (its JSON line could not even be encoded).
    request = without_lone_surrogates(request)
    # names the request, so that asking again after a daemon stopped under it never files it twice
    request["rid"] = os.urandom(16).hex()
    locations = resolve()
    socket, searched = locations.socket, ""
    try:
        answer, other = _ask_daemon(socket, locations.board, request)
    except ValueError as exc:
        print(f"memoryd brief: {exc}", file=sys.stderr)
        return EXIT_PROBLEM
    if answer is None:
        from memoryd.core.local import file_brief
        from memoryd.kinds.briefs.source import BoardUnreadable
        from memoryd.settings import Settings

        try:
            answer, how = file_brief(Settings.load(), request)
        except (ValueError, BoardUnreadable, OSError) as exc:
            print(f"memoryd brief: {exc}", file=sys.stderr)
            return EXIT_PROBLEM
        where = f"the daemon on {socket} serves {other}" if other else f"no daemon answers on {socket}"
        searched = (
            f"; {where}, so it was filed here ({how}) and is indexed when a daemon serving its board starts"
        )
    print(answer["brief"])
    print(f"{filed_line(answer, locations.data / 'board')}{searched}", file=sys.stderr)
    reason = no_project_reason(request["cwd"]) if not (answer.get("project") or args.task) else ""
    if reason:
        print(
            f"memoryd brief: {request['cwd']} is {reason}, not a project's folder, so the brief has no project; "
            "run it in the project's folder or add --project NAME "
            f"(`memoryd tasks move {answer['brief']} --to T` moves it into a task of one)",
            file=sys.stderr,
        )
    kept = _kept_chars(args.text)
    if kept:
        print(
            f"memoryd brief: the text is {kept[0]:,} characters; the brief keeps its first {kept[1]:,} "
            "(put the rest in a file and name it in the brief)",
            file=sys.stderr,
        )
    if answer.get("reopened"):
        print(
            f"memoryd brief: task {answer['task']} was done; it is open again, since it has new work "
            f"(`memoryd tasks done {answer['task']}` closes it; `memoryd tasks move {answer['brief']} --to T` "
            "files the brief elsewhere)",
            file=sys.stderr,
        )
    return EXIT_OK


def _kept_chars(text: str) -> tuple[int, int] | None:
    """``(length, kept)`` when the brief's rules cut ``text`` (its private blocks left out first), else None."""
    from memoryd.kinds.briefs.capture import MAX_PROMPT_CHARS
    from memoryd_shim.textrules import strip_private

    length = len(strip_private(text.replace("\r\n", "\n"))[0])
    return (length, MAX_PROMPT_CHARS) if length > MAX_PROMPT_CHARS else None


def _ask_daemon(
    socket, board, request: dict, wait_s: float = STOPPED_WAIT_S
) -> tuple[dict | None, str | None]:
    """``(answer, other)``: the daemon's answer to the capture ``request``, or ``None`` when this process is
    to file it: no daemon answers, or the one that answers serves ``other`` board (then named).

    A daemon that closes the connection without answering was stopping (or died) under the request, and
    may have filed it: the request (its ``rid`` makes that safe) goes to the next daemon that answers, or,
    when none does, is filed here once that daemon has exited (it holds the board until then), where a
    brief naming its ``rid`` is found rather than filed again. Raises ``ValueError`` for a refusal, or
    when the daemon neither comes back nor exits within ``wait_s`` seconds."""
    import time

    from memoryd.serve.control import Unanswered, ask_capture

    deadline = time.monotonic() + wait_s
    interrupted = False
    while True:
        try:
            other = _other_board(socket, board)
            answer = None if other else ask_capture(socket, request)
        except Unanswered as exc:
            if time.monotonic() >= deadline:
                raise
            if not interrupted:
                print(f"memoryd brief: {str(exc).split(' (')[0]}; asking again", file=sys.stderr)
                interrupted = True
            time.sleep(_PAUSE_S)
            continue
        if answer is not None or other or not interrupted or not _board_held(board):
            return answer, other
        if time.monotonic() >= deadline:  # the daemon is not serving, yet it still holds the board
            raise ValueError(
                f"the daemon that stopped under the brief still holds the board {board} after {wait_s:g} s, so "
                "the brief was not filed here; `memoryd tasks` shows whether it was filed before it stopped"
            )
        time.sleep(_PAUSE_S)


def _board_held(board) -> bool:
    """Whether a daemon holds ``board`` (its lock on the folder, kept until that process exits)."""
    from pathlib import Path

    from memoryd.locks import FileLock

    probe = FileLock(Path(board), directory=True)
    try:
        if not probe.try_acquire():
            return True
    except OSError:  # no board folder yet: nobody holds it
        return False
    probe.release()
    return False


#: Why a brief joined an existing task, by the capture answer's ``filed``.
_JOINED = {"matched": "its words match that task's briefs", "named": "it names the task", "given": "--task"}


def filed_line(answer: dict, default_board) -> str:
    """The stderr line naming where a brief went: its task (id, title, joined or new), its project, and its
    board when that is not ``default_board``."""
    title = answer.get("title") or ""
    why = _JOINED.get(answer.get("filed") or "", answer.get("filed") or "")
    how = f"which continues earlier work: {why}" if answer.get("filed") != "new" else "a new task"
    if answer.get("filed") == "already":
        how = "filed before the daemon stopped under the request"
    line = f'task {answer["task"]} ("{title}", {how})' if title else f"task {answer['task']} ({how})"
    line += f", project {answer['project']}" if answer.get("project") else ", no project"
    board = answer.get("board")
    if board and os.path.abspath(board) != os.path.abspath(default_board):
        line += f", board {board}"
    return line


def _other_board(socket, board) -> str | None:
    """The board the daemon on ``socket`` serves when the board was named (``MEMORYD_BOARD``,
    ``MEMORYD_INDEX``) and the daemon serves another; ``None`` otherwise (also when none answers).
    Raises ``ValueError`` when what answers is not a daemon speaking this wire version."""
    from memoryd.paths import board_named
    from memoryd.serve.control import ask_status

    if not board_named():
        return None
    status = ask_status(socket, timeout=3.0)
    served = status.get("board") if status else None
    if not isinstance(served, str) or os.path.realpath(served) == os.path.realpath(board):
        return None  # the same folder, perhaps spelled through a link
    return served

"""``memoryd tasks``: the board's tasks, newest activity first (like ``list_tasks``), and a person's changes
to them: ``done``/``open`` set a task's status, ``move`` files briefs under another task (capture files a
prompt into the task it continues by search, and a search can be wrong).

Every command reads and writes the board files (:mod:`memoryd.kinds.briefs.edits`), the board the running
daemon serves when one answers, else this install's; a running daemon's watcher takes the change in, as it
does for any edit, and a stopped one at its next start.

Exit status: 0 done (also when nothing needed to change), 1 a problem (no such task or brief, a broken
file, an unreadable board; for the list: a task file that could not be read, named on stderr with its
reason, while the readable tasks are listed), 2 usage.
"""

from __future__ import annotations

import sys

from memoryd.cli.options import EXIT_OK, EXIT_PROBLEM, command
from memoryd.serve.control import served_board
from memoryd.wording import NO_PROJECT, counted


def register(sub) -> None:
    t = command(
        sub,
        "tasks",
        cmd_list,
        help="list the board's tasks, newest activity first; done/open/move change them",
        description="Without an action: list the tasks. `memoryd tasks done T...` closes tasks, "
        "`memoryd tasks open T...` reopens them, `memoryd tasks move B... --to T` files briefs under task T.",
    )
    t.add_argument("--project", help="list only this project's tasks")
    t.add_argument("--status", choices=("open", "done"), help="list only tasks with this status")
    t.add_argument("--limit", type=int, default=30, help="list at most this many (default 30)")
    actions = t.add_subparsers(dest="action", metavar="{done,open,move}")
    for status, says in (("done", "mark tasks done"), ("open", "open tasks again")):
        a = actions.add_parser(status, help=says)
        a.add_argument("task", nargs="+", metavar="TASK")
        a.set_defaults(func=cmd_status, status=status)
    m = actions.add_parser("move", help="file briefs under another task")
    m.add_argument("brief", nargs="+", metavar="BRIEF")
    m.add_argument("--to", required=True, metavar="TASK", help="the task they belong to")
    m.set_defaults(func=cmd_move)


def _each(done: str, keys: list[str], change, attempt) -> int:
    """Apply ``change(key) -> bool`` to every key; print ``"<key> <done>"`` (``already`` when nothing changed)
    or, on stderr, ``"cannot <attempt(key)>: <why>"``; the exit status."""
    from memoryd.errors import NotFound, ToolFailed
    from memoryd.kinds.briefs.source import BoardUnreadable
    from memoryd.kinds.briefs.writer import BriefNotFound

    code = EXIT_OK
    for key in keys:
        try:
            changed = change(key)
        except BriefNotFound:
            why = f"there is no brief {key} on the board (`memoryd search` finds briefs)"
        except NotFound as exc:
            why = f"there is {exc} on the board (`memoryd tasks` lists them)"
        except (ToolFailed, BoardUnreadable, ValueError, OSError) as exc:
            why = str(exc)
        else:
            print(f"{key} {'' if changed else 'already '}{done}")
            continue
        print(f"memoryd tasks: cannot {attempt(key)}: {why}", file=sys.stderr)
        code = EXIT_PROBLEM
    return code


def cmd_status(args) -> int:
    from memoryd.kinds.briefs.edits import set_task_status

    board = served_board(timeout=1.0)
    verb = "close" if args.status == "done" else "reopen"
    return _each(
        args.status,
        args.task,
        lambda task: set_task_status(board, task, args.status),
        lambda task: f"{verb} task {task}",
    )


def cmd_move(args) -> int:
    from memoryd.kinds.briefs.edits import move_brief

    board = served_board(timeout=1.0)
    left: set[str] = set()

    def move(brief: str) -> bool:
        moved, projects, was = move_brief(board, brief, args.to)
        if projects is not None:  # said, not refused: a brief filed under the wrong project is fixed here
            old, joined = (p or "(none)" for p in projects)
            print(f"memoryd tasks: {brief} moves from project {old} to project {joined}", file=sys.stderr)
        if was and was != args.to:
            left.add(was)
        return moved

    code = _each(f"in {args.to}", args.brief, move, lambda brief: f"move brief {brief} to task {args.to}")
    _say_emptied(board, left)
    return code


def _say_emptied(board, tasks: set[str]) -> None:
    """Say on stderr which of ``tasks`` (the ones briefs were moved out of) are open with no brief left: an
    empty open task stays in every list of open work until someone closes it."""
    from memoryd.kinds.briefs.reader import BoardReader
    from memoryd.kinds.briefs.source import BoardUnreadable

    if not tasks:
        return
    try:
        snap = BoardReader(board).load()
    except BoardUnreadable:
        return
    kept = {b.task for b in snap.briefs.values()}
    for task in sorted(tasks):
        if task not in kept and task in snap.tasks and snap.tasks[task].status == "open":
            print(
                f"memoryd tasks: task {task} now has no briefs and is still open; "
                f"`memoryd tasks done {task}` closes it",
                file=sys.stderr,
            )


def cmd_list(args) -> int:
    from memoryd.kinds.briefs.reader import BoardReader
    from memoryd.kinds.briefs.source import BoardUnreadable
    from memoryd.logs import hush

    hush("board.file_skipped")  # said below, once, as part of the answer
    board = served_board(timeout=1.0)
    try:
        snap = BoardReader(board).load()
    except BoardUnreadable as exc:
        print(f"memoryd tasks: {exc}", file=sys.stderr)
        return EXIT_PROBLEM
    activity: dict[str, tuple[str, int]] = {}
    for b in snap.briefs.values():
        last, n = activity.get(b.task, ("", 0))
        activity[b.task] = (max(last, b.created_at), n + 1)
    rows = [
        (t, max(activity.get(t.id, ("", 0))[0], t.created_at), activity.get(t.id, ("", 0))[1])
        for t in snap.tasks.values()
        if (not args.project or t.project == args.project) and (not args.status or t.status == args.status)
    ]
    rows.sort(key=lambda r: (r[1], r[0].id), reverse=True)
    shown = rows[: max(1, args.limit)]
    of = f"{len(shown)} of " if len(shown) < len(rows) else ""
    print(f"{of}{counted(len(rows), 'task')} on {board}" + (" (--limit shows more)" if of else ""))
    projects = {t.project for t in snap.tasks.values()}
    if args.project and args.project not in projects:  # most likely misspelled: list what there is
        listed = ", ".join(name or NO_PROJECT for name in sorted(projects)) or "none"
        print(f"no task is filed under project {args.project!r}; projects on the board: {listed}")
    for task, last, n in shown:
        print(
            f"{task.id}  {task.status:<4}  {last[:10]}  {n:>3} brief{'' if n == 1 else 's'}  "
            f"{f'[{task.project}]' if task.project else NO_PROJECT} {task.title}"
        )
    return _unread_tasks(snap.skipped)


def _unread_tasks(skipped) -> int:
    """Say on stderr which task files could not be read (their tasks are missing from the list, their briefs
    are not), and how many other board files (briefs: missing from the counts); the exit status: 1 when a
    task file could not be read."""
    from memoryd.kinds.briefs.source import unread_tasks

    unread = unread_tasks(skipped)
    if len(skipped) > len(unread):
        print(
            f"memoryd tasks: {counted(len(skipped) - len(unread), 'brief file')} could not be read "
            "(`memoryd doctor` names each)",
            file=sys.stderr,
        )
    if not unread:
        return EXIT_OK
    print(
        f"memoryd tasks: {counted(len(unread), 'task file')} could not be read, so not listed "
        "(fix or remove each; `memoryd doctor` names every board file that does not load):",
        file=sys.stderr,
    )
    for s in unread:
        print(f"  {s.path}: {s.reason}", file=sys.stderr)
    return EXIT_PROBLEM

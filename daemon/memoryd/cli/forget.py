"""``memoryd forget --now``: make text deleted from the board leave the index folder on disk now.

What forgetting means: a note line deleted by hand, a screenshot's ``.png`` removed, a
brief folder deleted. The running daemon applies such a change to the index within its watcher's debounce
(``MEMORYD_DEBOUNCE_MS``, 250 ms), and from then on no tool returns it. LanceDB still holds the old rows
in older versions and data files until the daemon's maintenance rewrites the live rows and drops every
old version; maintenance runs at most ``MEMORYD_OPTIMIZE_INTERVAL_S`` (30 s) after the first index write
since the last one. So, while a daemon runs, forgotten text leaves the disk within
:func:`bound_s` seconds of the change (30.25 s with the defaults, plus the time of the rewrite itself);
a change made while no daemon runs is applied and purged when the next daemon starts.

``--now`` does it at once:

* a daemon answers on the socket: it is asked over the control line (:func:`memoryd.serve.control.ask_forget`);
  its one index writer re-reads the whole board (so every deletion is applied, even one the watcher has
  not reported yet), rewrites the live rows and drops every old version, then answers;
* no daemon runs: the same is done in this process, holding the board lock every daemon holds while it
  serves (:mod:`memoryd.serve.lock`) and the index's writer lock (:mod:`memoryd.index.lock`), so there are never
  two writers; a daemon serving this board on another socket, another process writing the index, or an
  index built from another board makes it refuse.

Exit codes: 0 done (or, without ``--now``, the bound printed), 1 failed (board unreadable, the daemon
answered with an error, another daemon holds the board), 2 bad arguments.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from memoryd.cli.options import BOARD_HELP, INDEX_HELP, SOCKET_HELP, command, locations

EXIT_OK = 0
EXIT_FAILED = 1
LOCK_WAIT_S = 2.0  # a daemon holding the board lock answers on its socket, or is starting / stopping


def register(sub: Any) -> None:
    """Add ``forget`` to the ``memoryd`` sub-commands (see :mod:`memoryd.cli.main`)."""
    f = command(
        sub,
        "forget",
        run,
        help="make text deleted from the board leave the index on disk now (--now); without --now, "
        "print how soon that happens on its own",
    )
    f.add_argument(
        "--now",
        action="store_true",
        help="re-read the board and purge the index now (through the running daemon, directly when none runs)",
    )
    f.add_argument("--json", action="store_true", help="print the report as one JSON object")
    locations(f, board=BOARD_HELP, index=INDEX_HELP, socket=SOCKET_HELP)


def bound_s(settings: Any) -> float:
    """Seconds after a change on disk by which a running daemon has purged it from the index folder,
    not counting the rewrite itself: the watcher's debounce plus the maintenance interval."""
    return settings.debounce_ms / 1000 + settings.optimize_interval_s


def run(args: Any) -> int:
    """``args``: ``now``, ``json``, ``board``, ``index``, ``socket``; returns the exit code."""
    from memoryd.paths import board_named
    from memoryd.settings import Settings

    settings = Settings.load(board=args.board, index=args.index, socket=args.socket, model="none")
    if not args.now:
        return _explain(settings, args.json)
    try:
        report = _forget(settings, explicit=board_named(args.board, args.index), args_index=args.index)
    except _Failed as exc:
        print(f"memoryd forget: {exc}", file=sys.stderr)
        return EXIT_FAILED
    report["bound_s"] = bound_s(settings)
    print(json.dumps(report, ensure_ascii=False) if args.json else render(report))
    return EXIT_OK


class _Failed(Exception):
    """Nothing was purged; the message says why."""


def _explain(settings: Any, as_json: bool) -> int:
    bound = bound_s(settings)
    if as_json:
        print(json.dumps({"bound_s": bound, "optimize_interval_s": settings.optimize_interval_s}))
        return EXIT_OK
    print(
        f"While the daemon runs, text deleted from the board leaves every tool answer within "
        f"{settings.debounce_ms} ms and the index folder on disk within {bound:g} s "
        f"(MEMORYD_OPTIMIZE_INTERVAL_S={settings.optimize_interval_s} plus MEMORYD_DEBOUNCE_MS), plus the "
        "time of the rewrite itself. Changes made while no daemon runs are purged when it next starts.\n"
        "Run `memoryd forget --now` to purge at once."
    )
    return EXIT_OK


def _forget(settings: Any, *, explicit: bool, args_index: str | None = None) -> dict[str, Any]:
    """Purge through the daemon on the socket when it serves this board, else in-process. ``explicit``:
    --board or --index was given; ``args_index``: the --index given, which must be the daemon's own."""
    from memoryd.serve.control import ask_forget, ask_status

    loc = settings.locations
    try:
        status = ask_status(loc.socket)
    except ValueError as exc:
        raise _Failed(str(exc)) from None
    if status is not None:
        same_board = status.get("board") == str(loc.board)
        if explicit and same_board and args_index is not None and status.get("index") != str(loc.index):
            raise _Failed(
                f"the daemon on {loc.socket} serves {loc.board} with the index {status.get('index')}, not "
                f"{loc.index}; nothing was changed. Purge its index without --index, or stop it first"
            )
        if not explicit or same_board:
            try:
                answer = ask_forget(loc.socket)
            except ValueError as exc:
                raise _Failed(f"the daemon on {loc.socket} could not forget: {exc}") from None
            if answer is not None:
                return {"via": "daemon", "pid": status.get("pid"), **answer}
            # it stopped between the two requests: do it here
        elif status.get("index") == str(loc.index):
            raise _Failed(
                f"the daemon on {loc.socket} serves {status.get('board')} and writes the index {loc.index}; "
                "stop it, or run forget without --board/--index to purge through it"
            )
    return {"via": "in-process", **in_process(settings)}


def in_process(settings: Any) -> dict[str, Any]:
    """Re-read the board and purge its index here, holding the board lock; the report of
    :func:`memoryd.serve.control.forget_now`. Raises :class:`_Failed` when nothing could be done."""
    from memoryd.errors import StartupError
    from memoryd.index.lock import describe
    from memoryd.serve import lock
    from memoryd.serve.control import folder_bytes

    loc = settings.locations
    if not loc.board.is_dir():
        raise _Failed(f"the board {loc.board} does not exist or is not a folder; nothing was changed")
    if not loc.index.exists():
        return _report(settings, None, 0, 0, 0, None, 0.0)
    board_lock = lock.FileLock(loc.board, directory=True)

    def holder() -> dict[str, Any]:
        return lock.board_holder(loc.board, loc.index, loc.socket)

    try:
        lock.acquire(board_lock, loc.socket, what=f"board {loc.board}", wait_s=LOCK_WAIT_S, holder_of=holder)
    except StartupError as exc:  # AlreadyRunning included: a daemon serves this board elsewhere
        note = holder()
        its = note.get("socket")
        if isinstance(its, str) and its and lock.socket_answers(Path(its)):
            raise _Failed(
                f"{describe(note)} holds the board {loc.board}; nothing was changed here. Purge through "
                f"it: memoryd forget --now --socket {its}"
            ) from None
        raise _Failed(f"{exc}. Ask that daemon: memoryd forget --now --socket <its socket>") from None
    try:
        from memoryd.core.indexer import Indexer
        from memoryd.core.sources import make_sources
        from memoryd.index.lock import IndexLock
        from memoryd.index.searcher import RWLock
        from memoryd.index.store import IndexStore
        from memoryd.kinds.briefs.source import BoardUnreadable

        before = folder_bytes(loc.index)
        started = time.monotonic()
        try:
            store = IndexStore.open_writer(IndexLock(loc.index, loc.board, command="memoryd forget"))
        except StartupError as exc:  # another writer, or an index built from another board
            raise _Failed(f"{exc}; nothing was changed") from None
        try:
            indexer = Indexer(store, lambda: None, RWLock(), sources=make_sources(loc.board))
            try:
                report = indexer.full_sync()  # no model here: changed records keep or lose their vectors only
            except BoardUnreadable as exc:
                raise _Failed(f"{exc}; nothing was changed") from None
            indexer.maintain(purge=True)
            return _report(
                settings, report, store.count(), before, folder_bytes(loc.index), store.version(), started
            )
        finally:
            store.close()
    finally:
        board_lock.release()


def _report(
    settings: Any,
    sync: Any,
    records: int,
    before: int,
    after: int,
    version: int | None,
    started: float,
) -> dict[str, Any]:
    reconciled = {"added": 0, "updated": 0, "deleted": 0, "unchanged": 0}
    if sync is not None:
        reconciled = {k: getattr(sync, k) for k in reconciled}
    return {
        "board": str(settings.locations.board),
        "index": str(settings.locations.index),
        "reconciled": reconciled,
        "records": records,
        "index_bytes_before": before,
        "index_bytes_after": after,
        "version": version,
        "seconds": round(time.monotonic() - started, 3) if started else 0.0,
    }


def _size(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB"):
        if n < 1024 or unit == "MiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def render(report: dict[str, Any]) -> str:
    """Readable lines for a person at a terminal."""
    via = (
        f"through the running daemon (pid {report.get('pid')})"
        if report["via"] == "daemon"
        else "directly (no daemon serves this board)"
    )
    r = report["reconciled"]
    if report["version"] is None:
        return (
            f"memoryd forget --now, {via}: there is no index at {report['index']} yet; nothing on disk "
            "to forget."
        )
    return "\n".join(
        [
            f"memoryd forget --now, {via}: done in {report['seconds']:g} s.",
            f"  board  {report['board']} re-read: {r['deleted']} records deleted, {r['updated']} updated, "
            f"{r['added']} added, {r['unchanged']} unchanged",
            f"  index  {report['index']}: live rows rewritten ({report['records']} records), every old "
            f"version dropped; {_size(report['index_bytes_before'])} -> {_size(report['index_bytes_after'])}",
            "Text deleted from the board is no longer in any file of the index folder. Without --now this "
            f"happens on its own within {report['bound_s']:g} s of a change while the daemon runs.",
        ]
    )

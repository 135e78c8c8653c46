"""``memoryd doctor``'s checks of the board: is the index in step with it, and which board files do not load.

With a daemon running, both come from its status answer: the brief folders on the board against the briefs
indexed (a folder whose ``brief.json`` is broken is no brief, and is left to the board files check, since
a restart would not change it), the newest board file against the last index write, and the files its
record sources skip (``skipped_files``, the first few named). With no daemon running, the board files are
found the way a daemon finds them at its start: each record source's full load (:mod:`memoryd.core.sources`),
which writes nothing and opens no index (the 200 briefs of the sample board: about half a second).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from memoryd.cli.connect.doctor import OK, PROBLEM, Check, _restart
from memoryd.wording import counted

#: How far the newest board file may be ahead of the last index write before the index counts as behind
#: (the watcher debounces per brief, and a save is indexed within seconds).
INDEX_SLACK_S = 30.0
#: Board files a scan without a daemon names (all are counted).
SKIPPED_NAMED = 10


def _board_facts(board: Path) -> tuple[int, float]:
    """(brief folders on the board, newest mtime of any board file)."""
    from memoryd.cli.connect.hook import BRIEF_ID

    briefs_dir = board / "briefs"
    count = sum(1 for p in briefs_dir.iterdir() if BRIEF_ID.fullmatch(p.name)) if briefs_dir.is_dir() else 0
    newest = 0.0
    for root, _dirs, files in os.walk(board):
        for name in files:
            with contextlib.suppress(OSError):
                newest = max(newest, os.stat(os.path.join(root, name)).st_mtime)
    return count, newest


def index(status: dict[str, Any] | None, service: bool) -> Check | None:
    engine = (status or {}).get("engine") or {}
    if status is None or engine.get("briefs") is None or not status.get("board"):
        return None
    board = Path(status["board"])
    count, newest = _board_facts(board)
    indexed_at = engine.get("last_indexed_at") or 0.0
    fix = _restart(service, "the daemon reconciles the index with the board when it starts")
    if engine.get("watcher") not in (None, "alive"):
        return Check("index", PROBLEM, f"the board watcher is {engine.get('watcher')}", fix)
    behind = newest - indexed_at if indexed_at else None
    # a folder whose brief.json is broken is no brief: the "board files" check names it, a restart won't help
    count -= engine.get("briefs_skipped") or 0
    if count != engine.get("briefs") or (behind is not None and behind > INDEX_SLACK_S):
        return Check(
            "index",
            PROBLEM,
            f"behind the board: {counted(engine.get('briefs') or 0, 'brief')} indexed, {count} on {board}",
            fix,
        )
    records, briefs = counted(engine.get("records") or 0, "record"), counted(count, "brief")
    return Check("index", OK, f"{records}, in step with {briefs} on the board")


def _reported(status: dict[str, Any] | None) -> Check | None:
    """Board files the daemon could not load: their records are missing from every search."""
    engine = (status or {}).get("engine") or {}
    n = engine.get("skipped_files") or 0
    if not n:
        return None
    named = "; ".join(f"{s['path']} ({s['reason']})" for s in engine.get("skipped") or [])
    more = n - len(engine.get("skipped") or [])
    detail = f"{counted(n, 'file')} on the board not loaded: {named or 'see the daemon log'}"
    detail += f"; and {more} more (the daemon log names each)" if more > 0 and named else ""
    return Check(
        "board files",
        PROBLEM,
        detail,
        "fix or remove each file listed above; the daemon loads a file again once it is saved",
    )


def _scanned(board: Path) -> Check | None:
    """With no daemon running: the board files a daemon would skip at its start, found the way it finds
    them (each record source's full load; nothing is written). None when the board does not exist yet."""
    from memoryd.core.sources import make_sources
    from memoryd.kinds.briefs.source import BoardUnreadable
    from memoryd.logs import hush

    if not board.is_dir():
        return None
    hush("board.file_skipped", "sessions.line_skipped", "sessions.summary_skipped")  # the check names them
    skipped = []
    try:
        for src in make_sources(board):
            skipped += src.load_all().skipped
    except BoardUnreadable as exc:
        return Check("board files", PROBLEM, str(exc), f"fix the board folder {board}")
    if not skipped:
        return Check("board files", OK, f"every file on {board} loads")
    shown = skipped[:SKIPPED_NAMED]
    detail = f"{counted(len(skipped), 'file')} on {board} would not load: " + "; ".join(
        f"{s.path} ({s.reason})" for s in shown
    )
    detail += f"; and {len(skipped) - len(shown)} more" if len(skipped) > len(shown) else ""
    return Check("board files", PROBLEM, detail, "fix or remove each file listed above")


def files(status: dict[str, Any] | None, board: Path, scan: bool) -> Check | None:
    """The board files check: from the daemon's ``status``, or, with ``scan``, by reading ``board``."""
    return _scanned(board) if scan else _reported(status)

"""Removing the temp files a killed writer left behind (run once by every daemon start), after finishing
the briefs a killed filing left half written (:mod:`memoryd.kinds.briefs.newbrief`).

A write that is killed (``kill -9``, power loss) between creating its temp file and renaming it leaves
``.<name>.<pid>-<hex>.tmp`` (:func:`memoryd.board.atomic.temp_name`) beside its target. Readers and the
watcher ignore dotfiles, so nothing breaks, but nothing ever removes them either. A daemon start removes
the ones that are provably ours and provably stale:

ours
    the name is exactly :func:`~memoryd.board.atomic.parse_temp_name`'s form, for a target memoryd writes
    in that very folder (``memories/<sha256>.md``; ``sessions/<id>.jsonl`` and ``<id>.summary.json``;
    ``tasks/<task id>.json``; ``briefs/<brief id>/`` ``brief.json``, ``said.txt``, ``prompt.md``,
    ``notes.md`` and ``outcome.md``; ``*.jsonl`` in the exports folder), and the entry is a regular file
    owned by this user (a symlink, a folder or another user's file is never ours). Every other name, a
    user's ``notes.md.tmp`` (not our temp form) or an editor's swap file included, is left alone.
stale
    the pid in its name is not a running process (its writer died: the write can never finish), or the
    file is older than an hour (:data:`~memoryd.board.atomic.STALE_AGE_S`: names from before the pid was
    added, a pid taken over by a new process, a writer on another machine sharing the board). A temp lives
    for milliseconds while a write is in flight, so an hour-old one is never being written; a live writer
    (``memoryd import`` next to the daemon) keeps its temp because its pid is alive.

The daemon holds the board lock while it sweeps, so no other daemon writes this board; folders are opened
through :mod:`memoryd.board.gate` (a symlinked folder is skipped, never followed).
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from memoryd.board.atomic import parse_temp_name, writer_gone
from memoryd.board.gate import SafeDir, UnsafePath, is_brief_id, is_task_id, open_root
from memoryd.errors import MemorydError
from memoryd.kinds.briefs.edits import NOTES_FILE
from memoryd.kinds.briefs.newbrief import BRIEF_FILE, finish_briefs
from memoryd.kinds.briefs.reader import BRIEFS_DIR, TASKS_DIR
from memoryd.kinds.briefs.writer import OUTCOME_FILE
from memoryd.kinds.memories.files import MEMORIES_DIR, memory_id_of
from memoryd.kinds.sessions.files import session_of_path
from memoryd.kinds.sessions.format import SESSIONS_DIR
from memoryd.logs import get_logger

log = get_logger("memoryd.core.sweep")


def is_stale_temp(name: str, st: os.stat_result, target_ok: Callable[[str], bool], now: float) -> bool:
    """Whether the entry ``name`` (its ``lstat``) is one of our temp files (for a target ``target_ok``
    accepts) that no live writer will finish; the rules are in the module docstring."""
    parsed = parse_temp_name(name)
    if parsed is None or not target_ok(parsed[0]):
        return False
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
        return False
    return writer_gone(parsed[1], st.st_mtime, now)


def _is_memory(name: str) -> bool:
    return memory_id_of(name) is not None


def _is_session_file(name: str) -> bool:
    return session_of_path(f"{SESSIONS_DIR}/{name}") is not None


def _is_task_file(name: str) -> bool:
    return name.endswith(".json") and is_task_id(name[:-5])


def _is_brief_file(name: str) -> bool:
    # new briefs are written whole in a folder of their own; `memoryd import` writes these in place
    return name in (BRIEF_FILE, "said.txt", "prompt.md", OUTCOME_FILE, NOTES_FILE)


def _sweep_dir(d: SafeDir, target_ok: Callable[[str], bool], now: float, removed: list[str]) -> None:
    for name in d.names():
        if not name.startswith("."):
            continue
        try:
            if is_stale_temp(name, d.lstat(name), target_ok, now):
                os.unlink(name, dir_fd=d.fd)
                removed.append(d.relpath(name))
        except FileNotFoundError:
            continue  # renamed or removed meanwhile
        except (OSError, UnsafePath) as exc:
            log.warning("temp_not_removed", path=d.relpath(name), error=str(exc))


@contextlib.contextmanager
def _child(d: SafeDir, name: str) -> Iterator[SafeDir | None]:
    try:
        child = d.child(name)
    except (OSError, UnsafePath):
        yield None  # absent, a symlink or not a folder: nothing of ours to remove
        return
    with child:
        yield child


def sweep_board(board: Path, now: float | None = None) -> list[str]:
    """Remove our stale temp files from ``board`` (module docstring); returns their board-relative paths.

    Never raises for a file or a folder (each problem is logged and skipped); OSError for the root."""
    now = time.time() if now is None else now
    removed: list[str] = []
    with open_root(board) as root:
        for folder, target_ok in (
            (MEMORIES_DIR, _is_memory),
            (SESSIONS_DIR, _is_session_file),
            (TASKS_DIR, _is_task_file),
        ):
            with _child(root, folder) as d:
                if d is not None:
                    _sweep_dir(d, target_ok, now, removed)
        with _child(root, BRIEFS_DIR) as briefs:
            names = briefs.names() if briefs is not None else []
            for name in names:
                if not is_brief_id(name):
                    continue
                with _child(briefs, name) as d:
                    if d is not None:
                        _sweep_dir(d, _is_brief_file, now, removed)
    return removed


def sweep_exports(folder: Path, now: float | None = None) -> list[str]:
    """Remove our stale temp files of ``*.jsonl`` exports from ``folder``; returns their absolute paths."""
    now = time.time() if now is None else now
    removed: list[str] = []
    try:
        d = open_root(folder)
    except OSError:
        return removed  # no exports yet
    with d:
        _sweep_dir(d, lambda target: target.endswith(".jsonl"), now, removed)
    return [str(Path(folder) / p) for p in removed]


def finish_cut_briefs(board: Path) -> list[tuple[str, str]]:
    """The briefs a killed filing left half written, finished or removed
    (:func:`memoryd.kinds.briefs.newbrief.finish_briefs`); never raises."""
    try:
        return finish_briefs(board)
    except (OSError, MemorydError) as exc:
        log.warning("cut_briefs_not_checked", board=str(board), error=str(exc))
        return []


def sweep(board: Path, exports: Path) -> list[str]:
    """The briefs a killed filing left (:func:`finish_cut_briefs`), then both sweeps, logged as one
    ``stale_temps_removed`` line when anything was removed; never raises."""
    finish_cut_briefs(board)
    removed: list[str] = []
    for fn, where in ((sweep_board, board), (sweep_exports, exports)):
        try:
            removed += fn(where)
        except OSError as exc:
            log.warning("temp_sweep_failed", folder=str(where), error=str(exc))
    if removed:
        log.info("stale_temps_removed", count=len(removed), paths=removed[:20])
    return removed

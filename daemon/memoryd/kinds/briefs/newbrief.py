"""Writing a new brief, and the new task it starts, so that no cut leaves an empty task or half a brief.

A brief is a folder of files and its new task one more file elsewhere: no single rename shows both. So
:func:`write_brief` builds the brief whole where no reader looks, then shows the task, then the brief:

1. ``briefs/.<id>.<pid>-<12 hex>.tmp/`` (:func:`memoryd.board.atomic.temp_name`'s form: a dot folder, which
   the reader and the watcher ignore) receives ``.task.json`` (the new task's file, when there is one), then
   ``said.txt``, ``prompt.md``, the screens and, last, ``brief.json``, each written atomically;
2. the new task's ``tasks/<id>.json`` is created (``link(2)``: never replacing one), ``.task.json`` removed;
3. the folder is renamed to ``briefs/<id>``: the brief exists, whole, for readers and the watcher.

It runs in one worker thread, so a caller cancelled meanwhile (a daemon stopping under the request) never
stops it halfway, and it undoes its own writes when one fails. A killed process (``kill -9``, power loss)
leaves the temp folder behind: :func:`finish_briefs` (every daemon start, and ``memoryd brief`` before it
files in its own process) takes each one whose writer is gone. One holding ``brief.json`` holds the whole
brief (every other file was written before it): its task is created when still missing, then it is renamed
into place. One without never held the whole brief, and no task was written for it yet: it is removed.
Finishing keeps what the developer said (a hook killed with its daemon never spools it); the brief records
its request's ``rid``, so the copy a hook spooled, or ``memoryd brief`` asking again, is found filed and not
filed twice.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from memoryd.board import atomic
from memoryd.board.gate import (
    DIR_MODE,
    SafeDir,
    UnsafePath,
    check_brief_id,
    check_task_id,
    is_brief_id,
    is_task_id,
    open_folder,
)
from memoryd.errors import MemorydError
from memoryd.index.redact import redact
from memoryd.kinds.briefs.files import BriefHead
from memoryd.kinds.briefs.reader import BRIEFS_DIR, SCREENS_DIR, TASKS_DIR
from memoryd.logs import get_logger

log = get_logger("memoryd.board")

BRIEF_FILE = "brief.json"
#: The new task's file, kept in the brief's temp folder until the task exists.
TASK_FILE = ".task.json"


@dataclass(frozen=True)
class NewTask:
    """The ``tasks/<id>.json`` a brief starts (status ``open``)."""

    id: str
    title: str
    project: str
    created_at: str

    def to_json(self) -> dict[str, str]:
        return {"id": self.id, "title": self.title, "project": self.project, "status": "open",
                "created_at": self.created_at}  # fmt: skip


@dataclass(frozen=True)
class NewBrief(BriefHead):
    """What :func:`write_brief` writes. ``said``/``prompt`` are already cleaned; ``screens`` are
    ``(png bytes, text or None)`` pairs, numbered from 1. ``captured`` names the agent and session that
    sent it, and the ``rid`` of its request (an extra ``brief.json`` field; readers ignore what they do
    not know)."""

    said: str
    prompt: str
    screens: tuple[tuple[bytes, str | None], ...] = ()
    captured: dict | None = None


def json_bytes(value: dict) -> bytes:
    """A board JSON file's bytes: indented UTF-8, one final newline."""
    return (json.dumps(value, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def write_brief(board: Path, brief: NewBrief, task: NewTask | None = None) -> Path:
    """Write ``briefs/<id>/`` (and ``task``, the new task it starts) in the order of the module docstring;
    returns the brief's folder. ``brief.task`` must be ``task.id`` when a task is given.

    Raises InvalidId, FileExistsError (the brief's folder or the task's file exists: nothing is left
    written), BoardUnreadable, UnsafePath, OSError (what was written is removed again)."""
    check_brief_id(brief.id)
    check_task_id(brief.task)
    if task is not None and check_task_id(task.id) != brief.task:
        raise ValueError(f"brief {brief.id} names task {brief.task}, not the new task {task.id}")
    meta = {"id": brief.id, "task": brief.task, "project": brief.project, "created_at": brief.created_at,
            "title": brief.title, "summary": brief.summary}  # fmt: skip
    if brief.captured:
        meta["captured"] = brief.captured
    with open_folder(board, BRIEFS_DIR, create=True) as briefs:
        if briefs.exists(brief.id):
            raise FileExistsError(f"brief {brief.id} exists")
        tmp = atomic.temp_name(brief.id)
        os.mkdir(tmp, DIR_MODE, dir_fd=briefs.fd)
        linked = False
        try:
            with briefs.child(tmp) as d:
                if task is not None:
                    atomic.write_replace(d, TASK_FILE, json_bytes(task.to_json()), sync_dir=False)
                _write_texts(d, brief)
                atomic.fsync_dir(d)  # brief.json says the rest is there: it must never outlive them
                atomic.write_replace(d, BRIEF_FILE, json_bytes(meta))
                if task is not None:
                    linked = _link_task(board, task.to_json())
                    if not linked:
                        raise FileExistsError(f"task {task.id} exists")
                    d.unlink(TASK_FILE)
            _show(briefs, tmp, brief.id)
        except BaseException:
            if linked:  # ours, and its brief is not shown: never leave it empty
                _unlink_task(board, task.id)
            _remove_tree(briefs, tmp)
            raise
        return Path(board) / briefs.relpath(brief.id)


def _write_texts(d: SafeDir, brief: NewBrief) -> None:
    atomic.write_replace(d, "said.txt", brief.said.encode("utf-8") + b"\n", sync_dir=False)
    atomic.write_replace(d, "prompt.md", brief.prompt.encode("utf-8") + b"\n", sync_dir=False)
    if not brief.screens:
        return
    os.mkdir(SCREENS_DIR, DIR_MODE, dir_fd=d.fd)
    with d.child(SCREENS_DIR) as screens:
        for n, (png, text) in enumerate(brief.screens, start=1):
            if text is not None:
                atomic.write_replace(screens, f"{n}.txt", redact(text).text.encode("utf-8"), sync_dir=False)
            atomic.write_replace(screens, f"{n}.png", png, sync_dir=False)
        atomic.fsync_dir(screens)


def _link_task(board: Path, task: dict) -> bool:
    """Create ``tasks/<id>.json``; False when that file exists already."""
    with open_folder(board, TASKS_DIR, create=True) as tasks:
        return atomic.write_new(tasks, f"{task['id']}.json", json_bytes(task))


def _unlink_task(board: Path, task_id: str) -> None:
    try:
        with open_folder(board, TASKS_DIR) as tasks:
            tasks.unlink(f"{task_id}.json")
    except (OSError, MemorydError) as exc:  # BoardUnreadable, UnsafePath
        log.warning("board.new_task_not_removed", task=task_id, error=str(exc))


def _show(briefs: SafeDir, tmp: str, brief_id: str) -> None:
    """Rename the whole brief folder into place, never over an entry of that name."""
    if briefs.exists(brief_id):  # rename(2) would replace an empty folder
        raise FileExistsError(f"brief {brief_id} exists")
    os.rename(tmp, brief_id, src_dir_fd=briefs.fd, dst_dir_fd=briefs.fd)
    atomic.fsync_dir(briefs)


def _remove_tree(briefs: SafeDir, name: str, depth: int = 2) -> None:
    """Remove folder ``name`` of ``briefs`` (ours: a temp folder) and what it holds, ``depth`` levels down;
    a symlink is removed itself, never followed. Never raises."""
    try:
        with briefs.child(name) as d:
            for entry in d.names():
                with contextlib.suppress(OSError, UnsafePath):
                    if depth > 1 and stat.S_ISDIR(d.lstat(entry).st_mode):
                        _remove_tree(d, entry, depth - 1)
                    else:
                        d.unlink(entry)
        os.rmdir(name, dir_fd=briefs.fd)
    except (OSError, UnsafePath) as exc:
        if not isinstance(exc, FileNotFoundError):
            log.warning("board.temp_brief_not_removed", path=briefs.relpath(name), error=str(exc))


# --- briefs a killed writer left ---------------------------------------------------------------------


def finish_briefs(board: Path, now: float | None = None) -> list[tuple[str, str]]:
    """Finish or remove the temp brief folders whose writer is gone (module docstring);
    ``[(brief id, "finished" | "removed")]``. Never raises for a folder (each problem is logged); OSError,
    BoardUnreadable for the board itself."""
    now = time.time() if now is None else now
    done: list[tuple[str, str]] = []
    briefs = open_folder(board, BRIEFS_DIR)
    if briefs is None:
        return done
    with briefs:
        for name in briefs.names():
            parsed = atomic.parse_temp_name(name)
            if parsed is None or not is_brief_id(parsed[0]):
                continue
            try:
                st = briefs.lstat(name)
            except (OSError, UnsafePath):
                continue
            # a real folder of this user's, and its writer can never finish it
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
                continue
            if not atomic.writer_gone(parsed[1], st.st_mtime, now):
                continue
            try:
                done.append((parsed[0], _finish(board, briefs, name, parsed[0])))
            except (OSError, UnsafePath, ValueError) as exc:
                log.warning("board.temp_brief_left", path=briefs.relpath(name), error=str(exc))
    if done:
        log.info("board.cut_briefs", briefs=[f"{brief} {what}" for brief, what in done])
    return done


def _finish(board: Path, briefs: SafeDir, tmp: str, brief_id: str) -> str:
    with briefs.child(tmp) as d:
        if not d.is_safe_file(BRIEF_FILE):
            whole = False
        else:
            whole = True
            if d.is_safe_file(TASK_FILE):
                task = json.loads(d.read_text(TASK_FILE))
                if not isinstance(task, dict) or not is_task_id(task.get("id")):
                    raise ValueError(f"{TASK_FILE} names no task")
                _link_task(board, task)  # False: created before the cut
                d.unlink(TASK_FILE)
    if not whole:
        _remove_tree(briefs, tmp)
        return "removed"
    _show(briefs, tmp, brief_id)
    return "finished"

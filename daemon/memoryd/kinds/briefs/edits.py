"""Hand edits made for a person: remove one note line, remove one screenshot, read a screenshot's bytes,
mark a task done or open again, move a brief to another task.

These write the board exactly as a person editing the files would, so forgetting works as it always does
(the watcher or the caller hands the brief to the index, and maintenance drops the old text from disk):

* a note line: ``notes.md`` is rewritten without that one line (temp file + rename in the brief's folder;
  every other byte kept, a file left empty stays, empty);
* a screenshot: ``screens/<n>.png`` is unlinked first (from then on the screen does not exist, see
  :mod:`memoryd.kinds.briefs.reader`), then its ``<n>.txt`` and ``<n>.json`` so its text leaves the board too.

Notes are shown redacted, and redaction runs over the whole file before it is split into lines, so a note is
named by its position *and* the digest of its redacted text (:func:`note_digest`): the line removed is the one whose removal leaves exactly the
other shown notes. When no single line does that (the file changed meanwhile, or a secret spans lines),
nothing is written and :class:`EditRefused` says to edit the file by hand.

A task's status and a brief's task are one JSON field each: the file is read, that field (and a moved
brief's ``project``, which follows its new task) is changed, every other field is kept, and the file is
replaced atomically, as a person editing it would.

Every folder is opened through :mod:`memoryd.board.gate` (no symlink below the board root is followed).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from pathlib import Path

from memoryd.board import atomic
from memoryd.board.gate import SafeDir, UnsafePath, check_brief_id, check_task_id, open_folder
from memoryd.errors import NotFound, ToolFailed
from memoryd.index.redact import redact
from memoryd.kinds.briefs.files import TASK_STATUSES, parse_notes
from memoryd.kinds.briefs.reader import SCREENS_DIR, TASKS_DIR
from memoryd.kinds.briefs.writer import BriefNotFound, brief_dir
from memoryd.logs import get_logger

log = get_logger("memoryd.board")

NOTES_FILE = "notes.md"
#: The screen names the reader accepts (``<n>`` of ``screens/<n>.png``); anything else is refused first.
SCREEN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}", re.ASCII)
#: Largest screenshot served (the gate's default cap for any board file).
SCREEN_MAX_BYTES = 8 * 2**20


class EditRefused(ToolFailed):
    """The edit cannot be made safely as asked; nothing was written. The message says why."""


def _shown(text: str) -> tuple[str, ...]:
    return parse_notes(redact(text).text) if text else ()


def note_digest(note: str) -> str:
    """A short digest naming one note (``Brief.notes[i]``, redacted) in a delete request."""
    return hashlib.sha256(note.encode("utf-8")).hexdigest()[:16]


def delete_note(board: Path, brief_id: str, index: int, digest: str) -> None:
    """Remove note ``index`` (0-based, as ``Brief.notes`` lists them) whose :func:`note_digest` is ``digest``.

    Raises InvalidId, BriefNotFound, NotFound (no such note now), EditRefused, UnsafePath, OSError."""
    check_brief_id(brief_id)
    with brief_dir(board, brief_id) as d:
        try:
            raw = d.read_text(NOTES_FILE)
        except FileNotFoundError:
            raise NotFound(f"brief {brief_id} has no notes") from None
        notes = _shown(raw)
        if not 0 <= index < len(notes) or note_digest(notes[index]) != digest:
            raise NotFound(f"brief {brief_id} has no such note now (the notes changed); reload the page")
        want = notes[:index] + notes[index + 1 :]
        lines = raw.splitlines(keepends=True)
        # Try the line at the note's own position first, then every other note line.
        note_lines = [i for i, line in enumerate(lines) if parse_notes(line)]
        order = ([note_lines[index]] if index < len(note_lines) else []) + note_lines
        for i in dict.fromkeys(order):
            rest = "".join(lines[:i] + lines[i + 1 :])
            if _shown(rest) == want:
                atomic.write_replace(d, NOTES_FILE, rest.encode("utf-8"))
                log.info("board.note_deleted", brief=brief_id, line=i + 1)
                return
    raise EditRefused(
        f"no single line of {NOTES_FILE} holds just that note (a redacted secret may span lines); "
        f"edit briefs/{brief_id}/{NOTES_FILE} by hand"
    )


def _screens(d: SafeDir) -> SafeDir:
    try:
        return d.child(SCREENS_DIR)
    except FileNotFoundError:
        raise NotFound("that brief has no screenshots") from None


def _check_screen(name: str) -> str:
    if not isinstance(name, str) or not SCREEN_NAME.fullmatch(name):
        raise EditRefused("a screenshot name is letters, digits, '-' and '_' (at most 64)")
    return name


def delete_screen(board: Path, brief_id: str, name: str) -> None:
    """Remove screenshot ``name`` of the brief: ``<name>.png``, then its ``.txt`` and ``.json``.

    Raises InvalidId, EditRefused (bad name), BriefNotFound, NotFound (no such screenshot), UnsafePath."""
    check_brief_id(brief_id)
    _check_screen(name)
    with brief_dir(board, brief_id) as d, _screens(d) as s:
        try:
            s.lstat(f"{name}.png")
        except FileNotFoundError:
            raise NotFound(f"brief {brief_id} has no screenshot {name}") from None
        for suffix in (".png", ".txt", ".json"):  # the .png first: without it the screen is gone
            with contextlib.suppress(FileNotFoundError):
                s.unlink(f"{name}{suffix}")
        atomic.fsync_dir(s)
    log.info("board.screen_deleted", brief=brief_id, screen=name)


def screenshot(board: Path, brief_id: str, name: str) -> bytes:
    """The bytes of ``briefs/<brief_id>/screens/<name>.png`` through the gate (a regular file inside the
    board, reached without a symlink). Raises InvalidId, EditRefused (bad name), BriefNotFound,
    NotFound, UnsafePath."""
    check_brief_id(brief_id)
    _check_screen(name)
    with brief_dir(board, brief_id) as d, _screens(d) as s:
        try:
            return s.read_bytes(f"{name}.png", SCREEN_MAX_BYTES)
        except FileNotFoundError:
            raise NotFound(f"brief {brief_id} has no screenshot {name}") from None


__all__ = [
    "BriefNotFound",
    "EditRefused",
    "UnsafePath",
    "delete_note",
    "delete_screen",
    "note_digest",
    "screenshot",
]


def _read_json(d: SafeDir, name: str, what: str) -> dict:
    try:
        value = json.loads(d.read_text(name))
    except FileNotFoundError:
        raise NotFound(f"no {what}") from None
    except ValueError:
        raise EditRefused(f"{what} is not valid JSON; edit {d.relpath(name)} by hand") from None
    if not isinstance(value, dict):
        raise EditRefused(f"{what} is not a JSON object; edit {d.relpath(name)} by hand")
    return value


def _write_json(d: SafeDir, name: str, value: dict) -> None:
    data = json.dumps(value, ensure_ascii=False, indent=2) + "\n"
    atomic.write_replace(d, name, data.encode("utf-8"))


def _task_json(board: Path, task_id: str) -> tuple[SafeDir, dict]:
    check_task_id(task_id)
    tasks = open_folder(board, TASKS_DIR)
    if tasks is None:
        raise NotFound(f"no task {task_id}")
    try:
        return tasks, _read_json(tasks, f"{task_id}.json", f"task {task_id}")
    except BaseException:
        tasks.close()
        raise


def set_task_status(board: Path, task_id: str, status: str) -> bool:
    """Set ``tasks/<task_id>.json``'s status to ``status`` (``open`` or ``done``); False when it already was.

    Raises InvalidId, ValueError (another status), NotFound, EditRefused (not a JSON object), UnsafePath,
    OSError."""
    if status not in TASK_STATUSES:
        raise ValueError(f"a task's status is one of {', '.join(TASK_STATUSES)}")
    tasks, task = _task_json(board, task_id)
    with tasks:
        if task.get("status") == status:
            return False
        _write_json(tasks, f"{task_id}.json", {**task, "status": status})
    log.info("board.task_status", task=task_id, status=status)
    return True


def move_brief(board: Path, brief_id: str, task_id: str) -> tuple[bool, tuple[str, str] | None, str | None]:
    """File brief ``brief_id`` under task ``task_id`` (its ``project`` becomes the task's). Returns
    ``(moved, (project it left, project it joined), task it left)``: ``moved`` is False when it already was
    there; the projects are None unless the move changed its project; the task it left is None when it
    did not move. Raises InvalidId, BriefNotFound, NotFound (no such task), EditRefused,
    UnsafePath, OSError."""
    check_brief_id(brief_id)
    tasks, task = _task_json(board, task_id)
    tasks.close()
    with brief_dir(board, brief_id) as d:
        brief = _read_json(d, "brief.json", f"brief {brief_id}'s brief.json")
        moved = {**brief, "task": task_id, "project": task.get("project", brief.get("project"))}
        if moved == brief:
            return False, None, None
        _write_json(d, "brief.json", moved)
    log.info("board.brief_moved", brief=brief_id, task=task_id, was=brief.get("task"))
    changed = brief.get("project") != moved["project"]
    projects = (str(brief.get("project") or ""), str(moved["project"] or "")) if changed else None
    return True, projects, brief.get("task") if isinstance(brief.get("task"), str) else None

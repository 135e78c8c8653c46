"""Reading a board's ``tasks/`` and ``briefs/`` folders into tasks and briefs (:class:`BoardReader`).

A board (format v1, contract §3) is read through the gate, tolerating every broken file. Only the
board root itself can make a read fail (:class:`BoardUnreadable`: missing, not a directory, no
permission), because "no history" and "cannot read the history" must never look alike. Every
other problem - bad JSON, invalid UTF-8, a half-written file, a wrong or mismatched id, a missing required
field, a symlink, FIFO, socket, device or hard link - skips that one file (or that brief, when it is its
``brief.json``), is logged as a warning and recorded in :attr:`BoardSnapshot.skipped`, and the rest loads.

Every stored text is redacted as a whole as it is read (:mod:`memoryd.kinds.briefs.redacted`).
"""

from __future__ import annotations

import re
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

from memoryd.board.gate import (
    SafeDir,
    Skipped,
    UnsafePath,
    check_brief_id,
    check_task_id,
    is_brief_id,
    is_ignored_name,
    is_task_id,
    open_board,
    refusal,
)
from memoryd.kinds.briefs.files import (
    Brief,
    FormatError,
    Screen,
    Task,
    parse_brief_json,
    parse_notes,
    parse_outcome,
    parse_screen_json,
    parse_task,
)
from memoryd.kinds.briefs.redacted import _clean, _clean_or_none, _parsed
from memoryd.logs import get_logger

log = get_logger("memoryd.board")

TASKS_DIR = "tasks"
BRIEFS_DIR = "briefs"
SCREENS_DIR = "screens"
# Screen names: "1", "2", ... (contract: <n>); a little slack for hand-made names, never a path.
_SCREEN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}", re.ASCII)
# Editor swap/backup files and our own temp files are not board files: ignored without a warning.

T = TypeVar("T")


@dataclass
class BoardSnapshot:
    """Everything readable on the board at one moment: tasks and briefs by id, plus what was skipped."""

    tasks: dict[str, Task] = field(default_factory=dict)
    briefs: dict[str, Brief] = field(default_factory=dict)
    skipped: list[Skipped] = field(default_factory=list)


def _screen_key(n: str) -> tuple[int, int, str]:
    return (0, int(n), n) if n.isdigit() else (1, 0, n)


class BoardReader:
    """Reads one board. Holds no cache, so every call sees the disk as it is now; safe across threads.
    ``screens=False``: briefs come without their screens (what an export takes), which are not read."""

    def __init__(self, root: Path, *, screens: bool = True) -> None:
        self.root = Path(root)
        self.screens = screens

    # --- public API -----------------------------------------------------------------------------------

    def load(self) -> BoardSnapshot:
        """Read every task and brief. Raises BoardUnreadable only for the root; see the module docstring."""
        started = time.perf_counter()
        snap = BoardSnapshot()
        with open_board(self.root) as root:
            tasks = self._subdir(root, TASKS_DIR, snap.skipped)
            if tasks is not None:
                with tasks:
                    for name in self._names(tasks, snap.skipped):
                        task = self._guard(tasks.relpath(name), snap.skipped, self._task_entry, tasks, name)
                        if task is not None:
                            snap.tasks[task.id] = task
            briefs = self._subdir(root, BRIEFS_DIR, snap.skipped)
            if briefs is not None:
                with briefs:
                    for name in self._names(briefs, snap.skipped):
                        if not is_brief_id(name):
                            self._skip(snap.skipped, briefs.relpath(name), "name is not a brief id")
                            continue
                        brief = self._guard(briefs.relpath(name), snap.skipped, self._brief, briefs, name)
                        if brief is not None:
                            snap.briefs[brief.id] = brief
        log.info(
            "board.loaded",
            board=str(self.root),
            tasks=len(snap.tasks),
            briefs=len(snap.briefs),
            skipped=len(snap.skipped),
            ms=round((time.perf_counter() - started) * 1000, 1),
        )
        return snap

    def read_task(self, task_id: str, skipped: list[Skipped] | None = None) -> Task | None:
        """The task, or None when absent or broken (logged, and appended to ``skipped`` when given). Raises
        InvalidId first, BoardUnreadable for the root."""
        check_task_id(task_id)
        return self._read_one(TASKS_DIR, f"{TASKS_DIR}/{task_id}.json", self._task, task_id, skipped)

    def read_brief(self, brief_id: str, skipped: list[Skipped] | None = None) -> Brief | None:
        """The brief, or None when absent or broken; every file of it skipped (a broken ``brief.json``, or an
        optional file such as ``outcome.md`` that the brief loads without) is logged, and appended to
        ``skipped`` when given. Raises InvalidId first, BoardUnreadable for the root."""
        check_brief_id(brief_id)
        return self._read_one(BRIEFS_DIR, f"{BRIEFS_DIR}/{brief_id}", self._brief, brief_id, skipped)

    def brief_ids(self) -> list[str]:
        """Ids of brief folders (real directories with a brief-id name), sorted; contents are not read."""
        return self._ids(BRIEFS_DIR, lambda d, name: is_brief_id(name) and self._is_real_dir(d, name))

    def task_ids(self) -> list[str]:
        """Ids of task files (``<id>.json`` passing the gate), sorted; contents are not read."""
        return [
            name[: -len(".json")]
            for name in self._ids(
                TASKS_DIR,
                lambda d, name: name.endswith(".json") and is_task_id(name[:-5]) and d.is_safe_file(name),
            )
        ]

    # --- pieces ---------------------------------------------------------------------------------------

    def _skip(self, skipped: list[Skipped], path: str, reason: str) -> None:
        log.warning("board.file_skipped", board=str(self.root), path=path, reason=reason)
        skipped.append(Skipped(path, reason))

    def _guard(
        self,
        path: str,
        skipped: list[Skipped],
        read: Callable[[SafeDir, str, list[Skipped]], T | None],
        d: SafeDir,
        name: str,
    ) -> T | None:
        # One broken entry must never stop the rest of the board from loading, whatever went wrong.
        try:
            return read(d, name, skipped)
        except UnsafePath as exc:
            self._skip(skipped, exc.path, exc.reason)
        except OSError as exc:
            self._skip(skipped, path, f"cannot read: {exc.strerror or type(exc).__name__}")
        except Exception as exc:  # noqa: BLE001 - last line of defence, logged with its type
            log.exception("board.read_failed", board=str(self.root), path=path)
            self._skip(skipped, path, f"unexpected error: {type(exc).__name__}")
        return None

    def _read_one(
        self,
        sub: str,
        path: str,
        read: Callable[[SafeDir, str, list[Skipped]], T | None],
        name: str,
        skipped: list[Skipped] | None,
    ) -> T | None:
        """``read`` of entry ``name`` of folder ``sub`` (its board path: ``path``); None when absent or broken.
        What it skips goes to ``skipped`` (a throwaway list when None)."""
        skipped = [] if skipped is None else skipped
        with open_board(self.root) as root:
            d = self._subdir(root, sub, skipped)
            if d is None:
                return None
            with d:
                return self._guard(path, skipped, read, d, name)

    def _subdir(self, root: SafeDir, name: str, skipped: list[Skipped]) -> SafeDir | None:
        try:
            return root.child(name)
        except FileNotFoundError:
            return None  # a new board may not have it yet: empty, not an error
        except UnsafePath as exc:
            self._skip(skipped, exc.path, exc.reason)
        except OSError as exc:
            self._skip(skipped, name, f"cannot open: {exc.strerror}")
        return None

    def _names(self, d: SafeDir, skipped: list[Skipped]) -> list[str]:
        try:
            return [name for name in d.names() if not is_ignored_name(name)]
        except OSError as exc:
            self._skip(skipped, d.rel, f"cannot list: {exc.strerror}")
            return []

    def _ids(self, sub: str, keep: Callable[[SafeDir, str], bool]) -> list[str]:
        skipped: list[Skipped] = []
        with open_board(self.root) as root:
            d = self._subdir(root, sub, skipped)
            if d is None:
                return []
            with d:
                return [name for name in self._names(d, skipped) if keep(d, name)]

    @staticmethod
    def _is_real_dir(d: SafeDir, name: str) -> bool:
        try:
            st = d.lstat(name)
        except OSError:
            return False
        return stat.S_ISDIR(st.st_mode)  # on the lstat: a symlinked folder is not a brief

    def _optional_text(self, d: SafeDir, name: str, skipped: list[Skipped]) -> str | None:
        """Text of an optional file; None when absent, or when unsafe/broken (then also skipped)."""
        try:
            return d.read_text(name)
        except FileNotFoundError:
            return None
        except UnsafePath as exc:
            self._skip(skipped, exc.path, exc.reason)
        except OSError as exc:
            self._skip(skipped, d.relpath(name), f"cannot read: {exc.strerror}")
        return None

    def _task_entry(self, tasks: SafeDir, name: str, skipped: list[Skipped]) -> Task | None:
        if not name.endswith(".json") or not is_task_id(name[:-5]):
            self._skip(skipped, tasks.relpath(name), "name is not <task-id>.json")
            return None
        return self._task(tasks, name[:-5], skipped)

    def _task(self, tasks: SafeDir, task_id: str, skipped: list[Skipped]) -> Task | None:
        name = f"{task_id}.json"
        try:
            text = tasks.read_text(name)
        except FileNotFoundError:
            return None
        try:
            task = parse_task(text, expected_id=task_id)
        except FormatError as exc:
            self._skip(skipped, tasks.relpath(name), str(exc))
            return None
        held: dict[str, tuple[bool, ...]] = {}
        return replace(task, title=_clean(task.title, held), project=_clean(task.project, held), held=held)

    def _brief(self, briefs: SafeDir, brief_id: str, skipped: list[Skipped]) -> Brief | None:
        try:
            d = briefs.child(brief_id)  # UnsafePath for a symlinked or non-directory entry
        except FileNotFoundError:
            return None
        with d:
            try:
                meta = parse_brief_json(d.read_text("brief.json"), expected_id=brief_id)
            except FileNotFoundError:
                self._skip(skipped, d.relpath("brief.json"), "missing brief.json")
                return None
            except FormatError as exc:
                self._skip(skipped, d.relpath("brief.json"), str(exc))
                return None
            held: dict[str, tuple[bool, ...]] = {}
            for key in ("project", "title", "summary"):
                meta[key] = _clean(meta[key], held)
            notes = self._optional_text(d, "notes.md", skipped)
            outcome = self._optional_text(d, "outcome.md", skipped)
            screens, pngs = self._screens(d, skipped, held)
            return Brief(
                **meta,
                said=_clean(self._optional_text(d, "said.txt", skipped) or "", held),
                prompt=_clean(self._optional_text(d, "prompt.md", skipped) or "", held),
                notes=_parsed(notes, parse_notes, held) if notes else (),
                outcome=_parsed(outcome, parse_outcome, held) if outcome is not None else None,
                screens=screens,
                screen_pngs=pngs,
                held=held,
            )

    def _screens(
        self, brief: SafeDir, skipped: list[Skipped], held: dict[str, tuple[bool, ...]]
    ) -> tuple[tuple[Screen, ...], tuple[str, ...]]:
        d = self._subdir(brief, SCREENS_DIR, skipped) if self.screens else None
        if d is None:
            return (), ()
        screens: list[Screen] = []
        pngs: list[str] = []
        with d:
            names = [
                n[:-4]
                for n in self._names(d, skipped)
                if n.endswith(".png") and _SCREEN_NAME.fullmatch(n[:-4])
            ]
            for n in sorted(names, key=_screen_key):
                # A screen exists only while its .png does (contract §3); a removed screenshot's .txt and
                # .json are never even opened.
                png = f"{n}.png"
                try:
                    why = refusal(d.lstat(png))
                except FileNotFoundError:
                    continue
                if why:
                    self._skip(skipped, d.relpath(png), why)
                    continue
                meta = self._optional_text(d, f"{n}.json", skipped)
                app = title = None
                if meta is not None:
                    try:
                        app, title = parse_screen_json(meta)
                    except FormatError as exc:
                        self._skip(skipped, d.relpath(f"{n}.json"), str(exc))
                text = _clean(self._optional_text(d, f"{n}.txt", skipped) or "", held)
                app, title = _clean_or_none(app, held), _clean_or_none(title, held)
                screens.append(Screen(n=n, text=text, app=app, window_title=title))
                pngs.append(d.relpath(png))
        return tuple(screens), tuple(pngs)

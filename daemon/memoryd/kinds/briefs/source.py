"""The ``briefs/`` and ``tasks/`` record source (:mod:`memoryd.core.sources`): the brief folders read into
records, and the in-memory snapshot of them.

Over 400 lines: reading the folders (:class:`BoardReader`) and offering them as records
(:class:`BriefSource`) are one job.

*Reading.* A board (format v1, contract §3) is read through the gate, tolerating every broken file. Only the
board root itself can make a read fail (:class:`BoardUnreadable`: missing, not a directory, no
permission), because "no history" and "cannot read the history" must never look alike. Every
other problem - bad JSON, invalid UTF-8, a half-written file, a wrong or mismatched id, a missing required
field, a symlink, FIFO, socket, device or hard link - skips that one file (or that brief, when it is its
``brief.json``), is logged as a warning and recorded in :attr:`BoardSnapshot.skipped`, and the rest loads.

Every stored text is redacted (:func:`memoryd.index.redact.redact`) as a whole as it is read, before it is
parsed into parts: ``outcome.md`` before it becomes bullets, ``notes.md`` before it becomes lines, each
string of a JSON file once decoded (a JSON escape can hide a secret from a rule reading the encoded text).
So a private key written as bullets, quoted or fenced is replaced as one block, and no bullet holds a
piece of it. The tasks and briefs returned here hold no secret the rules know: the index, the answers
and the export all use them as they are. The board files themselves are never changed. A file may hold
placeholders already (capture redacts a prompt before it writes it): each task and brief keeps, for its
texts that did, which placeholders the read wrote (``held``, :data:`~memoryd.kinds.briefs.files.Held`), so
that what answers report as redacted is only what was redacted from the files.

*Records.* One ``brief`` record per brief folder; its origin is the folder (``briefs/<id>``). A task file
yields no record of its own: its title and status live in the records of its briefs, so a changed
``tasks/<id>.json`` re-derives every brief of that task. Records of a full load are offered deferred
(:meth:`~memoryd.index.records.SourceBatch.defer`, keyed by the hash of the brief and its task): the writer
derives only those whose inputs changed since it last derived them (deriving costs ~1.8 ms a brief, most of
a restart that changes nothing).

Besides the records, :class:`BriefSource` keeps the :class:`BoardSnapshot` the briefs tools read (tasks and
briefs by id, redacted; without the prompt and the screens' text, which only a record and a brief's details
read, from the files). It is refreshed only by the writer (``load_all`` / ``records_for``) and replaced
copy-on-write in one assignment: tools iterate the published snapshot's dicts on the event loop while the
writer runs in a worker thread, so those dicts are never changed in place.
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

# BoardUnreadable: re-exported, the kinds and the CLI name it here.
from memoryd.board.gate import BoardUnreadable as BoardUnreadable
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
from memoryd.index.derive_cache import source_hash
from memoryd.index.records import SourceBatch, brief_record
from memoryd.index.redact import PLACEHOLDERS, redact
from memoryd.kinds.briefs.files import (
    OUTCOME_SECTIONS,
    Brief,
    FormatError,
    Outcome,
    Screen,
    Task,
    parse_brief_json,
    parse_notes,
    parse_outcome,
    parse_screen_json,
    parse_task,
)
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


def _clean(text: str, held: dict[str, tuple[bool, ...]]) -> str:
    """One stored text, redacted as a whole (see the module docstring); when the file held placeholders
    already, which of the text's placeholders this read wrote goes into ``held`` (:data:`files.Held`)."""
    if not text:
        return text
    red = redact(text)
    if red.fresh is not None:
        held[red.text.strip()] = red.fresh
    return red.text


def _clean_or_none(text: str | None, held: dict[str, tuple[bool, ...]]) -> str | None:
    return None if text is None else _clean(text, held)


#: Marks a placeholder its file held while a text is parsed into parts (a private-use character: no rule
#: of the parsers treats it as a space, a bullet or a heading).
_HELD_MARK = "\ue000"


def _parsed(text: str, parse: Callable[[str], T], held: dict[str, tuple[bool, ...]]) -> T:
    """``parse`` of ``text`` redacted as a whole; when the file held placeholders already, which of each
    part's placeholders this read wrote goes into ``held`` (the parser keeps a mark put before each held
    one)."""
    red = redact(text)
    parts = parse(red.text)
    fresh = red.fresh
    if fresh is None or _HELD_MARK in red.text or len(PLACEHOLDERS.findall(red.text)) != len(fresh):
        return parts  # nothing held; or no safe mark: its placeholders count as written now
    flags = iter(fresh)
    marked = PLACEHOLDERS.sub(lambda m: m.group() if next(flags) else _HELD_MARK + m.group(), red.text)
    for part in _strings(parse(marked)):
        if "[REDACTED:" in part:
            written = tuple(
                part[max(0, m.start() - 1) : m.start()] != _HELD_MARK for m in PLACEHOLDERS.finditer(part)
            )
            held[part.replace(_HELD_MARK, "").strip()] = written
    return parts


def _strings(parsed: object) -> list[str]:
    """The texts of a parsed notes file (a tuple of lines) or outcome (its sections' items)."""
    if isinstance(parsed, Outcome):
        return [item for name, _ in OUTCOME_SECTIONS for item in getattr(parsed, name)]
    return list(parsed)  # type: ignore[call-overload]


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


# -- the record source -------------------------------------------------------------------------------

KIND = "brief"


def brief_origin(brief_id: str) -> str:
    """The origin key (board-relative folder) of a brief."""
    return f"{BRIEFS_DIR}/{brief_id}"


def task_path(task_id: str) -> str:
    """The board-relative path of a task's file."""
    return f"{TASKS_DIR}/{task_id}.json"


class BriefSource:
    """Record source for ``briefs/`` and ``tasks/`` plus the snapshot described in the module docstring."""

    folders = (BRIEFS_DIR, TASKS_DIR)
    kinds = (KIND,)

    def __init__(self, board: Path) -> None:
        self.board = Path(board)
        self.reader = BoardReader(self.board)
        #: The last published snapshot (empty until the first full load).
        self.snapshot = BoardSnapshot()

    # -- RecordSource ---------------------------------------------------------------------------------
    def load_all(self) -> SourceBatch:
        """Every task and brief; raises :class:`BoardUnreadable` for the root."""
        snap = self.reader.load()
        batch = SourceBatch(skipped=list(snap.skipped), complete=True)
        for b in snap.briefs.values():
            task = snap.tasks.get(b.task)
            batch.defer(brief_origin(b.id), b.id, source_hash(b, task), _deriver(b, snap))
        self.snapshot = BoardSnapshot(
            tasks=snap.tasks, briefs={i: _kept(b) for i, b in snap.briefs.items()}, skipped=snap.skipped
        )
        return batch

    def records_for(self, paths: Collection[str]) -> SourceBatch:
        """Re-read the briefs and tasks these paths touch (``briefs/<id>/...``, ``tasks/<id>.json``); the
        folders themselves (created, deleted or moved wholesale) are a full load."""
        briefs: set[str] = set()
        tasks: set[str] = set()
        misnamed: set[str] = set()
        for path in paths:
            parts = path.split("/")
            if len(parts) == 1:
                if parts[0] in self.folders:
                    return self.load_all()
            elif is_ignored_name(parts[1]):
                continue
            elif parts[0] == BRIEFS_DIR and is_brief_id(parts[1]):
                briefs.add(parts[1])
            elif parts[0] == BRIEFS_DIR:
                misnamed.add(path)
            elif parts[0] == TASKS_DIR:
                if len(parts) == 2 and _is_task_file(parts[1]):
                    tasks.add(parts[1][:-5])
                else:
                    misnamed.add(path)
        old = self.snapshot
        snap = BoardSnapshot(tasks=dict(old.tasks), briefs=dict(old.briefs), skipped=old.skipped)
        batch = SourceBatch()
        for path in sorted(misnamed):
            self._misnamed(path, batch)
        for task_id in sorted(tasks):
            task = self.reader.read_task(task_id, batch.skipped)
            if task is None:
                snap.tasks.pop(task_id, None)
            else:
                snap.tasks[task_id] = task
            batch.origins[task_path(task_id)] = ()
            briefs.update(b.id for b in snap.briefs.values() if b.task == task_id)
        for brief_id in sorted(briefs):
            brief = self.reader.read_brief(brief_id, batch.skipped)
            if brief is None:
                snap.briefs.pop(brief_id, None)
                batch.add(brief_origin(brief_id), [])
            else:
                snap.briefs[brief_id] = _kept(brief)
                batch.add(brief_origin(brief_id), [brief_record(brief, snap.tasks.get(brief.task))])
        self.snapshot = snap
        return batch

    def _misnamed(self, path: str, batch: SourceBatch) -> None:
        """An entry of ``briefs/`` or ``tasks/`` whose name is no brief's or task's: skipped while it exists,
        as a full load skips it (its origin is the entry, so removing it clears the skip)."""
        folder, name = path.split("/")[:2]
        origin = f"{folder}/{name}"
        if os.path.lexists(self.board / origin):
            why = "name is not a brief id" if folder == BRIEFS_DIR else "name is not <task-id>.json"
            self.reader._skip(batch.skipped, origin, why)
        batch.origins.setdefault(origin, ())


def unread_tasks(skipped: Iterable[Skipped]) -> list[Skipped]:
    """The skipped files under ``tasks/`` (broken task files, misnamed entries): tasks missing from a list of
    the board's tasks, in the order given."""
    return [s for s in skipped if s.path.startswith(f"{TASKS_DIR}/")]


def unread_briefs(skipped: Iterable[Skipped]) -> list[Skipped]:
    """The skipped files under ``briefs/`` (a broken ``brief.json`` or ``outcome.md``, misnamed entries):
    briefs missing from, or incomplete in, what the board's tasks list, in the order given."""
    return [s for s in skipped if s.path.startswith(f"{BRIEFS_DIR}/")]


def unloaded_briefs(skipped: Iterable[Skipped], loaded: Collection[str]) -> int:
    """How many brief folders (brief-id names) a skipped file belongs to whose brief is not in ``loaded``
    (ids): folders on the board that are not briefs until a file is fixed (a broken ``brief.json``)."""
    ids = {parts[1] for s in skipped if len(parts := s.path.split("/")) > 1 and parts[0] == BRIEFS_DIR}
    return len({i for i in ids if is_brief_id(i)} - set(loaded))


def _is_task_file(name: str) -> bool:
    return name.endswith(".json") and is_task_id(name[:-5])


def _kept(brief: Brief) -> Brief:
    """``brief`` as the snapshot keeps it: without its prompt and its screens' text. Listings, digests and
    capture read the snapshot; a brief's details are read from its files (:mod:`memoryd.kinds.briefs.api`),
    and a screen's text is searchable, never handed out: only the brief's record reads them, derived from
    the brief as read. On board-v1 they are ~1.3 KB of the ~3 KB the snapshot held per brief."""
    if not brief.prompt and not any(s.text for s in brief.screens):
        return brief
    return replace(brief, prompt="", screens=tuple(replace(s, text="") for s in brief.screens))


def _deriver(brief: Brief, snap: BoardSnapshot):
    return lambda: brief_record(brief, snap.tasks.get(brief.task))


def source(board: Path) -> BriefSource:
    """Entry point for :data:`memoryd.core.sources.SOURCES`."""
    return BriefSource(board)

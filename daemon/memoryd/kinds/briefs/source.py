"""The ``briefs/`` and ``tasks/`` record source (:mod:`memoryd.core.sources`): the briefs read by
:class:`~memoryd.kinds.briefs.reader.BoardReader` offered as records, and the in-memory snapshot of them.

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
from collections.abc import Collection, Iterable
from dataclasses import replace
from pathlib import Path

# BoardUnreadable: re-exported, the kinds and the CLI name it here.
from memoryd.board.gate import BoardUnreadable as BoardUnreadable
from memoryd.board.gate import Skipped, is_brief_id, is_ignored_name, is_task_id
from memoryd.index.derive_cache import source_hash
from memoryd.index.records import SourceBatch, brief_record
from memoryd.kinds.briefs.files import Brief
from memoryd.kinds.briefs.reader import BRIEFS_DIR, TASKS_DIR, BoardReader, BoardSnapshot

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

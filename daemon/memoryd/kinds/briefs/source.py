"""The ``briefs/`` and ``tasks/`` record source (:mod:`memoryd.core.sources`), and the in-memory snapshot of them.

One ``brief`` record per brief folder; its origin is the folder (``briefs/<id>``). A task file yields no
record of its own: its title and status live in the records of its briefs, so a changed ``tasks/<id>.json``
re-derives every brief of that task. Records of a full load are offered deferred
(:meth:`~memoryd.core.sources.SourceBatch.defer`, keyed by the hash of the brief and its task): the writer
derives only those whose inputs changed since it last derived them (deriving costs ~1.8 ms a brief, most of
a restart that changes nothing).

Besides the records, :class:`BriefSource` keeps the :class:`BoardSnapshot` the briefs tools read (tasks and
briefs by id, redacted). It is refreshed only by the writer (``load_all`` / ``records_for``) and replaced
copy-on-write in one assignment: tools iterate the published snapshot's dicts on the event loop while the
writer runs in a worker thread, so those dicts are never changed in place.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from memoryd.board.gate import is_brief_id, is_task_id
from memoryd.core.sources import SourceBatch
from memoryd.index.derive_cache import source_hash
from memoryd.index.records import brief_record
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
        """Every task and brief; raises :class:`~memoryd.kinds.briefs.reader.BoardUnreadable` for the root."""
        snap = self.reader.load()
        batch = SourceBatch(skipped=list(snap.skipped), complete=True)
        for b in snap.briefs.values():
            task = snap.tasks.get(b.task)
            batch.defer(brief_origin(b.id), b.id, source_hash(b, task), _deriver(b, snap))
        self.snapshot = snap
        return batch

    def records_for(self, paths: Collection[str]) -> SourceBatch:
        """Re-read the briefs and tasks these paths touch (``briefs/<id>/...``, ``tasks/<id>.json``); the
        folders themselves (created, deleted or moved wholesale) are a full load."""
        briefs: set[str] = set()
        tasks: set[str] = set()
        for path in paths:
            parts = path.split("/")
            if len(parts) == 1:
                if parts[0] in self.folders:
                    return self.load_all()
            elif parts[0] == BRIEFS_DIR and is_brief_id(parts[1]):
                briefs.add(parts[1])
            elif parts[0] == TASKS_DIR and len(parts) == 2 and _is_task_file(parts[1]):
                tasks.add(parts[1][:-5])
        old = self.snapshot
        snap = BoardSnapshot(tasks=dict(old.tasks), briefs=dict(old.briefs), skipped=old.skipped)
        batch = SourceBatch()
        for task_id in sorted(tasks):
            task = self.reader.read_task(task_id)
            if task is None:
                snap.tasks.pop(task_id, None)
            else:
                snap.tasks[task_id] = task
            batch.origins[task_path(task_id)] = ()
            briefs.update(b.id for b in snap.briefs.values() if b.task == task_id)
        for brief_id in sorted(briefs):
            brief = self.reader.read_brief(brief_id)
            if brief is None:
                snap.briefs.pop(brief_id, None)
                batch.add(brief_origin(brief_id), [])
            else:
                snap.briefs[brief_id] = brief
                batch.add(brief_origin(brief_id), [brief_record(brief, snap.tasks.get(brief.task))])
        self.snapshot = snap
        return batch


def _is_task_file(name: str) -> bool:
    return name.endswith(".json") and is_task_id(name[:-5])


def _deriver(brief: Brief, snap: BoardSnapshot):
    return lambda: brief_record(brief, snap.tasks.get(brief.task))


def source(board: Path) -> BriefSource:
    """Entry point for :data:`memoryd.core.sources.SOURCES`."""
    return BriefSource(board)

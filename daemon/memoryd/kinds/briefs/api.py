"""The briefs API (``engine.briefs``): what the briefs tools ask of the board and the index.

Reads come from the indexer's last snapshot of the board (tasks, and which briefs each holds) and, for the
details of one task or brief, from the files themselves (the truth, possibly newer than the snapshot).
``save_outcome`` writes ``outcome.md`` atomically and returns once the index holds it. Built by the engine
from its collaborators; it never sees the engine.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from memoryd.board.gate import Skipped, check_brief_id, check_task_id
from memoryd.kinds.briefs import edits
from memoryd.kinds.briefs.files import Brief, Outcome, Task
from memoryd.kinds.briefs.reader import BoardReader, BoardSnapshot
from memoryd.kinds.briefs.source import BoardUnreadable, unread_briefs, unread_tasks
from memoryd.kinds.briefs.writer import save_outcome

#: ``submit(brief_ids)``: hand briefs to the index's one writer and wait until they are searchable (none:
#: wait for every write acknowledged before, e.g. a prompt the capture hook filed; the read barrier).
SubmitBriefs = Callable[[Sequence[str]], Awaitable[None]]


def check_board(board: Path) -> None:
    """Raise :class:`BoardUnreadable` when the board folder cannot be listed and read."""
    if not os.access(board, os.R_OK | os.X_OK) or not board.is_dir():
        raise BoardUnreadable(f"the board at {board} cannot be read")


class Briefs:
    """Tasks and briefs of one board. ``snapshot()`` returns the indexer's latest :class:`BoardSnapshot`;
    ``skipped()`` the board files the indexer currently skips (what ``memoryd status`` names)."""

    def __init__(
        self,
        board: Path,
        reader: BoardReader,
        snapshot: Callable[[], BoardSnapshot],
        submit: SubmitBriefs,
        skipped: Callable[[], Sequence[Skipped]] = tuple,
    ) -> None:
        self.board = board
        self.reader = reader
        self._snapshot = snapshot
        self._submit = submit
        self._skipped = skipped

    def snapshot(self) -> BoardSnapshot:
        """The indexer's latest snapshot of the board (tasks and briefs, redacted)."""
        return self._snapshot()

    def tasks(self) -> dict[str, Task]:
        """Every task of the last snapshot, by id."""
        return self._snapshot().tasks

    def spelling(self, project: str) -> str:
        """The board's spelling of ``project`` when it differs only in case ('Shopfront' -> 'shopfront');
        ``project`` itself when no project or several match that way."""
        known = {task.project for task in self.tasks().values()}
        if project in known:
            return project
        folded = [p for p in known if p.casefold() == project.strip().casefold()]
        return folded[0] if len(folded) == 1 else project

    def briefs_of(self, task_id: str) -> list[Brief]:
        """The briefs of ``task_id`` in the last snapshot, oldest first."""
        briefs = [b for b in self._snapshot().briefs.values() if b.task == task_id]
        return sorted(briefs, key=lambda b: (b.created_at, b.id))

    async def list_tasks(
        self, project: str | None = None, status: str | None = None, settle: bool = True
    ) -> list[tuple[Task, str, int]]:
        """``[(task, last_activity_iso, brief_count)]``, newest activity first; ``settle=False``: the
        snapshot as it is, without waiting for writes in flight."""
        check_board(self.board)
        if settle:
            await self._submit(())  # the read barrier: a brief filed (and answered) before is in the snapshot
        snapshot = self._snapshot()
        activity: dict[str, tuple[str, int]] = {}
        for b in snapshot.briefs.values():
            last, n = activity.get(b.task, ("", 0))
            activity[b.task] = (max(last, b.created_at), n + 1)
        out = []
        for t in snapshot.tasks.values():
            if (project and t.project != project) or (status and t.status != status):
                continue
            last, n = activity.get(t.id, ("", 0))
            out.append((t, max(last, t.created_at), n))
        out.sort(key=lambda x: (x[1], x[0].id), reverse=True)
        return out

    def unread_tasks(self) -> list[Skipped]:
        """The files under ``tasks/`` the indexer skips now (broken or misnamed): tasks :meth:`list_tasks`
        cannot list. Read after :meth:`list_tasks` settled, it matches the snapshot it listed."""
        return unread_tasks(self._skipped())

    def unread_briefs(self) -> list[Skipped]:
        """The files under ``briefs/`` the indexer skips now: briefs (and the tasks only they would show)
        missing from :meth:`list_tasks` and :meth:`get_task`, or read without a broken file."""
        return unread_briefs(self._skipped())

    async def get_task(self, task_id: str) -> tuple[Task, list[Brief]] | None:
        """The task and its briefs as the files hold them now; None when no such task. Raises InvalidId."""
        check_task_id(task_id)
        check_board(self.board)
        task = await asyncio.to_thread(self.reader.read_task, task_id)
        if task is None:
            return None
        await self._submit(())  # the read barrier, as in list_tasks
        ids = [b.id for b in self.briefs_of(task_id)]
        fresh = await asyncio.to_thread(lambda: [self.reader.read_brief(i) for i in ids])
        return task, [b for b in fresh if b is not None]

    async def get_brief(self, brief_id: str) -> Brief | None:
        """The brief as its files hold it now; None when no such brief. Raises InvalidId."""
        check_brief_id(brief_id)
        check_board(self.board)
        return await asyncio.to_thread(self.reader.read_brief, brief_id)

    async def save_outcome(self, brief_id: str, outcome: Outcome) -> Path:
        """Write ``outcome.md`` (atomically, inside the brief's folder) and index it before returning."""
        check_brief_id(brief_id)
        path = await asyncio.to_thread(save_outcome, self.board, brief_id, outcome)
        await self._submit([brief_id])
        return path

    # -- hand edits made for a person (the page): see :mod:`memoryd.kinds.briefs.edits` -----------------
    async def delete_note(self, brief_id: str, index: int, digest: str) -> None:
        """Remove one note line from ``notes.md`` (``index`` into ``Brief.notes``, ``digest`` its
        :func:`~memoryd.kinds.briefs.edits.note_digest`) and index the brief before returning."""
        await asyncio.to_thread(edits.delete_note, self.board, brief_id, index, digest)
        await self._submit([brief_id])

    async def delete_screen(self, brief_id: str, name: str) -> None:
        """Remove one screenshot (its ``.png``, ``.txt``, ``.json``) and index the brief before returning."""
        await asyncio.to_thread(edits.delete_screen, self.board, brief_id, name)
        await self._submit([brief_id])

    async def screenshot(self, brief_id: str, name: str) -> bytes:
        """The PNG bytes of a screenshot that exists, read through the board's gate."""
        return await asyncio.to_thread(edits.screenshot, self.board, brief_id, name)

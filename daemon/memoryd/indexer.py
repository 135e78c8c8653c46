"""The one writer: turns board changes into batched index writes, and runs index maintenance.

Everything that writes to LanceDB goes through :class:`Indexer`'s single asyncio task, so writes are
batched (each LanceDB write adds a fragment and a version) and never race each other; searches read
concurrently and never wait for it, except during compaction (see :mod:`memoryd.rwlock`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field

from memoryd.board.reader import BoardReader, BoardSnapshot
from memoryd.index.records import brief_record
from memoryd.index.store import IndexStore
from memoryd.index.sync import SyncReport, sync_records, write_records
from memoryd.logs import get_logger
from memoryd.rwlock import RWLock

log = get_logger("memoryd.indexer")

#: Records embedded per backfill step; board changes and saves queued meanwhile are applied between steps.
BACKFILL_CHUNK = 16


@dataclass
class Pending:
    """Work gathered while the writer was busy; merged so a burst of saves is one write."""

    briefs: set[str] = field(default_factory=set)
    tasks: set[str] = field(default_factory=set)
    rescan: bool = False
    purge: bool = False
    waiters: list[asyncio.Future] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.briefs or self.tasks or self.rescan or self.purge)


class Indexer:
    """Keeps ``store`` equal to the board read by ``reader``; owns the in-memory :class:`BoardSnapshot`.

    ``embedder_ref`` is a zero-argument callable returning the current embedder or None (the model
    loads after the daemon starts serving).
    """

    def __init__(
        self,
        reader: BoardReader,
        store: IndexStore,
        embedder_ref,
        lock: RWLock,
        optimize_interval_s: float = 30.0,
    ) -> None:
        self.reader = reader
        self.store = store
        self.embedder_ref = embedder_ref
        self.lock = lock
        self.snapshot = BoardSnapshot(tasks={}, briefs={}, skipped=[])
        self.optimize_interval_s = optimize_interval_s
        self.last_indexed_at: float | None = None  # time.time() of the last completed write
        self.last_optimize_at: float | None = None
        self.last_report = SyncReport()
        self.dirty_since: float | None = None  # monotonic time of the first write since the last optimize
        self.purge_due = False
        self._pending = Pending()
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._closing = False
        self._backfill = False
        self._backfilled = SyncReport()

    # -- requests (event loop thread) -----------------------------------------------------------
    def submit(self, briefs=(), tasks=(), rescan: bool = False) -> asyncio.Future:
        """Queue a change; the returned future resolves when it is in the index."""
        fut = asyncio.get_running_loop().create_future()
        self._pending.briefs.update(briefs)
        self._pending.tasks.update(tasks)
        self._pending.rescan |= rescan
        self._pending.waiters.append(fut)
        self._wake.set()
        return fut

    def request_backfill(self) -> None:
        """Give records written keyword-only (or by another model) vectors of the current embedder, a
        chunk at a time, in the writer task: changes submitted meanwhile go first, so a save stays
        searchable at once instead of waiting behind the whole embedding pass."""
        self._backfill = True
        self._wake.set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="memoryd-indexer")

    async def close(self) -> None:
        """Flush pending writes, then stop."""
        self._closing = True
        self._wake.set()
        if self._task is not None:
            await self._task

    # -- the writer task ------------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            backfill = self._backfill and not self._closing
            timeout = 0 if backfill else self._next_maintenance_in()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=timeout)
            self._wake.clear()
            work, self._pending = self._pending, Pending()
            if work:
                try:
                    await asyncio.to_thread(self._apply, work)
                except Exception as exc:  # the writer must survive a bad batch
                    log.error("index_write_failed", error=f"{type(exc).__name__}: {exc}", exc_info=exc)
                    for w in work.waiters:
                        if not w.done():
                            w.set_exception(exc)
                else:
                    for w in work.waiters:
                        if not w.done():
                            w.set_result(None)
            elif backfill:
                try:
                    self._backfill = await asyncio.to_thread(self._backfill_step)
                except Exception as exc:
                    self._backfill = False
                    log.error("index_backfill_failed", error=f"{type(exc).__name__}: {exc}", exc_info=exc)
            if self.dirty_since is not None and (
                self._closing or time.monotonic() - self.dirty_since >= self.optimize_interval_s
            ):
                try:
                    await asyncio.to_thread(self.maintain)
                except Exception as exc:
                    log.error("index_optimize_failed", error=str(exc), exc_info=exc)
            if self._closing and not self._pending:
                return

    def _next_maintenance_in(self) -> float | None:
        if self.dirty_since is None:
            return None
        return max(0.05, self.optimize_interval_s - (time.monotonic() - self.dirty_since))

    def maintain(self, purge: bool | None = None) -> None:
        """Compact, refresh the full-text indexes and drop old versions. After deletions or edits the
        old versions are dropped at once (``purge``): forgotten text leaves the disk."""
        purge = self.purge_due if purge is None else purge
        with self.lock.exclusive():
            self.store.optimize(purge=purge)
        self.dirty_since = None
        self.purge_due = False
        self.last_optimize_at = time.time()
        log.info("index_optimized", purge=purge, version=self.store.version())

    # -- applying work (worker thread) ----------------------------------------------------------
    def full_sync(self) -> SyncReport:
        """Reload the whole board and reconcile every brief record."""
        snap = self.reader.load()
        self.snapshot = snap
        records = [brief_record(b, snap.tasks.get(b.task)) for b in snap.briefs.values()]
        report = sync_records(self.store, records, self.embedder_ref(), kinds=("brief",))
        self._after_write(report)
        return report

    def _backfill_step(self) -> bool:
        """Embed up to :data:`BACKFILL_CHUNK` brief records whose vector is missing or from another model;
        True while more remain."""
        embedder = self.embedder_ref()
        if embedder is None:
            return False
        snap = self.snapshot
        stored = self.store.stored_hashes("brief")
        stale = sorted(i for i, h in stored.items() if h.model != embedder.name and i in snap.briefs)
        chunk = [
            brief_record(snap.briefs[i], snap.tasks.get(snap.briefs[i].task)) for i in stale[:BACKFILL_CHUNK]
        ]
        report = SyncReport(updated=len(chunk))
        write_records(self.store, chunk, embedder, report)
        self._after_write(report)
        total = self._backfilled
        total.updated += report.updated
        total.embedded += report.embedded
        if len(stale) > len(chunk):
            return True
        log.info("index_backfilled", updated=total.updated, embedded=total.embedded, model=embedder.name)
        self._backfilled = SyncReport()
        return False

    def _apply(self, work: Pending) -> None:
        if work.rescan:
            self.full_sync()
            return
        # Copy on write: tools iterate the published snapshot's dicts on the event loop while this runs in
        # a worker thread, so those dicts are never changed in place ("dictionary changed size during
        # iteration"); the copy is published in one assignment.
        old = self.snapshot
        snap = BoardSnapshot(tasks=dict(old.tasks), briefs=dict(old.briefs), skipped=old.skipped)
        briefs = set(work.briefs)
        for task_id in work.tasks:
            task = self.reader.read_task(task_id)
            if task is None:
                snap.tasks.pop(task_id, None)
            else:
                snap.tasks[task_id] = task
            # a task's status and title live in every one of its briefs' records
            briefs.update(b.id for b in snap.briefs.values() if b.task == task_id)
        report = SyncReport()
        upserts, deletes = [], []
        for brief_id in sorted(briefs):
            brief = self.reader.read_brief(brief_id)
            if brief is None:
                snap.briefs.pop(brief_id, None)
                deletes.append(brief_id)
                continue
            snap.briefs[brief_id] = brief
            upserts.append(brief_record(brief, snap.tasks.get(brief.task)))
        self.snapshot = snap
        stored = self.store.stored_hashes_for([r.id for r in upserts])
        changed = [r for r in upserts if r.id not in stored or stored[r.id].hash != r.content_hash]
        report.updated = sum(1 for r in changed if r.id in stored)
        report.added = len(changed) - report.updated
        report.unchanged = len(upserts) - len(changed)
        write_records(self.store, changed, self.embedder_ref(), report)
        present = self.store.stored_hashes_for(deletes)
        report.deleted = self.store.delete(list(present))
        self._after_write(report)

    def _after_write(self, report: SyncReport) -> None:
        self.last_report = report
        self.last_indexed_at = time.time()
        if report.changed:
            if self.dirty_since is None:
                self.dirty_since = time.monotonic()
            if report.deleted or report.updated:
                self.purge_due = True

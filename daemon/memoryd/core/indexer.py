"""The one writer: turns board changes into batched index writes, and runs index maintenance.

One module (~410 lines) because the write queue, the backfill and maintenance share one task and its state.

Everything that writes to LanceDB goes through :class:`Indexer`'s single asyncio task, so writes are
batched (each LanceDB write adds a fragment and a version) and never race each other; searches read
concurrently and never wait for it, except during compaction (see :mod:`memoryd.index.rwlock`).

Briefs and tasks are read by :class:`~memoryd.kinds.briefs.reader.BoardReader`; every other board folder is a
record source (:mod:`memoryd.core.sources`): changed paths are routed to the source owning their folder, and
the indexer keeps origin -> record ids per source so every record a changed file no longer yields is
deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field

from memoryd.core.changes import ChangeFeed
from memoryd.core.sources import RecordSource, SourceBatch, folder_of
from memoryd.index.derive_cache import DeriveCache, source_hash
from memoryd.index.records import brief_record
from memoryd.index.rwlock import RWLock
from memoryd.index.store import IndexStore
from memoryd.index.sync import SyncReport, sync_records, write_records
from memoryd.kinds.briefs.reader import BoardReader, BoardSnapshot, Skipped
from memoryd.logs import get_logger

log = get_logger("memoryd.core.indexer")

#: Records embedded per backfill step; board changes and saves queued meanwhile are applied between steps.
BACKFILL_CHUNK = 16
#: Rows in the store's keyword tail (:mod:`memoryd.index.tail`) from which the text indexes are refreshed
#: at once rather than at the next scheduled maintenance: scoring the tail grows with it.
TAIL_MAX = 2000


@dataclass
class Pending:
    """Work gathered while the writer was busy; merged so a burst of saves is one write."""

    briefs: set[str] = field(default_factory=set)
    tasks: set[str] = field(default_factory=set)
    paths: set[str] = field(default_factory=set)  # board-relative, under a record source's folder
    rescan: bool = False
    purge: bool = False
    waiters: list[asyncio.Future] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.briefs or self.tasks or self.paths or self.rescan or self.purge)


class Indexer:
    """Keeps ``store`` equal to the board read by ``reader``; owns the in-memory :class:`BoardSnapshot`.

    ``embedder_ref`` is a zero-argument callable returning the current embedder or None (the model
    loads after the daemon starts serving). ``sources`` are the record sources (:mod:`memoryd.core.sources`)
    of the other board folders; ``changes`` hears of every batch once it is in the index.
    """

    def __init__(
        self,
        reader: BoardReader,
        store: IndexStore,
        embedder_ref,
        lock: RWLock,
        optimize_interval_s: float = 30.0,
        sources: list[RecordSource] | tuple[RecordSource, ...] = (),
        changes: ChangeFeed | None = None,
    ) -> None:
        self.reader = reader
        self.changes = changes  # told of each applied batch (the page's live events)
        self.sources: dict[str, RecordSource] = {s.folder: s for s in sources}
        # per source folder: origin key -> ids of the records it yields (rebuilt at every full sync)
        self._origins: dict[str, dict[str, tuple[str, ...]]] = {f: {} for f in self.sources}
        self._source_skipped: dict[str, list[Skipped]] = {f: [] for f in self.sources}
        self.store = store
        self._derive_cache = DeriveCache(store.path)
        self.last_derived = 0
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
        self._backfill_queue: list[tuple[str, str]] = []

    # -- requests (event loop thread) -----------------------------------------------------------
    def submit(self, briefs=(), tasks=(), rescan: bool = False, paths=()) -> asyncio.Future:
        """Queue a change; the returned future resolves when it is in the index.

        ``paths``: board-relative POSIX paths under a record source's folder (``memories/<hash>.md``);
        paths under no registered source are ignored."""
        fut = asyncio.get_running_loop().create_future()
        self._pending.briefs.update(briefs)
        self._pending.tasks.update(tasks)
        self._pending.paths.update(paths)
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

    def purge_now(self) -> asyncio.Future:
        """Re-read the whole board, then compact and drop every old version (``memoryd forget --now``).

        Runs in the writer task like every other write; the future resolves once text deleted from the
        board has left the index folder (or carries the writer's exception)."""
        fut = asyncio.get_running_loop().create_future()
        self._pending.rescan = True
        self._pending.purge = True
        self._pending.waiters.append(fut)
        self._wake.set()
        return fut

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
                    if work.purge:  # forget --now: the waiters hear back once old versions are gone
                        await asyncio.to_thread(self.maintain, True)
                except Exception as exc:  # the writer must survive a bad batch
                    log.error("index_write_failed", error=f"{type(exc).__name__}: {exc}", exc_info=exc)
                    for w in work.waiters:
                        if not w.done():
                            w.set_exception(exc)
                else:
                    if self.changes is not None:
                        self.changes.publish(
                            briefs=work.briefs, tasks=work.tasks, paths=work.paths, rescan=work.rescan
                        )
                    for w in work.waiters:
                        if not w.done():
                            w.set_result(None)
            else:
                for w in work.waiters:  # submit() with nothing: "everything before me is indexed"
                    if not w.done():
                        w.set_result(None)
            if not work and backfill:
                try:
                    self._backfill = await asyncio.to_thread(self._backfill_step)
                except Exception as exc:
                    self._backfill = False
                    log.error("index_backfill_failed", error=f"{type(exc).__name__}: {exc}", exc_info=exc)
            if self.dirty_since is not None and (
                self._closing
                or time.monotonic() - self.dirty_since >= self.optimize_interval_s
                or len(self.store.tail) >= TAIL_MAX
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
        if len(self.store.tail) >= TAIL_MAX:
            return 0.05
        return max(0.05, self.optimize_interval_s - (time.monotonic() - self.dirty_since))

    def maintain(self, purge: bool | None = None) -> None:
        """Compact, refresh the full-text indexes and drop old versions. After deletions or edits the
        old versions are dropped at once (``purge``): forgotten text leaves the disk."""
        purge = self.purge_due if purge is None else purge
        if not purge:
            # the slow part (compaction, folding new rows into the text indexes) keeps old versions,
            # so searches go on meanwhile; only dropping old versions below waits for them
            self.store.refresh()
        with self.lock.exclusive():
            self.store.optimize(purge=purge)
        self.dirty_since = None
        self.purge_due = False
        self.last_optimize_at = time.time()
        log.info("index_optimized", purge=purge, version=self.store.version())

    # -- applying work (worker thread) ----------------------------------------------------------
    @property
    def kinds(self) -> tuple[str, ...]:
        """Every record kind this indexer keeps equal to the board."""
        return ("brief", *(k for s in self.sources.values() for k in s.kinds))

    def skipped(self) -> list[Skipped]:
        """Every board file currently not loaded (briefs, tasks and the sources' folders)."""
        return [*self.snapshot.skipped, *(s for lst in self._source_skipped.values() for s in lst)]

    def full_sync(self) -> SyncReport:
        """Reload the whole board and reconcile every record of :attr:`kinds`."""
        snap = self.reader.load()
        self.snapshot = snap
        records, keep = self._brief_records(snap)
        self.last_derived = len(records)  # briefs whose record was derived again (the rest: cache hits)
        for folder, src in self.sources.items():
            batch = src.load_all()
            records.extend(batch.records)
            self._origins[folder] = {o: ids for o, ids in batch.origins.items() if ids}
            self._source_skipped[folder] = list(batch.skipped)
        report = sync_records(self.store, records, self.embedder_ref(), kinds=self.kinds, keep=keep)
        self._after_write(report)
        self._derive_cache.save()
        return report

    def _brief_records(self, snap: BoardSnapshot) -> tuple[list, list[str]]:
        """The records of briefs whose inputs changed since they were last derived, and the ids of those
        that did not (skipped: deriving costs ~1.8 ms a brief, most of a no-change restart)."""
        cache = self._derive_cache
        embedder = self.embedder_ref()
        stored = self.store.stored_hashes("brief")
        records, keep = [], []
        for b in snap.briefs.values():
            task = snap.tasks.get(b.task)
            src = source_hash(b, task)
            old = stored.get(b.id)
            fresh_model = old is not None and (embedder is None or old.model == embedder.name)
            if fresh_model and cache.unchanged(b.id, src, old.hash):
                keep.append(b.id)
                continue
            rec = brief_record(b, task)
            cache.put(b.id, src, rec.content_hash)
            records.append(rec)
        cache.keep_only(snap.briefs)
        return records, keep

    def _stale_queue(self, model: str) -> list[tuple[str, str]]:
        """``[(folder, key)]`` to re-embed: ``("", brief id)`` for briefs, ``(folder, origin)`` for a
        source's origins holding a record whose vector is missing or from another model. Computed once
        per backfill pass (one read of the hashes, not one per chunk: a board may hold 100,000 memories)."""
        stale = sorted(
            i
            for i, h in self.store.stored_hashes("brief").items()
            if h.model != model and i in self.snapshot.briefs
        )
        queue = [("", i) for i in stale]
        for folder, src in self.sources.items():
            stale_ids: set[str] = set()
            for kind in src.kinds:
                stale_ids.update(i for i, h in self.store.stored_hashes(kind).items() if h.model != model)
            if stale_ids:
                queue += [
                    (folder, o)
                    for o, ids in sorted(self._origins[folder].items())
                    if stale_ids.intersection(ids)
                ]
        return queue

    def _backfill_step(self) -> bool:
        """Embed the records of up to :data:`BACKFILL_CHUNK` briefs or source origins whose vector is
        missing or from another model (source files are re-read through their source); True while more
        remain. Entries that got their vector meanwhile (a save with the model warm) are skipped."""
        embedder = self.embedder_ref()
        if embedder is None:
            return False
        if not self._backfill_queue:
            self._backfill_queue = self._stale_queue(embedder.name)
        take, self._backfill_queue = (
            self._backfill_queue[:BACKFILL_CHUNK],
            self._backfill_queue[BACKFILL_CHUNK:],
        )
        snap = self.snapshot
        report = SyncReport()
        briefs = [k for f, k in take if not f and k in snap.briefs]
        fresh = self.store.stored_hashes_for(briefs)
        chunk = [
            brief_record(snap.briefs[i], snap.tasks.get(snap.briefs[i].task))
            for i in briefs
            if i in fresh and fresh[i].model != embedder.name
        ]
        report.updated += len(chunk)
        write_records(self.store, chunk, embedder, report)
        for folder in self.sources:
            origins = [k for f, k in take if f == folder]
            ids = [rid for o in origins for rid in self._origins[folder].get(o, ())]
            stored = self.store.stored_hashes_for(ids)
            stale = {i for i in ids if i in stored and stored[i].model != embedder.name}
            todo = [o for o in origins if stale.intersection(self._origins[folder].get(o, ()))]
            if todo:
                self._apply_batch(folder, self.sources[folder].records_for(todo), report, force=stale)
        self._after_write(report)
        total = self._backfilled
        total.updated += report.updated
        total.embedded += report.embedded
        if self._backfill_queue:
            return True
        if self._stale_queue(embedder.name):  # written keyword-only meanwhile (e.g. a rescan): go on
            return True
        log.info("index_backfilled", updated=total.updated, embedded=total.embedded, model=embedder.name)
        self._backfilled = SyncReport()
        return False

    def _apply(self, work: Pending) -> None:
        if work.rescan:
            self.full_sync()
            return
        report = SyncReport()
        if work.briefs or work.tasks:
            self._apply_briefs(work, report)
        by_folder: dict[str, list[str]] = {}
        for path in work.paths:
            by_folder.setdefault(folder_of(path), []).append(path)
        for folder, paths in sorted(by_folder.items()):
            src = self.sources.get(folder)
            if src is not None:
                self._apply_batch(folder, src.records_for(sorted(paths)), report)
        self._after_write(report)

    def _apply_briefs(self, work: Pending, report: SyncReport) -> None:
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
        self._write(upserts, deletes, report)

    def _apply_batch(
        self,
        folder: str,
        batch: SourceBatch,
        report: SyncReport,
        force: set[str] | frozenset[str] = frozenset(),
    ) -> None:
        """Upsert a source's batch and delete every record its origins no longer yield.

        ``force``: ids rewritten even when their content hash is unchanged (backfill of vectors)."""
        known = self._origins[folder]
        covered = dict(batch.origins)
        if batch.complete:
            covered.update({o: () for o in known if o not in covered})
        produced = {rid for ids in covered.values() for rid in ids}
        gone = {rid for o in covered for rid in known.get(o, ()) if rid not in produced}
        if gone:  # a record id another origin still yields stays (O(records), but only on deletes)
            gone -= {rid for o, ids in known.items() if o not in covered for rid in ids if rid in gone}
        for origin, ids in covered.items():
            if ids:
                known[origin] = ids
            else:
                known.pop(origin, None)
        skipped = {s.path: s for s in ([] if batch.complete else self._source_skipped[folder])}
        for origin in covered:
            skipped.pop(origin, None)
        skipped.update((s.path, s) for s in batch.skipped)
        self._source_skipped[folder] = list(skipped.values())
        self._write(batch.records, sorted(gone), report, force)

    def _write(self, upserts, deletes, report: SyncReport, force=frozenset()) -> None:
        stored = self.store.stored_hashes_for([r.id for r in upserts])
        changed = [
            r for r in upserts if r.id not in stored or stored[r.id].hash != r.content_hash or r.id in force
        ]
        updated = sum(1 for r in changed if r.id in stored)
        report.updated += updated
        report.added += len(changed) - updated
        report.unchanged += len(upserts) - len(changed)
        write_records(self.store, changed, self.embedder_ref(), report)
        present = self.store.stored_hashes_for(deletes)
        report.deleted += self.store.delete(list(present))

    def _after_write(self, report: SyncReport) -> None:
        self.last_report = report
        self.last_indexed_at = time.time()
        if report.changed:
            if self.dirty_since is None:
                self.dirty_since = time.monotonic()
            if report.deleted or report.updated:
                self.purge_due = True

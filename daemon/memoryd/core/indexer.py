"""The one writer: turns board changes into batched index writes, and runs index maintenance.

One module (~640 lines) because the write queue, the backfill, maintenance (the tail's fold beside the
writes included) and the release of held buffers share one task and its state.

Everything that writes to LanceDB goes through :class:`Indexer`'s single asyncio task, so writes are
batched (each LanceDB write adds a fragment and a version) and never race each other; searches read
concurrently, except during compaction (see :class:`memoryd.index.searcher.RWLock`).

Writes are acknowledged before they are indexed (the board file is the truth) and made visible by a read
barrier, :meth:`Indexer.barrier`; the queue and its numbering are :mod:`memoryd.core.writequeue`.

Every board folder belongs to a record source (:mod:`memoryd.core.sources`); the writer knows no record
kind. Changed paths are routed to the source owning their folder, and the writer keeps origin -> record ids
per source, so every record a changed file no longer yields is deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import time
from collections.abc import Sequence

from memoryd.board.gate import Skipped, file_signature
from memoryd.core.ahead import Ahead
from memoryd.core.sources import RecordSource, owners
from memoryd.core.writequeue import ChangeFeed, Pending, WriteQueue
from memoryd.index.derive_cache import DeriveCache
from memoryd.index.memory import trim
from memoryd.index.records import Record, SourceBatch, SyncReport, sync_records, write_records
from memoryd.index.searcher import RWLock
from memoryd.index.store import IndexStore
from memoryd.logs import get_logger

log = get_logger("memoryd.core.indexer")

#: Records embedded per backfill step; board changes and saves queued meanwhile are applied between steps.
BACKFILL_CHUNK = 16
#: Rows in the store's keyword tail (:class:`memoryd.index.keyword_tail.KeywordTail`) from which the text indexes are refreshed
#: at once rather than at the next scheduled maintenance: scoring the tail grows with it. While writes
#: stream in, only the tail is folded (:meth:`Indexer.fold_tail`); the rest waits for the first gap.
#: The bound for a small table; a larger one lets the tail grow to :data:`TAIL_SHARE` of its rows
#: (:meth:`Indexer.tail_bound`).
TAIL_MAX = 2000
#: A fold rewrites the whole table (LanceDB compacts every fragment below a million rows and re-indexes
#: them), so its cost grows with the table: folding every half table of new rows keeps the cost per row
#: written flat. 0.9 s a fold at 10,000 memories, ~20 ms of CPU per batch of 50 with a 2,000-row bound.
TAIL_SHARE = 0.5
#: ...up to this many rows: a search scores the tail in memory (at 10,000 indexed rows, p50 through the
#: shim 11.3 ms with no tail, 14.5 ms with 4,000 rows in it, 19.9 ms with 8,000).
TAIL_CAP = 5000
#: Rows in the keyword tail from which the maintenance runs in the first gap in the writes instead of at
#: the scheduled interval: each row written since the last refresh is its own small LanceDB fragment,
#: which every keyword search pays for until then (a search 17 -> ~40 ms through the shim for the 30 s
#: after 1,600 single stores); a burst this large has batched enough writes for one compaction.
TAIL_SOON = 256
#: Optimize intervals a stream may defer the full maintenance for by folding the tail: old versions (a
#: copy of the table per compaction) must still leave the disk during writes that never pause.
FOLD_INTERVALS = 10
#: Other paths queued or being indexed above which :meth:`Indexer.admit` makes a write wait (until the
#: writer is back within the bound, or its own paths are indexed): writes faster than the model would
#: otherwise leave the next search an ever longer wait. A chunk's worth (:data:`memoryd.core.ahead.CHUNK`):
#: a batch of 50 is answered while the one before is still embedded, so the model has the next batch
#: queued when it ends one (with 32, a stream of batches of 50 waited for each batch's embedding before
#: the next one's files were written, and the model's queue ran dry between batches).
MAX_BACKLOG = 64
#: The same bound on the text those writes bring (~4,000 tokens, a second or two of embedding here):
#: a few long memories are as much work as many short ones.
MAX_BACKLOG_CHARS = 16_000
#: Paths of writes whose passages are already embedded (:mod:`memoryd.core.ahead`) that may be queued
#: ahead of an answer: they leave the next search an append each, and while the writer folds the
#: keyword tail (~0.5 s at 10,000 rows) the writes after them keep the model busy. Below the vectors
#: the embedding thread keeps (:data:`memoryd.core.ahead.KEEP`).
MAX_EMBEDDED = 256
#: Files remembered as a write's batch read them, so the watcher's echo of that write is not read again.
ECHO_MEMORY = 4096
#: Seconds without a new write after which a stream of writes has paused (scheduled maintenance may run):
#: a client storing batch after batch leaves the queue empty for a moment while it writes its next
#: batch's files (hundreds of ms on a loaded machine), which is no pause.
STREAM_GAP_S = 0.5
#: Seconds without a write after which the model's buffers held for a stream of writes are handed back
#: (:meth:`memoryd.index.embed.Embedder.release`): a client storing batch after batch sends the next a
#: few hundred ms after the answer, while the writer may have caught up; released at once, every other
#: batch mapped and zeroed them again (~12 instead of ~4 MB of page faults per batch of 50 short notes).
RELEASE_AFTER_S = 0.5
#: Seconds the writer must have been idle (no write, backfill or maintenance) before it hands freed heap
#: memory back to the OS (:func:`memoryd.index.memory.trim`): the embedding, LanceDB's writes and its
#: compactions free ~100 MB per 20,000 records that glibc would keep. Never during a stream of writes: a
#: trim once a second while 16 agents stored and searched cut their calls/s from ~55 to ~35.
TRIM_AFTER_S = 2.0


class Indexer:
    """Keeps ``store`` equal to what the record ``sources`` (:mod:`memoryd.core.sources`) yield.

    ``embedder_ref`` is a zero-argument callable returning the current embedder or None (the model
    loads after the daemon starts serving). :attr:`sources` maps each board folder to its source;
    ``changes`` hears of every batch once it is in the index.
    """

    def __init__(
        self,
        store: IndexStore,
        embedder_ref,
        lock: RWLock,
        optimize_interval_s: float = 30.0,
        sources: list[RecordSource] | tuple[RecordSource, ...] = (),
        changes: ChangeFeed | None = None,
    ) -> None:
        self.changes = changes  # told of each applied batch (the page's live events)
        self.sources: dict[str, RecordSource] = owners(sources)
        # per source (named by its first folder): origin key -> ids of the records it yields (rebuilt at
        # every full sync), and the files it currently skips
        self._named: dict[str, RecordSource] = {s.folders[0]: s for s in sources}
        self._origins: dict[str, dict[str, tuple[str, ...]]] = {n: {} for n in self._named}
        self._source_skipped: dict[str, list[Skipped]] = {n: [] for n in self._named}
        self.store = store
        self._derive_cache = DeriveCache(store.path)
        self.last_derived = 0
        self.embedder_ref = embedder_ref
        self.lock = lock
        self.optimize_interval_s = optimize_interval_s
        self.last_indexed_at: float | None = None  # time.time() of the last completed write
        self.last_optimize_at: float | None = None
        self.last_report = SyncReport()
        self.dirty_since: float | None = None  # monotonic time of the first write since the last optimize
        self.purge_due = False
        self._queue = WriteQueue()
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._closing = False
        self._backfill = False
        self._backfilled = SyncReport()
        self._backfill_queue: list[tuple[str, str]] = []
        # board-relative path -> the file's signature just before a write's batch read it (worker thread)
        self._read_as: dict[str, tuple[int, ...]] = {}
        self._trim_at: float | None = None  # monotonic time of the next trim (None: nothing freed since)
        self._held = None  # the embedder holding a write's buffers (Embedder.embed_passages), until the trim
        self._release_at: float | None = None  # monotonic time the held buffers go if no write came since
        self._answered_at = 0.0  # monotonic time the writer last applied writes some caller waited for
        self._fold: asyncio.Task | None = None  # the keyword tail's fold, running beside the writes
        self.ahead = Ahead(self._embedded_ahead)  # passages of writes on their way, embedded meanwhile
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- requests (event loop thread) -----------------------------------------------------------
    def submit(self, paths=(), rescan: bool = False) -> asyncio.Future:
        """Queue a change; the returned future resolves when it is in the index (or carries the writer's
        exception). Queued before this returns: a :meth:`barrier` asked afterwards waits for it, so a
        caller may answer without awaiting the future.

        ``paths``: board-relative POSIX paths under a record source's folder (``memories/<hash>.md``,
        ``briefs/<id>/outcome.md``); paths under no registered source are ignored. ``rescan``: reload
        every source. Neither: the same as :meth:`barrier`."""
        paths = list(paths)
        if not paths and not rescan:
            return self.barrier()
        fut = self._queue.submit(paths, rescan)
        self._wake.set()
        return fut

    def admit(self, paths, chars: int = 0, passages: Sequence[str] = ()) -> asyncio.Future:
        """Queue ``paths`` (bringing ``chars`` characters of text to embed) for a write that answers
        before its indexing (:meth:`submit`); the future, which never fails, says when the caller may
        answer: once at most :data:`MAX_BACKLOG` other paths are queued or being indexed and at most
        :data:`MAX_BACKLOG_CHARS` characters (these included), at once or after a batch the writer
        finishes; else once these paths are indexed (flow control: :meth:`WriteQueue.admit`). A failed
        index write is the writer's to log; the files are on the board for the next start's reconcile.

        ``passages``: the texts the new files' records embed, embedded now while the model is free
        (:mod:`memoryd.core.ahead`); once they are, the write no longer counts for those bounds, only
        for :data:`MAX_EMBEDDED`. A failed hand-over is logged and changes nothing else."""
        paths = list(paths)
        if not paths:
            return self.barrier()
        ready = None
        if passages:
            try:
                ready = self._embed_ahead(passages)
            except Exception as exc:  # a head start only: the writer embeds them itself
                log.warning("embed_ahead_failed", error=f"{type(exc).__name__}: {exc}")
        written, admitted = self._queue.admit(
            paths, chars, MAX_BACKLOG, MAX_BACKLOG_CHARS, ready=ready, max_ready=MAX_EMBEDDED
        )
        self._wake.set()
        # retrieved: the writer logged it
        written.add_done_callback(lambda f: f.cancelled() or f.exception())
        return admitted

    def _embed_ahead(self, texts: Sequence[str]):
        """Hand these passages to the embedding thread; their :class:`~memoryd.core.ahead.Ticket`, or None
        (no model, closing). Raises RuntimeError when the thread cannot start."""
        embedder = self.embedder_ref()
        if embedder is None or self._closing:
            return None
        ticket = self.ahead.request(embedder, texts)
        if ticket is not None and not ticket.ready and self._loop is not None and self.ahead.full:
            # tokenized beside the chunks the model is embedding, not at the head of their own
            self._loop.run_in_executor(None, self._prepare_ahead, embedder, texts)
        # the thread holds the model's buffers like the writer's batches: they go when the writes pause
        self._held, self._release_at = embedder, time.monotonic() + RELEASE_AFTER_S
        return ticket

    def _prepare_ahead(self, embedder, texts: Sequence[str]) -> None:
        try:
            self.ahead.prepare(embedder, texts)
        except Exception as exc:  # a head start only: the chunk tokenizes them itself
            log.warning("embed_ahead_failed", error=f"{type(exc).__name__}: {exc}", passages=len(texts))

    def _embedded_ahead(self) -> None:
        """A write's passages are embedded (the embedding thread): its admission may answer now."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(self._queue.recheck)

    def barrier(self) -> asyncio.Future:
        """A future resolved once every change submitted before this call is applied (failed writes
        included: they are logged, and the board keeps their files for the next start), but for the
        last writes still waiting for their admission, whose callers have not been answered
        (:meth:`WriteQueue.acknowledged`). Already resolved when nothing is outstanding, so a search pays
        nothing then; never waits for later submissions."""
        fut = self._queue.barrier(writer_running=self._task is not None and not self._task.done())
        if not fut.done():
            self._wake.set()
        return fut

    def take(self, change) -> None:
        """Queue a watcher's :class:`~memoryd.core.watch.Change` (its ``paths`` and ``rescan``); runs on the
        event loop's thread. No barrier waits for it as such (:meth:`WriteQueue.note`)."""
        self._queue.note(change.paths, change.rescan)
        self._wake.set()

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
        fut = self._queue.submit(rescan=True, purge=True)
        self._wake.set()
        return fut

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(self._run(), name="memoryd-indexer")

    async def close(self) -> None:
        """Flush pending writes (acknowledged ones included), then stop."""
        self._closing = True
        self.ahead.stop()  # now, whether or not the flush below finishes in the shutdown's budget
        self._wake.set()
        if self._task is not None:
            await self._task
        if self._fold is not None:  # the writer awaited it already, unless it failed first
            await asyncio.gather(self._fold, return_exceptions=True)
        await asyncio.to_thread(self.ahead.close)

    # -- the writer task ------------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            backfill = self._backfill and not self._closing
            timeout = 0 if backfill else self._next_wake_in()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=timeout)
            self._wake.clear()
            # up to the oldest waiting barrier: its search waits for no later submission
            work, done = self._queue.take()
            if self._queue.pending:
                self._wake.set()  # the rest runs next, without waiting for another submission
            if work or backfill:
                self._trim_at = time.monotonic() + TRIM_AFTER_S
            if work:
                try:
                    await asyncio.to_thread(self._apply, work)
                    if work.purge:  # forget --now: the waiters hear back once old versions are gone
                        await asyncio.to_thread(self.maintain, True)
                except Exception as exc:  # the writer must survive a bad batch; the board keeps the files
                    log.error(
                        "index_write_failed",
                        error=f"{type(exc).__name__}: {exc}",
                        paths=sorted(work.paths)[:20],
                        rescan=work.rescan,
                        exc_info=exc,
                    )
                    for _, w in work.waiters:
                        if not w.done():
                            w.set_exception(exc)
                else:
                    if self.changes is not None:
                        self.changes.publish(paths=work.paths, rescan=work.rescan)
                    for _, w in work.waiters:
                        if not w.done():
                            w.set_result(None)
            if work.waiters:  # their callers, answered now, send their next writes from now on
                self._answered_at = time.monotonic()
            self._queue.release(done)
            if work:
                self._release_at = time.monotonic() + RELEASE_AFTER_S
            elif (
                self._held is not None
                and self._release_at is not None
                and time.monotonic() >= self._release_at
                and not self._queue.writes_waiting
            ):
                if self.ahead.busy:  # the embedding thread still uses them: later
                    self._release_at = time.monotonic() + RELEASE_AFTER_S
                else:
                    # the stream of writes paused: its buffers go now, as they went after every batch
                    # before, and so do the vectors embedded ahead that no write claimed
                    held, self._held, self._release_at = self._held, None, None
                    self.ahead.clear()
                    with contextlib.suppress(Exception):  # only memory is at stake
                        await asyncio.to_thread(held.release, False)
            if not work and backfill:
                try:
                    self._backfill = await asyncio.to_thread(self._backfill_step)
                except Exception as exc:
                    self._backfill = False
                    log.error("index_backfill_failed", error=f"{type(exc).__name__}: {exc}", exc_info=exc)
            if self._fold is not None and (self._fold.done() or self._closing):
                await self._fold  # it logs its own failure
                self._fold = None
            if self._fold is not None:
                pass  # the tail is being folded beside the writes: maintenance waits for it
            elif (
                self.dirty_since is not None
                and len(self.store.tail) >= self.tail_bound()
                and not self._closing
                and self._deferring()
                and time.monotonic() - self.dirty_since < FOLD_INTERVALS * self.optimize_interval_s
            ):
                # mid-stream: the tail's bound only, beside the writes that keep coming; compaction and
                # old versions wait for the gap
                self._fold = asyncio.get_running_loop().create_task(self._fold_beside())
            elif self.dirty_since is not None and (
                self._closing
                or len(self.store.tail) >= self.tail_bound()
                or (self._maintenance_due() and not self._deferring())
            ):
                try:
                    await asyncio.to_thread(self.maintain)
                except Exception as exc:
                    log.error("index_optimize_failed", error=str(exc), exc_info=exc)
                self._trim_at = time.monotonic() + TRIM_AFTER_S  # a compaction frees the most
            if self._closing and not self._queue.pending:
                return
            if (
                self._trim_at is not None
                and time.monotonic() >= self._trim_at
                and not self._queue.pending
                and self._fold is None  # the fold's end sets the next trim
            ):
                if self.ahead.busy:  # the embedding thread still uses the model's buffers: later
                    self._trim_at = time.monotonic() + TRIM_AFTER_S
                    continue
                self._trim_at = None
                self.ahead.clear()
                try:
                    await asyncio.to_thread(self._release)
                except Exception as exc:  # only memory is at stake: the writer goes on
                    log.warning("memory_trim_failed", error=f"{type(exc).__name__}: {exc}")

    async def _fold_beside(self) -> None:
        """:meth:`fold_tail` in a thread while the writer goes on appending (LanceDB commits an append
        beside the fold; merges and deletes wait for it in the store); wakes the writer when done."""
        try:
            await asyncio.to_thread(self.fold_tail)
        except Exception as exc:  # the tail stays as it was: the next fold or the maintenance retries
            log.error("index_optimize_failed", error=str(exc), exc_info=exc)
        finally:
            # a fold frees what it compacted (~100 MB at 10,000 rows): the trim follows it, as after any
            # write, once the writer has been idle long enough
            self._trim_at = time.monotonic() + TRIM_AFTER_S
            self._wake.set()

    def _release(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            held.release()  # the arena's shrink, then the heap's trim
        else:
            trim()

    def tail_bound(self) -> int:
        """Rows the keyword tail may hold before it is folded: :data:`TAIL_MAX`, or :data:`TAIL_SHARE` of
        the table's rows when that is more, at most :data:`TAIL_CAP`."""
        return max(TAIL_MAX, min(TAIL_CAP, int(self.store.count() * TAIL_SHARE)))

    def _deferring(self) -> bool:
        """Whether the scheduled maintenance waits for the first gap in the writes: while writes are queued
        or the last one came, or the last ones were applied, less than :data:`STREAM_GAP_S` ago (a stream
        of ``store_memories`` batches) a compaction would stall every one of them for its hundreds of ms
        (seconds at 10,000 records), and the tail it folds keeps growing only up to :meth:`tail_bound`.
        Counted from the application too: a client whose write waited for the writer (its admission, a
        fold of the tail) sends its next one only after its answer. Not after a delete or an edit:
        forgotten text leaves the disk within the interval whatever comes next."""
        if self.purge_due:
            return False
        return self._queue.writes_waiting or time.monotonic() - self._last_write_at() < STREAM_GAP_S

    def _last_write_at(self) -> float:
        """Monotonic time of the last write submitted or applied for a caller."""
        return max(self._queue.last_submit_at, self._answered_at)

    def _next_wake_in(self) -> float | None:
        """Seconds until the writer has something to do unasked (maintenance or a trim), or None."""
        due = self._next_maintenance_in()
        for at in (self._trim_at, self._release_at if self._held is not None else None):
            if at is not None:
                left = max(0.0, at - time.monotonic())
                due = left if due is None else min(due, left)
        return due

    def _maintenance_due(self) -> bool:
        """The interval has passed since the first write maintenance has not covered, or the tail holds a
        burst of :data:`TAIL_SOON` rows (either way it waits for a gap in the writes)."""
        if self.dirty_since is None:
            return False
        return (
            time.monotonic() - self.dirty_since >= self.optimize_interval_s
            or len(self.store.tail) >= TAIL_SOON
        )

    def _next_maintenance_in(self) -> float | None:
        if self.dirty_since is None:
            return None
        if len(self.store.tail) >= self.tail_bound():
            return 0.05
        if len(self.store.tail) >= TAIL_SOON:  # at the gap a stream of writes leaves
            return max(0.05, STREAM_GAP_S - (time.monotonic() - self._last_write_at()))
        return max(0.05, self.optimize_interval_s - (time.monotonic() - self.dirty_since))

    def fold_tail(self) -> None:
        """Fold the keyword tail into the full-text indexes, keeping old versions and without the exclusive
        lock (searches go on, and so do appends: :meth:`memoryd.index.store_writes.StoreWrites.refresh`);
        ``dirty_since`` stays, so :meth:`maintain` follows at the first gap. LanceDB
        compacts on the way: the fragments written since, and (from the second fold on) the whole table,
        since it merges neighbouring fragments the same indexes cover; :meth:`maintain` always does the
        latter, in a second call under the exclusive lock, and drops old versions."""
        t0 = time.perf_counter()
        self.store.refresh()
        log.info(
            "index_tail_folded", version=self.store.version(), ms=round((time.perf_counter() - t0) * 1000)
        )

    def maintain(self, purge: bool | None = None) -> None:
        """Compact, refresh the full-text indexes and drop old versions. After deletions or edits the
        old versions are dropped at once (``purge``): forgotten text leaves the disk."""
        purge = self.purge_due if purge is None else purge
        t0 = time.perf_counter()
        if not purge:
            # the slow part (compaction, folding new rows into the text indexes) keeps old versions,
            # so searches go on meanwhile; only dropping old versions below waits for them
            self.store.refresh()
        t1 = time.perf_counter()
        with self.lock.exclusive():
            self.store.optimize(purge=purge)
        self.dirty_since = None
        self.purge_due = False
        self.last_optimize_at = time.time()
        log.info(
            "index_optimized",
            purge=purge,
            version=self.store.version(),
            refresh_ms=round((t1 - t0) * 1000),  # grows with the table: see docs/benchmarks.md
            optimize_ms=round((time.perf_counter() - t1) * 1000),
        )

    # -- applying work (worker thread) ----------------------------------------------------------
    @property
    def kinds(self) -> tuple[str, ...]:
        """Every record kind this indexer keeps equal to the board."""
        return tuple(k for s in self._named.values() for k in s.kinds)

    def skipped(self) -> list[Skipped]:
        """Every board file currently not loaded, of every source."""
        return [s for lst in self._source_skipped.values() for s in lst]

    def full_sync(self) -> SyncReport:
        """Reload every source and reconcile every record of :attr:`kinds`."""
        records: list[Record] = []
        keep: list[str] = []
        derived = 0
        for name, src in self._named.items():
            batch = src.load_all()
            records.extend(batch.records)
            fresh, unchanged = self._derive(batch, skip_unchanged=True)
            records.extend(fresh)
            keep.extend(unchanged)
            derived += len(fresh)
            self._origins[name] = {o: ids for o, ids in batch.origins.items() if ids}
            self._source_skipped[name] = list(batch.skipped)
        self.last_derived = derived  # deferred records derived again (the rest: cache hits)
        self._derive_cache.keep_only(keep + [r.id for r in records])
        embedder = self.embedder_ref()
        embed = functools.partial(self.ahead.embed, embedder) if embedder is not None else None
        report = sync_records(self.store, records, embedder, kinds=self.kinds, keep=keep, embed=embed)
        self._after_write(report)
        self._derive_cache.save()
        return report

    def _derive(self, batch: SourceBatch, skip_unchanged: bool) -> tuple[list[Record], list[str]]:
        """The batch's deferred records whose inputs changed since they were last derived, and (with
        ``skip_unchanged``) the ids of those that did not, left underived."""
        cache = self._derive_cache
        embedder = self.embedder_ref()
        stored = self.store.stored_hashes_for([d.id for d in batch.deferred]) if skip_unchanged else {}
        records, keep = [], []
        for d in batch.deferred:
            old = stored.get(d.id)
            fresh_model = old is not None and (embedder is None or old.model == embedder.name)
            if fresh_model and cache.unchanged(d.id, d.inputs, old.hash):
                keep.append(d.id)
                continue
            rec = d.derive()
            cache.put(d.id, d.inputs, rec.content_hash)
            records.append(rec)
        return records, keep

    def _stale_queue(self, model: str) -> list[tuple[str, str]]:
        """``[(source name, origin)]`` to re-embed: origins holding a record whose vector is missing or from
        another model. Computed once per backfill pass (one read of the hashes, not one per chunk: a board
        may hold 100,000 memories)."""
        queue: list[tuple[str, str]] = []
        for name, src in self._named.items():
            stale_ids: set[str] = set()
            for kind in src.kinds:
                stale_ids.update(i for i, h in self.store.stored_hashes(kind).items() if h.model != model)
            if stale_ids:
                queue += [
                    (name, o) for o, ids in sorted(self._origins[name].items()) if stale_ids.intersection(ids)
                ]
        return queue

    def _backfill_step(self) -> bool:
        """Embed the records of up to :data:`BACKFILL_CHUNK` origins whose vector is missing or from another
        model (re-read through their source); True while more remain. Origins whose records got their
        vector meanwhile (a save with the model warm) are skipped."""
        embedder = self.embedder_ref()
        if embedder is None:
            return False
        if not self._backfill_queue:
            self._backfill_queue = self._stale_queue(embedder.name)
        take, self._backfill_queue = (
            self._backfill_queue[:BACKFILL_CHUNK],
            self._backfill_queue[BACKFILL_CHUNK:],
        )
        report = SyncReport()
        for name, src in self._named.items():
            origins = [k for f, k in take if f == name]
            ids = [rid for o in origins for rid in self._origins[name].get(o, ())]
            stored = self.store.stored_hashes_for(ids)
            stale = {i for i in ids if i in stored and stored[i].model != embedder.name}
            todo = [o for o in origins if stale.intersection(self._origins[name].get(o, ()))]
            if todo:
                self._apply_batch(name, src.records_for(todo), report, force=stale)
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
        by_source: dict[str, list[str]] = {}
        for path in work.paths:
            src = self.sources.get(path.split("/", 1)[0])
            if src is None:
                continue
            now = _signature(src, path)
            if float(work.seqs.get(path, 0)).is_integer():  # a write's: note the file as it is read
                self._read_as[path] = now
                if len(self._read_as) > ECHO_MEMORY:
                    del self._read_as[next(iter(self._read_as))]
            elif now is not None and self._read_as.pop(path, None) == now:
                continue  # the watcher's echo of a write whose file was read as it is now
            by_source.setdefault(src.folders[0], []).append(path)
        for name, paths in sorted(by_source.items()):
            self._apply_batch(name, self._named[name].records_for(sorted(paths)), report)
        self._after_write(report)

    def _apply_batch(
        self,
        name: str,
        batch: SourceBatch,
        report: SyncReport,
        force: set[str] | frozenset[str] = frozenset(),
    ) -> None:
        """Upsert a source's batch and delete every record its origins no longer yield.

        ``force``: ids rewritten even when their content hash is unchanged (backfill of vectors)."""
        known = self._origins[name]
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
        kept = [] if batch.complete else self._source_skipped[name]
        skipped = {s.path: s for s in kept if not any(_within(s.path, o) for o in covered)}
        skipped.update((s.path, s) for s in batch.skipped)
        self._source_skipped[name] = list(skipped.values())
        fresh, _ = self._derive(batch, skip_unchanged=False)
        self._write([*batch.records, *fresh], sorted(gone), report, force)

    def _write(self, upserts, deletes, report: SyncReport, force=frozenset()) -> None:
        stored = self.store.stored_hashes_for([r.id for r in upserts])
        changed = [
            r for r in upserts if r.id not in stored or stored[r.id].hash != r.content_hash or r.id in force
        ]
        updated = sum(1 for r in changed if r.id in stored)
        report.updated += updated
        report.added += len(changed) - updated
        report.unchanged += len(upserts) - len(changed)
        embedder = self.embedder_ref()
        # the writer's batches hold the model's buffers: the next batch reuses them instead of mapping and
        # zeroing them again (blocks from 4 MB on are mapped alone); they go once writes pause (_run).
        # Noted before the write: a batch that fails after its embedding holds them all the same
        if changed and embedder is not None:
            self._held = embedder
        embed = functools.partial(self.ahead.embed, embedder, hold=True) if embedder is not None else None
        write_records(self.store, changed, embedder, report, embed=embed)
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


def _signature(src: RecordSource, path: str) -> tuple[int, ...] | None:
    """:func:`memoryd.board.gate.file_signature` of a board-relative ``path`` of ``src``."""
    return file_signature(os.path.join(src.board, path))


def _within(path: str, origin: str) -> bool:
    """``path`` is the origin itself or inside it (``briefs/<id>/notes.md`` within ``briefs/<id>``)."""
    return path == origin or path.startswith(origin + "/")

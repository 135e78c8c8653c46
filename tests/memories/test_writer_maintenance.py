"""The writer's scheduled maintenance (compaction, folding the keyword tail into the text indexes) waits for the
first gap in a stream of writes instead of stalling it, and runs at once in that gap; after a delete it
does not wait (forgotten text leaves the disk within the interval). A real writer (:class:`Indexer`),
LanceDB store and memories source on a temporary board, keyword-only."""

from __future__ import annotations

import asyncio
import time

import pytest

from memoryd.core import indexer as indexer_module
from memoryd.core.indexer import Indexer
from memoryd.index.columns import Filter
from memoryd.index.searcher import RWLock
from memoryd.index.store import IndexStore
from memoryd.kinds.memories.files import Memory, write_memory
from memoryd.kinds.memories.source import MemorySource

INTERVAL_S = 0.2


def writer(tmp_path, interval_s: float = INTERVAL_S) -> tuple[Indexer, list[Memory]]:
    board = tmp_path / "board"
    board.mkdir()
    store = IndexStore(tmp_path / "index")
    indexer = Indexer(
        store, lambda: None, RWLock(), optimize_interval_s=interval_s, sources=[MemorySource(board)]
    )
    indexer.full_sync()
    made = [Memory.new(f"stream note {n} about the zqstream release", tags=("s",)) for n in range(1500)]
    for m in made:
        write_memory(board, m)
    return indexer, made


def test_maintenance_waits_for_the_first_gap_in_a_stream_of_writes_then_runs_at_once(tmp_path):
    indexer, made = writer(tmp_path)

    async def run() -> tuple[float, float, float | None, float | None]:
        indexer.start()
        first = time.time()
        # writes faster than the writer applies them, for several intervals: some are always queued
        futures = []
        for at in range(0, len(made), 3):
            futures.append(indexer.submit([m.path for m in made[at : at + 3]]))
            await asyncio.sleep(0.002)
            if indexer._queue.pending.paths and time.time() - first > 6 * INTERVAL_S:
                break
        await asyncio.gather(*futures)
        stream_end = time.time()
        during = indexer.last_optimize_at
        deadline = time.monotonic() + 10
        while indexer.last_optimize_at is None and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        after = indexer.last_optimize_at
        await indexer.close()
        return first, stream_end, during, after

    first, stream_end, during, after = asyncio.run(run())
    assert stream_end - first > 3 * INTERVAL_S  # the stream outlasted the interval several times
    assert during is None, f"maintenance ran {during - first:.2f} s into a {stream_end - first:.2f} s stream"
    assert after is not None and after - stream_end < 2.0  # in the gap, not an interval later


def test_after_a_delete_maintenance_does_not_wait_for_a_gap(tmp_path):
    indexer, made = writer(tmp_path)
    board = indexer._named["memories"].board

    async def run() -> tuple[float, float | None, float]:
        indexer.start()
        await indexer.submit([m.path for m in made[:5]])
        (board / made[0].path).unlink()
        await indexer.submit([made[0].path])  # deleted: old versions must go within the interval
        first = time.time()
        futures = []
        for at in range(5, len(made), 3):
            futures.append(indexer.submit([m.path for m in made[at : at + 3]]))
            await asyncio.sleep(0.002)
            if indexer.last_optimize_at is not None or time.time() - first > 20 * INTERVAL_S:
                break
        ran = indexer.last_optimize_at
        await asyncio.gather(*futures)
        end = time.time()
        await indexer.close()
        return first, ran, end

    first, ran, end = asyncio.run(run())
    assert ran is not None, f"no maintenance during {end - first:.2f} s of writes after a delete"


def test_a_write_that_fails_after_its_embedding_still_hands_the_models_buffers_back(tmp_path, embedder):
    """The writer's batches keep the model's buffers for the next one; a batch whose index write fails
    after it was embedded (here LanceDB cannot create its data folder: a file is in the way) must not
    keep them for good: they go once writes pause, as after a batch that succeeded."""
    from memoryd.core.indexer import RELEASE_AFTER_S, TRIM_AFTER_S

    board = tmp_path / "board"
    board.mkdir()
    store = IndexStore(tmp_path / "index")
    indexer = Indexer(store, lambda: embedder, RWLock(), sources=[MemorySource(board)])
    indexer.full_sync()
    long = "about the checkout page and the login redirect loop after a deploy " * 12
    made = [Memory.new(f"note {n} {long}", tags=("s",)) for n in range(24)]
    for m in made:
        write_memory(board, m)
    (tmp_path / "index" / "records.lance" / "data").write_text("in the way")
    embedded = embedder.passages_embedded

    async def run() -> bool:
        indexer.start()
        try:
            await indexer.submit([m.path for m in made])
        except Exception:
            failed = True
        else:
            failed = False
        deadline = time.monotonic() + RELEASE_AFTER_S + TRIM_AFTER_S + 5
        while embedder._holding and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await indexer.close()
        return failed

    assert asyncio.run(run()), "the index write should have failed"
    assert embedder.passages_embedded - embedded == len(made)  # embedded (holding its buffers), then failed
    assert not embedder._holding, "the failed batch's buffers were never handed back"


def test_in_a_stream_the_tail_bound_folds_the_tail_and_the_full_maintenance_waits_for_the_gap(
    tmp_path, monkeypatch
):
    """Past the keyword tail's bound mid-stream, only the tail is folded into the text indexes (rows stay
    searchable by keyword, searches are not locked out); the compaction that rewrites the table and the
    cleanup of old versions run in the first gap."""
    monkeypatch.setattr(indexer_module, "TAIL_MAX", 60)
    monkeypatch.setattr(indexer_module, "TAIL_SHARE", 0.0)  # a fixed bound
    monkeypatch.setattr(indexer_module, "FOLD_INTERVALS", 1000)  # however long the stream takes here
    indexer, made = writer(tmp_path)
    store = indexer.store
    versions: list[int] = []  # LanceDB versions kept on disk, after each fold
    fold = indexer.fold_tail

    def counting_fold():
        fold()
        versions.append(len(store._table.list_versions()))

    indexer.fold_tail = counting_fold
    over: list[tuple[int, int]] = []  # (tail after a batch, the batch's rows) wherever the bound broke
    apply = indexer._apply

    def watching_apply(work):
        before = len(store.tail)
        apply(work)
        if before >= 60 and indexer._fold is None:  # past its bound, and no fold running or coming
            over.append((before, len(work.paths)))

    indexer._apply = watching_apply

    async def run() -> tuple[float | None, float | None, int, list[tuple[str, float]]]:
        indexer.start()
        futures = []
        for at in range(0, 600, 3):  # faster than the writer: some are always queued
            futures.append(indexer.submit([m.path for m in made[at : at + 3]]))
            await asyncio.sleep(0.002)
        await asyncio.gather(*futures)
        during = indexer.last_optimize_at
        tail_after = len(store.tail)
        hits = store.keyword("zqstream", Filter(), 1000)
        deadline = time.monotonic() + 10
        while indexer.last_optimize_at is None and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        after = indexer.last_optimize_at
        await indexer.close()
        return during, after, tail_after, hits

    during, after, tail_after, hits = asyncio.run(run())
    assert versions, "the tail was never folded in a stream of 600 writes past a bound of 60"
    assert during is None, "the full maintenance ran inside the stream"
    # bounded: a fold starts after each batch that passes the bound, and the batches go on beside it
    # (the rows they bring stay in the tail for the next fold)
    assert not over, f"batches began on a tail past its bound with no fold running (tail, rows): {over[:5]}"
    assert tail_after < 600
    assert len(hits) == 600  # every row found by keyword, folded or in the tail
    assert after is not None  # then in the gap


@pytest.mark.parametrize("cap", [5000, 100])
def test_the_tail_bound_grows_with_the_table_up_to_its_cap(tmp_path, monkeypatch, cap):
    """A fold rewrites the whole table, so in a stream the tail is folded once it holds a share of the
    table's rows (at least the fixed bound, at most the cap), not every fixed number of rows."""
    monkeypatch.setattr(indexer_module, "TAIL_MAX", 60)
    monkeypatch.setattr(indexer_module, "TAIL_SHARE", 0.5)
    monkeypatch.setattr(indexer_module, "TAIL_CAP", cap)
    monkeypatch.setattr(indexer_module, "FOLD_INTERVALS", 1000)
    indexer, made = writer(tmp_path)
    store = indexer.store
    starts: list[tuple[int, int]] = []  # (rows in the tail, rows in the table) as each fold began
    fold = indexer.fold_tail

    def recording_fold():
        starts.append((len(store.tail), store.count()))
        fold()

    indexer.fold_tail = recording_fold

    async def run() -> None:
        indexer.start()
        futures = []
        for at in range(0, 900, 3):
            futures.append(indexer.submit([m.path for m in made[at : at + 3]]))
            await asyncio.sleep(0.002)
        await asyncio.gather(*futures)
        await indexer.close()

    asyncio.run(run())
    assert starts, "the tail was never folded in a stream of 900 writes"
    for tail, rows in starts:
        assert tail >= max(60, min(cap, rows // 2)), f"folded at {tail} tail rows of {rows}: {starts}"
    if cap == 100:  # the cap, not the share, bounds the tail of a larger table
        assert any(tail < rows // 2 for tail, rows in starts), starts
    else:  # each fold waits for half the table: far fewer than 900 / 60
        assert len(starts) <= 5, starts


def test_maintenance_waits_while_a_client_writes_its_next_batch_after_each_answer(tmp_path):
    """A client that sends its next batch a moment after each answer leaves the queue empty for that
    moment: no gap in the stream, so the scheduled maintenance waits for the stream's end."""
    indexer, made = writer(tmp_path)

    async def run() -> tuple[float, float | None, float | None]:
        indexer.start()
        first = time.time()
        for at in range(0, 60, 5):
            await indexer.submit([m.path for m in made[at : at + 5]])
            await asyncio.sleep(0.1)  # the client writes its next batch's files
        during = indexer.last_optimize_at
        end = time.time()
        deadline = time.monotonic() + 10
        while indexer.last_optimize_at is None and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        after = indexer.last_optimize_at
        await indexer.close()
        return end - first, during, after and after - end

    length, during, after = asyncio.run(run())
    assert length > 5 * INTERVAL_S
    assert during is None, "maintenance ran in the moment between an answer and the next batch"
    assert after is not None and after < 2.0


def test_a_burst_of_writes_is_compacted_in_the_gap_after_it_not_an_interval_later(tmp_path):
    """Rows written since the last refresh slow every keyword search until the maintenance: after a
    burst of :data:`TAIL_SOON` rows or more it runs in the gap that ends the burst, however long the
    interval; a few writes still wait for the interval."""
    indexer, made = writer(tmp_path, interval_s=3600)
    burst = indexer_module.TAIL_SOON + 30

    async def run() -> tuple[float | None, float | None, float | None, int]:
        indexer.start()
        for at in range(0, 12, 3):  # a few writes, then a gap: nothing is due for an hour
            await indexer.submit([m.path for m in made[at : at + 3]])
        await asyncio.sleep(1.5)
        few = indexer.last_optimize_at
        futures = []
        for at in range(12, 12 + burst, 3):
            futures.append(indexer.submit([m.path for m in made[at : at + 3]]))
            await asyncio.sleep(0.002)
        await asyncio.gather(*futures)
        end = time.time()
        during = indexer.last_optimize_at
        deadline = time.monotonic() + 10
        while indexer.last_optimize_at is None and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        after = indexer.last_optimize_at
        tail = len(indexer.store.tail)
        await indexer.close()
        return few, during, after and after - end, tail

    few, during, after, tail = asyncio.run(run())
    assert few is None, "maintenance ran after a dozen writes, an hour early"
    assert during is None, "maintenance ran inside the burst"
    assert after is not None and after < 2.0, "the burst's rows waited for the interval"
    assert tail == 0


def test_a_long_fold_is_no_gap_in_a_stream_whose_client_waits_for_its_answer(tmp_path, monkeypatch):
    """A client answered only once the writer is back (its write was admitted after the batch before
    it) cannot send its next batch while the writer folds the tail: a fold longer than the gap that ends
    a stream must not read as that gap, or the full maintenance stalls the stream right after it."""
    monkeypatch.setattr(indexer_module, "TAIL_MAX", 60)
    monkeypatch.setattr(indexer_module, "TAIL_SHARE", 0.0)  # a fixed bound
    monkeypatch.setattr(indexer_module, "FOLD_INTERVALS", 1000)
    indexer, made = writer(tmp_path)
    fold = indexer.fold_tail
    folds: list[float] = []

    def slow_fold():  # a fold as long as one on a large index (hundreds of ms), past the stream's gap
        fold()
        time.sleep(indexer_module.STREAM_GAP_S + 0.3)
        folds.append(time.time())

    indexer.fold_tail = slow_fold

    async def run() -> tuple[float | None, float | None]:
        indexer.start()
        for at in range(0, 400, 40):  # more paths than an admission's bound: each waits for the one before
            await indexer.admit([m.path for m in made[at : at + 40]], 40 * 40)
            await asyncio.sleep(0.05)  # the client writes its next batch's files
        during = indexer.last_optimize_at
        deadline = time.monotonic() + 10
        while indexer.last_optimize_at is None and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        after = indexer.last_optimize_at
        await indexer.close()
        return during, after

    during, after = asyncio.run(run())
    assert folds, "the tail was never folded in the stream"
    assert during is None, "the full maintenance ran inside the stream, right after a long fold"
    assert after is not None


def test_writes_embedded_ahead_are_answered_while_the_writer_is_held_up(tmp_path, embedder):
    """While the writer is held up applying a batch (a slow disk; a merge waiting for a fold) a client's
    next batches answer as soon as their passages are embedded, so the model keeps working meanwhile;
    before, each waited for the batch before it to be applied."""
    from memoryd.kinds.memories.records import memory_record

    board = tmp_path / "board"
    board.mkdir()
    indexer = Indexer(
        IndexStore(tmp_path / "index"),
        lambda: embedder,
        RWLock(),
        optimize_interval_s=3600,
        sources=[MemorySource(board)],
    )
    indexer.full_sync()
    made = [
        Memory.new(f"held note {n}: the {n % 7} replica of the qzheld cache", tags=("f",)) for n in range(360)
    ]
    for m in made:
        write_memory(board, m)
    upsert = indexer.store.upsert
    slow: list[float] = []  # the first batch's write: its start and end (monotonic)

    def slow_upsert(*args, **kwargs):
        out = upsert(*args, **kwargs)
        if not slow:
            slow.append(time.monotonic())
            time.sleep(2.0)
            slow.append(time.monotonic())
        return out

    indexer.store.upsert = slow_upsert

    async def run() -> list[float]:
        indexer.start()
        answered = []
        for at in range(0, len(made), 40):
            batch = made[at : at + 40]
            passages = [memory_record(m).embed_text for m in batch]
            await indexer.admit([m.path for m in batch], sum(len(m.content) for m in batch), passages)
            answered.append(time.monotonic())
            while not slow:  # the next batches come once the writer is held up on the first
                await asyncio.sleep(0.01)
        await indexer.barrier()
        await indexer.close()
        return answered

    answered = asyncio.run(run())
    end = slow[1]
    inside = [t for t in answered[1:] if t < end]
    assert len(inside) >= 3, f"{len(inside)} batches answered while the writer was held up"
    ids = [memory_record(m).id for m in made]
    stored = indexer.store.stored_hashes_for(ids)
    assert len(stored) == len(made), "a batch answered meanwhile is not in the index"
    assert {h.model for h in stored.values()} == {embedder.name}  # each with its vector


def test_the_writer_goes_on_appending_while_the_tail_is_folded(tmp_path, monkeypatch):
    """A fold of the keyword tail (hundreds of ms at 10,000 rows) runs beside the writes: batches
    submitted meanwhile are applied (and searchable) before it ends, and the rows they bring stay in
    the tail for the next fold."""
    monkeypatch.setattr(indexer_module, "TAIL_MAX", 60)
    monkeypatch.setattr(indexer_module, "TAIL_SHARE", 0.0)  # a fixed bound
    monkeypatch.setattr(indexer_module, "FOLD_INTERVALS", 1000)
    indexer, made = writer(tmp_path)
    fold = indexer.fold_tail
    slow: list[float] = []  # the first fold's start and end (monotonic)

    def slow_fold():
        fold()
        if not slow:
            slow.append(time.monotonic())
            time.sleep(2.0)
            slow.append(time.monotonic())

    indexer.fold_tail = slow_fold

    async def run() -> tuple[list[float], int]:
        indexer.start()
        applied = []
        for at in range(0, 400, 40):
            await indexer.submit([m.path for m in made[at : at + 40]])  # resolves once in the index
            applied.append(time.monotonic())
            await asyncio.sleep(0.05)
        tail = len(indexer.store.tail)
        await indexer.close()
        return applied, tail

    applied, tail = asyncio.run(run())
    start, end = slow
    assert len([t for t in applied if start < t < end]) >= 3, "the writer waited for the fold"
    assert tail > 0
    hits = indexer.store.keyword("zqstream", Filter(), 1000)
    assert len(hits) == 400


def test_the_heap_is_trimmed_after_a_fold_that_ends_once_the_writes_stopped(tmp_path, monkeypatch):
    """A fold frees what it compacted (~100 MB at 10,000 rows): when it ends after the last write, the
    trim that follows an idle writer comes after it, not during it."""
    monkeypatch.setattr(indexer_module, "TAIL_MAX", 60)
    monkeypatch.setattr(indexer_module, "TAIL_SHARE", 0.0)  # a fixed bound
    monkeypatch.setattr(indexer_module, "FOLD_INTERVALS", 1000)
    monkeypatch.setattr(indexer_module, "TRIM_AFTER_S", 0.2)
    indexer, made = writer(tmp_path, interval_s=3600)
    fold = indexer.fold_tail
    ended: list[float] = []

    def slow_fold():
        fold()
        time.sleep(1.0)
        ended.append(time.monotonic())

    indexer.fold_tail = slow_fold
    trims: list[float] = []
    indexer._release = lambda: trims.append(time.monotonic())

    async def run() -> None:
        indexer.start()
        for at in range(0, 120, 40):
            await indexer.submit([m.path for m in made[at : at + 40]])
        deadline = time.monotonic() + 10
        while not (ended and trims and trims[-1] > ended[0]) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await indexer.close()

    asyncio.run(run())
    assert ended, "no fold ran"
    assert [t for t in trims if t > ended[0]], "no trim after the fold"
    assert not [t for t in trims if ended[0] - 0.9 < t < ended[0]], "a trim ran while the fold held memory"

"""The writer's two stages: a batch's rows land on their own thread while the next batch is read back and
embedded, and nothing a caller relies on changes. A real writer (:class:`Indexer`), LanceDB store and
memories source on a temporary board, keyword-only; the store's row write is slowed (it still runs) so
that the stages overlap on any machine."""

from __future__ import annotations

import asyncio
import threading
import time

from memoryd.core.indexer import Indexer
from memoryd.index.searcher import RWLock
from memoryd.index.store import IndexStore
from memoryd.kinds.memories.files import Memory, write_memory
from memoryd.kinds.memories.source import MemorySource

LAND_S = 0.15  # each row write takes at least this long


class SlowStore(IndexStore):
    """The real store; each upsert first waits :data:`LAND_S` and records when it ran."""

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.landed: list[tuple[float, float, frozenset[str]]] = []
        self.fail_ids: set[str] = set()

    def upsert(self, records, vectors, model) -> None:
        t0 = time.monotonic()
        time.sleep(LAND_S)
        if self.fail_ids & {r.id for r in records}:
            raise OSError("disk full (test)")
        super().upsert(records, vectors, model)
        self.landed.append((t0, time.monotonic(), frozenset(r.id for r in records)))


def writer(tmp_path, interval_s: float = 60.0) -> tuple[Indexer, SlowStore, MemorySource]:
    board = tmp_path / "board"
    board.mkdir()
    store = SlowStore(tmp_path / "index")
    view = MemorySource(board)
    indexer = Indexer(store, lambda: None, RWLock(), optimize_interval_s=interval_s, sources=[view])
    indexer.full_sync()
    return indexer, store, view


def notes(board, tag: str, n: int) -> list[Memory]:
    made = [Memory.new(f"{tag} note {k} about the zqstage release", tags=(tag,)) for k in range(n)]
    for m in made:
        write_memory(board, m)
    return made


def test_each_batch_answers_once_its_own_rows_are_in_the_store_and_batches_answer_in_order(tmp_path):
    indexer, store, view = writer(tmp_path)
    batches = [notes(view.board, f"b{k}", 5) for k in range(6)]
    prepared: list[tuple[float, float]] = []
    prepare = indexer._prepare

    def timed_prepare(work):
        t0 = time.monotonic()
        try:
            return prepare(work)
        finally:
            prepared.append((t0, time.monotonic()))

    indexer._prepare = timed_prepare

    async def run() -> list[tuple[int, set[str]]]:
        indexer.start()
        heard: list[tuple[int, set[str]]] = []

        def on_done(k: int, ids: list[str]):
            # what the store holds at the moment the caller hears back
            return lambda _f: heard.append((k, set(store.rows(ids, ("id",)))))

        futures = []
        for k, batch in enumerate(batches):
            fut = indexer.submit([m.path for m in batch])
            fut.add_done_callback(on_done(k, [m.id for m in batch]))
            futures.append(fut)
            while indexer._queue.taken < indexer._queue.seq:  # a batch of its own: taken before the next
                await asyncio.sleep(0.002)
        await asyncio.gather(*futures)
        await indexer.close()
        return heard

    heard = asyncio.run(run())
    assert [k for k, _ in heard] == list(range(len(batches)))
    for k, present in heard:
        assert present == {m.id for m in batches[k]}, f"batch {k} answered before its rows landed"
    # the stages overlapped: some batch was read back while an earlier one's rows were being written
    overlaps = [(p0, l0) for p0, p1 in prepared for l0, l1, _ in store.landed if l0 < p0 < l1]
    assert overlaps, f"no first stage ran during a landing: {prepared} {store.landed}"


def test_a_search_barrier_waits_for_every_batch_still_landing(tmp_path):
    indexer, store, view = writer(tmp_path)
    batches = [notes(view.board, f"c{k}", 4) for k in range(4)]

    async def run() -> set[str]:
        indexer.start()
        for batch in batches:
            indexer.submit([m.path for m in batch])
        await asyncio.sleep(LAND_S / 2)  # the first batch is landing, the others queued or embedding
        await indexer.barrier()
        present = set(store.rows([m.id for b in batches for m in b], ("id",)))
        await indexer.close()
        return present

    assert asyncio.run(run()) == {m.id for b in batches for m in b}


def test_an_edit_right_after_a_store_counts_as_an_update_so_the_old_text_is_purged(tmp_path):
    """The edit's first stage runs while the store's rows land; it must see them (wait for that landing),
    or it would count the memory as added and the replaced text would stay on disk."""
    indexer, store, view = writer(tmp_path)
    (first,) = notes(view.board, "d", 1)
    others = notes(view.board, "e", 3)
    edited = first.with_(tags=("d", "zqedited"))

    async def run() -> tuple[bool, set[str]]:
        indexer.start()
        stored = indexer.submit([first.path, *(m.path for m in others)])
        await asyncio.sleep(LAND_S / 3)  # its rows are landing now
        write_memory(view.board, edited, overwrite=True)
        updated = indexer.submit([first.path])
        await asyncio.gather(stored, updated)
        purge_due = indexer.purge_due
        text = store.rows([first.id], ("id", "text_main"))[first.id]["text_main"]
        await indexer.close()
        return purge_due, set(text.split())

    purge_due, terms = asyncio.run(run())
    assert "zqedited" in terms
    assert purge_due, "the edit was counted as a new record: the replaced text would stay on disk"


def test_a_delete_right_after_a_store_leaves_no_row(tmp_path):
    indexer, store, view = writer(tmp_path)
    made = notes(view.board, "f", 4)

    async def run() -> dict:
        indexer.start()
        stored = indexer.submit([m.path for m in made])
        await asyncio.sleep(LAND_S / 3)
        (view.board / made[0].path).unlink()
        deleted = indexer.submit([made[0].path])
        await asyncio.gather(stored, deleted)
        left = store.rows([m.id for m in made], ("id",))
        await indexer.close()
        return left

    assert set(asyncio.run(run())) == {m.id for m in made[1:]}


def test_a_failed_landing_fails_its_own_waiters_and_the_next_batches_still_land(tmp_path):
    indexer, store, view = writer(tmp_path)
    bad = notes(view.board, "g", 3)
    good = notes(view.board, "h", 3)
    store.fail_ids = {bad[0].id}

    async def run() -> tuple[BaseException | None, set[str]]:
        indexer.start()
        failing = indexer.submit([m.path for m in bad])
        await asyncio.sleep(LAND_S / 3)  # a batch of its own, landing now
        later = indexer.submit([m.path for m in good])
        results = await asyncio.gather(failing, later, return_exceptions=True)
        await indexer.barrier()
        present = set(store.rows([m.id for m in good], ("id",)))
        await indexer.close()
        return results[0] if isinstance(results[0], BaseException) else None, present

    error, present = asyncio.run(run())
    assert isinstance(error, OSError)
    assert present == {m.id for m in good}


def test_close_lands_every_batch_handed_over_and_stops_the_row_thread(tmp_path):
    indexer, store, view = writer(tmp_path)
    made = [notes(view.board, f"i{k}", 3) for k in range(3)]

    async def run() -> None:
        indexer.start()
        for batch in made:
            indexer.submit([m.path for m in batch])
        await asyncio.sleep(0.01)
        await indexer.close()

    asyncio.run(run())
    assert set(store.rows([m.id for b in made for m in b], ("id",))) == {m.id for b in made for m in b}
    assert not [t for t in threading.enumerate() if t.name.startswith("memoryd-rows")]


def test_single_writes_that_arrive_while_rows_land_land_together_in_fewer_writes(tmp_path):
    indexer, store, view = writer(tmp_path)
    singles = notes(view.board, "j", 12)

    async def run() -> int:
        indexer.start()
        futures = []
        for m in singles:  # each a batch of its own, read back while the rows before it land
            futures.append(indexer.submit([m.path]))
            while indexer._queue.taken < indexer._queue.seq:
                await asyncio.sleep(0.002)
        await asyncio.gather(*futures)
        present = len(store.rows([m.id for m in singles], ("id",)))
        await indexer.close()
        return present

    assert asyncio.run(run()) == len(singles)
    assert len(store.landed) <= len(singles) // 2, f"{len(store.landed)} LanceDB writes for {len(singles)}"


def test_maintenance_waits_while_a_client_writes_its_next_batch_after_each_answer(tmp_path):
    """A client that sends its next batch a moment after each answer leaves the queue empty for that
    moment: no gap in the stream, so the scheduled maintenance waits for the stream's end."""
    interval_s = 0.2
    indexer, store, view = writer(tmp_path, interval_s=interval_s)
    batches = [notes(view.board, f"k{n}", 3) for n in range(12)]

    async def run() -> tuple[float, float | None, float | None]:
        indexer.start()
        first = time.time()
        for batch in batches:
            await indexer.submit([m.path for m in batch])
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
    assert length > 5 * interval_s
    assert during is None, "maintenance ran in the moment between an answer and the next batch"
    assert after is not None and after < 2.0

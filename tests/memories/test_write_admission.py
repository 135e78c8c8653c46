"""The writer queue's flow control (:meth:`memoryd.core.writequeue.WriteQueue.admit`), step by step: when a
write answered before its index write may answer, given the work ahead of it and the text queued."""

from __future__ import annotations

import asyncio

BOUND, CHARS = 32, 16_000


def paths(tag: str, n: int) -> list[str]:
    return [f"memories/{tag}{k:03d}.md" for k in range(n)]


def test_a_batch_over_the_path_bound_answers_once_the_work_ahead_is_done_not_its_own():
    from memoryd.core.writequeue import WriteQueue

    async def run() -> None:
        q = WriteQueue()
        _, first = q.admit(paths("a", 50), 4_000, BOUND, CHARS)
        assert first.done()  # nothing ahead of it
        work, done = q.take()  # the writer embeds the first batch
        assert len(work.paths) == 50
        second_written, second = q.admit(paths("b", 50), 4_000, BOUND, CHARS)
        assert not second.done()  # 50 paths ahead
        q.note(paths("a", 50))  # the watcher's echo of the first batch's files counts for nothing
        q.release(done)
        await asyncio.sleep(0)
        assert second.done() and not second_written.done()  # answers; its own write is still to come
        assert q.barrier(writer_running=True).done() is False  # the next search waits for it

    asyncio.run(run())


def test_text_over_the_character_bound_waits_for_its_own_write_even_with_nothing_ahead():
    from memoryd.core.writequeue import WriteQueue

    async def run() -> None:
        q = WriteQueue()
        _, admitted = q.admit(paths("long", 1), CHARS + 1, BOUND, CHARS)
        assert not admitted.done()
        _, done = q.take()
        assert not admitted.done()  # being embedded: still its own text in the queue
        q.release(done)
        assert admitted.done()

    asyncio.run(run())


def test_single_writes_answer_at_once_while_within_the_bound_and_wait_past_it():
    from memoryd.core.writequeue import WriteQueue

    async def run() -> None:
        q = WriteQueue()
        answered = [q.admit(paths(f"s{k}x", 1), 100, BOUND, CHARS)[1].done() for k in range(BOUND + 3)]
        assert answered == [True] * (BOUND + 1) + [False, False]  # 32 ahead is within; 33 is not
        waiting = q._admissions[:]
        _, done = q.take()  # everything pending goes as one batch
        q.release(done)
        assert all(fut.done() for _, _, fut in waiting) and q.backlog == 0

    asyncio.run(run())


class Flag:
    """A write's readiness as :mod:`memoryd.core.ahead` reports it: its passages embedded or not."""

    def __init__(self) -> None:
        self.ready = False

    def __call__(self) -> bool:
        return self.ready


def test_writes_whose_passages_are_embedded_count_only_for_their_own_bound_while_the_writer_is_busy():
    from memoryd.core.writequeue import WriteQueue

    async def run() -> None:
        q = WriteQueue()
        flags = [Flag() for _ in range(7)]
        _, first = q.admit(paths("a", 50), 4_000, BOUND, CHARS, ready=flags[0], max_ready=120)
        assert first.done()
        work, done = q.take()  # the writer applies the first batch, then folds the tail: no release yet
        _, second = q.admit(paths("b", 50), 4_000, BOUND, CHARS, ready=flags[1], max_ready=120)
        assert not second.done()  # 50 paths ahead, not embedded
        flags[0].ready = True
        q.recheck()
        assert second.done()  # what is ahead of it is an append now
        _, third = q.admit(paths("c", 50), 4_000, BOUND, CHARS, ready=flags[2], max_ready=120)
        assert not third.done()  # the second batch is still being embedded
        flags[1].ready = True
        q.recheck()
        assert third.done()
        flags[2].ready = True
        _, fourth = q.admit(paths("d", 50), 4_000, BOUND, CHARS, ready=flags[3], max_ready=120)
        assert not fourth.done()  # 150 embedded paths ahead: over the bound on those
        q.release(done)  # the first batch is in the index: 100 embedded paths ahead now
        assert fourth.done()
        assert not q.barrier(writer_running=True).done()  # the next search still waits for them all

    asyncio.run(run())


def test_a_write_without_readiness_or_never_ready_waits_as_before():
    from memoryd.core.writequeue import WriteQueue

    async def run() -> None:
        q = WriteQueue()
        never = Flag()
        q.admit(paths("a", 50), 4_000, BOUND, CHARS, ready=never, max_ready=120)
        work, done = q.take()
        _, plain = q.admit(paths("b", 50), 4_000, BOUND, CHARS, max_ready=120)
        q.recheck()
        assert not plain.done()
        _, after = q.admit(paths("c", 1), 100, BOUND, CHARS, max_ready=120)
        assert not after.done()  # 100 paths ahead, none of them embedded
        q.release(done)
        assert plain.done()  # one path ahead of it now
        assert not after.done()  # the second batch's 50 paths, not embedded, are still ahead of it
        assert list(q._ready) == []  # the readiness of an applied write is dropped with it

    asyncio.run(run())


def test_a_read_barrier_waits_for_the_writes_answered_not_for_one_still_waiting_for_its_admission():
    """A search while another agent's batch of long texts waits for its own index write sees every write
    answered before it, without waiting for that batch's embedding; once the batch is answered, the next
    search waits for it."""
    from memoryd.core.writequeue import WriteQueue

    async def run() -> None:
        q = WriteQueue()
        answered_written, answered = q.admit(paths("a", 3), 300, BOUND, CHARS)
        assert answered.done()
        long_written, long_batch = q.admit(paths("long", 50), CHARS + 1, BOUND, CHARS)
        assert not long_batch.done()  # its own text is over the bound: it waits for its index write
        search = q.barrier(writer_running=True)
        assert not search.done()  # the answered write is not applied yet
        work, done = q.take()  # the writer takes what the search waits for first
        assert set(work.paths) == set(paths("a", 3))
        q.release(done)
        assert search.done() and not long_batch.done()
        work, done = q.take()  # then the long batch; a search now still does not wait for it
        assert q.barrier(writer_running=True).done()
        q.release(done)
        assert long_batch.done()
        later_written, later = q.admit(paths("b", 60), 600, BOUND, CHARS)
        assert later.done()  # nothing ahead
        assert not q.barrier(writer_running=True).done()  # answered, not applied: a search waits for it

    asyncio.run(run())

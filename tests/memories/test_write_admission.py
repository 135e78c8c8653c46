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
        assert all(fut.done() for _, fut in waiting) and q.backlog == 0

    asyncio.run(run())

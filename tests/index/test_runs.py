"""How an embedding call's texts are cut into runs and shared among threads (memoryd.index.runs)."""

from __future__ import annotations

import random
import threading
import time

import numpy as np
import pytest

from memoryd.index import runs


def _flat(shares):
    return [i for share in shares for run in share for i in run]


@pytest.mark.parametrize("threads", [1, 2, 3, 4])
@pytest.mark.parametrize("seed", range(5))
def test_every_text_is_in_exactly_one_run(threads, seed):
    rng = random.Random(seed)
    lengths = [rng.choice([3, 20, 38, 45, 120, 300, 512]) for _ in range(rng.randrange(1, 90))]
    shares = runs.plan(lengths, threads)
    assert sorted(_flat(shares)) == list(range(len(lengths)))
    assert 1 <= len(shares) <= threads
    for share in shares:
        for run in share:
            longest = max(lengths[i] for i in run)
            assert len(run) <= runs.BATCH_ROWS
            assert len(run) == 1 or len(run) * longest * longest <= runs.BATCH_CELLS


def _padded(lengths, share):
    return sum(len(run) * max(lengths[i] for i in run) for run in share)


def test_a_batch_of_short_notes_is_shared_evenly_between_two_threads():
    rng = random.Random(3)
    lengths = [rng.randrange(30, 48) for _ in range(50)]
    assert len(list(runs.runs(lengths))) < 4  # fewer runs than two per thread: they are cut in halves
    shares = runs.plan(lengths, 2)
    loads = [_padded(lengths, share) for share in shares]
    assert len(shares) == 2 and abs(loads[0] - loads[1]) <= 0.15 * max(loads), loads


def test_a_large_call_keeps_the_runs_of_one_thread():
    """Activations are quantised per run: a call of many runs (an index rebuild, an eval) gets the very
    runs, and so the very vectors, it would get on one thread, only dealt out among threads."""
    rng = random.Random(8)
    lengths = [rng.choice([rng.randrange(8, 90), rng.randrange(100, 512)]) for _ in range(256)]
    alone = sorted(sorted(run) for run in runs.runs(lengths))
    shares = runs.plan(lengths, 2)
    assert len(shares) == 2
    assert sorted(sorted(run) for share in shares for run in share) == alone
    loads = [_padded(lengths, share) for share in shares]
    assert abs(loads[0] - loads[1]) <= 0.1 * max(loads), loads


def test_small_calls_stay_on_one_thread():
    assert runs.plan([12], 4) == [[[0]]]
    assert len(runs.plan([40, 41, 39], 2)) == 1  # under PARALLEL_TOKENS
    assert len(runs.plan([200, 210], 2)) == 2  # one run, cut in two


def test_a_call_of_several_shares_runs_on_the_pools_threads_and_one_share_here():
    pool = runs.Pool(3)
    seen: dict[int, str] = {}
    pool.run([[[0], [1]], [[2]], [[3]]], lambda run: seen.update({run[0]: threading.current_thread().name}))
    assert sorted(seen) == [0, 1, 2, 3]
    assert all(name.startswith("memoryd-embed") for name in seen.values()), seen
    seen.clear()
    pool.run([[[0], [1]]], lambda run: seen.update({run[0]: threading.current_thread().name}))
    assert seen == {0: threading.current_thread().name, 1: threading.current_thread().name}


def test_an_error_in_any_run_is_raised_after_every_run_ended():
    pool = runs.Pool(2)
    done: list[int] = []

    def fn(run):
        if run[0] == 5:
            raise ValueError("bad run")
        done.append(run[0])

    with pytest.raises(ValueError, match="bad run"):
        pool.run([[[1], [2]], [[5], [6]]], fn)
    assert sorted(done) == [1, 2, 6]


def test_a_pool_shut_down_runs_every_run_on_the_calling_thread_and_leaves_none_queued():
    """At the interpreter's exit the pool takes no new task: a call then runs its runs itself, and no
    run is left in the queue for a later call's tasks to take instead of their own."""
    pool = runs.Pool(2)
    pool._executor.shutdown(wait=True)
    seen: dict[int, str] = {}
    pool.run([[[0], [1]], [[2]]], lambda run: seen.update({run[0]: threading.current_thread().name}))
    assert seen == dict.fromkeys([0, 1, 2], threading.current_thread().name)
    assert pool._heap == []


class Gates:
    """Runs that each wait for their own gate: the test, not the clock, says when a run ends."""

    def __init__(self) -> None:
        self.gates: dict[str, threading.Event] = {}
        self.started: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, run) -> None:
        name = run[0]
        with self._lock:
            self.started.append(name)
            gate = self.gates.setdefault(name, threading.Event())
        assert gate.wait(30), f"run {name} was never let go"

    def open(self, name: str) -> None:
        with self._lock:
            self.gates.setdefault(name, threading.Event()).set()

    def wait_started(self, *names: str) -> None:
        deadline = time.monotonic() + 30
        while not set(names) <= set(self.started):
            assert time.monotonic() < deadline, f"never started: {set(names) - set(self.started)}"
            time.sleep(0.001)


def call(pool: runs.Pool, shares, fn, first: bool = False) -> threading.Thread:
    thread = threading.Thread(target=pool.run, args=(shares, fn, first), daemon=True)
    thread.start()
    return thread


def test_a_thread_done_with_one_calls_runs_starts_the_next_calls_while_the_other_is_still_busy():
    """A stream of calls (batches embedded ahead): no thread waits for another's last run of a call."""
    pool, gates = runs.Pool(2), Gates()
    a = call(pool, [[["a-long"]], [["a-short"]]], gates)
    gates.wait_started("a-long", "a-short")
    b = call(pool, [[["b1"]], [["b2"]]], gates)
    gates.open("a-short")
    gates.wait_started("b1")  # on the thread a-short left, while a-long still runs
    assert "b2" not in gates.started and a.is_alive()
    gates.open("b1")
    gates.wait_started("b2")
    for name in ("a-long", "b2"):
        gates.open(name)
    a.join(30)
    b.join(30)
    assert not a.is_alive() and not b.is_alive()


def test_a_first_calls_runs_go_ahead_of_the_runs_queued_before_them():
    pool, gates = runs.Pool(2), Gates()
    a = call(pool, [[["a1"]], [["a2"]]], gates)
    gates.wait_started("a1", "a2")  # both threads busy
    b = call(pool, [[["b1"]], [["b2"]]], gates)
    time.sleep(0.05)
    w = call(pool, [[["w1"]], [["w2"]]], gates, first=True)  # the writer's, queued after b's
    time.sleep(0.05)
    gates.open("a1")
    gates.open("a2")
    gates.wait_started("w1", "w2")
    assert gates.started[2:4] == ["w1", "w2"], gates.started
    for name in ("w1", "w2", "b1", "b2"):
        gates.open(name)
    for t in (a, b, w):
        t.join(30)
        assert not t.is_alive()
    assert gates.started[4:] == ["b1", "b2"]


def test_a_pool_of_one_runs_every_share_here():
    pool = runs.Pool(1)
    seen = []
    pool.run([[[0]], [[1]]], lambda run: seen.append((run[0], threading.current_thread().name)))
    assert seen == [(0, threading.current_thread().name), (1, threading.current_thread().name)]


def test_the_embedder_shares_a_batch_among_its_threads_and_matches_one_thread(embedder):
    """The vectors of a call shared among threads are those of the same runs on one thread."""
    texts = [f"note {n}: the deploy of service {n % 7} failed on the migration lock" for n in range(40)]
    ids = [embedder._token_ids(embedder._config.passage_prefix + t) for t in texts]
    assert len(runs.plan([len(r) for r in ids], 2)) == 2
    names: set[str] = set()
    real_run = embedder._run

    def spy(rows, shrink=None):
        names.add(threading.current_thread().name)
        return real_run(rows, shrink)

    embedder._run, pool = spy, embedder._pool
    try:
        embedder._pool = runs.Pool(2)
        shared = embedder.embed_passages(texts)
        assert len(names) == 2
        serial = np.empty_like(shared)
        for share in runs.plan([len(r) for r in ids], 2):
            for run in share:
                serial[run] = real_run([ids[i] for i in run])
    finally:
        embedder._run, embedder._pool = real_run, pool
    np.testing.assert_allclose(shared, serial, atol=1e-6)

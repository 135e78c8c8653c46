"""How one embedding call's texts reach the model: grouped by length into runs, run side by side.

A *run* is one call of the onnxruntime session: texts of similar length padded to the longest.
:func:`plan` deals a call's runs out to ``workers`` threads so that each gets about the same padded
tokens; :class:`Pool` runs them at once on its threads, from one queue that every call shares (a call of
one share stays on the calling thread). Each run keeps to its thread (the session has one intra-op
thread), so a lone run (a query, one long text) uses one core.

Why: the runs of a batch ran one after another, and within each the cores met at the end of every operator
(hundreds per run), waiting for the slowest. Side by side, each thread runs its own operators and the
threads meet once per call. In-process, batches of 50 notes of ~38 tokens on 2 cores
(``bench/embed_contention.py``, 3 rounds): 112 notes/s against 102 one run after another, one long text
65 against 73 ms, a query 7.7-10 against 10.9 ms; with another thread beside them using 200 ms of CPU per
batch, 82 against 80 notes/s. (Those runs still shared onnxruntime's intra-op threads. Without them, on a
CPU with VNNI: 404 against 339 notes/s alone, 251 against 240 beside that thread; a query 2.4 against
3.2 ms; one text of 512 tokens 110 against 72 ms.)
"""

from __future__ import annotations

import heapq
import itertools
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

BATCH_ROWS = 32
# rows * seq^2 cap of a run: its attention scores (x 12 heads x 4 bytes) stay under ~50 MB (one such run per
# thread at once; a smaller cap in parallel would change the runs of long texts, and so their vectors)
BATCH_CELLS = 1 << 20
# a longer text joins a run only if the padding it adds to the others costs at most this many tokens
PAD_SLACK = 64
# below this many tokens a call stays on one thread: handing a share to another costs more than it saves
PARALLEL_TOKENS = 256


def workers() -> int:
    """Threads an embedding call may use: the cores this process may run on, at most 4."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS has no affinity call
        cores = os.cpu_count() or 1
    return max(1, min(cores, 4))


def runs(lengths: list[int]) -> Iterator[list[int]]:
    """Indices of ``lengths`` grouped into runs: sorted by length, so a run holds similar lengths and little
    padding; at most :data:`BATCH_ROWS` rows and :data:`BATCH_CELLS` rows x longest^2."""
    batch: list[int] = []
    longest = 0
    for i in sorted(range(len(lengths)), key=lengths.__getitem__):
        n = lengths[i]
        fits = len(batch) < BATCH_ROWS and (len(batch) + 1) * n * n <= BATCH_CELLS
        if batch and not (fits and len(batch) * (n - longest) <= PAD_SLACK):
            yield batch
            batch = []
        batch.append(i)
        longest = n
    if batch:
        yield batch


def plan(lengths: list[int], threads: int) -> list[list[list[int]]]:
    """Per thread, its runs (lists of indices into ``lengths``, token counts per text); the first share is
    the calling thread's.

    One share when ``threads`` is 1 or the call holds fewer than :data:`PARALLEL_TOKENS` tokens. Otherwise
    the call's runs are dealt out longest first, each to the share with the fewest padded tokens so far.
    A call of fewer than two runs per thread (a batch of 50 notes is 2) first cuts each run in two, so the
    threads get equal halves. A larger call keeps its runs whole: the same runs, and so the same vectors,
    as on one thread (activations are quantised per run).
    """
    total = sum(lengths)
    if threads <= 1 or len(lengths) < 2 or total < PARALLEL_TOKENS:
        return [list(runs(lengths))]
    pieces = list(runs(lengths))
    if len(pieces) < 2 * threads:
        pieces = [
            half
            for run in pieces
            for half in (run[: (len(run) + 1) // 2], run[(len(run) + 1) // 2 :])
            if half
        ]

    def padded(run: list[int]) -> int:
        return len(run) * max(lengths[i] for i in run)

    shares: list[list[list[int]]] = [[] for _ in range(min(threads, len(pieces)))]
    load = [0] * len(shares)
    for run in sorted(pieces, key=padded, reverse=True):
        least = load.index(min(load))
        shares[least].append(run)
        load[least] += padded(run)
    return shares


class Pool:
    """Threads that run embedding calls' runs from one queue (``threads`` of them, started on first use;
    none when ``threads`` is 1). Closed when garbage-collected.

    A call's runs are queued and each free thread takes the next one, from whichever call queued it: in a
    stream of batches (several calls pending), a thread that finishes the last run of one call starts on
    the next call's at once, instead of idling until the other thread's last run ends. A ``first`` call's
    runs go ahead of every queued run of calls that are not (the writer's: a write waits on it)."""

    def __init__(self, threads: int) -> None:
        self.threads = max(1, threads)
        self._executor = None
        self._lock = threading.Lock()
        self._heap: list = []  # (rank, order, run, fn, job)
        self._order = itertools.count()
        if self.threads > 1:
            self._executor = ThreadPoolExecutor(self.threads, thread_name_prefix="memoryd-embed")
            weakref.finalize(self, self._executor.shutdown, wait=False)

    def run(
        self, shares: list[list[list[int]]], fn: Callable[[list[int]], None], first: bool = False
    ) -> None:
        """Call ``fn(run)`` for every run of ``shares``: on this thread when there is one share, else on the
        pool's threads (``first``: before the queued runs of calls that are not). Returns when all are
        done; re-raises the first error."""
        if self._executor is None or len(shares) < 2:
            for share in shares:
                _each(share, fn)
            return
        # the shares' runs in turn: each share is dealt longest first, so the queue is about that too
        order = [share[k] for k in range(max(map(len, shares))) for share in shares if k < len(share)]
        job = _Job(len(order))
        rank = 0 if first else 1
        with self._lock:
            for run in order:
                heapq.heappush(self._heap, (rank, next(self._order), run, fn, job))
        for _ in order:  # one task per run queued; each takes whichever run is first when it starts
            try:
                self._executor.submit(self._next)
            except RuntimeError:  # the pool is shut down (the interpreter exiting): run one here instead
                self._next()
        job.done.wait()
        if job.error is not None:
            raise job.error

    def _next(self) -> None:
        with self._lock:
            _, _, run, fn, job = heapq.heappop(self._heap)
        error = None
        try:
            fn(run)
        except BaseException as exc:  # the caller's to raise
            error = exc
        with self._lock:
            if error is not None and job.error is None:
                job.error = error
            job.left -= 1
            if not job.left:
                job.done.set()


class _Job:
    """One call's runs not done yet, and its first error."""

    __slots__ = ("left", "error", "done")

    def __init__(self, left: int) -> None:
        self.left = left
        self.error: BaseException | None = None
        self.done = threading.Event()


def _each(share: list[list[int]], fn: Callable[[list[int]], None]) -> None:
    for run in share:
        fn(run)

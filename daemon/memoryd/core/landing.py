"""The writer's second stage: each batch's row writes run on a thread of their own, in order.

The writer (:class:`memoryd.core.indexer.Indexer`) reads a batch's files back, derives its records and
embeds them (stage one), then hands the row writes (LanceDB's append, the keyword tail, the in-memory
columns, the deletes) here and goes on to the next batch's stage one while they run: on 2 cores the
model's next batch fills the time LanceDB spends waiting on its own threads and the disk. What it keeps:

* order: one thread, so batches land in the order they were handed over (a later batch's rows never
  land before an earlier one's);
* reads of what is stored: a batch whose stage one needs the stored state of an id still landing (its
  hashes decide what is new, updated or unchanged, and whether a vector is reused) waits for that
  landing first (:meth:`Landing.wait_for`), so its counts and its purge flag are exact;
* the read barrier: the writer resolves a batch's waiters, and releases its place in the queue, only
  once its rows have landed (:meth:`memoryd.core.indexer.Indexer`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Collection
from concurrent.futures import Future, ThreadPoolExecutor


class Landing:
    """One thread that writes rows, and the ids of the batches it has not finished yet."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None  # started by the first write
        self._lock = threading.Lock()
        self._unlanded: list[tuple[Future, frozenset[str]]] = []

    def submit(self, write: Callable[[], None], ids: Collection[str]) -> Future:
        """Run ``write`` after every write submitted before it; ``ids``: the record ids it writes or
        deletes. The future carries its exception."""
        with self._lock:
            self._unlanded = [(f, own) for f, own in self._unlanded if not f.done()]
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memoryd-rows")
            fut = self._pool.submit(write)
            self._unlanded.append((fut, frozenset(ids)))
        return fut

    def wait_for(self, ids: Collection[str]) -> None:
        """Block until no write still running or queued touches any of ``ids`` (their failures are the
        writer's to report, not this caller's). Called from the writer's worker thread."""
        ids = set(ids)
        with self._lock:
            overlapping = [f for f, own in self._unlanded if not f.done() and not own.isdisjoint(ids)]
        for fut in overlapping:
            with contextlib.suppress(Exception):
                fut.result()

    def busy(self) -> bool:
        """Whether a write is running or queued."""
        with self._lock:
            return any(not f.done() for f, _ in self._unlanded)

    def close(self) -> None:
        """Finish the writes handed over, then stop the thread (a later write starts another)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

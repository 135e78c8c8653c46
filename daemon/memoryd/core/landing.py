"""The writer's second stage: batches' row writes on a thread of their own, in order, grouped.

The writer (:class:`memoryd.core.indexer.Indexer`) reads a batch's files back, derives its records and
embeds them (stage one), then hands the row writes (LanceDB's append, the keyword tail, the in-memory
columns, the deletes) here and goes on to the next batch's stage one while they run: on 2 cores the
model's next batch fills the time LanceDB spends waiting on its own threads and the disk. What it keeps:

* order: one thread, so batches land in the order they were handed over (a later batch's rows never
  land before an earlier one's);
* few LanceDB writes: the batches waiting when the thread gets to them land as one write (each write
  adds a fragment and a version, and what maintenance costs grows with both), so single stores
  trickling in while rows land do not each become a write of their own;
* reads of what is stored: a batch whose stage one needs the stored state of an id still landing (its
  hashes decide what is new, updated or unchanged, and whether a vector is reused) waits for that
  landing first (:meth:`Landing.wait_for`), so its counts and its purge flag are exact; batches that
  land together therefore never share an id;
* the read barrier: the writer resolves a batch's waiters, and releases its place in the queue, only
  once its rows have landed.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import Future
from typing import Any

#: Batches landed in one write at most (a bound on one write's size and on what one failure fails).
GROUP_MAX = 64


class Landing:
    """One thread that lands what is handed over, and the ids of what it has not landed yet.

    ``land``: called on that thread with the items of one or more :meth:`submit` calls, oldest first;
    it writes them all or raises (then every one of them carries the exception)."""

    def __init__(self, land: Callable[[Sequence[Any]], None]) -> None:
        self._land = land
        self._cond = threading.Condition()
        self._queue: list[tuple[Any, Future]] = []
        self._unlanded: list[tuple[Future, frozenset[str]]] = []
        self._thread: threading.Thread | None = None  # started by the first submit
        self._closing = False

    def submit(self, item: Any, ids: Collection[str]) -> Future:
        """Land ``item`` after every item submitted before it; ``ids``: the record ids it writes or
        deletes. The future carries its exception."""
        fut: Future = Future()
        with self._cond:
            self._unlanded = [(f, own) for f, own in self._unlanded if not f.done()]
            self._unlanded.append((fut, frozenset(ids)))
            self._queue.append((item, fut))
            if self._thread is None:
                self._closing = False
                self._thread = threading.Thread(target=self._run, name="memoryd-rows", daemon=True)
                self._thread.start()
            self._cond.notify()
        return fut

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait()
                if not self._queue:  # closing, nothing left
                    self._thread = None
                    return
                group, self._queue = self._queue[:GROUP_MAX], self._queue[GROUP_MAX:]
            try:
                self._land([item for item, _ in group])
            except BaseException as exc:  # every item of the write failed with it
                for _, fut in group:
                    fut.set_exception(exc)
            else:
                for _, fut in group:
                    fut.set_result(None)

    def wait_for(self, ids: Collection[str]) -> None:
        """Block until no item still queued or landing touches any of ``ids`` (their failures are the
        writer's to report, not this caller's). Called from the writer's worker thread."""
        ids = set(ids)
        with self._cond:
            overlapping = [f for f, own in self._unlanded if not f.done() and not own.isdisjoint(ids)]
        for fut in overlapping:
            with contextlib.suppress(Exception):
                fut.result()

    def close(self) -> None:
        """Land what was handed over, then stop the thread (a later submit starts another)."""
        with self._cond:
            thread, self._closing = self._thread, True
            self._cond.notify()
        if thread is not None:
            thread.join()

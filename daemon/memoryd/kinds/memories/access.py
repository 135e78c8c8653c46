"""``accessed_at``: updated whenever a memory is returned, written to its file lazily and coarsely.

memdb stamps ``accessed_at`` on every read. memoryd shows the new time in the answer at once (kept in
memory, :meth:`AccessTimes.shown`) but rewrites a memory's file at most once per :data:`PERSIST_S`, in
the background :data:`DELAY_S` after the access and never on the answer's path: a search returning 100
memories must not become 100 synchronous file writes (each also an event for the watcher). Pending times
are written at daemon shutdown, so at most the last :data:`PERSIST_S` of access times can be lost to a
crash; the answers of a running daemon are always current.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterable

from memoryd.kinds.memories.files import Memory, utc_now

DELAY_S = 2.0
PERSIST_S = 60.0


class AccessTimes:
    """Latest access time per memory id; ``write({id: iso})`` persists (the API's locked board write)."""

    def __init__(self, write: Callable[[dict[str, str]], Awaitable[None]]) -> None:
        self._write = write
        self._latest: dict[str, str] = {}
        self._dirty: set[str] = set()
        self._written: dict[str, float] = {}  # id -> time.monotonic() of its last file write
        self._since: dict[str, float] = {}  # dirty id -> time.monotonic() of its first unwritten access
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None

    def shown(self, memory: Memory) -> Memory:
        """``memory`` with its latest access time (what answers show)."""
        at = self._latest.get(memory.id)
        return memory.with_(accessed_at=at) if at and at > memory.accessed_at else memory

    def touch(self, ids: Iterable[str]) -> None:
        """Mark memories as accessed now; schedules the file writes."""
        now, mono = utc_now(), time.monotonic()
        for mid in ids:
            self._latest[mid] = now
            self._dirty.add(mid)
            self._since.setdefault(mid, mono)
        if not self._dirty:
            return
        if self._task is None or self._task.done():
            with contextlib.suppress(RuntimeError):  # no running loop: written at close()
                self._task = asyncio.get_running_loop().create_task(self._run(), name="memoryd-accessed-at")
        else:
            self._wake.set()  # a sleeping writer may be waiting a minute on other memories

    def forget(self, ids: Iterable[str]) -> None:
        """Drop deleted or moved memories."""
        for mid in ids:
            self._latest.pop(mid, None)
            self._dirty.discard(mid)
            self._written.pop(mid, None)
            self._since.pop(mid, None)

    def _due(self, mid: str) -> float:
        """When ``mid``'s file may be written: DELAY_S after its access, PERSIST_S after its last write."""
        return max(self._since.get(mid, 0.0) + DELAY_S, self._written.get(mid, -PERSIST_S) + PERSIST_S)

    async def _run(self) -> None:
        while self._dirty:
            wait = min(self._due(m) for m in self._dirty) - time.monotonic()
            if wait > 0:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=wait)
                continue
            now = time.monotonic()
            await self._flush([m for m in self._dirty if self._due(m) <= now])

    async def _flush(self, ids: Iterable[str]) -> None:
        batch = {m: self._latest[m] for m in ids if m in self._latest}
        for m in batch:
            self._dirty.discard(m)
            self._since.pop(m, None)
            self._written[m] = time.monotonic()
        if batch:
            await self._write(batch)

    async def close(self) -> None:
        """Write every pending time now (daemon shutdown)."""
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._flush(list(self._dirty))

"""What the index has just applied, for whoever shows the board live (the page's server-sent events).

The indexer (the one writer) publishes one :class:`Applied` after each batch of board changes it has
written to the index: an outcome saved, a memory stored or deleted, a note line removed by hand, a
rescan. A change is published only once it is searchable, so a listener that re-reads on an event sees
it. Listeners are asyncio queues on the event loop; a slow listener loses old events, never blocks the
writer (each queue keeps the newest :data:`QUEUE_SIZE`; any one event means "read again").
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

#: Events kept per listener that has not read them yet; older ones are dropped (any event means "re-read").
QUEUE_SIZE = 16


@dataclass(frozen=True)
class Applied:
    """One batch the index applied. ``seq``: 1, 2, ... per process; ``folders``: top-level board folders
    touched (``"briefs"``, ``"tasks"``, ``"memories"``, ``"sessions"``); ``rescan``: the whole board was
    re-read; ``at``: ``time.time()``."""

    seq: int
    folders: tuple[str, ...]
    briefs: tuple[str, ...] = ()
    rescan: bool = False
    at: float = field(default_factory=time.time)

    def as_dict(self) -> dict:
        return {
            "seq": self.seq,
            "folders": list(self.folders),
            "briefs": list(self.briefs),
            "rescan": self.rescan,
            "at": round(self.at, 3),
        }


class ChangeFeed:
    """Publish (the indexer, on the event loop) and subscribe (any number of listeners). After
    :meth:`close` every listener receives ``None``: the feed has ended (the engine is shutting down)."""

    def __init__(self) -> None:
        self.seq = 0
        self.closed = False
        self._listeners: set[asyncio.Queue[Applied | None]] = set()

    def publish(
        self,
        *,
        briefs: Iterable[str] = (),
        tasks: Iterable[str] = (),
        paths: Iterable[str] = (),
        rescan: bool = False,
    ) -> Applied:
        """Tell every listener; call from the event loop thread. Returns the event."""
        paths = sorted(paths)
        # a path under briefs/ names its brief: ``briefs/<id>[/file]``
        briefs = sorted({*briefs, *(p.split("/")[1] for p in paths if p.startswith("briefs/"))})
        tasks = sorted(tasks)
        folders = {p.split("/", 1)[0] for p in paths}
        if briefs:
            folders.add("briefs")
        if tasks:
            folders.add("tasks")
        self.seq += 1
        event = Applied(self.seq, tuple(sorted(folders)), tuple(briefs), rescan)
        self._tell(event)
        return event

    def close(self) -> None:
        """End the feed: every listener, present and future, receives ``None``."""
        self.closed = True
        self._tell(None)

    def _tell(self, event: Applied | None) -> None:
        for queue in list(self._listeners):
            if queue.full():
                with contextlib.suppress(asyncio.QueueEmpty):
                    queue.get_nowait()
            queue.put_nowait(event)

    @contextlib.contextmanager
    def subscribe(self) -> Iterator[asyncio.Queue[Applied | None]]:
        """A queue that receives every event published while the ``with`` block runs (``None``: ended)."""
        queue: asyncio.Queue[Applied | None] = asyncio.Queue(QUEUE_SIZE)
        if self.closed:
            queue.put_nowait(None)
        self._listeners.add(queue)
        try:
            yield queue
        finally:
            self._listeners.discard(queue)

    @property
    def listeners(self) -> int:
        """How many subscribers are listening now."""
        return len(self._listeners)

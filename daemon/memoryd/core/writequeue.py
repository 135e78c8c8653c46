"""The one writer's edges: what comes in (the queue, the read barriers) and what goes out (the change feed).

*In.* Changes are numbered as they are submitted, and read barriers wait on them. Writes are acknowledged
before they are indexed (the board file is the truth), so a read that must see them asks for a barrier: a
future resolved once every change submitted before it is applied, and only those (not the last writes
still waiting for their admission: their callers have not been answered yet). :meth:`WriteQueue.take`
cuts the next batch at the oldest waiting barrier, so a stream of later saves never holds a search back,
and otherwise takes everything (a burst of saves is one write).

Changes the watcher reports count for no barrier of their own (a large rescan must not stall searches):
numbered just after the last submission, one joins the batch of the next acknowledged write, or any
batch when no search waits, so neither side can starve the other.

Admissions (:meth:`WriteQueue.admit`) are the flow control of writes answered before their index write:
one may answer while the work ahead of it (other paths queued or being applied) and the text queued
(its own included) are within bounds, re-checked each time the writer finishes a batch. So a write of
more paths than the bound still answers as soon as the work before it is done, and the next one's file
writes overlap its embedding; the next search waits for at most the bound plus the last write's own
paths, and for at most the text bound. A write whose passages are already embedded (its ``ready``
says so: :mod:`memoryd.core.ahead`) counts for neither bound, only for a third, on such paths
(re-checked when one turns ready, :meth:`WriteQueue.recheck`): what it leaves the next search is an
append, so while the writer folds the keyword tail the next writes keep the model busy. Runs on the
event loop's thread.

*Out.* What the index has just applied, for whoever shows the board live (the page's server-sent events).
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
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

#: A number after every submission: a path's or a rescan's, when none is pending.
UNORDERED = float("inf")
#: Events kept per listener that has not read them yet; older ones are dropped (any event means "re-read").
QUEUE_SIZE = 16


@dataclass
class Pending:
    """Work gathered while the writer was busy; merged so a burst of saves is one write.

    ``seqs``: each path's first submission number; ``rescan_seq`` likewise for a rescan; ``waiters``:
    ``(seq, future)`` resolved when that work is in the index."""

    paths: set[str] = field(default_factory=set)  # board-relative, under a record source's folder
    rescan: bool = False
    purge: bool = False
    waiters: list[tuple[float, asyncio.Future]] = field(default_factory=list)
    seqs: dict[str, float] = field(default_factory=dict)
    rescan_seq: float = UNORDERED

    def __bool__(self) -> bool:
        return bool(self.paths or self.rescan or self.purge)

    def add(self, seq: float, paths=(), rescan: bool = False, purge: bool = False) -> None:
        for p in paths:
            self.paths.add(p)
            self.seqs[p] = min(seq, self.seqs.get(p, UNORDERED))
        if rescan:
            self.rescan = True
            self.rescan_seq = min(seq, self.rescan_seq)
        self.purge |= purge

    def split(self, cut: float) -> Pending:
        """Take the work submitted up to ``cut``; the rest stays here. A path submitted before and after
        ``cut`` is taken: its file is read when the batch runs, so it carries the later change too. (A
        rescan among it reads the whole board: :meth:`WriteQueue.take` takes everything then.)"""
        taken = Pending()
        for p in [p for p in self.paths if self.seqs.get(p, UNORDERED) <= cut]:
            taken.add(self.seqs.pop(p), [p])
            self.paths.discard(p)
        taken.waiters = [w for w in self.waiters if w[0] <= cut]
        self.waiters = [w for w in self.waiters if w[0] > cut]
        return taken


def _submitted(work: Pending) -> set[str]:
    """The paths of ``work`` some write submitted; the watcher's notes (often the echo of those very
    writes, a moment later) count for no admission, as for no barrier."""
    return {p for p in work.paths if float(work.seqs.get(p, UNORDERED)).is_integer()}


class WriteQueue:
    """Pending work, the number of the last submission (:attr:`seq`) and of the last applied one."""

    def __init__(self) -> None:
        self.pending = Pending()
        self.seq = 0  # the last submission a barrier counts
        self.done = 0  # every submission numbered up to this is applied (or failed and was logged)
        self.last_submit_at = 0.0  # time.monotonic() of the last submission
        self.in_flight = 0  # paths in the batch the writer is applying
        self._flying: set[str] = set()  # those some write submitted
        self._admissions: list[tuple[int, frozenset[str], asyncio.Future]] = []
        self._bounds = (0, 0, 0)  # (paths ahead, characters, embedded paths) an admission answers within
        self._chars: dict[int, int] = {}  # submission -> characters of text it queued (admitted writes)
        self._ready: dict[int, tuple[frozenset[str], Callable[[], bool]]] = {}  # submission -> its readiness
        self._barriers: list[tuple[int, asyncio.Future]] = []

    @property
    def backlog(self) -> int:
        """Paths queued or being applied: what the next search may have to wait for."""
        return len(self.pending.paths) + self.in_flight

    @property
    def writes_waiting(self) -> bool:
        """Whether a write some caller submitted is queued (the watcher's notes do not count)."""
        return bool(_submitted(self.pending))

    @property
    def backlog_chars(self) -> int:
        """Characters of text queued or being applied by admitted writes: the embedding work they hold."""
        return sum(self._chars.values())

    def submit(self, paths=(), rescan: bool = False, purge: bool = False, chars: int = 0) -> asyncio.Future:
        """Number and queue a change (``chars``: the text it brings, counted in :attr:`backlog_chars`
        until it is applied); the future resolves once the writer has applied it (or carries the
        writer's exception)."""
        fut = asyncio.get_running_loop().create_future()
        self.seq += 1
        self.last_submit_at = time.monotonic()
        if chars:
            self._chars[self.seq] = chars
        self.pending.add(self.seq, paths, rescan, purge)
        self.pending.waiters.append((self.seq, fut))
        return fut

    def admit(
        self,
        paths,
        chars: int,
        max_ahead: int,
        max_chars: int,
        ready: Callable[[], bool] | None = None,
        max_ready: int = 0,
    ) -> tuple[asyncio.Future, asyncio.Future]:
        """:meth:`submit` ``paths`` (bringing ``chars`` characters), and a second future saying when the
        write may answer: once at most ``max_ahead`` other paths are queued or being applied and at most
        ``max_chars`` characters of admitted text (these included) are, not counting the other writes
        whose ``ready()`` is true (their passages embedded), of whose paths at most ``max_ready`` may be ahead;
        checked now, after every applied batch and at :meth:`recheck`; or once these paths are applied.
        The caller awaits the second; the first resolves (or fails) with the index write, as
        :meth:`submit`'s does."""
        own = frozenset(paths)
        written = self.submit(own, chars=chars)
        if ready is not None:
            self._ready[self.seq] = (own, ready)
        admitted = asyncio.get_running_loop().create_future()
        self._bounds = (max_ahead, max_chars, max_ready)
        if self._fits(self.seq, own):
            admitted.set_result(None)
        else:
            self._admissions.append((self.seq, own, admitted))

        def settle(fut: asyncio.Future) -> None:
            if not admitted.done():
                admitted.set_result(None)

        written.add_done_callback(settle)
        return written, admitted

    def _fits(self, seq: int, own: frozenset[str]) -> bool:
        """Whether submission ``seq`` (its paths ``own``) may answer: its own text always counts."""
        max_ahead, max_chars, max_ready = self._bounds
        embedded: set[str] = set()
        embedded_chars = 0
        for other, (paths, ready) in self._ready.items():
            if other != seq and ready():
                embedded |= paths
                embedded_chars += self._chars.get(other, 0)
        embedded -= own
        ahead = len((_submitted(self.pending) | self._flying) - own - embedded)
        return (
            ahead <= max_ahead
            and self.backlog_chars - embedded_chars <= max_chars
            and len(embedded) <= max_ready
        )

    def note(self, paths=(), rescan: bool = False) -> None:
        """Queue a watcher's change: no future, no barrier of its own (see the module docstring)."""
        self.pending.add(self.seq + 0.5, paths, rescan)

    def barrier(self, writer_running: bool) -> asyncio.Future:
        """A future resolved once every submission made before this call is applied, but for the latest
        admissions still waiting to answer (:meth:`acknowledged`); already resolved when none is
        outstanding (or no writer runs to apply it)."""
        fut = asyncio.get_running_loop().create_future()
        upto = self.acknowledged()
        if self.done >= upto or not writer_running:
            fut.set_result(None)
        else:
            self._barriers.append((upto, fut))
        return fut

    def acknowledged(self) -> int:
        """The last submission whose caller may have been answered: every one but the admissions
        submitted last and still waiting to answer. A read need not see those (their callers have not
        been told they are stored), and waiting for them would hold it for their whole embedding: a
        search while another agent's batch of long texts waits for its own index write."""
        waiting = {seq for seq, _, fut in self._admissions if not fut.done()}
        upto = self.seq
        while upto in waiting:
            upto -= 1
        return upto

    def take(self) -> tuple[Pending, int]:
        """The next batch, and the number up to which it completes the submissions; what it leaves
        stays pending (:attr:`pending` is then non-empty)."""
        cut = min((seq for seq, _ in self._barriers), default=self.seq)
        pending = self.pending
        if cut >= self.seq or (pending.rescan and pending.rescan_seq <= cut):
            self.pending, work, done = Pending(), pending, self.seq
        else:
            work, done = pending.split(cut), cut
        self.in_flight = len(work.paths)
        self._flying = _submitted(work)
        return work, done

    def release(self, done: int) -> None:
        """Every submission numbered up to ``done`` is applied: resolve the barriers waiting for them."""
        self.done = max(self.done, done)
        self.in_flight = 0
        self._flying = set()
        for seq in [n for n in self._chars if n <= self.done]:
            del self._chars[seq]
        for seq in [n for n in self._ready if n <= self.done]:
            del self._ready[seq]
        self.recheck()
        waiting = []
        for seq, fut in self._barriers:
            if seq > self.done:
                waiting.append((seq, fut))
            elif not fut.done():
                fut.set_result(None)
        self._barriers = waiting

    def recheck(self) -> None:
        """Answer the admissions now within bounds (a write's passages were just embedded)."""
        waiting_admissions = []
        for seq, own, fut in self._admissions:
            if fut.done():
                continue
            if self._fits(seq, own):
                fut.set_result(None)
            else:
                waiting_admissions.append((seq, own, fut))
        self._admissions = waiting_admissions


# -- what goes out: the change feed ------------------------------------------------------------------


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

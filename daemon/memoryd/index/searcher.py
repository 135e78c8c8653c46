"""The one search every kind asks: the hybrid search over the live index, under its read lock (:class:`RWLock`).

:class:`Searcher` holds what a query needs: the store (set once the index is open), the embedder (set once
the model is warm; until then queries run keyword-only and say so), the readers-writer lock that keeps
maintenance from deleting files a query still reads, and the read barrier (set once the writer runs):
writes are acknowledged before they are indexed, so every query first waits for those acknowledged
before it began (:meth:`memoryd.core.indexer.Indexer.barrier`; free when none is outstanding).
Briefs, memories and sessions are handed the same searcher; none of them sees the engine.

:class:`SearchQuery` is what one search asks for, as data: built once by its caller (a tool, the page,
capture, eval) and handed unchanged to :func:`memoryd.index.search.search`, which turns its filters into
the store's :class:`memoryd.index.columns.Filter`. This module loads the index library only at the first
search, so the tool modules build queries before the index is open.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memoryd.index.ranking import Ranking
    from memoryd.index.search import SearchResult


@dataclass(frozen=True)
class SearchQuery:
    """One search. ``text`` is plain user text, never query syntax.

    ``project``, ``kind`` and ``status`` are what every result must equal (None or empty: any); ``scope``
    is a second project filter (``eval --scope prefix``). ``limit`` is clamped to 1–100. ``ranking``: a
    profile other than ``kind``'s own (memories use theirs). ``as_of`` anchors relative dates ("last
    week"; None: now, UTC). ``group_by_task``: briefs vote for their task. ``reasons``: each hit carries
    its :class:`memoryd.index.search.Why`, with the query's words found in its text. ``ids``: only these
    records may be returned (None: any; empty: none), applied in the index before ranking.
    """

    text: str
    project: str | None = None
    kind: str | None = None
    status: str | None = None
    scope: str | None = None
    limit: int = 10
    ranking: Ranking | None = None
    as_of: datetime | None = None
    group_by_task: bool = True
    reasons: bool = False
    ids: frozenset[str] | None = None


class RWLock:
    """A small readers-writer lock: many searches at once, index maintenance alone.

    LanceDB's compaction + old-version cleanup deletes files a query that started earlier may still read;
    searches hold the shared side, :meth:`IndexStore.optimize` runs under the exclusive side. Writers are
    preferred so a steady stream of searches cannot starve maintenance.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False
        self._waiting_writers = 0

    @contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            while self._writer or self._waiting_writers:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if not self._readers:
                    self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._waiting_writers += 1
            while self._writer or self._readers:
                self._cond.wait()
            self._waiting_writers -= 1
            self._writer = True
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()


class Searcher:
    """``await searcher.search(SearchQuery(text, project=, kind=, ...)) -> SearchResult``.

    ``guard()`` runs before every query and raises when the board behind the index cannot be read (an empty
    answer must never stand for "no history"). Raises ``RuntimeError`` before :attr:`store` is set.
    """

    def __init__(self, lock: RWLock, guard: Callable[[], None] | None = None) -> None:
        self.lock = lock
        self.store: Any = None  #: the open :class:`memoryd.index.store.IndexStore`
        self.embedder: Any = None  #: the warm model, or None (keyword-only)
        #: ``barrier()``: resolves once every write acknowledged before the call is in the index
        self.barrier: Callable[[], Awaitable[None]] | None = None
        self._guard = guard
        # Bound here, not at import: the tool modules import this one for SearchQuery before the index
        # library loads; the engine creates its searcher as it opens the index.
        from memoryd.index.search import search

        self._search = search

    async def settled(self) -> None:
        """Wait until every write acknowledged before this call is in the index (and in the record
        sources' in-memory views, which the writer updates): what a read of either must see."""
        if self.barrier is not None:
            await self.barrier()

    @property
    def mode(self) -> str:
        """``"hybrid"`` once the model is warm, else ``"keyword"``."""
        return "hybrid" if self.embedder is not None else "keyword"

    async def search(self, query: SearchQuery, *, settle: bool = True) -> SearchResult:
        """The hybrid search (:func:`memoryd.index.search.search`) under the read lock; ``settle=False``:
        the index as it is, without waiting for writes still in flight (the read barrier)."""
        if self._guard is not None:
            self._guard()
        if self.store is None:
            raise RuntimeError("the index is not open yet")
        if settle:
            await self.settled()
        store, embedder = self.store, self.embedder

        def run() -> SearchResult:
            with self.lock.shared():
                return self._search(store, embedder, query)

        return await asyncio.to_thread(run)

"""The one search every kind asks: the hybrid search over the live index, under its read lock.

:class:`Searcher` holds what a query needs: the store (set once the index is open), the embedder (set once
the model is warm; until then queries run keyword-only and say so), and the readers-writer lock that keeps
maintenance from deleting files a query still reads. Briefs, memories and sessions are handed the same
searcher; none of them sees the engine.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from memoryd.index.ranking import Ranking
from memoryd.index.rwlock import RWLock
from memoryd.index.search import SearchResult, search


class Searcher:
    """``await searcher.search(query, project=, kind=, status=, limit=, ranking=) -> SearchResult``.

    ``guard()`` runs before every query and raises when the board behind the index cannot be read (an empty
    answer must never stand for "no history"). Raises ``RuntimeError`` before :attr:`store` is set.
    """

    def __init__(self, lock: RWLock, guard: Callable[[], None] | None = None) -> None:
        self.lock = lock
        self.store: Any = None  #: the open :class:`memoryd.index.store.IndexStore`
        self.embedder: Any = None  #: the warm model, or None (keyword-only)
        self._guard = guard

    @property
    def mode(self) -> str:
        """``"hybrid"`` once the model is warm, else ``"keyword"``."""
        return "hybrid" if self.embedder is not None else "keyword"

    async def search(
        self,
        query: str,
        *,
        project: str | None = None,
        kind: str | None = None,
        status: str | None = None,
        limit: int = 10,
        ranking: Ranking | None = None,
        reasons: bool = False,
    ) -> SearchResult:
        """The hybrid search (:func:`memoryd.index.search.search`); ``ranking``: a profile other than
        ``kind``'s own (memories use theirs); ``reasons``: each hit carries why it matched."""
        if self._guard is not None:
            self._guard()
        if self.store is None:
            raise RuntimeError("the index is not open yet")
        store, embedder = self.store, self.embedder

        def run() -> SearchResult:
            with self.lock.shared():
                return search(
                    store,
                    embedder,
                    query,
                    project=project,
                    kind=kind,
                    status=status,
                    limit=limit,
                    ranking=ranking,
                    reasons=reasons,
                )

        return await asyncio.to_thread(run)

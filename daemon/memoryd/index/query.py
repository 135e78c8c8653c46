"""What one search asks for, as data: built once by the caller (a tool, the page, capture, eval) and
handed unchanged through :class:`memoryd.index.searcher.Searcher` to :func:`memoryd.index.search.search`,
which turns its filters into the store's :class:`memoryd.index.columns.Filter`.

A light module (no numpy, no LanceDB), so the tool modules can build queries without loading the index.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from memoryd.index.ranking import Ranking


@dataclass(frozen=True)
class SearchQuery:
    """One search. ``text`` is plain user text, never query syntax.

    ``project``, ``kind`` and ``status`` are what every result must equal (None or empty: any); ``scope``
    is a second project filter (``eval --scope prefix``). ``limit`` is clamped to 1–100. ``ranking``: a
    profile other than ``kind``'s own (memories use theirs). ``as_of`` anchors relative dates ("last
    week"; None: now, UTC). ``group_by_task``: briefs vote for their task. ``reasons``: each hit carries
    its :class:`memoryd.index.search.Why`, with the query's words found in its text.
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

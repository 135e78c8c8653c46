"""In-process search over the board (no daemon): build or refresh the index, then search it.

Used by ``memoryd search`` when no daemon answers, and by tests of the core.
"""

from __future__ import annotations

from memoryd.board.reader import BoardReader
from memoryd.index.records import brief_record
from memoryd.index.search import SearchResult, search
from memoryd.index.store import IndexStore
from memoryd.index.sync import sync_records
from memoryd.settings import Settings


def refresh(settings: Settings, embedder) -> IndexStore:
    """Open the index and reconcile it with the board; returns the store."""
    snap = BoardReader(settings.locations.board).load()
    store = IndexStore(settings.locations.index)
    records = [brief_record(b, snap.tasks.get(b.task)) for b in snap.briefs.values()]
    report = sync_records(store, records, embedder, kinds=("brief",))
    if report.changed:
        store.optimize()
    return store


def local_search(
    settings: Settings, query: str, *, project: str | None = None, limit: int = 10
) -> SearchResult:
    from memoryd.index.embed import load_embedder

    embedder, _ = load_embedder(settings.model, settings.locations.models)
    store = refresh(settings, embedder)
    return search(store, embedder, query, project=project, kind="brief", limit=limit)

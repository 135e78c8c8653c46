"""In-process search over the board (no daemon): build or refresh the board's index, then search it.

Used by ``memoryd search`` when no daemon serves the board asked for, and by tests of the core. The index
is the board's own (:func:`memoryd.paths.default_index` unless ``--index`` names one), written under its
writer lock (:mod:`memoryd.index.lock`): an index another process writes, or one built from another
board, is refused (:class:`~memoryd.index.lock.IndexInUse`, :class:`~memoryd.index.lock.IndexOfAnotherBoard`),
never synced to this board.
"""

from __future__ import annotations

from memoryd.core.indexer import Indexer
from memoryd.index.lock import IndexLock
from memoryd.index.search import SearchResult, search
from memoryd.index.searcher import RWLock
from memoryd.index.store import IndexStore
from memoryd.kinds.briefs.source import BriefSource
from memoryd.settings import Settings


def refresh(settings: Settings, embedder) -> IndexStore:
    """Open the board's index for writing and reconcile it with the board; returns the store, still
    holding the writer lock (release it with ``store.close()``). Raises what :meth:`IndexStore.open_writer`
    raises."""
    loc = settings.locations
    source = BriefSource(loc.board)
    source.reader.task_ids()  # an unreadable board fails here, before the index is opened
    store = IndexStore.open_writer(IndexLock(loc.index, loc.board, command="memoryd search"))
    try:
        report = Indexer(store, lambda: embedder, RWLock(), sources=[source]).full_sync()
        if report.changed:
            store.optimize()
    except BaseException:
        store.close()
        raise
    return store


def local_search(
    settings: Settings, query: str, *, project: str | None = None, limit: int = 10
) -> SearchResult:
    from memoryd.index.embed import load_embedder

    embedder, _ = load_embedder(settings.model, settings.locations.models)
    store = refresh(settings, embedder)
    try:
        return search(store, embedder, query, project=project, kind="brief", limit=limit)
    finally:
        store.close()

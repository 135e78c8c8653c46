"""In-process work on the board when no daemon runs: search it (``memoryd search``), file a brief
(``memoryd brief``).

:func:`local_searches` builds or refreshes the board's index, then searches its briefs, its memories or both.
:func:`file_brief` hands a person's brief to the daemon's own :class:`memoryd.core.capture.Capture` in this
process: the same text rules, files and filing, with keyword-only search (no model is loaded) over the
refreshed index, or straight into a new task (or the ``task`` asked for) when there is no index to search
or it cannot be opened. Nothing is indexed for the new files here: the daemon's start-up reconciliation (or
its watcher, when one runs on another socket) indexes them with the model. The index
is the board's own (:func:`memoryd.paths.default_index` unless ``--index`` names one), written under its
writer lock (:mod:`memoryd.index.lock`): an index another process writes, or one built from another
board, is refused (:class:`~memoryd.index.lock.IndexInUse`, :class:`~memoryd.index.lock.IndexOfAnotherBoard`),
never synced to this board.
"""

from __future__ import annotations

import asyncio

from memoryd.core.indexer import Indexer
from memoryd.index.lock import IndexLock
from memoryd.index.search import SearchResult, search
from memoryd.index.searcher import RWLock, SearchQuery
from memoryd.index.store import IndexStore
from memoryd.kinds.briefs.reader import BoardReader
from memoryd.kinds.briefs.source import BriefSource
from memoryd.kinds.memories.source import MemorySource
from memoryd.settings import Settings


def refresh(
    settings: Settings, embedder, command: str = "memoryd search", memories: MemorySource | None = None
) -> IndexStore:
    """Open the board's index for writing and reconcile it with the board's briefs (and its memories when
    ``memories`` is given: that source's view is loaded too); returns the store, still holding the writer
    lock (release it with ``store.close()``). Raises what :meth:`IndexStore.open_writer` raises."""
    loc = settings.locations
    source = BriefSource(loc.board)
    source.reader.task_ids()  # an unreadable board fails here, before the index is opened
    store = IndexStore.open_writer(IndexLock(loc.index, loc.board, command=command))
    sources = [source] if memories is None else [source, memories]
    try:
        report = Indexer(store, lambda: embedder, RWLock(), sources=sources).full_sync()
        if report.changed:
            store.optimize()
    except BaseException:
        store.close()
        raise
    return store


def local_searches(
    settings: Settings, briefs: SearchQuery | None, memories: dict | None
) -> tuple[SearchResult | None, dict | None]:
    """Briefs and memories searched in this process with one refresh of the index and one model load.

    ``briefs``: the briefs' query (None: not searched); ``memories``: ``search_memories``' arguments
    (``query``, ``project``?, ``limit``; None: not searched). Returns the briefs' result and the
    ``search_memories`` answer (memdb's envelope), each None when not asked for. A memory found here is not
    marked as accessed (a look from the terminal is no agent's use of it)."""
    from memoryd.index.embed import load_embedder
    from memoryd.kinds.memories.api import Memories
    from memoryd.kinds.memories.render import found, unknown_project
    from memoryd.tools.answers import Scrub

    embedder, _ = load_embedder(settings.model, settings.locations.models)
    view = MemorySource(settings.locations.board) if memories is not None else None
    store = refresh(settings, embedder, memories=view)
    try:
        brief_result = search(store, embedder, briefs) if briefs is not None else None
        if view is None or memories is None:
            return brief_result, None

        async def searched(query: SearchQuery, settle: bool = True) -> SearchResult:
            return search(store, embedder, query)

        async def nothing(_paths) -> None:
            return None

        api = Memories(settings.locations.board, view, submit=nothing, search=searched)
        got = asyncio.run(
            api.search(
                memories["query"], project=memories.get("project"), limit=memories["limit"], touch=False
            )
        )
        scrub = Scrub()
        answer = found(got, scrub, recall=False)
        if memories.get("project") is not None and not got.memories:
            answer.update(unknown_project(memories["project"], {m.project for m in view.all()}, scrub))
        return brief_result, answer
    finally:
        store.close()


class _Tasks:
    """What :class:`~memoryd.core.capture.Capture` reads of the briefs when filing: the board's tasks, and
    its briefs (is the request's ``rid`` filed already?)."""

    def __init__(self, board) -> None:
        self._snapshot = BoardReader(board).load()

    def tasks(self) -> dict:
        return self._snapshot.tasks

    def snapshot(self):
        return self._snapshot


class _KeywordSearch:
    """The searcher :class:`~memoryd.core.capture.Capture` asks, keyword-only on ``store`` (None: no hit)."""

    mode = "keyword"

    def __init__(self, store: IndexStore | None) -> None:
        self.store = store

    async def search(self, query: SearchQuery) -> SearchResult:
        if self.store is None:
            return SearchResult(mode="keyword")
        return await asyncio.to_thread(search, self.store, None, query)

    async def settled(self) -> None:
        """Nothing to wait for: this process writes files only; the daemon indexes them when it next runs."""


async def _indexed_later(**_changes) -> None:
    """The daemon indexes the new files when it next runs."""


def file_brief(settings: Settings, request: dict) -> tuple[dict, str]:
    """File a person's brief (the ``brief`` capture request of :mod:`memoryd.core.capture`) in this process.

    Returns ``(answer, searched)``: the request's answer (``{"brief", "task", "title", "filed",
    "project", "reopened", "board"}``) and how the task was chosen when none was given (``"keyword search"``, or why there was
    no search). Raises
    ``ValueError`` for a bad request (empty text, unknown task), BoardUnreadable, OSError.
    """
    from memoryd.core.capture import Capture
    from memoryd.core.sweep import sweep
    from memoryd.kinds.briefs.writer import ensure_board

    loc = settings.locations
    ensure_board(loc.board)
    # what a daemon killed while filing (maybe this very request) left to the next start: this is one
    sweep(loc.board, loc.exports)
    store, searched = None, "keyword search"
    if request.get("task") or request.get("new_task"):
        searched = "no search (task given)"
    elif not loc.index.is_dir():
        searched = f"no index at {loc.index} yet: a new task"
    else:
        try:
            store = refresh(settings, None, command="memoryd brief")
        except Exception as exc:  # noqa: BLE001 - any index trouble: file into a new task rather than fail
            searched = f"the index could not be searched ({type(exc).__name__}: {exc}): a new task"
    try:
        capture = Capture(loc.board, _Tasks(loc.board), _KeywordSearch(store), None, _indexed_later)
        return asyncio.run(capture.handle({**request, "event": "brief"})), searched
    finally:
        if store is not None:
            store.close()

"""The process-level engine: the board, the index, the model and the watcher, shared by every session.

:func:`open_engine` is what the daemon calls (in the background, after the socket is bound). The engine
is ready once the board has been reconciled with the index; the embedding model loads after that, and
until it is warm searches run keyword-only and say so (``mode: "keyword"``).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memoryd import __version__
from memoryd.board.gate import Skipped
from memoryd.core.capture import Capture
from memoryd.core.indexer import Indexer
from memoryd.core.sources import RecordSource, make_sources, owners
from memoryd.core.spool import take_spool
from memoryd.core.sweep import sweep
from memoryd.core.writequeue import ChangeFeed
from memoryd.index.lock import IndexLock
from memoryd.index.searcher import RWLock, Searcher
from memoryd.index.store import IndexStore
from memoryd.kinds.briefs.api import Briefs, check_board
from memoryd.kinds.briefs.context import Context
from memoryd.kinds.briefs.reader import BRIEFS_DIR, BoardSnapshot
from memoryd.kinds.briefs.source import BoardUnreadable, BriefSource, brief_origin, task_path, unloaded_briefs
from memoryd.kinds.briefs.writer import ensure_board
from memoryd.kinds.memories.api import Memories
from memoryd.kinds.memories.files import MEMORIES_DIR
from memoryd.logs import get_logger
from memoryd.settings import Settings

log = get_logger("memoryd.core.engine")
#: Board files not loaded that the status names (all are counted in ``skipped_files``).
SKIPPED_SHOWN = 5


@dataclass
class ModelState:
    name: str
    state: str = "loading"  # loading | ready | disabled | failed
    detail: str = ""


class Engine:
    """Owns the record sources, the index store, the writer (:class:`Indexer`), the model and the watcher.

    Query methods are coroutines that run blocking work in threads; they raise
    :class:`memoryd.kinds.briefs.source.BoardUnreadable` when the board cannot be read (never an empty answer
    that reads as "no history") and :class:`memoryd.board.gate.InvalidId` for malformed ids.
    """

    def __init__(self, settings: Settings, index_lock: IndexLock | None = None) -> None:
        self.settings = settings
        loc = settings.locations
        #: The index's writer lock: the daemon's (already held), else taken when the store opens.
        self.index_lock = index_lock or IndexLock(
            loc.index, loc.board, command="memoryd serve", socket=loc.socket
        )
        self.board = settings.locations.board
        self.lock = RWLock()
        self.store: IndexStore | None = None
        self.indexer: Indexer | None = None
        self.embedder = None
        self.model = ModelState(
            name=settings.model, state="disabled" if settings.model == "none" else "loading"
        )
        self.watcher = None
        #: Every batch the index applies, for live listeners (:class:`memoryd.core.writequeue.ChangeFeed`).
        self.changes = ChangeFeed()
        self.started_at = time.time()
        self._model_task: asyncio.Task | None = None
        self.sources: list[RecordSource] = make_sources(self.board)
        by_folder = owners(self.sources)
        self.brief_source: BriefSource = by_folder[BRIEFS_DIR]
        #: The one search every kind is handed (store and model are set as they become ready).
        self.searcher = Searcher(self.lock, guard=functools.partial(check_board, self.board))
        #: The kinds' APIs that their tools call, each built from the collaborators it needs.
        self.briefs = Briefs(
            self.board, self.brief_source.reader, self._snapshot, self._submit_briefs, self._skipped_files
        )
        self.memories = Memories(
            self.board,
            by_folder[MEMORIES_DIR],
            submit=self.submit_paths,
            search=self.searcher.search,
            admit=self.admit_paths,
            settled=self.searcher.settled,
        )
        #: The session-start digest, for the capture hook, the get_context tool and its resources.
        self.context = Context(self.briefs, self.searcher, self.memories, lambda: self.changes.seq)
        #: Agents' hook events -> briefs, turns, summaries, the session-start digest.
        self.capture = Capture(self.board, self.briefs, self.searcher, self.context, self._index)
        self._spool_task: asyncio.Task | None = None
        self._warm_task: asyncio.Task | None = None

    def submit_paths(self, paths: Sequence[str]) -> asyncio.Future:
        """Queue these board-relative paths for the index, now; the future resolves once they are in it
        (none: once every earlier write is). Already resolved before start."""
        if self.indexer is None:
            return _resolved()
        return self.indexer.submit(paths=paths)

    def admit_paths(
        self, paths: Sequence[str], chars: int = 0, passages: Sequence[str] = ()
    ) -> asyncio.Future:
        """Queue paths (with ``chars`` characters of text, and the ``passages`` their new records embed)
        written by a call that answers before their indexing; the future (never failing) resolves when it
        may answer (:meth:`memoryd.core.indexer.Indexer.admit`)."""
        if self.indexer is None:
            return _resolved()
        return self.indexer.admit(paths, chars, passages)

    # -- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        if not self.board.exists():
            await asyncio.to_thread(ensure_board, self.board)
            log.info("board_created", board=str(self.board))
        # Under the board lock no other daemon writes here: temps whose writer died can go (never raises).
        await asyncio.to_thread(sweep, self.board, self.settings.locations.exports)
        self.store = await asyncio.to_thread(IndexStore.open_writer, self.index_lock)
        self.searcher.store = self.store
        self.indexer = Indexer(
            self.store,
            functools.partial(
                getattr, self.searcher, "embedder"
            ),  # the writer embeds with the searcher's model
            self.lock,
            optimize_interval_s=self.settings.optimize_interval_s,
            sources=self.sources,
            changes=self.changes,
        )
        # Watch before reading the board: a save made while the reconcile runs is queued for the writer
        # (which starts below), not lost between the read and the first event.
        self._start_watcher()
        try:
            await self._reconcile()
        except BaseException:
            if self.watcher is not None:  # the engine never starts: nothing would take the watcher's events
                self.watcher.stop()
            raise
        self.indexer.start()
        # from here on every search first waits for the writes acknowledged before it began
        self.searcher.barrier = self.indexer.barrier
        # What hooks could not deliver while no daemon ran is filed now, in the order it happened.
        self._spool_task = asyncio.get_running_loop().create_task(
            take_spool(self.settings.locations.state, self.capture.handle, self.capture.delivered.applied),
            name="memoryd-spool",
        )
        # Kept session-start digests are rebuilt after changes, so a hook rarely waits for one.
        self._warm_task = asyncio.get_running_loop().create_task(
            self.context.keep_warm(self.changes.subscribe), name="memoryd-digests"
        )
        if self.model.state == "loading":
            self._model_task = asyncio.get_running_loop().create_task(
                self._load_model(), name="memoryd-model"
            )

    async def _reconcile(self) -> None:
        try:
            report = await asyncio.to_thread(self.indexer.full_sync)
            log.info("board_reconciled", **report.counts(), skipped=len(self.indexer.skipped()))
        except BoardUnreadable as exc:
            log.error("board_unreadable", board=str(self.board), error=str(exc))
        if self.indexer.dirty_since is not None:
            await asyncio.to_thread(self.indexer.maintain)

    async def _load_model(self) -> None:
        from memoryd.index.embed import load_embedder

        embedder, status = await asyncio.to_thread(
            load_embedder, self.settings.model, self.settings.locations.models
        )
        self.model = ModelState(name=status.name, state=status.state, detail=status.detail)
        if embedder is None:
            log.warning(
                "model_unavailable",
                model=status.name,
                state=status.state,
                detail=status.detail,
                consequence="keyword-only search",
            )
            return
        self.embedder = self.searcher.embedder = embedder
        log.info("model_ready", model=status.name, detail=status.detail)
        self.indexer.request_backfill()  # give keyword-only records their vectors, a chunk at a time

    def _start_watcher(self) -> None:
        try:
            from memoryd.core.watch import BoardWatcher
        except ImportError:
            return
        # the watcher's thread hands each change straight to the one writer, on the event loop
        on_change = functools.partial(asyncio.get_running_loop().call_soon_threadsafe, self.indexer.take)
        self.watcher = BoardWatcher(
            self.board, on_change, self.sources, debounce_ms=self.settings.debounce_ms
        )
        try:
            self.watcher.start()
        except Exception as exc:
            log.error("watcher_failed", error=str(exc))

    async def close(self) -> None:
        """End the change feed, stop watching, flush pending index writes, stop the model loader."""
        self.changes.close()  # live listeners (the page's event streams) end now, not at a timeout
        if self.watcher is not None:
            await asyncio.to_thread(self.watcher.stop)
        if self._model_task is not None and not self._model_task.done():
            self._model_task.cancel()
        if self._spool_task is not None and not self._spool_task.done():
            self._spool_task.cancel()  # what is left stays in the spool for the next start
        if self._warm_task is not None and not self._warm_task.done():
            self._warm_task.cancel()
        await self.memories.close()  # writes pending accessed_at touches
        if self.indexer is not None:  # flushes writes acknowledged before their indexing
            await self.indexer.close()
        if self.store is not None:
            self.store.close()  # the writer lock, when the store took it (not the daemon's)

    # -- what the kinds are handed -----------------------------------------------------------------
    def _snapshot(self) -> BoardSnapshot:
        if self.indexer is None:
            raise RuntimeError("the engine has not started")
        return self.brief_source.snapshot

    def _skipped_files(self) -> list[Skipped]:
        """Every board file the indexer skips now (each source's, as its last batch left them)."""
        return self.indexer.skipped() if self.indexer is not None else []

    def _index(
        self, briefs: Sequence[str] = (), tasks: Sequence[str] = (), paths: Sequence[str] = ()
    ) -> asyncio.Future:
        """Queue the changed files now; the future resolves once they are in the index."""
        return self.submit_paths([*map(brief_origin, briefs), *map(task_path, tasks), *paths])

    async def _submit_briefs(self, brief_ids: Sequence[str]) -> None:
        await self._index(briefs=brief_ids)

    # -- status ----------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        idx = self.indexer
        watcher_alive = bool(self.watcher and self.watcher.alive())
        return {
            "version": __version__,
            "board": str(self.board),
            "index": str(self.settings.locations.index),
            "records": self.store.count() if self.store else 0,
            "briefs": len(self.brief_source.snapshot.briefs) if idx else 0,
            "tasks": len(self.brief_source.snapshot.tasks) if idx else 0,
            "memories": self.memories.count(),
            "skipped_files": len(idx.skipped()) if idx else 0,
            # brief folders on the board that are no brief while a file of theirs is broken
            "briefs_skipped": unloaded_briefs(idx.skipped(), self.brief_source.snapshot.briefs) if idx else 0,
            # the first few by name, so status and doctor can say which file to fix
            "skipped": [{"path": k.path, "reason": k.reason} for k in idx.skipped()[:SKIPPED_SHOWN]]
            if idx
            else [],
            "model": {"name": self.model.name, "state": self.model.state, "detail": self.model.detail},
            "search_mode": "hybrid" if self.embedder is not None else "keyword",
            "last_indexed_at": idx.last_indexed_at if idx else None,
            "last_optimize_at": idx.last_optimize_at if idx else None,
            "watcher": "alive" if watcher_alive else "stopped",
            "uptime_s": round(time.time() - self.started_at, 1),
        }


async def open_engine(settings: Settings, index_lock: IndexLock | None = None) -> Engine:
    """Create and start the engine (called once per daemon, in the background). ``index_lock``: the
    index's writer lock when the daemon holds it already (:class:`memoryd.serve.config.ServeConfig`)."""
    engine = Engine(settings, index_lock)
    await engine.start()
    return engine


def _resolved() -> asyncio.Future:
    fut = asyncio.get_running_loop().create_future()
    fut.set_result(None)
    return fut

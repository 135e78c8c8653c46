"""The engine-level memory API (``engine.memories``): every memory tool, and the memo tools, call this.

One class (~550 lines) holds every memory operation because all of them share its write lock and view.

Writes go to the board first (:mod:`memoryd.kinds.memories.writes`: atomic files, fsynced), then the
changed paths are submitted to the indexer. A store answers once its file is on the board and its paths
are queued (``admit``; unless the writer is far behind, then once they are indexed): the embedding and
the row write follow, batched with the stores that came meanwhile. It is searchable when the call
returns all the same, because every search and every read of the view (:meth:`Memories.settled`) first
waits for the writes acknowledged before it began (the indexer's read barrier); a crash in between
loses nothing, since the next start indexes the board. The other writes
(update, delete, relations) still await their index write. Board mutations run one at a time under one
asyncio lock, each reading the current file inside it; the index writes happen outside it. The
argument rules are :mod:`memoryd.kinds.memories.rules` (memdb's limits); their exceptions are
re-exported here.

Keys: every method taking a ``key`` accepts a memory's id (its file name) or, for a file edited by
hand, the hash of its current content (:meth:`memoryd.kinds.memories.source.MemorySource.find`).

Returning a memory (:meth:`get`, :meth:`search`, :meth:`recall`) updates its ``accessed_at``
(:mod:`memoryd.kinds.memories.access`: shown at once, written to the file lazily).

Example (a tool)::

    api = (await ctx.engine()).memories
    stored = await api.store("Deploys use blue-green", tags=["deploy"], project="shopfront", origin="memo")
    found = await api.search("how do we deploy", project="shopfront", limit=5)
    for s in found.memories:
        print(s.memory.id, s.relevance, s.memory.content)
"""

from __future__ import annotations

import asyncio
import contextlib
import unicodedata
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from memoryd.index.searcher import SearchQuery
from memoryd.kinds.briefs.api import check_board
from memoryd.kinds.memories import graph, ranking
from memoryd.kinds.memories.access import AccessTimes
from memoryd.kinds.memories.files import Memory
from memoryd.kinds.memories.graph import Edge
from memoryd.kinds.memories.records import memory_record
from memoryd.kinds.memories.rules import (
    MAX_CONTENT_CHARS,
    MAX_DEPTH,
    MAX_TAG_CHARS,
    MAX_TAGS,
    BrokenMemory,
    InvalidMemory,
    MemoryConflict,
    MemoryNotFound,
    check_key,
    clean_content,
    clean_importance,
    clean_relation_type,
    clean_tags,
    clean_type,
)
from memoryd.kinds.memories.source import MemorySource
from memoryd.kinds.memories.writes import BoardOps
from memoryd.logs import get_logger
from memoryd.textcheck import has_lone_surrogate

if TYPE_CHECKING:
    from memoryd.index.search import SearchResult

#: ``submit(paths)``: queue board-relative paths for the index's one writer before returning an awaitable
#: that resolves once they are searchable (no paths: once every earlier write is; the read barrier).
#: ``search(SearchQuery, settle=)``: the hybrid search under the read lock, behind the same barrier.
#: ``admit(paths, chars, passages)`` (optional): queue paths bringing ``chars`` characters of text (and
#: the ``passages`` their new records embed, embedded at once while the model is free) and resolve when
#: a store may answer, never failing (:meth:`memoryd.core.indexer.Indexer.admit`); without it a store
#: awaits its index write.
Submit = Callable[[Sequence[str]], Awaitable[None]]
Admit = Callable[[Sequence[str], int, Sequence[str]], Awaitable[None]]
Search = Callable[..., Awaitable["SearchResult"]]

__all__ = [
    "MAX_CONTENT_CHARS",
    "MAX_DEPTH",
    "MAX_TAGS",
    "MAX_TAG_CHARS",
    "SEARCH_POOL",
    "BrokenMemory",
    "Found",
    "InvalidMemory",
    "MemoryConflict",
    "MemoryNotFound",
    "Memories",
    "Scored",
    "Stored",
    "Updated",
]

#: Candidates fetched from the hybrid search before the re-rank.
SEARCH_POOL = 100
SKIPPED_SHOWN = 5  # memory files not loaded named by stats (all are counted)
#: Access times written per hold of the write lock (:meth:`Memories._write_access`).
TOUCH_CHUNK = 32

log = get_logger("memoryd.kinds.memories")


@dataclass(frozen=True)
class Stored:
    """The result of a store: the memory as on the board, whether this call created it, and the tags an
    existing memory gained from it."""

    memory: Memory
    is_new: bool
    gained_tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Updated:
    """``old_hash``: the id before; ``new_hash``: the id after (equal unless the content changed)."""

    old_hash: str
    new_hash: str
    memory: Memory


@dataclass(frozen=True)
class Scored:
    """A memory with its relevance and, in a recall, its hops from the nearest seed; ``why``: the
    search's :class:`memoryd.index.search.Why` and the re-rank's bonuses (``search(reasons=True)``)."""

    memory: Memory
    relevance: float
    depth: int = 0
    why: dict[str, Any] | None = None


@dataclass(frozen=True)
class Found:
    """A search or recall answer; ``mode`` is the hybrid search's (``"hybrid"`` or ``"keyword"``)."""

    memories: list[Scored]
    relationships: list[Edge]
    mode: str
    depth: int = 0


class Memories:
    """See the module docstring. Created by the engine with its collaborators; usable once the engine has
    started (``view`` loaded, the writer running). ``view`` is the memories record source: the in-memory
    view of every memory."""

    def __init__(
        self,
        board: Path,
        view: MemorySource,
        submit: Submit,
        search: Search,
        admit: Admit | None = None,
        settled: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.board = board
        self.view = view
        self._submit = submit
        self._admit = admit  # None: a store awaits its index write
        self._search = search
        self._settled = settled  # the read barrier alone: a tag filter reads the view after it
        self._lock = asyncio.Lock()
        self._prune: set[str] = set()
        self.access = AccessTimes(self._write_access)

    # -- plumbing -------------------------------------------------------------------------------------
    @property
    def ops(self) -> BoardOps:
        return BoardOps(self.board, self.view)

    def count(self) -> int:
        """How many memories are loaded (0 before the engine starts)."""
        return self.view.count()

    async def _locked(self, fn, *args: Any, settle: bool = False) -> Any:
        """Run a blocking board operation under the write lock (``settle``: after every earlier index
        write, so the view's incoming edges are complete)."""
        async with self._lock:
            if settle:
                await self._submit(())
            # A cancelled caller (its deadline, notifications/cancelled, a client gone) cannot stop the
            # thread: the lock stays held until the thread ends, so no other write meets its work half done.
            work = asyncio.ensure_future(asyncio.to_thread(fn, *args))
            try:
                return await asyncio.shield(work)
            except asyncio.CancelledError:
                with anyio.CancelScope(shield=True):
                    while not work.done():
                        with contextlib.suppress(asyncio.CancelledError):  # a second native cancel
                            await asyncio.wait([work])
                raise

    async def _index(self, paths: Iterable[str]) -> None:
        paths = sorted(set(paths))
        if paths:
            await self._submit(paths)

    async def _index_admitted(self, stored: Sequence[Memory], passages: Sequence[str] = ()) -> None:
        """Queue the files of ``stored`` (``passages``: what their new records embed) and wait only as
        ``admit`` says (reads wait through :meth:`settled`)."""
        paths = sorted({m.path for m in stored})
        if not paths:
            return
        if self._admit is None:
            await self._submit(paths)
        else:
            await self._admit(paths, sum(len(m.content) for m in stored), passages)

    async def settled(self) -> None:
        """Wait until every write acknowledged before this call is in the index and in :attr:`view`
        (the read barrier); searches pass it on their own, other readers of the view call this first."""
        await self._submit(())

    # -- store ----------------------------------------------------------------------------------------
    def prepare(
        self,
        content: object,
        *,
        tags: Iterable[object] | None = (),
        importance: object = 0,
        memory_type: object = "general",
        project: str = "",
        origin: str | None = None,
        created_at: str | None = None,
    ) -> Memory:
        """Validate arguments into a new :class:`Memory` (not written). Raises InvalidMemory."""
        extra: dict[str, Any] = {"created_at": created_at} if created_at else {}
        return Memory.new(
            clean_content(content),
            tags=clean_tags(tags),
            importance=clean_importance(importance),
            memory_type=clean_type(memory_type),
            project=project or "",
            origin=origin,
            **extra,
        )

    async def store(self, content: object, **fields: Any) -> Stored:
        """Store a memory (keyword arguments as :meth:`prepare`); returns it and whether it is new.

        Content that exists returns the existing memory with ``is_new`` False; it gains the new tags
        (memdb does the same), nothing else changes. Raises InvalidMemory, BrokenMemory."""
        (result,) = await self.store_many([self.prepare(content, **fields)])
        if isinstance(result, Exception):
            raise result
        return result

    async def store_many(self, items: Sequence[Memory | Exception]) -> list[Stored | Exception]:
        """Store prepared memories (:meth:`prepare`) in one board pass; the index write follows the answer
        (see the module docstring).

        An item that is an exception (a failed :meth:`prepare`) is passed through, so a batch keeps its
        positions; each result is :class:`Stored` or that item's exception."""
        # shielded: a caller gone mid-call (a cancelled tool call) must still hand the files it wrote to
        # the index, since the watcher drops the echo of a store's new file (BoardOps.store)
        return await asyncio.shield(self._store_and_queue(items))

    async def _store_and_queue(self, items: Sequence[Memory | Exception]) -> list[Stored | Exception]:
        results, passages = await self._locked(self._store_sync, items)
        await self._index_admitted([r.memory for r in results if isinstance(r, Stored)], passages)
        return results

    def _store_sync(self, items: Sequence[Memory | Exception]) -> tuple[list[Stored | Exception], list[str]]:
        """The board pass: each item's result, and the passages of the memories it created (as their
        files now read), for the index's embedding to start on at once."""
        ops = self.ops
        out: list[Stored | Exception] = []
        valid = [m for m in items if isinstance(m, Memory)]
        # the new files written and fsynced together, then linked; one fsync of the folder, before the answer
        with ops.batch(valid) if valid else contextlib.nullcontext():
            for m in items:
                if isinstance(m, Exception):
                    out.append(m)
                    continue
                try:
                    out.append(Stored(*ops.store(m)))
                except BrokenMemory as exc:
                    out.append(exc)
                except OSError as exc:
                    out.append(BrokenMemory(f"cannot write the memory file: {exc.strerror or exc}"))
        # the new memories' passages as their files now read: a later item of the batch may add tags
        last = {r.memory.id: r.memory for r in out if isinstance(r, Stored)}
        written = []
        for r in out:
            if isinstance(r, Stored) and r.is_new:
                m = last[r.memory.id]
                record = self.view.written_record(m.id) if m is r.memory else None  # derived by the view
                written.append((record or memory_record(m)).embed_text)
        stored = [r for r in out if isinstance(r, Stored)]
        if stored:  # one line per board pass (its files are logged at debug level)
            new = sum(r.is_new for r in stored)
            log.info(
                "board.memories_stored",
                new=new,
                existing=len(stored) - new,
                failed=len(out) - len(stored),
                first=stored[0].memory.id[:12],
            )
        return out, written

    # -- read -----------------------------------------------------------------------------------------
    async def get(self, key: str, *, touch: bool = True) -> Memory:
        """The memory as on disk now. Raises InvalidMemory (malformed key), MemoryNotFound, BrokenMemory."""
        check_key(key)
        m = await asyncio.to_thread(self.ops.resolve, key)
        if m is None:
            raise MemoryNotFound(f"no memory {key}")
        if touch:
            self.access.touch([m.id])
        return self.access.shown(m)

    # -- update / delete --------------------------------------------------------------------------------
    async def update(
        self,
        key: str,
        *,
        content: object | None = None,
        tags: Iterable[object] | None = None,
        importance: object | None = None,
        memory_type: object | None = None,
    ) -> Updated:
        """Change a memory; ``None`` keeps a field, ``tags`` replaces all tags. New content gives a new
        hash: the file moves to its new name with its relations, and edges pointing at it follow.
        Raises InvalidMemory, MemoryNotFound, MemoryConflict (the content is another memory), BrokenMemory."""
        check_key(key)
        changes: dict[str, Any] = {}
        if content is not None:
            changes["content"] = clean_content(content)
        if tags is not None:
            changes["tags"] = clean_tags(tags)
        if importance is not None:
            changes["importance"] = clean_importance(importance)
        if memory_type is not None:
            changes["memory_type"] = clean_type(memory_type)
        old_id, new, paths = await self._locked(self.ops.update, key, changes, settle=True)
        if new.id != old_id:
            self.access.forget([old_id])
        await self._index(paths)
        return Updated(old_id, new.id, new)

    async def delete(self, key: str) -> Memory:
        """Delete a memory and every edge to or from it; returns what was deleted.
        Raises InvalidMemory, MemoryNotFound."""
        (result,) = await self.delete_many([key])
        if isinstance(result, Exception):
            raise result
        return result

    async def delete_many(self, keys: Sequence[str]) -> list[Memory | Exception]:
        """Delete each key (one board pass, one index write); per key the deleted memory or its error."""
        results, paths = await self._locked(self.ops.delete, list(keys), settle=True)
        self.access.forget(m.id for m in results if isinstance(m, Memory))
        await self._index(paths)
        return results

    # -- search / recall ----------------------------------------------------------------------------------
    async def search(
        self,
        query: str,
        *,
        project: str | None = None,
        tags: Iterable[str] = (),
        memory_type: str | None = None,
        limit: int = 10,
        touch: bool = True,
        reasons: bool = False,
        settle: bool = True,
    ) -> Found:
        """Hybrid search over memories, re-ranked by importance and recency (:mod:`.ranking`).

        ``project``/``memory_type`` filter in the index; ``tags``: a memory must carry all of them;
        ``limit`` 1-100; ``reasons``: each result says why it matched (:attr:`Scored.why`); ``settle=False``:
        without waiting for writes in flight (:meth:`memoryd.index.searcher.Searcher.search`). Raises
        InvalidMemory for text with a lone surrogate."""
        if not isinstance(query, str) or has_lone_surrogate(query):
            raise InvalidMemory("query contains a lone surrogate (invalid Unicode)")
        # the filter as typed (NFC) against tags as answers show them: a guessed secret matches nothing
        want = {unicodedata.normalize("NFC", t) for t in clean_tags(tags)}
        tagged = None
        if want:
            if settle and self._settled is not None:
                await self._settled()  # the view must hold the memories stored before this search
                settle = False  # that barrier was the search's own
            # tags as answers show them (shown_tag), so a guessed secret in a tag filter confirms nothing
            tagged = frozenset(self.view.tagged(want))
        wanted = SearchQuery(
            query,
            project=project or None,
            kind="memory",
            status=memory_type,
            limit=SEARCH_POOL,
            ranking=ranking.MEMORY_RANKING,
            reasons=reasons,
            ids=tagged,  # the tag filter, in the index before ranking
        )
        result = await self._search(wanted, settle=settle)
        now = datetime.now(UTC)
        view = self.view
        scored = []
        for hit in result.hits:
            m = view.get(hit.id)
            if m is not None:
                rel = ranking.relevance(hit.score, m, now)
                why = ranking.why(hit, m, now) if reasons else None
                scored.append(Scored(m, rel, why=why))
        scored.sort(key=lambda s: (-s.relevance, s.memory.id))
        scored = scored[: max(1, min(int(limit), SEARCH_POOL))]
        if touch:
            self.access.touch(s.memory.id for s in scored)
        return Found(self._shown(scored), [], result.mode)

    def _shown(self, items: Iterable[Scored]) -> list[Scored]:
        return [Scored(self.access.shown(s.memory), s.relevance, s.depth, s.why) for s in items]

    async def recall(
        self, query: str, *, depth: int = 1, project: str | None = None, limit: int = 10
    ) -> Found:
        """Search, then follow relationships (both directions) up to ``depth`` hops (0-3; 0 = search
        only). At most :data:`~memoryd.kinds.memories.graph.MAX_CLUSTER` memories: the seeds (their search
        relevance), then by hops (relevance ``best seed relevance / (1 + hops)``); and every relationship
        between returned memories."""
        depth = max(0, min(int(depth), MAX_DEPTH))
        seeds = await self.search(query, project=project, limit=limit, touch=False)
        if depth == 0 or not seeds.memories:
            self.access.touch(s.memory.id for s in seeds.memories)
            return Found(self._shown(seeds.memories), [], seeds.mode, depth)
        view = self.view
        hops, edges = graph.cluster(view, [s.memory.id for s in seeds.memories], depth)
        top = seeds.memories[0].relevance
        by_seed = {s.memory.id: s for s in seeds.memories}
        out: list[Scored] = []
        for mid, d in hops.items():
            m = view.get(mid)
            if mid in by_seed:
                out.append(by_seed[mid])
            elif m is not None:
                out.append(Scored(m, top / (1 + d), d))
        out.sort(key=lambda s: (s.depth, -s.relevance, s.memory.id))
        self.access.touch(s.memory.id for s in out)
        return Found(self._shown(out), edges, seeds.mode, depth)

    # -- relationships --------------------------------------------------------------------------------------
    async def relate(self, from_key: str, to_key: str, relation_type: str) -> tuple[Edge, bool]:
        """Create the edge ``from -> to`` of ``relation_type``; returns it and whether it is new.
        Raises InvalidMemory (bad key or type, an edge to itself), MemoryNotFound."""
        check_key(from_key)
        check_key(to_key)
        rtype = clean_relation_type(relation_type)
        edge, is_new, paths = await self._locked(self.ops.relate, from_key, to_key, rtype, settle=True)
        await self._index(paths)
        return edge, is_new

    async def unrelate(self, from_key: str, to_key: str, relation_type: str) -> bool:
        """Delete the edge ``from -> to`` of ``relation_type``; False when there was none."""
        check_key(from_key)
        check_key(to_key)
        rtype = clean_relation_type(relation_type)
        paths = await self._locked(self.ops.unrelate, from_key, to_key, rtype, settle=True)
        await self._index(paths)
        return bool(paths)

    async def relationships(
        self, key: str, direction: str = "both", relation_type: str | None = None
    ) -> list[Edge]:
        """Live edges of a memory (``outgoing``, ``incoming`` or ``both``), in memdb's order. Edges to a
        memory that no longer exists are left out, and removed from their file in the background.
        Raises InvalidMemory, MemoryNotFound, BrokenMemory (its file is unusable, as :meth:`get` says),
        BoardUnreadable."""
        check_key(key)
        if direction not in graph.DIRECTIONS:
            raise InvalidMemory("direction must be outgoing, incoming or both")
        check_board(self.board)  # the view would answer from what the board held
        await self.settled()
        m = self.view.find(key) or await asyncio.to_thread(self.ops.read, key)
        if m is None:
            raise MemoryNotFound(f"no memory {key}")
        edges, dangling = graph.edges_of(self.view, m, direction, relation_type)
        if dangling:
            self._prune.update(dangling)
            with contextlib.suppress(RuntimeError):
                asyncio.get_running_loop().create_task(self._prune_dangling(), name="memoryd-memories-prune")
        return edges

    async def _prune_dangling(self) -> None:
        ids, self._prune = sorted(self._prune), set()
        if ids:
            await self._index(await self._locked(self.ops.prune, ids, settle=True))

    # -- stats -------------------------------------------------------------------------------------------
    def stats(self, project: str | None = None) -> dict[str, Any]:
        """From the view (call :meth:`settled` first to count acknowledged stores): memdb's
        ``{memoryCount, tagCount, oldestMemory, newestMemory}`` plus ``relationshipCount``,
        ``byType``, ``byProject``, ``skippedFiles`` (memory files not loaded) and, when there are any,
        ``skipped``: the first :data:`SKIPPED_SHOWN` of them as ``{"path", "reason"}``. Raises
        BoardUnreadable when the board folder is gone or unreadable (the view still holds what it had)."""
        check_board(self.board)
        view = self.view
        everything = view.all()
        skipped = view.skipped()
        memories = [m for m in everything if project is None or m.project == project]
        created = sorted(m.created_at for m in memories if m.created_at)
        by_type: dict[str, int] = {}
        by_project: dict[str, int] = {}
        for m in memories:
            by_type[m.memory_type] = by_type.get(m.memory_type, 0) + 1
            by_project[m.project] = by_project.get(m.project, 0) + 1
        return {
            "memoryCount": len(memories),
            "tagCount": len({t for m in memories for t in m.tags}),
            "oldestMemory": created[0] if created else None,
            "newestMemory": created[-1] if created else None,
            "relationshipCount": sum(1 for m in memories for r in m.relations if view.resolve(r.target)),
            "byType": dict(sorted(by_type.items())),
            "byProject": dict(sorted(by_project.items())),
            "skippedFiles": len(skipped),
        } | (
            {"skipped": [{"path": k.path, "reason": k.reason} for k in skipped[:SKIPPED_SHOWN]]}
            if skipped
            else {}
        )

    # -- accessed_at ---------------------------------------------------------------------------------------
    async def _write_access(self, times: dict[str, str]) -> None:
        # a few dozen files at a time: a store waits on the write lock for one chunk, not for every
        # memory the last searches returned (hundreds after a burst of searches, ~1 ms of disk each)
        items = list(times.items())
        for start in range(0, len(items), TOUCH_CHUNK):
            await self._locked(self.ops.touch, dict(items[start : start + TOUCH_CHUNK]))

    def shown(self, memory: Memory) -> Memory:
        """``memory`` with its latest ``accessed_at`` (what answers show)."""
        return self.access.shown(memory)

    async def close(self) -> None:
        """Write pending ``accessed_at`` times (daemon shutdown)."""
        await self.access.close()

"""The ``memories/`` record source (:mod:`memoryd.core.sources`), and the in-memory view of every memory.

Besides yielding one ``memory`` record per file, :class:`MemorySource` keeps what the tools need without
reading the folder on every call: every memory by id, content hash -> id (to find a hand-edited file
by what it now says), and the incoming edges of each memory (relations are stored with their source, so
"who points at X" needs a global view). A relation's target names a memory the way a key does
(:meth:`MemorySource.resolve`: its file name, else the hash of its current content), so a file renamed
with its content unchanged keeps every edge pointing at it. It is refreshed only by the indexer (``load_all`` /
``records_for``), so after a write is submitted and awaited the view includes it; reads from the event
loop take a short lock and never see a half-applied change.
"""

from __future__ import annotations

import threading
import unicodedata
from collections.abc import Collection
from pathlib import Path

from memoryd.board.gate import Skipped, UnsafePath, file_signature
from memoryd.index.records import Record, SourceBatch, records_by_id
from memoryd.index.redact import redact
from memoryd.kinds.memories.files import (
    MEMORIES_DIR,
    MISNAMED,
    Memory,
    MemoryFileError,
    Relation,
    list_memories,
    memory_of_path,
    memory_path,
    misnamed,
    read_memory,
)
from memoryd.kinds.memories.format import shared
from memoryd.kinds.memories.records import KIND, memory_inputs, memory_record
from memoryd.logs import get_logger

log = get_logger("memoryd.kinds.memories")

#: Memories this daemon created whose files the writer has not read yet (see :meth:`MemorySource.written`).
WRITTEN_KEPT = 4096


class MemorySource:
    """Record source for ``memories/`` plus the view described in the module docstring."""

    folders = (MEMORIES_DIR,)
    kinds = (KIND,)

    def __init__(self, board: Path) -> None:
        self.board = Path(board)
        self._lock = threading.Lock()
        self._memories: dict[str, Memory] = {}
        self._by_content: dict[str, str] = {}  # content hash -> id, only where they differ (hand edits)
        self._incoming: dict[str, set[str]] = {}  # target id -> ids of memories with an edge to it
        self._by_tag: dict[str, set[str]] = {}  # a tag as answers show it (redacted) -> ids carrying it
        self._skipped: dict[str, Skipped] = {}
        # id -> (its file's signature as written, the memory, its record): :meth:`written`
        self._written: dict[str, tuple[tuple[int, ...], Memory, Record]] = {}
        self.generation = 0  # bumped on every change (cache key for stats)

    # -- RecordSource ---------------------------------------------------------------------------------
    def load_all(self) -> SourceBatch:
        memories, skipped = list_memories(self.board)
        batch = SourceBatch(skipped=list(skipped), complete=True)
        for m in memories:
            # derived by the writer only when these inputs changed since it last derived the record
            # (redacting and splitting a long memory into terms costs tenths of a second)
            batch.defer(m.path, m.id, memory_inputs(m), lambda m=m: memory_record(m))
        for s in skipped:
            batch.origins.setdefault(s.path, ())
        with self._lock:
            self._memories, self._by_content, self._incoming = {}, {}, {}
            for m in memories:
                self._put(m)
            self._skipped = {s.path: s for s in skipped}
            self.generation += 1
        return batch

    def records_for(self, paths: Collection[str]) -> SourceBatch:
        batch = records_by_id(self, paths, MEMORIES_DIR, memory_of_path, self._load)
        if not batch.complete:  # a full load has reported every misnamed file already
            for path in filter(misnamed, paths):
                self._misnamed(path, batch)
        return batch

    def _misnamed(self, path: str, batch: SourceBatch) -> None:
        """A file saved (or deleted) under a name that is no memory's: skipped while it exists."""
        problem = Skipped(path, MISNAMED) if (self.board / path).is_file() else None
        if problem is not None:
            log.warning("board.file_skipped", path=path, reason=MISNAMED)
            batch.skipped.append(problem)
        batch.origins.setdefault(path, ())
        with self._lock:
            self._note(path, problem)

    def written(self, memory: Memory, path: Path) -> None:
        """``memory`` was just written at ``path`` by this daemon (a store, an access-time touch). When the
        writer comes to that file (:meth:`records_for`) and it is still exactly as written
        (:func:`file_signature`), the memory and its record are taken from here instead of reading and
        parsing the file again: the writer's cycle is what a stream of stores waits on, and this call runs
        on the store's own thread beside it.
        A file changed meanwhile, by anyone, is read as always. Thread-safe."""
        signature = file_signature(path)
        if signature is None:
            return
        memory = shared(memory)
        record = memory_record(memory)
        with self._lock:
            self._written[memory.id] = (signature, memory, record)
            if len(self._written) > WRITTEN_KEPT:  # a writer that never came: forget the oldest
                del self._written[next(iter(self._written))]

    def written_record(self, memory_id: str) -> Record | None:
        """The record :meth:`written` derived for ``memory_id``, until the writer takes it (None then, or
        when nothing was kept). Thread-safe."""
        with self._lock:
            known = self._written.get(memory_id)
        return known[2] if known is not None else None

    def _load(self, memory_id: str, batch: SourceBatch) -> None:
        """Re-read one memory's file into ``batch`` and the view (unless this daemon just wrote it:
        :meth:`written`)."""
        origin = memory_path(memory_id)
        with self._lock:
            known = self._written.pop(memory_id, None)
        problem = None
        if known is not None and known[0] == file_signature(self.board / origin):
            memory, record = known[1], known[2]
        else:
            try:
                memory = read_memory(self.board, memory_id)
                record = memory_record(memory) if memory is not None else None
            except (MemoryFileError, UnsafePath) as exc:
                memory, record, problem = None, None, Skipped(exc.path, exc.reason)
                log.warning("board.file_skipped", path=exc.path, reason=exc.reason)
                batch.skipped.append(problem)
        batch.add(origin, [record] if record is not None else [])
        with self._lock:
            self._drop(memory_id)
            if memory is not None:
                self._put(memory)
            self._note(origin, problem)

    # -- state (caller holds the lock) -----------------------------------------------------------------
    def _note(self, origin: str, problem: Skipped | None) -> None:
        """``origin`` is skipped for ``problem``, or no longer (None); the view changed either way."""
        if problem is not None:
            self._skipped[origin] = problem
        else:
            self._skipped.pop(origin, None)
        self.generation += 1

    def _put(self, m: Memory) -> None:
        self._memories[m.id] = m
        h = m.hash
        if h != m.id:
            self._by_content[h] = m.id
        for r in m.relations:
            self._incoming.setdefault(r.target, set()).add(m.id)
        for t in _shown_tags(m):
            self._by_tag.setdefault(t, set()).add(m.id)

    def _drop(self, memory_id: str) -> None:
        old = self._memories.pop(memory_id, None)
        if old is None:
            return
        h = old.hash
        if self._by_content.get(h) == memory_id:
            del self._by_content[h]
        for r in old.relations:
            sources = self._incoming.get(r.target)
            if sources is not None:
                sources.discard(memory_id)
                if not sources:
                    del self._incoming[r.target]
        for t in _shown_tags(old):
            carrying = self._by_tag.get(t)
            if carrying is not None:
                carrying.discard(memory_id)
                if not carrying:
                    del self._by_tag[t]

    # -- the view (any thread) -------------------------------------------------------------------------
    def get(self, memory_id: str) -> Memory | None:
        """The memory stored as ``memories/<memory_id>.md`` as last indexed, or None."""
        with self._lock:
            return self._memories.get(memory_id)

    def find(self, key: str) -> Memory | None:
        """The memory whose file name OR current content hash is ``key`` (a hand-edited or renamed file
        answers to both), or None."""
        with self._lock:
            return self._find(key)

    def _find(self, key: str) -> Memory | None:
        m = self._memories.get(key)
        if m is None and key in self._by_content:
            m = self._memories.get(self._by_content[key])
        return m

    def resolve(self, target: str) -> str | None:
        """The id of the memory a relation's ``target`` points at (:meth:`find`), or None when it is gone.

        Edges store the target's id as it was when they were made; a file renamed by hand keeps its
        content, so its content hash still leads to it."""
        m = self.find(target)
        return m.id if m is not None else None

    def all(self) -> list[Memory]:
        """Every memory (a copy of the list; the memories themselves are immutable)."""
        with self._lock:
            return list(self._memories.values())

    def count(self) -> int:
        with self._lock:
            return len(self._memories)

    def tagged(self, tags: Collection[str]) -> set[str]:
        """Ids of the memories carrying every one of ``tags``, compared as answers show tags (redacted),
        so a guessed secret in a tag filter confirms nothing. No tags: every id."""
        with self._lock:
            if not tags:
                return set(self._memories)
            sets = sorted((self._by_tag.get(t, set()) for t in set(tags)), key=len)
            return sets[0].intersection(*sets[1:])

    def incoming(self, memory_id: str) -> list[tuple[Memory, Relation]]:
        """``[(source memory, relation)]`` for every stored edge pointing at ``memory_id``: its file name,
        or its content hash when no file of that name exists (:meth:`resolve`)."""
        with self._lock:
            m = self._memories.get(memory_id)
            keys = {memory_id}
            if m is not None and (found := self._find(m.hash)) is not None and found.id == memory_id:
                keys.add(m.hash)
            ids = {s for k in keys for s in self._incoming.get(k, ())}
            sources = [self._memories[s] for s in sorted(ids) if s in self._memories]
        return [(s, r) for s in sources for r in s.relations if r.target in keys]

    def skipped(self) -> list[Skipped]:
        """Memory files currently not loaded (broken front matter, refused by the gate, bad name)."""
        with self._lock:
            return list(self._skipped.values())


def _shown_tags(m: Memory) -> set[str]:
    """A memory's tags as a filter compares them: as answers show them (redacted), in Unicode's composed
    form (NFC), so a tag typed on one system matches the same tag saved decomposed (NFD) by another."""
    return {unicodedata.normalize("NFC", redact(t).text) for t in m.tags}


def source(board: Path) -> MemorySource:
    """Entry point for :data:`memoryd.core.sources.SOURCES`."""
    return MemorySource(board)

"""The board side of every memory write: blocking file operations, run one at a time in a worker thread.

:class:`memoryd.kinds.memories.api.Memories` calls these under its write lock, so each reads the current file
from disk (never the possibly older in-memory view) before changing it: two writers of the same memory
never lose each other's change. Each returns the board-relative paths it changed, for the indexer.
Edges live in their source memory's file, so deleting or moving a memory also rewrites every memory with
an edge pointing at it (found through the view's incoming-edge index, which the caller brings up to date
first).
"""

from __future__ import annotations

import contextlib
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from memoryd.kinds.memories.files import (
    Memory,
    MemoryFileError,
    Relation,
    delete_memory,
    memory_folder,
    read_memory,
    relation_id,
    stage_memories,
    utc_now,
    write_memory,
)
from memoryd.kinds.memories.graph import Edge
from memoryd.kinds.memories.rules import (
    BrokenMemory,
    InvalidMemory,
    MemoryConflict,
    MemoryNotFound,
    check_key,
)
from memoryd.kinds.memories.source import MemorySource
from memoryd.logs import get_logger

log = get_logger("memoryd.kinds.memories")


class BoardOps:
    """File operations on ``board``'s ``memories/``, with ``view`` for lookups (see module docstring)."""

    def __init__(self, board: Path, view: MemorySource) -> None:
        self.board = board
        self.view = view
        self.folder = None  # memories/ while a batch() is open
        self.staged = None  # its files written ahead

    @contextlib.contextmanager
    def batch(self, new: Sequence[Memory] = ()) -> Iterator[None]:
        """Reads and stores inside share one open ``memories/``, fsynced once at the end (before the
        caller answers) rather than after each file. ``new``: memories the batch will store; those whose
        file is absent are written ahead and fsynced together (:func:`stage_memories`), and their stores
        link them. When the folder cannot be opened, each call opens it itself and reports its own
        error."""
        with contextlib.ExitStack() as stack:
            try:
                self.folder = stack.enter_context(memory_folder(self.board))
            except Exception:
                self.folder = None
            if self.folder is not None and new:
                self.staged = stack.enter_context(stage_memories(self.folder, new))
            try:
                yield
            finally:
                self.folder = self.staged = None

    # -- reads ------------------------------------------------------------------------------------------
    def read(self, memory_id: str) -> Memory | None:
        """The file ``memories/<memory_id>.md`` now; None when absent, BrokenMemory when unusable."""
        try:
            return read_memory(self.board, memory_id, folder=self.folder)
        except MemoryFileError as exc:
            raise BrokenMemory(f"memory file {exc.path} cannot be used: {exc.reason}") from None

    def read_quiet(self, memory_id: str) -> Memory | None:
        """:meth:`read`, with a broken file counted as absent."""
        try:
            return self.read(memory_id)
        except BrokenMemory:
            return None

    def resolve(self, key: str) -> Memory | None:
        """The memory named by ``key`` (its id, or a hand-edited file's content hash), as on disk now."""
        found = self.view.find(key)
        if found is not None:
            fresh = self.read(found.id)
            if fresh is not None:
                return fresh
        return self.read(key)

    # -- store ------------------------------------------------------------------------------------------
    def store(self, m: Memory) -> tuple[Memory, bool, tuple[str, ...]]:
        """Create ``m`` unless its content exists; then the existing memory gains ``m``'s tags (memdb's
        behaviour) and nothing else changes. Returns ``(memory, is_new, tags it gained)``."""
        existing = self.read(m.id)
        if existing is None:
            hand_edited = self.view.find(m.id)  # a file edited by hand to this very content
            if hand_edited is not None and hand_edited.id != m.id:
                fresh = self.read(hand_edited.id)
                if fresh is not None and fresh.hash == m.id:
                    existing = fresh
        if existing is None:
            # the caller hands the new file to the index itself: the watcher need not report its link
            path, is_new = write_memory(self.board, m, folder=self.folder, echo=False, staged=self.staged)
            if is_new:
                self.view.written(m, path)  # the writer takes it from here while the file is unchanged
                return m, True, ()
            existing = self.read(m.id)  # another writer (an import) created it a moment ago
            if existing is None:
                raise BrokenMemory("the memory file vanished while it was being stored")
        # a hand-written file may hold a tag in NFD; m's tags are NFC (rules.clean_tags)
        had = {unicodedata.normalize("NFC", t) for t in existing.tags}
        gained = tuple(t for t in m.tags if t not in had)
        merged = existing.tags + gained
        if gained:
            existing = existing.with_(tags=merged)
            write_memory(self.board, existing, overwrite=True, folder=self.folder)
        return existing, False, gained

    # -- update -----------------------------------------------------------------------------------------
    def update(self, key: str, changes: dict) -> tuple[str, Memory, list[str]]:
        """Apply ``changes`` (Memory fields; ``content`` already normalised). Returns ``(old id, new
        memory, changed paths)``. New content moves the file to its new hash, keeping its relations, and
        retargets every edge pointing at it. Raises MemoryNotFound, MemoryConflict, BrokenMemory."""
        old = self.resolve(key)
        if old is None:
            raise MemoryNotFound(f"no memory {key}")
        new = old.with_(**changes)
        paths = [old.path]
        new_id = new.hash if "content" in changes else old.id
        if new_id == old.id:  # same content, or content not given (a hand-edited file keeps its name)
            write_memory(self.board, new, overwrite=True)
            return old.id, new, paths
        other = self.read(new_id) or self.view.find(new_id)
        moved = new.with_(id=new_id)
        if other is not None and other.id != old.id:
            if not _moved_copy(other, moved):
                raise MemoryConflict(f"the new content already exists as memory {other.id}")
            moved = other  # this very move, cut short (a crash): finish it below, links then the old file
        elif not write_memory(self.board, moved)[1]:
            raise MemoryConflict(f"the new content already exists as memory {new_id}")
        paths.append(moved.path)
        for src, _ in self.view.incoming(old.id):
            fresh = self.read_quiet(src.id) if src.id != old.id else None
            if fresh is None:
                continue
            rel = tuple(
                Relation(r.id, r.type, new_id, r.created_at) if self._points_at(r, old.id) else r
                for r in fresh.relations
            )
            if rel != fresh.relations:
                write_memory(self.board, fresh.with_(relations=dedupe(rel)), overwrite=True)
                paths.append(fresh.path)
        delete_memory(self.board, old.id)
        return old.id, moved, paths

    # -- delete -----------------------------------------------------------------------------------------
    def delete(self, keys: Sequence[str]) -> tuple[list[Memory | Exception], list[str]]:
        """Delete each key; per key the deleted memory or its error (InvalidMemory, MemoryNotFound,
        BrokenMemory). Edges pointing at a deleted memory are removed from their files."""
        results: list[Memory | Exception] = []
        paths: list[str] = []
        gone: set[str] = set()
        for key in keys:
            try:
                check_key(key)
                m = self.view.find(key) or self.read_quiet(key)
                if m is None and key not in gone and delete_memory(self.board, key):
                    m = Memory(id=key, content="")  # a broken file: deleted all the same
                elif m is None or m.id in gone or not delete_memory(self.board, m.id):
                    raise MemoryNotFound(f"no memory {key}")
            except (InvalidMemory, MemoryNotFound) as exc:
                results.append(exc)
                continue
            except OSError as exc:
                results.append(BrokenMemory(f"cannot delete: {exc.strerror or exc}"))
                continue
            gone.add(m.id)
            results.append(m)
            paths.append(m.path)
        holders = {src.id for mid in gone for src, _ in self.view.incoming(mid)} - gone
        paths += self._drop_edges(
            sorted(holders), lambda r: r.target not in gone and self.view.resolve(r.target) not in gone
        )
        return results, paths

    # -- relationships ----------------------------------------------------------------------------------
    def relate(self, from_key: str, to_key: str, rtype: str) -> tuple[Edge, bool, list[str]]:
        """Add the edge ``from -> to`` (``rtype``) to the source file unless it is there."""
        src = self.resolve(from_key)
        if src is None:
            raise MemoryNotFound(f"no memory {from_key} (from_hash)")
        dst = self.resolve(to_key)
        if dst is None:
            raise MemoryNotFound(f"no memory {to_key} (to_hash)")
        if src.id == dst.id:
            raise InvalidMemory("a memory cannot be related to itself")
        for r in src.relations:
            if r.type == rtype and self._points_at(r, dst.id):
                return Edge.of(src, r), False, []
        rel = Relation(relation_id(), rtype, dst.id, utc_now())
        write_memory(self.board, src.with_(relations=(*src.relations, rel)), overwrite=True)
        return Edge.of(src, rel), True, [src.path]

    def unrelate(self, from_key: str, to_key: str, rtype: str) -> list[str]:
        """Remove the edge ``from -> to`` (``rtype``); ``[]`` when there was none."""
        src = self.resolve(from_key)
        if src is None:
            return []
        dst = self.view.find(to_key)
        target = dst.id if dst is not None else to_key
        kept = tuple(
            r
            for r in src.relations
            if not (r.type == rtype and (r.target == to_key or self._points_at(r, target)))
        )
        if kept == src.relations:
            return []
        write_memory(self.board, src.with_(relations=kept), overwrite=True)
        return [src.path]

    def prune(self, ids: Iterable[str]) -> list[str]:
        """Remove edges whose target no longer exists (no file of that name, and no memory whose content
        hashes to it: a renamed file keeps its edges) from the memories ``ids``."""
        return self._drop_edges(
            ids, lambda r: self.view.resolve(r.target) is not None or self.read_quiet(r.target) is not None
        )

    def _points_at(self, r: Relation, memory_id: str) -> bool:
        """Whether the edge ``r`` targets ``memory_id`` (by its name, or a renamed file's content hash)."""
        return r.target == memory_id or self.view.resolve(r.target) == memory_id

    def _drop_edges(self, ids: Iterable[str], keep) -> list[str]:
        paths = []
        for mid in ids:
            m = self.read_quiet(mid)
            if m is None:
                continue
            kept = tuple(r for r in m.relations if keep(r))
            if kept != m.relations:
                write_memory(self.board, m.with_(relations=kept), overwrite=True)
                paths.append(m.path)
                log.info("memory_edges_removed", id=mid[:12], removed=len(m.relations) - len(kept))
        return paths

    # -- accessed_at ------------------------------------------------------------------------------------
    def touch(self, times: dict[str, str]) -> None:
        """Write ``accessed_at`` for each id (only forward in time); best effort, never raises.

        The files share one open ``memories/``, fsynced once at the end, and each rewritten memory is
        handed to the view (:meth:`MemorySource.written`), so the writer does not read and parse it again
        for the watcher's event: its record is unchanged (the access time is not part of it)."""
        written = 0
        with self.batch():
            for mid, at in times.items():
                try:
                    m = self.read(mid)
                    if m is not None and at > m.accessed_at:
                        touched = m.with_(accessed_at=at)
                        path, _ = write_memory(self.board, touched, overwrite=True, folder=self.folder)
                        self.view.written(touched, path)
                        written += 1
                except Exception as exc:  # a touch must never fail a call or lose a file
                    log.warning("memory_touch_failed", id=mid[:12], error=f"{type(exc).__name__}: {exc}")
        if written:
            log.info("board.accessed_at_written", files=written)


def _moved_copy(found: Memory, moved: Memory) -> bool:
    """Whether ``found`` is the file an update moving a memory to ``moved`` writes first: the same fields
    but the access time and the edges (a search may have touched it since; its own edges may have been
    retargeted). A memory an agent stored with this content has its own creation time and fields."""
    return found.id == moved.id and found.with_(accessed_at="", relations=()) == moved.with_(
        accessed_at="", relations=()
    )


def dedupe(relations: Sequence[Relation]) -> tuple[Relation, ...]:
    """Relations without a second edge of the same type to the same target (the first is kept)."""
    seen: set[tuple[str, str]] = set()
    out = []
    for r in relations:
        if (r.type, r.target) not in seen:
            seen.add((r.type, r.target))
            out.append(r)
    return tuple(out)

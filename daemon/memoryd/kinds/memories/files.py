"""Memory files on the board: ``memories/<hash>.md``, one human-readable file per memory.

The format, the identity (hash) rule and what a hand edit means are in :mod:`memoryd.kinds.memories.format`
(re-exported here, so callers import everything from this module).

Writes
    Atomic and in the same folder: a dotfile temp (``.<hash>.md.<hex>.tmp``, ignored by the watcher and
    the reader), ``fsync``, then either ``link(2)`` to the final name (creating: fails with ``EEXIST``
    when another writer won, so exactly one of many concurrent creators sees ``is_new``) or
    ``rename(2)`` over it (replacing). Every directory is reached through :mod:`memoryd.board.gate`
    (no symlinked component); reads go through the gate (regular file, no symlink, one link).
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from memoryd.board import atomic
from memoryd.board.gate import SafeDir, Skipped, UnsafePath, is_ignored_name, open_folder
from memoryd.kinds.memories.format import (  # re-exported: the one module callers import
    _FILE_RE,
    HASH_RE,
    IMPORTANCE_MAX,
    MEMORIES_DIR,
    MEMORY_TYPES,
    RELATION_ID_RE,
    RELATION_TYPE_MAX,
    Memory,
    MemoryFileError,
    Relation,
    check_hash,
    content_hash,
    is_hash,
    memory_path,
    normalize_content,
    parse_memory,
    relation_id,
    render_memory,
    utc_now,
)
from memoryd.logs import get_logger

__all__ = [
    "HASH_RE",
    "IMPORTANCE_MAX",
    "MAX_FILE_BYTES",
    "MEMORIES_DIR",
    "MEMORY_TYPES",
    "RELATION_ID_RE",
    "RELATION_TYPE_MAX",
    "Memory",
    "MemoryFileError",
    "Relation",
    "check_hash",
    "content_hash",
    "delete_memory",
    "is_hash",
    "list_memories",
    "memory_folder",
    "memory_id_of",
    "memory_path",
    "memory_of_path",
    "normalize_content",
    "parse_memory",
    "read_memory",
    "relation_id",
    "render_memory",
    "stage_memories",
    "utc_now",
    "write_memory",
]

log = get_logger("memoryd.kinds.memories.files")

MAX_FILE_BYTES = 8 * 2**20


def _memories_dir(board: Path, create: bool = False) -> SafeDir | None:
    """The ``memories/`` folder through the gate; None when absent (and not ``create``)."""
    return open_folder(board, MEMORIES_DIR, create=create)


def _read(d: SafeDir, memory_id: str) -> Memory | None:
    name = f"{memory_id}.md"
    try:
        data = d.read_text(name, MAX_FILE_BYTES)
    except FileNotFoundError:
        return None
    except UnsafePath as exc:
        raise MemoryFileError(exc.path, exc.reason) from None
    except OSError as exc:
        raise MemoryFileError(d.relpath(name), f"cannot read: {exc.strerror}") from None
    return parse_memory(data, memory_id, d.relpath(name))


def read_memory(board: Path, memory_id: str, *, folder: SafeDir | None = None) -> Memory | None:
    """The memory stored as ``memories/<memory_id>.md``; None when absent. ``folder``: ``memories/``
    already open (:func:`memory_folder`).

    Raises InvalidId (a malformed hash, before any file access), :class:`MemoryFileError` (the file is
    broken or refused by the gate), UnsafePath (``memories/`` itself is a symlink or not a folder),
    BoardUnreadable (the board root).
    """
    check_hash(memory_id)
    if folder is not None:
        return _read(folder, memory_id)
    d = _memories_dir(board)
    if d is None:
        return None
    with d:
        return _read(d, memory_id)


@contextlib.contextmanager
def memory_folder(board: Path) -> Iterator[SafeDir]:
    """``memories/`` opened once (created when missing) for several reads and writes given it as
    ``folder``: those writes leave the folder's fsync to this context, which does it once on exit, so
    the caller reports them only once every new name is durable. Raises as :func:`write_memory`."""
    d = _memories_dir(board, create=True)
    if d is None:  # created by us a moment ago and removed again
        raise FileNotFoundError(errno.ENOENT, "memories folder vanished", str(board))
    with d:
        try:
            yield d
        finally:
            atomic.fsync_dir(d)


def stage_memories(folder: SafeDir, memories: Iterable[Memory]) -> atomic.Staged:
    """The files of those ``memories`` absent from ``folder`` (``memories/`` open), written to temps and
    fsynced together (:class:`memoryd.board.atomic.Staged`); :func:`write_memory` given the staging links
    them. On a write error (disk full) nothing stays staged: each write then reports its own error.
    Holds a descriptor per file until the fsyncs (a ``store_memories`` call brings at most 50)."""
    staging = atomic.Staged(folder)
    try:
        for m in memories:
            name = f"{m.id}.md"
            if is_hash(m.id) and not folder.exists(name):
                staging.add(name, render_memory(m).encode("utf-8"), m)
    except OSError:
        staging.close()  # empty now
        return staging
    staging.sync()
    return staging


def memory_id_of(name: str) -> str | None:
    """The hash of a file name ``<64 hex>.md``, else None."""
    m = _FILE_RE.fullmatch(name)
    return m.group(1) if m else None


def memory_of_path(rel: str) -> str | None:
    """The hash a board-relative path like ``memories/<hash>.md`` names, or None (sub-folders, other
    names: not memories; :func:`list_memories` reports names)."""
    parts = rel.split("/")
    return memory_id_of(parts[1]) if len(parts) == 2 and parts[0] == MEMORIES_DIR else None


#: Why a file in ``memories/`` not named by its content's hash is skipped.
MISNAMED = "name is not <sha256 hex>.md"


def misnamed(rel: str) -> bool:
    """True for a board-relative ``memories/<name>`` that is not an editor's temporary file and not named
    ``<sha256 hex>.md``: a file the folder holds but no memory (reported as skipped)."""
    parts = rel.split("/")
    return (
        len(parts) == 2
        and parts[0] == MEMORIES_DIR
        and not is_ignored_name(parts[1])
        and memory_id_of(parts[1]) is None
    )


def list_memories(board: Path) -> tuple[list[Memory], list[Skipped]]:
    """Every readable memory (sorted by id) and the files skipped (each also logged as a warning).

    Raises BoardUnreadable only for the board root; a missing ``memories/`` folder is an empty list, an
    unusable one (a symlink, a file) an empty list with that folder skipped.
    """
    memories: list[Memory] = []
    skipped: list[Skipped] = []
    try:
        d = _memories_dir(board)
    except UnsafePath as exc:
        _skip(skipped, exc.path, exc.reason)
        return memories, skipped
    except OSError as exc:
        _skip(skipped, MEMORIES_DIR, f"cannot open: {exc.strerror or exc}")
        return memories, skipped
    if d is None:
        return memories, skipped
    with d:
        try:
            names = d.names()
        except OSError as exc:
            _skip(skipped, MEMORIES_DIR, f"cannot list: {exc.strerror or exc}")
            names = []
        for name in names:
            if is_ignored_name(name):
                continue
            memory_id = memory_id_of(name)
            if memory_id is None:
                _skip(skipped, d.relpath(name), MISNAMED)
                continue
            try:
                memory = _read(d, memory_id)
            except MemoryFileError as exc:
                _skip(skipped, exc.path, exc.reason)
                continue
            except Exception as exc:  # noqa: BLE001 - one file must never stop every memory from loading
                log.exception("board.read_failed", path=d.relpath(name))
                _skip(skipped, d.relpath(name), f"unexpected error: {type(exc).__name__}")
                continue
            if memory is not None:
                memories.append(memory)
    return memories, skipped


def _skip(skipped: list[Skipped], path: str, reason: str) -> None:
    log.warning("board.file_skipped", path=path, reason=reason)
    skipped.append(Skipped(path, reason))


def write_memory(
    board: Path,
    memory: Memory,
    *,
    overwrite: bool = False,
    folder: SafeDir | None = None,
    echo: bool = True,
    staged: atomic.Staged | None = None,
) -> tuple[Path, bool]:
    """Write ``memories/<memory.id>.md`` atomically; returns ``(absolute path, is_new)``.

    ``overwrite=False`` (storing): create the file only if absent; when it exists, or another writer
    creates it first, nothing is written and ``is_new`` is False. ``overwrite=True`` (updating relations,
    tags, accessed_at): replace the file (``is_new`` says whether it was absent before).
    Raises InvalidId (bad id), UnsafePath (``memories`` is a symlink or not a folder; the target name is
    a folder), BoardUnreadable (board root), OSError (disk full; no temp file is left). ``folder``:
    ``memories/`` open in a :func:`memory_folder`, which fsyncs the folder once for all its writes.
    ``echo=False`` (creating): the caller hands the new file to the index itself, so the watcher may drop
    the event of its creation (:func:`memoryd.board.atomic.write_new`). ``staged``: temps of ``folder``
    written ahead (:func:`stage_memories`); a new file staged for this very memory is linked from there.
    """
    check_hash(memory.id)
    name = f"{memory.id}.md"
    ahead = staged.data(name, memory) if staged is not None and folder is not None and not overwrite else None
    data = render_memory(memory).encode("utf-8") if ahead is None else ahead
    if folder is not None:
        how = (staged, memory) if ahead is not None else None
        path, is_new = _write(board, folder, name, data, overwrite, sync_dir=False, echo=echo, staged=how)
    else:
        d = _memories_dir(board, create=True)
        if d is None:  # created by us a moment ago and removed again
            raise FileNotFoundError(errno.ENOENT, "memories folder vanished", str(board))
        with d:
            path, is_new = _write(board, d, name, data, overwrite, sync_dir=True, echo=echo)
    if is_new or overwrite:
        # a batch's writes (``folder``) are logged once by their caller: a JSON line per file of a batch of
        # 50 was ~5 ms of the daemon's CPU, taken from the embedding running beside it on 2 cores
        (log.debug if folder is not None else log.info)(
            "board.memory_written", id=memory.id[:12], bytes=len(data), new=is_new
        )
    return path, is_new


def _write(
    board: Path,
    d: SafeDir,
    name: str,
    data: bytes,
    overwrite: bool,
    sync_dir: bool,
    echo: bool = True,
    staged: tuple[atomic.Staged, Memory] | None = None,
):
    path = Path(board) / d.rel / name
    if not overwrite and d.exists(name):
        return path, False
    if overwrite:
        is_new = not d.exists(name)
        atomic.write_replace(d, name, data, sync_dir=sync_dir)
    else:
        is_new = atomic.write_new(d, name, data, sync_dir=sync_dir, echo=echo, staged=staged)
    return path, is_new


def delete_memory(board: Path, memory_id: str) -> bool:
    """Remove ``memories/<memory_id>.md``; True when a file was removed, False when it was absent.

    Raises InvalidId first, UnsafePath when the entry is a folder, BoardUnreadable for the root.
    Edges stored in *other* memories that point here are not touched (callers clean them up).
    """
    check_hash(memory_id)
    d = _memories_dir(board)
    if d is None:
        return False
    with d:
        name = f"{memory_id}.md"
        try:
            os.unlink(name, dir_fd=d.fd)
        except FileNotFoundError:
            return False
        except IsADirectoryError:
            raise UnsafePath(d.relpath(name), "directory") from None
        except PermissionError as exc:
            if exc.errno == errno.EPERM:  # Linux reports unlink of a directory as EISDIR, macOS as EPERM
                raise UnsafePath(d.relpath(name), "directory") from None
            raise
        with contextlib.suppress(OSError):
            os.fsync(d.fd)
    log.info("board.memory_deleted", id=memory_id[:12])
    return True

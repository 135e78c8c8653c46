"""Record sources: how each board folder becomes index records, the same way for every kind.

A *source* owns one or more top-level board folders (``briefs`` and ``tasks``; ``memories``; ``sessions``)
and the record kinds derived from them. The watcher (:mod:`memoryd.core.watch`) asks this registry which
folders to watch (:func:`watched_folders`); the indexer (:mod:`memoryd.core.indexer`, the one writer)
routes each changed path to the source owning its folder, asks it for records and keeps the index equal to
what it yields; the source never writes to the index or the board itself.

Interface (a class; nothing to inherit, :class:`RecordSource` is a ``Protocol``)::

    board: Path                   # the board it reads
    folders: tuple[str, ...]      # the board folders it owns, e.g. ("memories",)
    kinds: tuple[str, ...]        # the record kinds it yields, e.g. ("memory",)
    def load_all(self) -> SourceBatch          # every file of the folder (startup, rescan)
    def records_for(self, paths) -> SourceBatch  # only what these board-relative paths touch

*Origins, deferred records, skips*: what a source hands the writer is a
:class:`memoryd.index.records.SourceBatch` (its rules are there); sources whose files are named by id build
``records_for`` with :func:`memoryd.index.records.records_by_id`.

``records_for(paths)`` gets board-relative paths under its :attr:`folders` reported by the watcher
(:attr:`memoryd.core.watch.Change.paths`) or submitted by a tool after a write. A path may name a file that
no longer exists, a subfolder, a temp name, or the folder itself (created, deleted or moved wholesale).
The batch must list every origin those paths touch, including origins whose files are gone (with
``()``). When the source cannot tell what a path covers (the folder itself), it returns
``load_all()`` with ``complete=True``: the indexer then also drops origins of this source that the
batch does not list.

*Skips.* A source method raises only for the board root
(:class:`memoryd.kinds.briefs.source.BoardUnreadable`); a file it cannot read is a skip in its batch.

*Threads.* ``load_all`` and ``records_for`` run on the indexer's worker thread, never concurrently with
each other. A source may keep in-memory state (the memories source keeps every memory for the tools);
state read from other threads must be published safely (a lock, or copy-on-write).

*Redaction.* Every text field of a record goes through :func:`memoryd.index.records.clean` (records are
the only way text reaches the index).

Registering a source: add its module name to :data:`SOURCES`. The module exposes
``source(board: pathlib.Path) -> RecordSource``; a module that is not installed yet is skipped (like
:data:`memoryd.tools.GROUP_MODULES`), an import error inside an existing module still raises.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from memoryd.index.records import SourceBatch

#: Modules defining ``source(board) -> RecordSource``, in the order sources are loaded.
SOURCES: tuple[str, ...] = (
    "memoryd.kinds.briefs.source",
    "memoryd.kinds.memories.source",
    "memoryd.kinds.sessions.source",
)


@runtime_checkable
class RecordSource(Protocol):
    """See the module docstring."""

    board: Path
    folders: tuple[str, ...]
    kinds: tuple[str, ...]

    def load_all(self) -> SourceBatch: ...

    def records_for(self, paths: Collection[str]) -> SourceBatch: ...


def make_sources(board: Path) -> list[RecordSource]:
    """One instance of every installed source in :data:`SOURCES`, for ``board``."""
    out: list[RecordSource] = []
    for name in SOURCES:
        try:
            found = importlib.util.find_spec(name)
        except ModuleNotFoundError:  # the parent package is not there either
            found = None
        if found is None:
            continue
        src = importlib.import_module(name).source(Path(board))
        if not isinstance(src, RecordSource):
            raise TypeError(f"{name}.source() does not return a RecordSource")
        out.append(src)
    owners(out)  # raises when two sources claim one folder
    return out


def owners(sources: Sequence[RecordSource]) -> dict[str, RecordSource]:
    """Board folder -> the source owning it. Raises ValueError when two sources claim one folder."""
    out: dict[str, RecordSource] = {}
    for src in sources:
        for folder in src.folders:
            if folder in out:
                raise ValueError(f"two record sources claim the board folder {folder!r}")
            out[folder] = src
    return out


def watched_folders(sources: Sequence[RecordSource]) -> frozenset[str]:
    """The top-level board folders whose changes reach a source: what the watcher watches."""
    return frozenset(owners(sources))


def folder_of(path: str) -> str:
    """The top-level folder of a board-relative POSIX path (``"memories/x.md"`` -> ``"memories"``)."""
    return path.split("/", 1)[0]

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

*Origins.* Every record comes from one **origin**: a key naming what it was derived from, normally the
board-relative POSIX path of one file or folder (``memories/<hash>.md``, ``briefs/<id>``). One origin may
yield many records (a session file yields one record per line). :attr:`SourceBatch.origins` maps every
origin the batch covers to the ids of ALL the records it yields now; ``()`` means the origin yields
nothing any more (file deleted, broken, emptied). The indexer remembers origin -> record ids (rebuilt at
every full sync) and deletes each record an origin no longer yields, so deleting or editing a file
removes every record derived from it that is gone, without the source having to remember anything.

*Deferred records.* A full load may offer a record as its id, a hash of the inputs it is derived from
and a function deriving it (:meth:`SourceBatch.defer`): the writer derives it only when those inputs
changed since it last derived that record (:mod:`memoryd.index.derive_cache`).

``records_for(paths)`` gets board-relative paths under its :attr:`folders` reported by the watcher
(:attr:`memoryd.core.watch.Change.paths`) or submitted by a tool after a write. A path may name a file that
no longer exists, a subfolder, a temp name, or the folder itself (created, deleted or moved wholesale).
The batch must list every origin those paths touch, including origins whose files are gone (with
``()``). When the source cannot tell what a path covers (the folder itself), it returns
``load_all()`` with ``complete=True``: the indexer then also drops origins of this source that the
batch does not list.

*Skips.* Files that cannot be read go to :attr:`SourceBatch.skipped` (and the log); their origin maps to
``()`` so any record they yielded before is removed. A source method raises only for the board root
(:class:`memoryd.kinds.briefs.source.BoardUnreadable`); everything else is a skip. A skipped path is the
origin or a path inside it (``briefs/<id>/notes.md``).

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
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from memoryd.board.gate import Skipped
from memoryd.index.records import Record

#: Modules defining ``source(board) -> RecordSource``, in the order sources are loaded.
SOURCES: tuple[str, ...] = (
    "memoryd.kinds.briefs.source",
    "memoryd.kinds.memories.source",
    "memoryd.kinds.sessions.source",
)


@dataclass(frozen=True)
class Deferred:
    """A record offered without deriving it: its ``id``, the hash of its ``inputs``, and ``derive()``."""

    id: str
    inputs: str
    derive: Callable[[], Record]


@dataclass
class SourceBatch:
    """What a source yields for a full load or for some changed paths.

    ``records``: records to upsert (unchanged ones are skipped by the indexer by content hash).
    ``deferred``: records to upsert, derived only when their inputs changed (:class:`Deferred`).
    ``origins``: origin key -> ids of every record that origin yields now (``()`` = none any more).
    ``skipped``: files not loaded, and why. ``complete``: ``origins`` covers the whole folder.
    """

    records: list[Record] = field(default_factory=list)
    deferred: list[Deferred] = field(default_factory=list)
    origins: dict[str, tuple[str, ...]] = field(default_factory=dict)
    skipped: list[Skipped] = field(default_factory=list)
    complete: bool = False

    def add(self, origin: str, records: Collection[Record]) -> None:
        """Record that ``origin`` yields exactly ``records`` now (appends to :attr:`records`)."""
        self.records.extend(records)
        self.origins[origin] = tuple(r.id for r in records)

    def defer(self, origin: str, record_id: str, inputs: str, derive: Callable[[], Record]) -> None:
        """Record that ``origin`` yields exactly the one record ``derive()`` returns, whose id is
        ``record_id`` and whose inputs hash to ``inputs`` (appends to :attr:`deferred`)."""
        self.deferred.append(Deferred(record_id, inputs, derive))
        self.origins[origin] = (record_id,)


@runtime_checkable
class RecordSource(Protocol):
    """See the module docstring."""

    board: Path
    folders: tuple[str, ...]
    kinds: tuple[str, ...]

    def load_all(self) -> SourceBatch: ...

    def records_for(self, paths: Collection[str]) -> SourceBatch: ...


def records_by_id(
    source: RecordSource,
    paths: Collection[str],
    folder: str,
    id_of: Callable[[str], str | None],
    load: Callable[[str, SourceBatch], None],
) -> SourceBatch:
    """``records_for`` of a source whose files are named by id: ``load(id, batch)`` for each id (sorted)
    ``id_of(path)`` finds among the board-relative ``paths`` under ``folder`` (paths it gives None for are
    not records of it); ``source.load_all()`` when ``folder`` itself is among them (created, deleted or
    moved wholesale: only a full load can tell what it covers)."""
    ids: set[str] = set()
    for path in paths:
        if path == folder:
            return source.load_all()
        if path.startswith(folder + "/") and (found := id_of(path)) is not None:
            ids.add(found)
    batch = SourceBatch()
    for one in sorted(ids):
        load(one, batch)
    return batch


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

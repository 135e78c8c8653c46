"""``memoryd import --from NAME PATH``: bring memories from another memory server onto the board.

Importers read a foreign store and yield neutral items; :mod:`memoryd.importers.apply` turns them into
board files (``memories/<hash>.md``, through :func:`memoryd.kinds.memories.files.write_memory`). They never open
the index: the running daemon's watcher indexes the new files (or the next ``memoryd serve`` does at start),
so there is never a second writer on one index.

The importer interface
----------------------
An importer is a module listed in :data:`IMPORTERS` (one line: ``"name": "memoryd.importers.module"``); a
listed module that does not exist yet is skipped (:func:`available`). The module defines:

``iter_items(path: pathlib.Path) -> Iterator[ImportItem | ImportRelation | ImportProblem]``
    Read the source and yield, in any order:

    * :class:`ImportItem` — one memory: ``key`` (the source's own id for it, unique in the source; what
      relations refer to), ``content`` (str), ``tags``, ``importance`` (0–10), ``memory_type``,
      ``created_at`` / ``accessed_at`` (ISO-8601 UTC or None = now), ``project`` (None = the command's);
    * :class:`ImportRelation` — a directed, typed edge between two ``key`` s (resolved after every item
      has been read, so it may come before its memories);
    * :class:`ImportProblem` — a line/row that cannot be imported: ``where`` (``"line 7"``,
      ``"memories row 12"``) and ``reason``. It is reported and skipped; the import goes on.

    Raise :class:`SourceUnreadable` when the source as a whole cannot be read (missing file, not a
    SQLite database, no ``memories`` table): nothing is written then.

``default_project(path) -> str | None`` (optional)
    The project of items whose ``project`` is None when the command line gives no ``--project``.

``DESCRIPTION: str`` (optional)
    One line for ``memoryd import --help``.

``run_import(source, board, *, dry_run, project, on_problem) -> ImportSummary`` (optional)
    For a source holding more than memories (memoryd's own export, ``jsonl``): when defined,
    :func:`memoryd.importers.apply.run_import` hands the whole import to it instead of reading
    ``iter_items``; it must keep the same promises (idempotent, problems reported, nothing written by a
    dry run).

How items become board files: every item is checked against the limits of the ``memories`` tools
(content 1–100,000 characters and no lone surrogates; tags 1–100, each 1–50 characters without
whitespace; importance an integer 0–10; ``memory_type`` one of :data:`MEMORY_TYPES`; relation types
1–50 characters without whitespace); its id is the SHA-256 of the normalised content, so a second import of
the same source finds every memory and relation already on the board and adds nothing (idempotent). A memory
already on the board is left as it is (its tags, importance and dates are not merged). Relations are stored
with their source memory; a relation naming a key that was not imported is reported and skipped.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from memoryd.board.gate import os_reason

#: Importer name (``memoryd import --from NAME``) -> module defining ``iter_items(path)``.
IMPORTERS: dict[str, str] = {
    "memdb": "memoryd.importers.memdb",
    "mcp-memory": "memoryd.importers.mcp_memory",
    "memo": "memoryd.importers.memo",
    "jsonl": "memoryd.importers.jsonl",
}

#: The ``memory_type`` values of memdb's tools.
MEMORY_TYPES = ("general", "fact", "plan", "decision", "reflection", "lesson", "error", "gradient")


class SourceUnreadable(Exception):
    """The source as a whole cannot be read (``str(exc)`` says why); nothing is imported."""


def read_lines(path: str | Path) -> list[bytes]:
    """The lines of a line-per-record source, each with its ``\\n`` (a torn last line has none).

    Raises :class:`SourceUnreadable` when the file is missing, a directory or unreadable."""
    try:
        with open(Path(path), "rb") as fh:
            return list(fh)
    except OSError as exc:
        raise SourceUnreadable(os_reason(exc, str(path))) from None


@dataclass(frozen=True)
class ImportItem:
    """One memory read from a source. ``where`` locates it in the source for messages."""

    key: str
    content: str
    where: str
    tags: tuple[str, ...] = ()
    importance: int = 0
    memory_type: str = "general"
    created_at: str | None = None
    accessed_at: str | None = None
    project: str | None = None


@dataclass(frozen=True)
class ImportRelation:
    """A directed, typed edge ``from_key -> to_key`` between two items of the same source."""

    from_key: str
    to_key: str
    relation_type: str
    where: str
    created_at: str | None = None


@dataclass(frozen=True)
class ImportProblem:
    """A line or row that is skipped: ``where`` (``"line 7"``, ``"memories row 12"``) and ``reason``."""

    where: str
    reason: str


@dataclass
class ImportSummary:
    """What an import did (or, with ``dry_run``, would do). Every memory and relation of the source is counted
    once: new, already on the board (``existing``), a ``duplicate`` of an earlier one in the same source, or
    skipped (one entry in ``problems``, with where and why)."""

    source: str
    importer: str
    board: str
    dry_run: bool = False
    memories_new: int = 0
    memories_existing: int = 0
    memories_duplicate: int = 0  # same content (after normalisation) twice in the source
    relations_new: int = 0
    relations_existing: int = 0
    problems: list[ImportProblem] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "source": self.source,
            "from": self.importer,
            "board": self.board,
            "dry_run": self.dry_run,
            "memories": {
                "new": self.memories_new,
                "existing": self.memories_existing,
                "duplicate": self.memories_duplicate,
            },
            "relations": {
                "new": self.relations_new,
                "existing": self.relations_existing,
            },
            "skipped": [{"where": p.where, "reason": p.reason} for p in self.problems],
        }


def available() -> dict[str, str]:
    """The importers whose module exists: ``{name: module}`` in :data:`IMPORTERS` order."""
    return {name: mod for name, mod in IMPORTERS.items() if importlib.util.find_spec(mod) is not None}


def load(name: str) -> ModuleType:
    """The importer module for ``name``. Raises KeyError for a name that is not available."""
    module = available().get(name)
    if module is None:
        raise KeyError(name)
    return importlib.import_module(module)


__all__ = [
    "IMPORTERS",
    "MEMORY_TYPES",
    "ImportItem",
    "ImportProblem",
    "ImportRelation",
    "ImportSummary",
    "SourceUnreadable",
    "available",
    "load",
    "read_lines",
]

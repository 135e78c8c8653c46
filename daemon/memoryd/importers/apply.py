"""Turn an importer's items into board files: ``memories/<hash>.md`` through :mod:`memoryd.kinds.memories.files`.

:func:`run_import` reads every item first (relations may name memories that come later), then writes the
memories (create-only: a memory already on the board is left untouched), then adds each source memory's new
relations in one rewrite of its file. Identity makes a second run a no-op: a memory's id is the hash of its
normalised content, and a relation that its source memory already holds (same type, same target) is not
added again — so re-importing the same source adds nothing.

It writes board files only and never opens the index: the daemon's watcher indexes the new files (never two
writers on one index). A relation added while the daemon rewrites the same memory file (an
``update_memory`` at that very moment) could be lost to the daemon's rename; running the import again adds it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

from memoryd.importers import ImportItem, ImportProblem, ImportRelation, ImportSummary, load
from memoryd.importers.values import IMPORTANCE_MAX, content_problem, relation_type_problem, tags_problem
from memoryd.kinds.briefs.writer import ensure_board
from memoryd.kinds.memories.files import (
    MEMORY_TYPES,
    Memory,
    MemoryFileError,
    Relation,
    memory_path,
    read_memory,
    relation_id,
    utc_now,
    write_memory,
)
from memoryd.logs import get_logger

log = get_logger("memoryd.import")


def origin_of(importer: str) -> str:
    """The ``origin`` front-matter value of memories written by ``importer`` (``import:memdb``)."""
    return f"import:{importer}"


def build_memory(item: ImportItem, project: str, origin: str) -> Memory:
    """The board memory for ``item``. Raises ValueError (message = the reason) when it breaks a rule."""
    reason = (
        content_problem(item.content)
        or tags_problem(tuple(item.tags))
        or (
            None
            if item.memory_type in MEMORY_TYPES
            else f"memory_type {item.memory_type!r} is not one of {', '.join(MEMORY_TYPES)}"
        )
        or (
            None
            if isinstance(item.importance, int)
            and not isinstance(item.importance, bool)
            and 0 <= item.importance <= IMPORTANCE_MAX
            else f"importance {item.importance!r} is not an integer 0-{IMPORTANCE_MAX}"
        )
    )
    if reason:
        raise ValueError(reason)
    fields: dict = {
        "tags": tuple(item.tags),
        "importance": item.importance,
        "memory_type": item.memory_type,
        "project": item.project if item.project is not None else project,
        "origin": origin,
    }
    if item.created_at:
        fields["created_at"] = item.created_at
        fields["accessed_at"] = item.accessed_at or item.created_at
    elif item.accessed_at:
        fields["accessed_at"] = item.accessed_at
    return Memory.new(item.content, **fields)


def exists_on_board(board: Path, memory_id: str) -> bool:
    """Whether ``memories/<memory_id>.md`` is taken (by any entry: a create-only write would keep it)."""
    return os.path.lexists(Path(board) / memory_path(memory_id))


def run_import(
    importer: str,
    source: Path,
    board: Path,
    *,
    dry_run: bool = False,
    project: str | None = None,
    on_problem: Callable[[ImportProblem], None] | None = None,
) -> ImportSummary:
    """Import ``source`` with the importer named ``importer`` onto ``board``; return the summary.

    ``project`` (None = the importer's ``default_project(source)``, else ``""``) is given to items that name
    none. ``dry_run`` reads and checks everything and counts what would be new, writing nothing.
    ``on_problem`` is called for each skipped line/row as it is found (the summary lists them too). The board
    is created when missing (not by a dry run).
    Raises KeyError (unknown importer), :class:`memoryd.importers.SourceUnreadable` (nothing written),
    BoardUnreadable / OSError from the board writes.
    """
    module = load(importer)
    source = Path(source)
    if hasattr(module, "run_import"):  # an importer writing more than memories (jsonl exports)
        return module.run_import(source, Path(board), dry_run=dry_run, project=project, on_problem=on_problem)
    if project is None:
        default = getattr(module, "default_project", None)
        project = (default(source) if default else None) or ""
    summary = ImportSummary(source=str(source), importer=importer, board=str(board), dry_run=dry_run)

    def problem(p: ImportProblem) -> None:
        summary.problems.append(p)
        if on_problem is not None:
            on_problem(p)

    items: list[ImportItem] = []
    relations: list[ImportRelation] = []
    for entry in module.iter_items(source):  # read it all first: a source that fails midway writes nothing
        if isinstance(entry, ImportItem):
            items.append(entry)
        elif isinstance(entry, ImportRelation):
            relations.append(entry)
        else:
            problem(entry)
    if not dry_run:
        ensure_board(Path(board))
    keys = _write_memories(items, board, project, origin_of(importer), dry_run, summary, problem)
    _write_relations(relations, keys, board, dry_run, summary, problem)
    log.info(
        "import_done",
        importer=importer,
        dry_run=dry_run,
        memories_new=summary.memories_new,
        memories_existing=summary.memories_existing,
        relations_new=summary.relations_new,
        skipped=len(summary.problems),
    )
    return summary


def _write_memories(
    items: Iterable[ImportItem],
    board: Path,
    project: str,
    origin: str,
    dry_run: bool,
    summary: ImportSummary,
    problem: Callable[[ImportProblem], None],
) -> dict[str, str]:
    """Write (or count) each item's memory; returns source key -> memory id."""
    keys: dict[str, str] = {}
    seen: set[str] = set()
    for item in items:
        if item.key in keys:
            problem(ImportProblem(item.where, f"key {item.key!r} appears twice in the source"))
            continue
        try:
            memory = build_memory(item, project, origin)
        except ValueError as exc:
            problem(ImportProblem(item.where, str(exc)))
            continue
        keys[item.key] = memory.id
        if memory.id in seen:
            summary.memories_duplicate += 1
            continue
        seen.add(memory.id)
        if dry_run:
            is_new = not exists_on_board(board, memory.id)
        else:
            _, is_new = write_memory(board, memory)
        if is_new:
            summary.memories_new += 1
        else:
            summary.memories_existing += 1
    return keys


def _write_relations(
    relations: Iterable[ImportRelation],
    keys: dict[str, str],
    board: Path,
    dry_run: bool,
    summary: ImportSummary,
    problem: Callable[[ImportProblem], None],
) -> None:
    """Add the new relations, one rewrite per source memory."""
    by_source: dict[str, list[tuple[ImportRelation, str]]] = {}
    for rel in relations:
        reason = relation_type_problem(rel.relation_type)
        missing = [k for k in (rel.from_key, rel.to_key) if k not in keys]
        if reason:
            problem(ImportProblem(rel.where, reason))
        elif missing:
            problem(ImportProblem(rel.where, f"points at {missing[0]!r}, which was not imported"))
        else:
            by_source.setdefault(keys[rel.from_key], []).append((rel, keys[rel.to_key]))
    for source_id, edges in by_source.items():
        try:
            memory = (
                read_memory(board, source_id) if (not dry_run or exists_on_board(board, source_id)) else None
            )
        except MemoryFileError as exc:
            for rel, _ in edges:
                problem(ImportProblem(rel.where, f"its source memory's file is broken ({exc.reason})"))
            continue
        have = {(r.type, r.target) for r in memory.relations} if memory is not None else set()
        added: list[Relation] = []
        for rel, target in edges:
            if (rel.relation_type, target) in have:
                summary.relations_existing += 1
                continue
            have.add((rel.relation_type, target))
            added.append(Relation(relation_id(), rel.relation_type, target, rel.created_at or utc_now()))
        summary.relations_new += len(added)
        if added and not dry_run:
            if memory is None:  # removed between our write and now: report instead of recreating it
                for rel, _ in edges:
                    problem(ImportProblem(rel.where, "its source memory vanished from the board"))
                summary.relations_new -= len(added)
                continue
            write_memory(board, memory.with_(relations=memory.relations + tuple(added)), overwrite=True)

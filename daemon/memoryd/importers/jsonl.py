"""Importer for memoryd's own export files (``export_database`` / ``memoryd export``).

Unlike the other importers, an export holds more than memories (briefs and tasks, session turns and
summaries), so this module defines :func:`run_import`, which :func:`memoryd.importers.apply.run_import`
calls instead of reading :func:`iter_items`: it validates every line first (each rejected line is
reported with its number) and merges the rest onto the board through :mod:`memoryd.importers.exchange`, keeping
every memory's own ``origin``, dates and relations. ``iter_items`` (memories and their relations only)
is there for callers of the plain importer interface.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memoryd.importers import ImportItem, ImportProblem, ImportRelation, ImportSummary, SourceUnreadable

DESCRIPTION = "a memoryd export (export_database / memoryd export): briefs, memories, sessions, summaries"


@dataclass
class ExportImportSummary(ImportSummary):
    """:class:`ImportSummary` plus what was written, kept and found per record type (``as_dict``)."""

    written: dict[str, int] = field(default_factory=dict)
    kept: dict[str, int] = field(default_factory=dict)
    read: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        out = super().as_dict()
        out.update(read=self.read, written=self.written, kept=self.kept)
        return out


def _parse(path: Path):
    from memoryd.importers.exchange import ExchangeError, parse_import, read_import_file

    try:
        return parse_import(read_import_file(Path(path)))
    except ExchangeError as exc:
        raise SourceUnreadable(str(exc)) from None


def run_import(
    source: Path,
    board: Path,
    *,
    dry_run: bool = False,
    on_problem: Callable[[ImportProblem], None] | None = None,
    **_: Any,
) -> ExportImportSummary:
    """Merge an export file onto ``board``; rejected lines are reported and skipped."""
    from memoryd.importers.exchange import apply_import

    parsed = _parse(source)
    summary = ExportImportSummary(source=str(source), importer="jsonl", board=str(board), dry_run=dry_run)
    for n, why in parsed.rejected:
        problem = ImportProblem(f"line {n}", why)
        summary.problems.append(problem)
        if on_problem is not None:
            on_problem(problem)
    summary.read = {
        k: len(getattr(parsed, k)) for k in ("tasks", "briefs", "memories", "interactions", "summaries")
    }
    summary.memories_read = len(parsed.memories)
    summary.relations_read = sum(len(m.relations) for m in parsed.memories)
    if dry_run:  # what a merge would add: memories whose file is not on the board yet
        from memoryd.importers.apply import exists_on_board

        fresh = [m for m in parsed.memories if not exists_on_board(board, m.id)]
        summary.memories_new = len(fresh)
        summary.memories_existing = len(parsed.memories) - len(fresh)
        summary.relations_new = sum(len(m.relations) for m in fresh)
        summary.written, summary.kept = _would_merge(Path(board), parsed)
        return summary
    result = apply_import(Path(board), parsed, "merge")
    summary.written, summary.kept = result["written"], result["kept"]
    if result.get("refused"):
        from memoryd.kinds.sessions.files import MAX_LOG_BYTES

        problem = ImportProblem(
            "sessions",
            f"{result['refused']['interaction']} turn(s) not imported: their session's log would pass "
            f"{MAX_LOG_BYTES // 2**20} MiB, the most memoryd reads",
        )
        summary.problems.append(problem)
        if on_problem is not None:
            on_problem(problem)
    summary.memories_new = result["written"].get("memory", 0)
    summary.memories_existing = result["kept"].get("memory", 0)
    summary.relations_new = sum(len(m.relations) for m in parsed.memories) if summary.memories_new else 0
    return summary


def _would_merge(board: Path, parsed) -> tuple[dict[str, int], dict[str, int]]:
    """``(written, kept)`` counts by kind that merging ``parsed`` onto ``board`` would give (as
    :func:`memoryd.importers.exchange.apply_import` counts them), reading the board only."""
    import os
    from collections import Counter

    from memoryd.importers.apply import exists_on_board
    from memoryd.kinds.sessions import files as sess

    written: Counter[str] = Counter()
    kept: Counter[str] = Counter()
    for kind, folder, items, suffix in (
        ("task", "tasks", parsed.tasks, ".json"),
        ("brief", "briefs", parsed.briefs, ""),
    ):
        for item in items:
            there = os.path.lexists(board / folder / f"{item['id']}{suffix}")
            (kept if there else written)[kind] += 1
    for m in parsed.memories:
        (kept if exists_on_board(board, m.id) else written)["memory"] += 1
    have: dict[str, set[str]] = {}
    for i in parsed.interactions:
        if i.session_id not in have:
            found = sess.read_log(board, i.session_id) if board.is_dir() else None
            have[i.session_id] = {x.id for x in found.interactions} if found is not None else set()
        (kept if i.id in have[i.session_id] else written)["interaction"] += 1
        have[i.session_id].add(i.id)
    for s in parsed.summaries:
        there = board.is_dir() and sess.read_summary(board, s.session_id) is not None
        (kept if there else written)["summary"] += 1
    return dict(written), dict(kept)


def iter_items(path: Path) -> Iterator[ImportItem | ImportRelation | ImportProblem]:
    """The export's memories and relations through the plain importer interface."""
    parsed = _parse(path)
    for n, why in parsed.rejected:
        yield ImportProblem(f"line {n}", why)
    for m in parsed.memories:
        yield ImportItem(
            key=m.id,
            content=m.content,
            where=f"memory {m.id[:12]}",
            tags=m.tags,
            importance=m.importance,
            memory_type=m.memory_type,
            created_at=m.created_at or None,
            accessed_at=m.accessed_at or None,
            project=m.project,
        )
        for r in m.relations:
            yield ImportRelation(m.id, r.target, r.type, f"memory {m.id[:12]}", r.created_at)

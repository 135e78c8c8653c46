"""``memoryd import --from NAME PATH [--dry-run] [--board DIR] [--project P] [--json]``.

Writes board files only (``memories/<hash>.md``; from a memoryd export also tasks, briefs, session turns
and summaries); the running daemon's watcher indexes them, or the next ``memoryd serve`` does at start.
Each skipped line/row is printed on stderr as it is found (``memoryd import: line 7: not valid JSON
(skipped)``); a summary follows on stdout, a line per kind of record the source held (``--json``: one
object, :meth:`memoryd.importers.ImportSummary.as_dict`).

Exit codes: 0 imported (or checked, with ``--dry-run``) with nothing skipped; 1 imported, but some lines or
rows were skipped; 2 nothing imported (unknown importer, unreadable source or board).
"""

from __future__ import annotations

import json
import sys

from memoryd.cli.options import BOARD_HELP, command, locations


def register(sub) -> None:
    """Add the ``import`` sub-command to the ``argparse`` sub-parsers ``sub``."""
    from memoryd.importers import available

    names = list(available())
    p = command(
        sub,
        "import",
        cmd_import,
        help="bring memories from another memory server onto the board",
        description="Import memories and their relations as board files (memories/<hash>.md). "
        "Idempotent: importing the same source again adds nothing.",
    )
    p.add_argument("--from", dest="importer", required=True, choices=names, help="the source's kind")
    p.add_argument("path", help="the source: " + "; ".join(f"{n}: {_describe(n)}" for n in names))
    p.add_argument("--dry-run", action="store_true", help="read and check everything, write nothing")
    locations(p, board=BOARD_HELP)
    p.add_argument(
        "--project",
        help="project of the imported memories (default: the workspace folder of a .memdb/memory.db, "
        "else none)",
    )
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")


def _describe(name: str) -> str:
    from memoryd.importers import load

    try:
        return getattr(load(name), "DESCRIPTION", name)
    except ImportError:
        return name


def cmd_import(args) -> int:
    import os
    from pathlib import Path

    from memoryd.logs import configure

    configure(os.environ.get("MEMORYD_LOG_LEVEL") or "warning")  # a line per file written is noise here

    from memoryd.importers import SourceUnreadable
    from memoryd.importers.apply import run_import
    from memoryd.kinds.briefs.source import BoardUnreadable
    from memoryd.paths import resolve

    board = resolve(board=args.board).board
    source = Path(args.path).expanduser()

    def report(problem) -> None:
        print(f"memoryd import: {problem.where}: {problem.reason} (skipped)", file=sys.stderr)

    try:
        summary = run_import(
            args.importer, source, board, dry_run=args.dry_run, project=args.project, on_problem=report
        )
    except SourceUnreadable as exc:
        print(f"memoryd import: cannot read {source}: {exc}", file=sys.stderr)
        return 2
    except (BoardUnreadable, OSError) as exc:
        print(f"memoryd import: cannot write the board {board}: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(summary.as_dict(), ensure_ascii=False))
    else:
        print(format_summary(summary))
    return 1 if summary.problems else 0


def format_summary(summary) -> str:
    """The human summary printed at the end of an import."""
    verb = "would be" if summary.dry_run else ""
    new = f"{summary.memories_new} {verb + ' ' if verb else ''}new"
    lines = [
        f"{'Checked' if summary.dry_run else 'Imported'} {summary.importer} {summary.source} -> board {summary.board}",
        f"  memories:  {new}, {summary.memories_existing} already on the board, "
        f"{summary.memories_duplicate} duplicate in the source",
        f"  relations: {summary.relations_new} {verb + ' ' if verb else ''}new, "
        f"{summary.relations_existing} already on the board",
        f"  skipped:   {len(summary.problems)} line(s)/row(s)"
        + (" (listed above)" if summary.problems else ""),
    ]
    lines[-1:-1] = _other_kinds(summary, verb)
    if summary.dry_run:
        lines.append("  dry run: nothing was written")
    elif summary.memories_new or summary.relations_new or any(getattr(summary, "written", {}).values()):
        lines.append(
            "  the running daemon indexes the new files at once; otherwise the next `memoryd serve` does"
        )
    return "\n".join(lines)


#: The kinds besides memories an export holds: (count key, ``read`` key, label).
_OTHER_KINDS = (
    ("task", "tasks", "tasks"),
    ("brief", "briefs", "briefs"),
    ("interaction", "interactions", "session turns"),
    ("summary", "summaries", "summaries"),
)


def _other_kinds(summary, verb: str) -> list[str]:
    """A line per kind besides memories that the source held (a memoryd export: tasks, briefs, session turns,
    session summaries): how many were (or would be) written, and how many were already on the board."""
    read = getattr(summary, "read", None) or {}
    written, kept = getattr(summary, "written", {}), getattr(summary, "kept", {})
    return [
        f"  {label + ':':<10} {written.get(kind, 0)} {verb + ' ' if verb else ''}new, "
        f"{kept.get(kind, 0)} already on the board"
        for kind, key, label in _OTHER_KINDS
        if read.get(key) or written.get(kind) or kept.get(kind)
    ]

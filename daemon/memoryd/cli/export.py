"""``memoryd export [--include KIND ...] [--board DIR] [FILE]``: the whole board as one JSONL file.

The same file as the ``export_database`` tool (:mod:`memoryd.importers.exchange`); without FILE it goes to
``<data>/exports/memoryd-export-<UTC time>.jsonl``. It reads board files only (never the index), so it
works with or without a running daemon. ``memoryd import --from jsonl FILE`` reads it back.
Exit codes: 0 written, 2 the board cannot be read or the file cannot be written.
"""

from __future__ import annotations

import json
import sys

from memoryd.cli.options import BOARD_HELP, command, locations

KINDS = ("briefs", "memories", "interactions", "summaries")


def register(sub) -> None:
    """Add the ``export`` sub-command to the ``argparse`` sub-parsers ``sub``."""
    p = command(
        sub,
        "export",
        cmd_export,
        help="write briefs, memories, session turns and summaries to one JSONL file",
        description="Export the board as JSONL (one object per line, a header first). Read it back with "
        "`memoryd import --from jsonl FILE` or the import_database tool.",
    )
    p.add_argument(
        "file", nargs="?", help="where to write (default: <data>/exports/memoryd-export-<time>.jsonl)"
    )
    p.add_argument(
        "--include", nargs="+", choices=KINDS, metavar="KIND", help=f"only these kinds ({', '.join(KINDS)})"
    )
    locations(p, board=BOARD_HELP)
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")


def cmd_export(args) -> int:
    import os
    import time
    from pathlib import Path

    from memoryd.logs import configure

    configure(os.environ.get("MEMORYD_LOG_LEVEL") or "warning")
    from memoryd.importers.exchange import export_file
    from memoryd.kinds.briefs.source import BoardUnreadable
    from memoryd.paths import resolve

    locations = resolve(board=args.board)
    dest = (
        Path(args.file).expanduser()
        if args.file
        else locations.exports / time.strftime("memoryd-export-%Y%m%dT%H%M%SZ.jsonl", time.gmtime())
    )
    include = tuple(k for k in KINDS if k in (args.include or KINDS))
    if not locations.board.is_dir():
        print(f"memoryd export: no board at {locations.board}", file=sys.stderr)
        return 2
    try:
        result = export_file(locations.board, dest, include)
    except (BoardUnreadable, OSError) as exc:
        print(f"memoryd export: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
    else:
        counts = ", ".join(f"{k} {v}" for k, v in result["counts"].items()) or "nothing"
        print(f"Exported {counts} to {result['path']} ({result['bytes']} bytes)")
        if result["redacted"]:
            kinds = ", ".join(f"{k} {v}" for k, v in result["redacted"].items())
            print(f"Secrets redacted from the export: {kinds}.")
    return 0

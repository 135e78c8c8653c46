"""``export_database`` / ``import_database``: the tool side of :mod:`memoryd.importers.exchange`.

Exports go to ``<data>/exports/memoryd-export-<UTC time>.jsonl`` (:attr:`memoryd.paths.Locations.exports`).
An import writes board files, then waits for the indexer to rescan the board, so the answer comes once
the imported data is searchable (or says it is still being indexed).
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

from memoryd.errors import InvalidParams, ToolFailed
from memoryd.importers.exchange import KINDS, ExchangeError, export_file, import_file
from memoryd.tools.registry import ToolContext, ToolResult


async def export_tool(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    engine = await ctx.engine()
    include = tuple(k for k in KINDS if k in (args.get("include") or KINDS))
    exports = Path(engine.settings.locations.exports)
    dest = exports / time.strftime("memoryd-export-%Y%m%dT%H%M%SZ.jsonl", time.gmtime())
    n = 1
    while dest.exists():
        n += 1
        dest = dest.with_name(time.strftime(f"memoryd-export-%Y%m%dT%H%M%SZ-{n}.jsonl", time.gmtime()))
    answer = await asyncio.to_thread(export_file, engine.board, dest, include)
    counts = ", ".join(f"{k} {v}" for k, v in answer["counts"].items()) or "nothing"
    text = (
        f"Exported to {answer['path']} ({answer['bytes']} bytes): {counts}. "
        f"Kinds included: {', '.join(answer['include'])}. "
        "Read it back with import_database or `memoryd import --from jsonl FILE`."
    )
    if answer["redacted"]:
        kinds = ", ".join(f"{k} {v}" for k, v in answer["redacted"].items())
        text += f" Secrets redacted from the export: {kinds}."
    return ToolResult(structured=answer, text=text)


async def import_tool(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    engine = await ctx.engine()
    # Agents may only import what sits in memoryd's exports folder (the CLI imports from anywhere): a
    # tool call must not read /etc/passwd or the daemon's /proc/self/environ into the board.
    exports = Path(os.path.normpath(engine.settings.locations.exports))
    path = Path(os.path.normpath(exports / Path(args["file"])))
    if not path.is_relative_to(exports) or path == exports:
        raise InvalidParams(
            f"import_database reads only files in memoryd's exports folder ({exports}); copy the file "
            "there, or run `memoryd import --from jsonl FILE` in a terminal"
        )
    mode = args.get("mode", "merge")
    try:
        answer = await asyncio.to_thread(import_file, engine.board, path, mode)
    except ExchangeError as exc:
        raise ToolFailed(str(exc)) from None
    fut = engine.indexer.submit(rescan=True)
    try:
        await asyncio.wait_for(asyncio.shield(fut), timeout=max(0.1, ctx.remaining_s * 0.7))
        answer["searchable"] = True
    except TimeoutError:
        answer["searchable"] = False
    written = ", ".join(f"{k} {v}" for k, v in answer["written"].items()) or "nothing new"
    lines = [
        f"Imported {answer['file']} ({mode}, {answer['lines']} lines): written {written}.",
        "Already on the board: " + (", ".join(f"{k} {v}" for k, v in answer["kept"].items()) or "none") + ".",
    ]
    if answer["removed"]:
        lines.append(
            "Removed (replace): " + ", ".join(f"{k} {v}" for k, v in answer["removed"].items()) + "."
        )
    rejected = answer["rejected"]
    lines.append(f"{len(rejected)} line(s) rejected" + (":" if rejected else "."))
    lines += [f"- line {r['line']}: {r['reason']}" for r in rejected]
    if not answer["searchable"]:
        lines.append("The index is still catching up; searches include the import shortly.")
    return ToolResult(structured=answer, text="\n".join(lines))

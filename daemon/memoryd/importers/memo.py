"""Importer for the memo server's ``memo.jsonl`` (the MCP tutorial's memo tools).

One JSON object per line, ``{"at": <ISO-8601 time>, "text": <str>, "tags": [<str>, ...]}``. Each line
becomes one memory: its content is ``text``, its tags are ``tags`` (whitespace runs made ``_``, since
memory tags are single words), its ``created_at`` is ``at``. The ``memo`` tools (``memo_search``,
``memo://all``) list memories written by ``memo_add`` and by this importer (origin ``import:memo``).
A broken line (not JSON, torn by a crash, no ``text``) is reported with its number, counted and skipped.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from memoryd.importers import ImportItem, ImportProblem, read_lines
from memoryd.importers.values import iso_utc, word

DESCRIPTION = 'the memo tutorial server\'s memo.jsonl ({"at","text","tags"} per line)'


def iter_items(path: Path) -> Iterator[ImportItem | ImportProblem]:
    """One :class:`ImportItem` per readable line, an :class:`ImportProblem` per broken one."""
    lines = read_lines(path)
    for n, raw in enumerate(lines, 1):
        where = f"line {n}"
        if not raw.strip():
            continue
        torn = n == len(lines) and not raw.endswith(b"\n")
        try:
            obj = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            reason = "not valid JSON" + (" (torn last line)" if torn else "") + f": {type(exc).__name__}"
            yield ImportProblem(where, reason)
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("text"), str) or not obj["text"].strip():
            yield ImportProblem(where, 'not a memo: needs {"at","text","tags"} with a non-empty "text"')
            continue
        tags = obj.get("tags") or []
        if isinstance(tags, str):
            tags = [tags]
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            yield ImportProblem(where, '"tags" must be a list of strings')
            continue
        yield ImportItem(
            key=where,
            content=obj["text"],
            where=where,
            tags=tuple(dict.fromkeys(w for t in tags if (w := word(t)))),
            created_at=iso_utc(obj.get("at")),
        )

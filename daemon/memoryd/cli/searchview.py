"""How ``memoryd search`` shows an answer at a terminal: briefs, then memories, each under its own heading,
with the line that matched when it is not the one shown, and a brief's outcome item that holds the query's
words its title and said line lack (read from the board that answered). Notes about the mode and the
redactions go to stderr; ``--json`` does not come here."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from memoryd.errors import MemorydError
from memoryd.wording import NO_PROJECT, redaction_line


def print_human(answer: dict[str, Any], query: str = "", via: str = "via daemon") -> None:
    """Briefs (score, date, project, task, brief, title, said; the outcome's item holding ``query``'s words the
    rest lacks), then memories (relevance, date, project, type, hash, first line, tags), each kind under its
    own heading (``via``: where the answer came from, in words), on stdout; notes about the mode on stderr."""
    if "results" in answer:
        _print_briefs(answer, query, via)
    if "memories" in answer:
        if "results" in answer:
            print()
        _print_memories(answer["memories"], via)
        if answer.get("memories_hint"):
            print(f"  {answer['memories_hint']}")
    if answer.get("mode_note"):
        print(f"({answer['mode_note']})", file=sys.stderr)
    if answer.get("redacted"):
        print(f"({redaction_line(answer['redacted'])})", file=sys.stderr)


def _print_briefs(answer: dict[str, Any], query: str, via: str) -> None:
    # Not memoryd.tools.answers.of_total: importing memoryd.tools costs the MCP types (about a second).
    matched = f"{answer['matched']}{'+' if answer.get('matched_at_least') else ''}"
    if answer["results"]:
        noun = "matching brief" if matched == "1" else "matching briefs"
        print(f"{answer['shown']} of {matched} {noun} ({via})")
    else:
        print("no brief matches that query")
        projects = answer.get("projects")
        if answer.get("project") is not None and projects is not None and answer["project"] not in projects:
            listed = ", ".join(name or NO_PROJECT for name in projects) or "none"
            print(f"  no brief is filed under project {answer['project']!r}; projects on the board: {listed}")
    outcomes = outcome_lines(answer, query)
    for r in answer["results"]:
        print(
            f"{r['score']:.2f}  {r['date']}  {r['project'] or NO_PROJECT:<14} {r['task_id']}  {r['brief_id']}"
        )
        title, said = r["title"], r["said"]
        # a short brief's title is its said text, whole or cut ("…"): print that text once
        if title.removesuffix("…").rstrip() and said.startswith(title.removesuffix("…").rstrip()):
            print(f"      “{said}”")
        else:
            print(f"      {title}\n      “{said}”")
        if r.get("snippet"):
            print(f"      … {r['snippet']}")
        if r["brief_id"] in outcomes:
            print(f"      outcome: {outcomes[r['brief_id']]}")


def outcome_lines(answer: dict[str, Any], query: str) -> dict[str, str]:
    """brief id -> the item of that hit's outcome (``"did: ..."``) holding the most of ``query``'s words that
    its shown title and said line lack, for the hits that have one: a brief found through its outcome shows
    why. Read from the board that answered (``answer["board"]``); ``{}`` when it cannot be read."""
    from memoryd.cli.matchline import stems as _stems
    from memoryd.index.terms import term_string
    from memoryd.kinds.briefs.files import OUTCOME_SECTIONS
    from memoryd.kinds.briefs.reader import BoardReader

    asked = _stems(term_string(query, query=True))
    if not asked or not answer.get("board"):
        return {}
    reader = BoardReader(Path(answer["board"]))
    found: dict[str, str] = {}
    for r in answer.get("results") or ():
        missing = asked - _stems(term_string(f"{r['title']}\n{r['said']}"))
        if not missing:
            continue
        try:
            brief = reader.read_brief(r["brief_id"])
        except (OSError, ValueError, MemorydError):  # the board: unreadable here, or a bad id
            return found
        if brief is None or brief.outcome is None:
            continue
        items = [(name, item) for name, _ in OUTCOME_SECTIONS for item in getattr(brief.outcome, name)]
        shared = [len(missing & _stems(term_string(item))) for _, item in items]
        if shared and max(shared):
            name, item = items[shared.index(max(shared))]  # the first of the best, in the outcome's order
            cut = item if len(item) <= MEMORY_LINE_CHARS else item[:MEMORY_LINE_CHARS].rstrip() + "…"
            found[r["brief_id"]] = f"{name}: {cut}"
    return found


MEMORY_LINE_CHARS = 160


def _print_memories(memories: list[dict[str, Any]], via: str) -> None:
    from memoryd.cli.matchline import first_line

    if not memories:
        print("no memory matches that query")
        return
    print(f"{len(memories)} matching {'memory' if len(memories) == 1 else 'memories'} ({via})")
    for m in memories:
        first = first_line([line for line in str(m.get("content", "")).splitlines() if line.strip()])
        if m.get("snippet"):
            first += f"\n      … {m['snippet']}"
        tags = " ".join(f"#{t}" for t in m.get("tags") or ())
        print(
            # relevance adds small importance and recency bonuses to a 0-1 score: shown on the briefs' scale
            f"{min(1.0, m.get('relevance', 0.0)):.2f}  {str(m.get('created_at', ''))[:10]}  {m.get('project') or NO_PROJECT:<14} "
            f"{m.get('memory_type', '')}  memory {str(m.get('hash', ''))[:12]}\n"
            f"      {first}" + (f"\n      {tags}" if tags else "")
        )

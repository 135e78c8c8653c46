"""Answers of ``get_brief`` and ``save_outcome``: one brief (or a saved report) -> structured content -> text.

``brief_answer`` hands out everything about one brief, bounded (:mod:`memoryd.kinds.briefs.render` holds the
bounds), its texts already redacted by :class:`~memoryd.kinds.briefs.reader.BoardReader`; screenshots as
absolute paths of ``.png`` files that still exist (screen text is never read here). ``render_brief`` and
``render_saved`` turn exactly that structure into text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from memoryd.board.gate import Skipped
from memoryd.kinds.briefs.files import OUTCOME_SECTIONS, Brief, Outcome, Task
from memoryd.kinds.briefs.render import (
    NOTE_CHARS,
    NOTE_LINES,
    OUTCOME_ITEM_CHARS,
    OUTCOME_ITEMS,
    PROMPT_CHARS,
    SAID_CHARS,
    SCREENSHOTS,
    SUMMARY_CHARS,
    TITLE_CHARS,
    _project,
    _section,
    _tail,
    _unread_briefs,
    held_of,
    named,
)
from memoryd.tools.answers import DATA_NOTE, Scrub
from memoryd.wording import counted


def brief_answer(
    brief: Brief, task: Task | None, board: Path, unread: Sequence[Skipped] = ()
) -> dict[str, Any]:
    """Everything handed out about one brief; screenshots as absolute paths of ``.png`` files that exist;
    ``unread``: the brief's files that could not be read (``skippedBriefFiles``, ``skippedBriefs``)."""
    # BoardReader redacted every text as it read it; ``held``: what was redacted before, in the files
    scrub = Scrub(read_redacted=True, held=held_of([brief] if task is None else [brief, task]))
    outcome = None
    if brief.outcome is not None:
        outcome = {
            name: scrub.items(
                getattr(brief.outcome, name), OUTCOME_ITEMS, OUTCOME_ITEM_CHARS, f"outcome.{name}"
            )
            for name, _ in OUTCOME_SECTIONS
        }
    answer: dict[str, Any] = {
        "brief_id": brief.id,
        "task_id": brief.task,
        "task_title": scrub.bounded(task.title, TITLE_CHARS, "task_title") if task else None,
        "task_status": task.status if task else None,
        "project": _project(scrub, brief.project),
        "created_at": brief.created_at,
        "title": scrub.bounded(brief.title, TITLE_CHARS, "title"),
        "summary": scrub.bounded(brief.summary, SUMMARY_CHARS, "summary"),
        "said": scrub.bounded(brief.said.strip(), SAID_CHARS, "said"),
        "prompt": scrub.bounded(brief.prompt.strip(), PROMPT_CHARS, "prompt"),
        "notes": scrub.items(brief.notes, NOTE_LINES, NOTE_CHARS, "notes"),
        "outcome": outcome,
        "screenshots": [str(board / rel) for rel in brief.screen_pngs[:SCREENSHOTS]],
        "note": DATA_NOTE,
    }
    _unread_briefs(answer, unread, scrub)
    answer.update(scrub.report())
    return answer


def render_brief(a: Mapping[str, Any]) -> str:
    task = f"task {a['task_id']}"
    if a["task_title"] is not None:
        task += f" ({a['task_status']}: {a['task_title']})"
    lines = [
        f"Brief {a['brief_id']} · {named(a['project'])} · {task} · created {a['created_at']}",
        a["note"],
        "",
        f"Title: {a['title']}",
        f"Summary: {a['summary']}",
        "",
        "What the developer said:",
        a["said"] or "(nothing recorded)",
        "",
        "Prompt handed to the agent:",
        a["prompt"] or "(none recorded)",
        "",
    ]
    if a["outcome"] is None:
        lines.append("Agent's report (outcome.md): none saved yet.")
    else:
        lines.append("Agent's report (outcome.md):")
        for name, heading in OUTCOME_SECTIONS:
            lines += [f"## {heading}", *_section(a["outcome"][name], "")]
    lines += ["", "Notes:", *(_section(a["notes"], "") if a["notes"] else ["- none"])]
    lines += ["", "Screenshots still on disk:", *(f"- {p}" for p in a["screenshots"])]
    if not a["screenshots"]:
        lines.append("- none")
    if a.get("skippedBriefFiles"):
        lines += [
            "",
            f"{counted(a['skippedBriefFiles'], 'file')} of this brief could not be read, so this answer misses "
            "what they hold; tell the developer to fix or remove each:",
            *(f"- {s['path']}: {s['reason']}" for s in a.get("skippedBriefs", ())),
        ]
    return "\n".join(lines + _tail(a))


# --- save_outcome -------------------------------------------------------------------------------------


def saved_answer(brief_id: str, path: Path, outcome: Outcome, searchable: bool = True) -> dict[str, Any]:
    return {
        "saved": True,
        "brief_id": brief_id,
        "path": str(path),
        "items": {name: len(getattr(outcome, name)) for name, _ in OUTCOME_SECTIONS},
        "searchable": searchable,
    }


def render_saved(a: Mapping[str, Any], unread: str | None = None) -> str:
    """The answer's text; ``unread``: why the brief is not loaded (then the report is not searchable)."""
    counts = ", ".join(f"{name} {n}" for name, n in a["items"].items())
    saved = f"Saved the outcome of brief {a['brief_id']} to {a['path']} ({counts}). "
    if unread is None:
        return saved + "It is searchable now; calling save_outcome again for this brief replaces it."
    return saved + (
        f"It is NOT searchable: {unread}, so the brief is missing from every answer; tell the developer to "
        "fix that file (the report is kept and found once it is). Calling save_outcome again replaces it."
    )

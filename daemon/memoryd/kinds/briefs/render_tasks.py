"""Answers of ``list_tasks`` and ``get_task``: tasks (and a task's briefs) -> structured content -> text.

``tasks_answer`` / ``task_answer`` build the structured content from what
:class:`~memoryd.kinds.briefs.reader.BoardReader` read (already redacted as a whole, so only counted here)
with every list and text bounded (:mod:`memoryd.kinds.briefs.render` holds the bounds); ``render_tasks`` /
``render_task`` turn exactly that structure into text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from memoryd.board.gate import Skipped
from memoryd.kinds.briefs.files import Brief, Outcome, Task
from memoryd.kinds.briefs.render import (
    LINE_CHARS,
    OVERVIEW_ITEM_CHARS,
    OVERVIEW_ITEMS,
    PROJECTS,
    SKIPPED_SHOWN,
    TASK_BRIEFS,
    TITLE_CHARS,
    _date,
    _project,
    _section,
    _tail,
    _unread_brief_lines,
    _unread_briefs,
    held_of,
    named,
    project_list,
)
from memoryd.tools.answers import DATA_NOTE, Scrub, of_total
from memoryd.wording import counted


def tasks_answer(
    rows: Sequence[tuple[Task, str, int]],
    *,
    limit: int,
    project: str | None,
    status: str | None,
    projects: Iterable[str],
    unread: Sequence[Skipped] = (),
    unread_briefs: Sequence[Skipped] = (),
) -> dict[str, Any]:
    """``rows`` from ``Engine.list_tasks``: ``(task, last_activity_iso, brief_count)``, newest first;
    ``unread``: the task files that could not be read (``skippedFiles``; the first :data:`SKIPPED_SHOWN`
    named in ``skipped``); ``unread_briefs``: the files under ``briefs/`` (:func:`_unread_briefs`)."""
    # BoardReader redacted every text as it read it; ``held``: what was redacted before, in the files
    scrub = Scrub(read_redacted=True, held=held_of(task for task, _, _ in rows))
    tasks = [
        {
            "task_id": task.id,
            "title": scrub.bounded(task.title, TITLE_CHARS, "title"),
            "project": _project(scrub, task.project),
            "status": task.status,
            "created": _date(task.created_at),
            "last_activity": _date(last),
            "briefs": count,
        }
        for task, last, count in rows[:limit]
    ]
    answer: dict[str, Any] = {
        "shown": len(tasks),
        "total": len(rows),
        "project": project,
        "status": status,
        "projects": [_project(scrub, p) for p in sorted(projects)[:PROJECTS]],
        "note": DATA_NOTE,
        "tasks": tasks,
        "skippedFiles": len(unread),
    }
    if unread:
        named = Scrub()  # a file name or a reason may quote what the file holds
        answer["skipped"] = [
            {"path": named(s.path), "reason": named(s.reason)} for s in unread[:SKIPPED_SHOWN]
        ]
        scrub.counts.update(named.counts)
    _unread_briefs(answer, unread_briefs, scrub)
    answer.update(scrub.report())
    return answer


def render_tasks(a: Mapping[str, Any]) -> str:
    filters = [
        f"project {named(a['project'])}" if a["project"] is not None else "",
        f"status {a['status']}" if a["status"] is not None else "",
    ]
    scope = f" ({', '.join(f for f in filters if f)})" if any(filters) else ""
    lines = [f"{of_total(a['shown'], a['total'], 'tasks')}{scope}, newest activity first.", a["note"]]
    if not a["tasks"]:
        lines.append("No task matches these filters.")
    else:
        lines.append("")
        for t in a["tasks"]:
            lines.append(
                f"- {t['task_id']} · {t['status']} · {named(t['project'])} · last activity {t['last_activity']} · "
                f"{counted(t['briefs'], 'brief')} · created {t['created']}"
            )
            lines.append(f"  {t['title']}")
    lines += ["", f"Projects on the board: {project_list(a['projects'])}."]
    if a.get("skippedFiles"):
        lines += [
            "",
            f"{counted(a['skippedFiles'], 'task file')} could not be read, so their tasks are not listed; "
            "tell the developer to fix or remove each (`memoryd doctor` names every board file that does not load):",
        ]
        lines += [f"- {s['path']}: {s['reason']}" for s in a.get("skipped", ())]
    lines += _unread_brief_lines(a)
    return "\n".join(lines + _tail(a))


# --- get_task -----------------------------------------------------------------------------------------


def _did_open(outcome: Outcome | None, scrub: Scrub) -> dict[str, list[str]] | None:
    if outcome is None:
        return None
    return {
        name: scrub.items(getattr(outcome, name), OVERVIEW_ITEMS, OVERVIEW_ITEM_CHARS, f"outcome.{name}")
        for name in ("did", "open")
    }


def task_answer(task: Task, briefs: Sequence[Brief], unread_briefs: Sequence[Skipped] = ()) -> dict[str, Any]:
    """The task and its newest :data:`TASK_BRIEFS` briefs in date order (``briefs`` oldest first);
    ``unread_briefs``: the files under ``briefs/`` that could not be read (:func:`_unread_briefs`)."""
    shown = list(briefs)[-TASK_BRIEFS:]
    # BoardReader redacted every text as it read it; ``held``: what was redacted before, in the files
    scrub = Scrub(read_redacted=True, held=held_of([task, *shown]))
    answer: dict[str, Any] = {
        "task": {
            "task_id": task.id,
            "title": scrub.bounded(task.title, TITLE_CHARS, "task.title"),
            "project": _project(scrub, task.project),
            "status": task.status,
            "created": _date(task.created_at),
        },
        "shown": len(shown),
        "briefs_total": len(briefs),
        "note": DATA_NOTE,
        "briefs": [
            {
                "brief_id": b.id,
                "date": _date(b.created_at),
                "title": scrub.bounded(b.title, TITLE_CHARS, "title"),
                "said": scrub.line(b.said or b.summary, LINE_CHARS),
                "outcome": _did_open(b.outcome, scrub),
            }
            for b in shown
        ],
    }
    _unread_briefs(answer, unread_briefs, scrub)
    answer.update(scrub.report())
    return answer


def render_task(a: Mapping[str, Any]) -> str:
    t = a["task"]
    lines = [
        f"Task {t['task_id']} ({t['status']}) · {named(t['project'])} · created {t['created']}",
        f"{t['title']}",
        f"{of_total(a['shown'], a['briefs_total'], 'briefs')}, oldest first"
        + (" (only the newest are shown)." if a["shown"] < a["briefs_total"] else "."),
        a["note"],
    ]
    for i, b in enumerate(a["briefs"], 1):
        lines += ["", f"{i}. {b['brief_id']} · {b['date']} · {b['title']}", f"   said: {b['said']}"]
        if b["outcome"] is None:
            lines.append("   outcome: none saved yet")
            continue
        lines += ["   Did:", *_section(b["outcome"]["did"], "     ")]
        lines += ["   Open:", *_section(b["outcome"]["open"], "     ")]
    return "\n".join(lines + _unread_brief_lines(a) + _tail(a))

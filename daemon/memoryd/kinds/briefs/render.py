"""Answers of the ``briefs`` tools: board records -> structured content, structured content -> text.

Each ``*_answer`` function builds the structured content from engine results and bounds every list and
text (:class:`~memoryd.tools.answers.Scrub`). Tasks and briefs come from
:class:`~memoryd.kinds.briefs.source.BoardReader`, which redacted every text as a whole as it read it, so they are
not redacted again; search hits come from the index and are redacted again at answer time. Each ``render_*``
function turns exactly that structure into readable text, so the text block and ``structuredContent``
always say the same thing (Codex shows the model only ``structuredContent``, other clients the text).
Screen text is never read here: only the paths of screenshots that still exist.

Over 400 lines: every tool's structure and its text are kept side by side, so one reading shows they say the
same thing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from memoryd.board.gate import Skipped
from memoryd.index.searcher import SearchQuery
from memoryd.kinds.briefs.files import OUTCOME_SECTIONS, Brief, Outcome, Task
from memoryd.tools.answers import DATA_NOTE, Scrub, of_total, report_lines
from memoryd.wording import NO_PROJECT, counted

LINE_CHARS = 200  # one line of what was said, in overviews
TITLE_CHARS = 300
SUMMARY_CHARS = 2000
SAID_CHARS = 8000
PROMPT_CHARS = 8000
NOTE_LINES = 50
NOTE_CHARS = 500
OVERVIEW_ITEMS = 10  # Did/Open items per brief in get_task
OVERVIEW_ITEM_CHARS = 300
OUTCOME_ITEMS = 50
OUTCOME_ITEM_CHARS = 2000
TASK_BRIEFS = 50  # briefs shown by get_task (the newest, in order)
SCREENSHOTS = 50
PROJECTS = 50
#: A project name is a folder's name (at most 255 bytes); one written by hand in a task file may be any
#: length, and it is repeated on every task of a list: shown names are cut here (the cut is recorded).
PROJECT_SHOWN = 200
SKIPPED_SHOWN = 5  # unreadable task files named in a list_tasks answer (all are counted)
UNBRIEFED_SHOWN = 30  # open tasks without a brief named by a search that lists the open work
SEARCH_POOL = 100  # hits asked of the search core (its maximum), so an answer can count matches
MATCHED_CAP = 50  # a search list holds at most this many candidates, so a count this high is "at least"

MODE_NOTES = {
    "loading": "keyword-only: the meaning model is still loading, so paraphrases and other languages may be "
    "missed; retry in a few seconds for a search by meaning too.",
    "disabled": "keyword-only: no embedding model is configured (--model none).",
    "failed": "keyword-only: the embedding model failed to load (see `memoryd status`); paraphrases and other "
    "languages may be missed.",
}


def _date(iso: str) -> str:
    return iso[:10]


def _section(items: Sequence[str], indent: str) -> list[str]:
    return [f"{indent}- {item}" for item in items] or [f"{indent}- none"]


def _tail(answer: Mapping[str, Any]) -> list[str]:
    lines = report_lines(answer)
    return ["", *lines] if lines else []


# --- search_briefs ------------------------------------------------------------------------------------


def search_query(text: str, project: str | None = None, *, reasons: bool = False) -> SearchQuery:
    """The search whose result :func:`search_answer` shapes: briefs only, :data:`SEARCH_POOL` hits."""
    return SearchQuery(text, project=project, kind="brief", limit=SEARCH_POOL, reasons=reasons)


def listing_scope(result: Any, project: str | None) -> str | None:
    """The project a search answer is limited to: ``project`` (the argument), else the one a question only
    about open work names ("what's still open in shopfront?") when every hit is of it; None: all projects."""
    named = result.open_listing
    if project is not None or not named:
        return project
    return named if all(h.project == named for h in result.hits) else None


def search_answer(
    result: Any,
    *,
    limit: int,
    project: str | None,
    model_state: str,
    projects: Iterable[str] = (),
    unbriefed: Sequence[Task] = (),
) -> dict[str, Any]:
    """``result`` is a :class:`memoryd.index.search.SearchResult` asked for more than ``limit`` hits (so
    the total can be counted); ``model_state`` explains a keyword-only search; ``projects`` (all project
    names) is listed only when a project filter matched nothing; ``unbriefed``: the open tasks without a
    brief, newest first, when the query asks only what is open (``open_without_briefs``, the first
    :data:`UNBRIEFED_SHOWN`; all counted in ``open_without_briefs_total``)."""
    scrub = Scrub()
    hits = result.hits
    results = [
        {
            "brief_id": h.id,
            "date": _date(h.date),
            "task_id": h.task,
            "task_status": h.status,
            "project": _project(scrub, h.project),
            "title": scrub.bounded(h.title, TITLE_CHARS, "title"),
            "said": scrub.line(h.line, LINE_CHARS),
            "score": round(float(h.score), 3),
        }
        for h in hits[:limit]
    ]
    answer: dict[str, Any] = {
        "shown": len(results),
        "matched": len(hits),
        "matched_at_least": len(hits) >= MATCHED_CAP,
        "mode": result.mode,
        "project": project,
        "note": DATA_NOTE,
        "results": results,
    }
    if result.mode != "hybrid":
        answer["mode_note"] = MODE_NOTES.get(model_state, MODE_NOTES["loading"])
    if project is not None and not hits and not unbriefed:
        answer["projects"] = sorted(projects)[:PROJECTS]
    if unbriefed:
        answer["open_without_briefs_total"] = len(unbriefed)
        answer["open_without_briefs"] = [
            {
                "task_id": task.id,
                "title": scrub.bounded(task.title, TITLE_CHARS, "title"),
                "project": _project(scrub, task.project),
                "created": _date(task.created_at),
            }
            for task in unbriefed[:UNBRIEFED_SHOWN]
        ]
    answer.update(scrub.report())
    return answer


def render_search(a: Mapping[str, Any]) -> str:
    scope = f" in project {named(a['project'])}" if a["project"] is not None else " across all projects"
    head = of_total(a["shown"], a["matched"], "matching briefs", a.get("matched_at_least", False))
    if a["results"]:
        lines = [f"{head}{scope}, best first. Search mode: {a['mode']}."]
    else:
        lines = [f"No brief matches that query{scope} ({a['matched']} found). Search mode: {a['mode']}."]
    if a.get("mode_note"):
        lines.append(f"Note: {a['mode_note']}")
    lines.append(a["note"])
    if not a["results"]:
        lines.append("Try other words, or list_tasks for an overview of the tasks.")
        if "projects" in a:
            lines.append(f"Projects on the board: {project_list(a['projects'])}.")
    else:
        lines.append("")
        for i, r in enumerate(a["results"], 1):
            lines.append(
                f"{i}. {r['brief_id']} · {r['date']} · {named(r['project'])} · task {r['task_id']} "
                f"({r['task_status']}) · score {r['score']}"
            )
            lines.append(f"   title: {r['title']}")
            lines.append(f"   said: {r['said']}")
    if a.get("open_without_briefs"):
        total = a["open_without_briefs_total"]
        lines += ["", f"{of_total(len(a['open_without_briefs']), total, 'open tasks')}{scope} without a brief "
                  "yet (no result above stands for these; get_task reads one):"]  # fmt: skip
        lines += [f"- {t['task_id']} · {named(t['project'])} · created {t['created']} · {t['title']}"
                  for t in a["open_without_briefs"]]  # fmt: skip
    return "\n".join(lines + _tail(a))


# --- list_tasks ---------------------------------------------------------------------------------------


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


def _unread_briefs(answer: dict[str, Any], unread: Sequence[Skipped], scrub: Scrub) -> None:
    """``skippedBriefFiles``: how many files under ``briefs/`` could not be read (a broken brief's task is
    not known, so any task may miss a brief); ``skippedBriefs``: the first :data:`SKIPPED_SHOWN` with reasons."""
    answer["skippedBriefFiles"] = len(unread)
    if unread:
        named = Scrub()  # a file name or a reason may quote what the file holds
        answer["skippedBriefs"] = [
            {"path": named(s.path), "reason": named(s.reason)} for s in unread[:SKIPPED_SHOWN]
        ]
        scrub.counts.update(named.counts)


def _unread_brief_lines(a: Mapping[str, Any]) -> list[str]:
    if not a.get("skippedBriefFiles"):
        return []
    lines = [
        "",
        f"{counted(a['skippedBriefFiles'], 'brief file')} could not be read, so this picture may miss briefs "
        "(a broken brief's task is not known); tell the developer to fix or remove each (`memoryd doctor` "
        "names every board file that does not load):",
    ]
    return lines + [f"- {s['path']}: {s['reason']}" for s in a.get("skippedBriefs", ())]


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


# --- get_brief ----------------------------------------------------------------------------------------


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


# --- get_context --------------------------------------------------------------------------------------

_PROJECT_FROM = {
    "argument": "as asked",
    "cwd": "the project of your working directory",
    "recent": "the most recently active project: your working directory names none",
    "none": "the board has no tasks yet",
}
_COUNTED_WITH = {"model": "the embedding model's tokenizer", "estimate": "an estimate, model not loaded"}


def context_answer(digest: Any, projects: Iterable[str] = ()) -> dict[str, Any]:
    """``digest`` is a :class:`memoryd.kinds.briefs.context.Digest`, built from already redacted text (the
    placeholders are only counted here: those its ``fresh`` says were written as the board was read);
    ``projects`` are listed when the digest came out empty."""
    scrub = Scrub(read_redacted=True, held={digest.text.strip(): digest.fresh})
    answer: dict[str, Any] = {
        "project": digest.project,
        "project_from": digest.source,
        "budget": digest.budget,
        "tokens": digest.tokens,
        "counted_with": digest.counter,
        "context": scrub(digest.text),
    }
    if digest.text:
        answer["note"] = DATA_NOTE
    elif digest.budget > 0:
        answer["projects"] = sorted(projects)[:PROJECTS]
    answer.update(scrub.report())
    return answer


def held_of(records: Iterable[Task | Brief]) -> dict[str, tuple[bool, ...]]:
    """The ``held`` placeholders of tasks and briefs as read, merged (:data:`memoryd.kinds.briefs.files.Held`)."""
    out: dict[str, tuple[bool, ...]] = {}
    for record in records:
        if record.held:
            out.update(record.held)
    return out


def project_list(names: Iterable[str]) -> str:
    """Project names for a sentence: ``""`` (briefs filed without a project) as :data:`NO_PROJECT`,
    ``"none"`` for no project at all."""
    return ", ".join(named(name) for name in names) or "none"


def named(project: str) -> str:
    """A project as a sentence names it: ``""`` (briefs filed without a project) as :data:`NO_PROJECT`."""
    return project or NO_PROJECT


def empty_context(a: Mapping[str, Any]) -> str:
    """The sentence that stands for an empty digest (the ``briefs://context`` resources hand it out)."""
    if a["budget"] <= 0:
        return "No context: the budget is 0 tokens."
    projects = a.get("projects", ())
    known = project_list(projects)
    if a["project"] not in projects:  # nothing to fit: not "nothing fits"
        return f"Nothing recorded yet for project {named(a['project'])}. Projects on the board: {known}."
    return (
        f"Nothing recorded for project {named(a['project'])} fits in {a['budget']} tokens. Projects "
        f"on the board: {known}."
    )


def render_context(a: Mapping[str, Any]) -> str:
    head = (
        f"Project {named(a['project'])} (project_from: {a['project_from']}, "
        f"{_PROJECT_FROM[a['project_from']]}); {a['tokens']} of {a['budget']} tokens "
        f"(counted_with: {a['counted_with']}, {_COUNTED_WITH[a['counted_with']]})."
    )
    if not a["context"]:
        return "\n".join([head, empty_context(a), *_tail(a)])
    return "\n".join([head, a["note"], a["context"], *_tail(a)])


def _project(scrub: Scrub, name: str | None) -> str:
    """A project name as answers show it: redacted, cut at :data:`PROJECT_SHOWN` characters."""
    return scrub.bounded(name, PROJECT_SHOWN, "project")

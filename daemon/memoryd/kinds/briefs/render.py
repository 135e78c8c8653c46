"""Answers of the ``briefs`` tools: board records -> structured content, structured content -> text.

Each ``*_answer`` function builds the structured content from engine results and bounds every list and
text (:class:`~memoryd.tools.answers.Scrub`). Tasks and briefs come from
:class:`~memoryd.kinds.briefs.reader.BoardReader`, which redacted every text as a whole as it read it, so they are
not redacted again; search hits come from the index and are redacted again at answer time. Each ``render_*``
function turns exactly that structure into readable text, so the text block and ``structuredContent``
always say the same thing (Codex shows the model only ``structuredContent``, other clients the text).
Screen text is never read here: only the paths of screenshots that still exist.

Each tool's structure and its text are kept side by side, so one reading shows they say the same thing.
This module holds ``search_briefs``, the bounds of every answer and the helpers they share;
:mod:`~memoryd.kinds.briefs.render_tasks` (``list_tasks``, ``get_task``),
:mod:`~memoryd.kinds.briefs.render_brief` (``get_brief``, ``save_outcome``) and
:mod:`~memoryd.kinds.briefs.render_context` (``get_context``) hold the others.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from memoryd.board.gate import Skipped
from memoryd.index.searcher import SearchQuery
from memoryd.kinds.briefs.files import Brief, Task
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


def _project(scrub: Scrub, name: str | None) -> str:
    """A project name as answers show it: redacted, cut at :data:`PROJECT_SHOWN` characters."""
    return scrub.bounded(name, PROJECT_SHOWN, "project")

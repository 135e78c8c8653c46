"""The tasks, task and sessions views: the tools' answers (``list_tasks``, ``get_task``, ``get_brief``,
``get_all_summaries``) turned into HTML. Nothing is read here that those answers do not carry, so the page
shows what an agent would be shown: redacted, bounded, no screen text (only thumbnails of the screenshots
that still exist).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

from memoryd.kinds.briefs.edits import note_digest
from memoryd.web.html import age, delete_form, esc, status_badge, url
from memoryd.wording import NO_PROJECT, counted


def tasks(answer: Mapping[str, Any]) -> str:
    """``list_tasks``'s answer (every task) grouped by project: projects by latest activity, open tasks first."""
    by_project: dict[str, list[Mapping[str, Any]]] = {}
    for t in answer["tasks"]:  # newest activity first
        by_project.setdefault(t["project"], []).append(t)
    if not by_project:
        return (
            "<h1>Tasks</h1><p class=empty>No tasks on the board yet. Briefs arrive as you prompt your agents "
            "(or with <code>memoryd brief</code>).</p>"
        )
    where = counted(len(by_project), "project")
    out = [f"<h1>Tasks</h1><p class=meta>{counted(answer['total'], 'task')} in {where}.</p>"]
    for project, rows in by_project.items():
        rows = sorted(rows, key=lambda t: t["status"] != "open")  # stable: newest first within each status
        n_open = sum(t["status"] == "open" for t in rows)
        out.append(
            f'<section class="project" aria-labelledby="p-{esc(project)}">'
            f'<h2 id="p-{esc(project)}">{esc(project or NO_PROJECT)} <span class=meta>{n_open} open · {counted(len(rows), "task")}</span></h2>'
            '<ul class="tasks">'
        )
        for t in rows:
            out.append(
                f'<li class="task {esc(t["status"])}">{status_badge(t["status"])} '
                f'<a href="{url("task", t["task_id"])}">{esc(t["title"])}</a>'
                f"<span class=meta>{counted(t['briefs'], 'brief')} · last {esc(t['last_activity'])}</span></li>"
            )
        out.append("</ul></section>")
    return "".join(out)


def _items(items: Sequence[str]) -> str:
    return (
        "<ul>" + "".join(f"<li>{esc(i)}</li>" for i in items) + "</ul>" if items else "<p class=none>none</p>"
    )


def _outcome(outcome: Mapping[str, Sequence[str]] | None) -> str:
    if outcome is None:
        return '<div class="outcome none">No outcome saved yet.</div>'
    parts = [f"<h4>Did</h4>{_items(outcome['did'])}", f"<h4>Open</h4>{_items(outcome['open'])}"]
    for name, label in (("decided", "Decided"), ("files", "Files"), ("retired", "Retired")):
        if outcome.get(name):
            parts.append(f"<h4>{label}</h4>{_items(outcome[name])}")
    return '<div class="outcome">' + "".join(parts) + "</div>"


def _notes(b: Mapping[str, Any], raw_notes: Sequence[str], csrf: str, back: str) -> str:
    if not b["notes"]:
        return ""
    rows = []
    for i, note in enumerate(b["notes"]):
        digest = note_digest(raw_notes[i]) if i < len(raw_notes) else ""
        action = url("brief", b["brief_id"], "notes", str(i), digest, "delete")
        rows.append(
            f'<li class="note"><span>{esc(note)}</span>{delete_form(action, csrf, "this note", back)}</li>'
        )
    return '<h4>Notes</h4><ul class="notes">' + "".join(rows) + "</ul>"


def _shots(b: Mapping[str, Any], csrf: str, back: str) -> str:
    if not b["screenshots"]:
        return ""
    figs = []
    for path in b["screenshots"]:
        n = PurePosixPath(path).stem
        src = url("shot", b["brief_id"], n)
        figs.append(
            f'<figure class="shot"><a href="{src}"><img src="{src}" loading="lazy" '
            f'alt="Screenshot {esc(n)} of this brief" width="160"></a>'
            f"<figcaption>Screenshot {esc(n)} "
            f"{delete_form(url('brief', b['brief_id'], 'screens', n, 'delete'), csrf, f'screenshot {n}', back)}"
            "</figcaption></figure>"
        )
    return '<h4>Screenshots</h4><div class="shots">' + "".join(figs) + "</div>"


def task(
    head: Mapping[str, Any],
    briefs: Sequence[tuple[Mapping[str, Any], Sequence[str]]],
    csrf: str,
) -> str:
    """``head``: ``get_task``'s answer; ``briefs``: ``(get_brief's answer, the brief's notes as read)`` in
    order (the notes name a note line in a delete request)."""
    t = head["task"]
    back = url("task", t["task_id"])
    out = [
        f'<p><a href="/">← Tasks</a></p><h1>{esc(t["title"])}</h1>'
        f"<p class=meta>{status_badge(t['status'])} {esc(t['project'] or NO_PROJECT)} · created {esc(t['created'])} · "
        f"{counted(head['briefs_total'], 'brief')}, oldest first · <code>{esc(t['task_id'])}</code></p>"
    ]
    if head["shown"] < head["briefs_total"]:
        out.append(f"<p class=meta>Only the newest {head['shown']} briefs are shown.</p>")
    for b, raw_notes in briefs:
        said = b["said"] or b["summary"] or b["title"]
        out.append(
            f'<article class="brief" id="{esc(b["brief_id"])}" aria-labelledby="h-{esc(b["brief_id"])}">'
            f'<h3 id="h-{esc(b["brief_id"])}">{esc(b["title"])}</h3>'
            f"<p class=meta>{esc(b['created_at'][:16].replace('T', ' '))} · "
            f"<code>{esc(b['brief_id'])}</code></p>"
            f'<blockquote class="said">{esc(said)}</blockquote>'
        )
        if b["prompt"]:
            out.append(
                f"<details><summary>Prompt handed to the agent</summary><pre>{esc(b['prompt'])}</pre></details>"
            )
        out.append(_outcome(b["outcome"]))
        out.append(_notes(b, raw_notes, csrf, back))
        out.append(_shots(b, csrf, back))
        out.append("</article>")
    if not briefs:
        out.append("<p class=empty>No briefs in this task.</p>")
    return "".join(out)


def sessions(summaries: Sequence[Mapping[str, Any]], logs: Sequence[Any]) -> str:
    """``summaries``: ``get_all_summaries``'s items, newest first; ``logs``: the sessions' log info
    (``session_id``, ``interactions``, ``last_at``), newest first."""
    out = ["<h1>Sessions</h1>"]
    if not summaries and not logs:
        return out[0] + "<p class=empty>No session turns stored yet.</p>"
    summarized = {s["sessionId"] for s in summaries}
    for s in summaries:
        tech = ", ".join(s.get("technologies") or [])
        out.append(
            f'<article class="session"><h2>{esc(s["title"])}</h2>'
            f"<p class=meta>{esc(s['timestamp'][:16].replace('T', ' '))} · {esc(s['category'])} · "
            f"{s['memoryCount']} turns · <code>{esc(s['sessionId'])}</code>"
            f"{' · ' + esc(tech) if tech else ''}</p>"
            f'<p class="summary">{esc(s["summary"])}</p></article>'
        )
    rest = [i for i in logs if i.session_id not in summarized]
    if rest:
        out.append("<h2>Sessions without a summary yet</h2><ul>")
        out += [
            f"<li><code>{esc(i.session_id)}</code> · {i.interactions} turns · last {esc(age(i.last_at))}</li>"
            for i in rest
        ]
        out.append("</ul>")
    return "".join(out)

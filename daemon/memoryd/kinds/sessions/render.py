"""Answers of the ``sessions`` tools: structured content (Memory Core's field names) and the same as text.

Every answer holding stored text carries the data note and is redacted again at answer time
(:mod:`memoryd.tools.answers`); stored fields are bounded per item, and a cut is reported, never silent.
"""

from __future__ import annotations

import json
from typing import Any

from memoryd.board.gate import Skipped
from memoryd.kinds.sessions.files import SCORES, Interaction, Summary
from memoryd.kinds.sessions.format import SUMMARY_SUFFIX
from memoryd.tools.answers import DATA_NOTE, Scrub, report_lines

#: Characters per stored field in one answer item (lists bound it lower: many items share one answer).
FIELD_CHARS = 20_000
LIST_FIELD_CHARS = 4_000


def memory_item(item: Interaction, scrub: Scrub, limit: int, score: float | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": item.id,
        "sessionId": item.session_id,
        "timestamp": item.timestamp,
        "prompt": scrub.bounded(item.prompt, limit, "prompt"),
        "thought": scrub.bounded(item.thought, limit, "thought"),
        "response": scrub.bounded(item.response, limit, "response"),
        "type": scrub(item.type),  # any non-empty string in a hand-written file
    }
    if score is not None:
        out["relevanceScore"] = round(score, 4)
    return out


def summary_item(s: Summary, scrub: Scrub, score: float | None = None) -> dict[str, Any]:
    data = s.to_json()
    data.pop("coveredUntil", None)
    data["title"] = scrub.bounded(s.title, LIST_FIELD_CHARS, "title")
    data["summary"] = scrub.bounded(s.summary, FIELD_CHARS, "summary")
    data["technologies"] = [scrub.bounded(t, 200, "technologies") for t in s.technologies]
    data["method"] = scrub(s.method)  # any string in a hand-written file
    if score is not None:
        data["relevanceScore"] = round(score, 4)
    return data


def finish(answer: dict[str, Any], scrub: Scrub) -> dict[str, Any]:
    """Add the data note and the redaction/truncation report."""
    answer["note"] = DATA_NOTE
    answer.update(scrub.report())
    return answer


def _block(label: str, text: str) -> list[str]:
    lines = text.splitlines() or [""]
    if len(lines) == 1:
        return [f"{label}: {lines[0]}"]
    return [f"{label}:", *("  " + line for line in lines)]


def _memory_lines(m: dict[str, Any], n: int) -> list[str]:
    head = f"[{n}] {m['id']} · session {m['sessionId']} · {m['timestamp']} · {m['type']}"
    if "relevanceScore" in m:
        head += f" · score {m['relevanceScore']}"
    return [
        head,
        *_block("prompt", m["prompt"]),
        *_block("thought", m["thought"]),
        *_block("response", m["response"]),
    ]


def _summary_lines(s: dict[str, Any], n: int) -> list[str]:
    head = f"[{n}] {s['title']} · session {s['sessionId']} · {s['timestamp']} · {s['category']}"
    if "relevanceScore" in s:
        head += f" · score {s['relevanceScore']}"
    scores = ", ".join(f"{k} {s[k]}" for k in SCORES if k in s)
    techs = ", ".join(s.get("technologies") or []) or "none named"
    return [
        head,
        f"id {s['id']} · memoryCount {s['memoryCount']} · method {s.get('method', '')}",
        f"scores: {scores}",
        f"technologies: {techs}",
        *_block("summary", s["summary"]),
    ]


def _tail(answer: dict[str, Any]) -> list[str]:
    return [*report_lines(answer), answer["note"]] if "note" in answer else report_lines(answer)


def render_memories(answer: dict[str, Any]) -> str:
    if "query" in answer:
        head = f"{answer['count']} memories match {json.dumps(answer['query'], ensure_ascii=False)}"
        head += f" (search mode {answer['mode']})."
    else:
        head = (
            f"{answer['count']} of {answer['total']} memories of session {answer['sessionId']} "
            f"(offset {answer.get('offset', 0)}, oldest first)."
        )
        if answer.get("skippedLines"):
            head += f" {answer['skippedLines']} broken line(s) of the session file were skipped."
    lines = [head]
    for n, m in enumerate(answer.get("memories") or answer.get("results") or [], 1):
        lines += ["", *_memory_lines(m, n)]
    return "\n".join([*lines, "", *_tail(answer)])


SKIPPED_SHOWN = 5  # unreadable summary files named by get_all_summaries (all are counted)


def unread_summaries(answer: dict[str, Any], skipped: list[Skipped], scrub: Scrub) -> None:
    """When summary files (``sessions/<id>.summary.json``) of ``skipped`` could not be read: ``skippedFiles``
    counts them (their sessions are not listed), ``skipped`` names the first :data:`SKIPPED_SHOWN`."""
    unread = [s for s in skipped if s.path.endswith(SUMMARY_SUFFIX)]
    if unread:
        answer["skippedFiles"] = len(unread)
        answer["skipped"] = [
            {"path": scrub(s.path), "reason": scrub(s.reason)} for s in unread[:SKIPPED_SHOWN]
        ]


def render_summaries(answer: dict[str, Any]) -> str:
    cat = f" in category {answer['category']}" if answer.get("category") else ""
    if "query" in answer:
        head = f"{answer['count']} summaries{cat} match {json.dumps(answer['query'], ensure_ascii=False)}"
        head += f" (search mode {answer['mode']})."
    else:
        head = f"{answer['count']} of {answer['total']} summaries{cat} (offset {answer.get('offset', 0)}, newest first)."
    lines = [head]
    for n, s in enumerate(answer.get("summaries") or answer.get("results") or [], 1):
        lines += ["", *_summary_lines(s, n)]
    if answer.get("skippedFiles"):
        lines += ["", f"{answer['skippedFiles']} summary file(s) could not be read, so their sessions are not "
                  "listed; tell the developer to fix or remove each (summarize_sessions writes it anew):"]  # fmt: skip
        lines += [f"- {s['path']}: {s['reason']}" for s in answer["skipped"]]
    return "\n".join([*lines, "", *_tail(answer)])


def render_added(answer: dict[str, Any]) -> str:
    return (
        f"{answer['message']}: id {answer['id']}, sessionId {answer['sessionId']}, timestamp "
        f"{answer['timestamp']}. Pass this sessionId to later add_memory calls of the same session."
        + ("" if answer.get("searchable", True) else " It becomes searchable once the index catches up.")
    )


def render_summarized(answer: dict[str, Any]) -> str:
    lines = [f"{answer['processed']} session(s) summarized (method {answer.get('method', 'none')})."]
    for s in answer["sessions"]:
        lines.append(
            f"- {s['sessionId']}: {s['title']} ({s['memoryCount']} memories, {s['method']}, id {s['summaryId']})"
        )
    for f in answer.get("failed") or []:
        lines.append(f"- failed {f.get('sessionId')}: {f.get('reason')}")
    return "\n".join([*lines, *_tail(answer)])


def render_json(title: str, answer: dict[str, Any]) -> str:
    """A heading line and the answer as indented JSON (facts without stored text: health, metrics)."""
    return title + "\n" + json.dumps(answer, ensure_ascii=False, indent=2)

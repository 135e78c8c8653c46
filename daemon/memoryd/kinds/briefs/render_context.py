"""Answers of ``get_context`` and the ``briefs://context`` resources: a digest -> structured content -> text.

``context_answer`` wraps a :class:`memoryd.kinds.briefs.context.Digest` (already redacted; its
placeholders only counted) with its project, where that project came from, the token budget and how the
tokens were counted; ``render_context`` and ``empty_context`` give the text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from memoryd.kinds.briefs.render import (
    PROJECTS,
    _tail,
    named,
    project_list,
)
from memoryd.tools.answers import DATA_NOTE, Scrub

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

"""JSON Schemas of the ``briefs`` tools: what an agent may send (bounds included) and what it gets back.

Input schemas are enforced before a handler runs (a violation is an argument error, :mod:`memoryd.serve.app`),
so ids are pattern-checked before any file is touched. Output schemas are checked on every answer by the registry
and by SDK clients. Patterns use ``[0-9]`` rather than ``\\d`` (which matches every Unicode digit in
Python's ``re``), and ids also carry their exact length (``$`` would accept a trailing newline).
"""

from __future__ import annotations

from typing import Any

from memoryd.kinds.briefs.digest import DEFAULT_TOKENS
from memoryd.kinds.briefs.files import OUTCOME_SECTIONS, TASK_STATUSES
from memoryd.tools.schema import BOOL, COUNT, NOT_BLANK, STR, STR_LIST, STR_OR_NULL, answer, array_of, closed

SEARCH_LIMIT_MAX = 50
SEARCH_LIMIT_DEFAULT = 10
TASKS_LIMIT_MAX = 100
TASKS_LIMIT_DEFAULT = 30
OUTCOME_ITEMS_MAX = 50
OUTCOME_ITEM_CHARS = 2000
QUERY_CHARS = 1000
CONTEXT_TOKENS_DEFAULT = DEFAULT_TOKENS  # the session-start hook's default
CONTEXT_TOKENS_MAX = 10_000
PROJECT_CHARS = 100
ID_CHARS = 17


TASK_ID = {
    "type": "string",
    "pattern": r"^t-[0-9]{8}-[0-9a-f]{6}$",
    "minLength": ID_CHARS,
    "maxLength": ID_CHARS,
    "description": "A task id, t-<yyyymmdd>-<6 lowercase hex>, as returned by list_tasks or search_briefs.",
}
BRIEF_ID = {
    "type": "string",
    "pattern": r"^b-[0-9]{8}-[0-9a-f]{6}$",
    "minLength": ID_CHARS,
    "maxLength": ID_CHARS,
    "description": "A brief id, b-<yyyymmdd>-<6 lowercase hex>, as returned by search_briefs or get_task.",
}
PROJECT = {
    "type": "string",
    "minLength": 1,
    "maxLength": PROJECT_CHARS,
    "pattern": NOT_BLANK,
    "description": "Only this project, as named on the board (e.g. 'shopfront'); omit for every project.",
}


def _items(what: str) -> dict[str, Any]:
    return {
        "type": "array",
        "maxItems": OUTCOME_ITEMS_MAX,
        "items": {"type": "string", "minLength": 1, "maxLength": OUTCOME_ITEM_CHARS, "pattern": NOT_BLANK},
        "description": f"{what} One short line per item (at most {OUTCOME_ITEMS_MAX} items of "
        f"{OUTCOME_ITEM_CHARS} characters; line breaks inside an item are folded into spaces).",
    }


SEARCH_INPUT = closed(
    {
        "query": {
            "type": "string",
            "maxLength": QUERY_CHARS,
            "description": "What to look for, in the developer's words or yours, any language: a feature, an "
            "error message, a file or function name, something they said. An empty or blank query finds "
            "nothing (an empty result list).",
        },
        "project": PROJECT,
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": SEARCH_LIMIT_MAX,
            "default": SEARCH_LIMIT_DEFAULT,
            "description": f"How many briefs to return, best first (1-{SEARCH_LIMIT_MAX}).",
        },
    },
    ["query"],
)
LIST_TASKS_INPUT = closed(
    {
        "project": PROJECT,
        "status": {"enum": list(TASK_STATUSES), "description": "Only open or only done tasks."},
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": TASKS_LIMIT_MAX,
            "default": TASKS_LIMIT_DEFAULT,
            "description": f"How many tasks to return, newest activity first (1-{TASKS_LIMIT_MAX}).",
        },
    },
    [],
)
GET_TASK_INPUT = closed({"task_id": TASK_ID}, ["task_id"])
GET_BRIEF_INPUT = closed({"brief_id": BRIEF_ID}, ["brief_id"])
SAVE_OUTCOME_INPUT = closed(
    {
        "brief_id": BRIEF_ID,
        "did": _items("What you did in this session."),
        "open": _items("What is still open: unfinished work, known problems, questions for the developer."),
        "decided": _items("Decisions made and why."),
        "files": _items("Files you created or changed (paths)."),
        "retired": _items("Things that no longer apply: removed code, superseded plans, dropped ideas."),
    },
    ["brief_id", "did", "open"],
)
GET_CONTEXT_INPUT = closed(
    {
        "project": {
            **PROJECT,
            "description": "The project, as named on the board (e.g. 'shopfront'); omit for the project of "
            "your working directory, or the most recently active project when that has none.",
        },
        "tokens": {
            "type": "integer",
            "minimum": 0,
            "maximum": CONTEXT_TOKENS_MAX,
            "default": CONTEXT_TOKENS_DEFAULT,
            "description": f"The budget in tokens (0-{CONTEXT_TOKENS_MAX}; 0 returns nothing). Whole items "
            "are dropped to fit, never cut mid-line.",
        },
        "query": {
            "type": "string",
            "maxLength": QUERY_CHARS,
            "description": "What you are about to work on, to pick the related memories (default: the "
            "checked-out branch, else the latest brief's title).",
        },
    },
    [],
)

# --- outputs ------------------------------------------------------------------------------------------

_STATUS = {"enum": list(TASK_STATUSES)}


def _records(properties: dict[str, Any]) -> dict[str, Any]:
    """An array of closed objects in which every property is required."""
    return array_of(closed(properties, list(properties)))


_SKIPPED = _records({"path": STR, "reason": STR})
#: The files under ``briefs/`` that could not be read: how many, the first few with reasons.
_SKIPPED_BRIEFS = {"skippedBriefFiles": COUNT, "skippedBriefs": _SKIPPED}

SEARCH_OUTPUT = answer(
    {
        "shown": COUNT,
        "matched": COUNT,
        "matched_at_least": BOOL,
        "mode": {"enum": ["hybrid", "keyword"]},
        "mode_note": STR,
        "project": STR_OR_NULL,
        "projects": STR_LIST,
        "results": _records(
            {
                "brief_id": STR,
                "date": STR,
                "task_id": STR,
                "task_status": STR,
                "project": STR,
                "title": STR,
                "said": STR,
                "score": {"type": "number"},
            }
        ),
        "open_without_briefs_total": COUNT,
        "open_without_briefs": _records({"task_id": STR, "title": STR, "project": STR, "created": STR}),
    },
    ["shown", "matched", "mode", "project", "note", "results"],
)
LIST_TASKS_OUTPUT = answer(
    {
        "shown": COUNT,
        "total": COUNT,
        "project": STR_OR_NULL,
        "status": STR_OR_NULL,
        "projects": STR_LIST,
        "tasks": _records(
            {
                "task_id": STR,
                "title": STR,
                "project": STR,
                "status": _STATUS,
                "created": STR,
                "last_activity": STR,
                "briefs": COUNT,
            }
        ),
        "skippedFiles": COUNT,
        "skipped": _SKIPPED,
        **_SKIPPED_BRIEFS,
    },
    ["shown", "total", "project", "status", "projects", "note", "tasks"],
)
_OUTCOME_DID_OPEN = closed({"did": STR_LIST, "open": STR_LIST}, ["did", "open"])
GET_TASK_OUTPUT = answer(
    {
        "task": closed(
            {"task_id": STR, "title": STR, "project": STR, "status": _STATUS, "created": STR},
            ["task_id", "title", "project", "status", "created"],
        ),
        "shown": COUNT,
        "briefs_total": COUNT,
        "briefs": _records(
            {
                "brief_id": STR,
                "date": STR,
                "title": STR,
                "said": STR,
                "outcome": {"anyOf": [_OUTCOME_DID_OPEN, {"type": "null"}]},
            }
        ),
        **_SKIPPED_BRIEFS,
    },
    ["task", "shown", "briefs_total", "note", "briefs"],
)
_OUTCOME_FULL = closed({name: STR_LIST for name, _ in OUTCOME_SECTIONS}, [n for n, _ in OUTCOME_SECTIONS])
GET_BRIEF_OUTPUT = answer(
    {
        "brief_id": STR,
        "task_id": STR,
        "task_title": STR_OR_NULL,
        "task_status": STR_OR_NULL,
        "project": STR,
        "created_at": STR,
        "title": STR,
        "summary": STR,
        "said": STR,
        "prompt": STR,
        "notes": STR_LIST,
        "outcome": {"anyOf": [_OUTCOME_FULL, {"type": "null"}]},
        "screenshots": STR_LIST,
        **_SKIPPED_BRIEFS,
    },
    [
        "brief_id",
        "task_id",
        "project",
        "created_at",
        "title",
        "summary",
        "said",
        "prompt",
        "notes",
        "outcome",
        "screenshots",
        "skippedBriefFiles",
        "note",
    ],
)
GET_CONTEXT_OUTPUT = answer(
    {
        "project": STR,
        "project_from": {"enum": ["argument", "cwd", "recent", "none"]},
        "budget": COUNT,
        "tokens": COUNT,
        "counted_with": {"enum": ["model", "estimate"]},
        "context": STR,
        "projects": STR_LIST,
    },
    ["project", "project_from", "budget", "tokens", "counted_with", "context"],
)
SAVE_OUTCOME_OUTPUT = {
    "type": "object",
    "properties": {
        "saved": {"const": True},
        "brief_id": STR,
        "path": STR,
        "items": closed({name: COUNT for name, _ in OUTCOME_SECTIONS}, [n for n, _ in OUTCOME_SECTIONS]),
        "searchable": BOOL,
    },
    "required": ["saved", "brief_id", "path", "items", "searchable"],
}

#: Tool name -> (input schema, output schema).
BY_TOOL = {
    "search_briefs": (SEARCH_INPUT, SEARCH_OUTPUT),
    "list_tasks": (LIST_TASKS_INPUT, LIST_TASKS_OUTPUT),
    "get_task": (GET_TASK_INPUT, GET_TASK_OUTPUT),
    "get_brief": (GET_BRIEF_INPUT, GET_BRIEF_OUTPUT),
    "save_outcome": (SAVE_OUTCOME_INPUT, SAVE_OUTCOME_OUTPUT),
    "get_context": (GET_CONTEXT_INPUT, GET_CONTEXT_OUTPUT),
}

"""JSON Schemas of the ``sessions`` tools (Neo.mjs Memory Core's names and parameters).

Parameter names, defaults and bounds follow Memory Core's OpenAPI description (``AddMemoryRequest``,
``QueryMemoriesRequest`` with ``nResults`` 1-100 default 10, ``get_session_memories`` ``limit`` 100 /
``offset`` 0, ``get_all_summaries`` ``limit`` 50, ``Summary.category`` enum). Session ids are
pattern-checked here, before any handler runs (:data:`memoryd.kinds.sessions.files.SESSION_ID_PATTERN`).
"""

from __future__ import annotations

from typing import Any

from memoryd.kinds.sessions.files import CATEGORIES, SESSION_ID_PATTERN
from memoryd.tools.schema import BOOL, COUNT, NUMBER, STR, STR_OR_NULL, answer, array_of, closed

TEXT_CHARS = 100_000
QUERY_CHARS = 1000
N_RESULTS_MAX = 100
N_RESULTS_DEFAULT = 10
MEMORIES_LIMIT_MAX = 1000
MEMORIES_LIMIT_DEFAULT = 100
SUMMARIES_LIMIT_MAX = 500
SUMMARIES_LIMIT_DEFAULT = 50
INCLUDE = ("briefs", "memories", "interactions", "summaries")
PATH_CHARS = 4096

SESSION_ID = {
    "type": "string",
    "minLength": 1,
    "maxLength": 128,
    "pattern": f"^{SESSION_ID_PATTERN}$",
    "description": "A session id (1-128 ASCII letters, digits, '_' or '-'; a UUID fits), as returned by "
    "add_memory or listed by get_all_summaries.",
}
CATEGORY = {"enum": list(CATEGORIES), "description": "Only summaries of this category."}


def _text(what: str, min_length: int = 1) -> dict[str, Any]:
    return {"type": "string", "minLength": min_length, "maxLength": TEXT_CHARS, "description": what}


def _int(lo: int, hi: int | None, default: int, what: str) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "integer", "minimum": lo, "default": default, "description": what}
    if hi is not None:
        out["maximum"] = hi
    return out


QUERY = {
    "type": "string",
    "maxLength": QUERY_CHARS,
    "description": "What to look for, in natural language (any language), or keywords. An empty or blank "
    "query finds nothing (an empty result list).",
}

ADD_MEMORY_INPUT = closed(
    {
        "prompt": _text("The user's verbatim prompt to the agent."),
        "thought": _text("The agent's internal reasoning for this turn (may be empty).", 0),
        "response": _text("The agent's final, user-facing response."),
        "sessionId": SESSION_ID,
    },
    ["prompt", "thought", "response"],
)
GET_SESSION_MEMORIES_INPUT = closed(
    {
        "sessionId": SESSION_ID,
        "limit": _int(1, MEMORIES_LIMIT_MAX, MEMORIES_LIMIT_DEFAULT, "Maximum number of memories to return."),
        "offset": _int(0, None, 0, "Number of memories to skip (pagination), oldest first."),
    },
    ["sessionId"],
)
QUERY_RAW_MEMORIES_INPUT = closed(
    {
        "query": QUERY,
        "nResults": _int(1, N_RESULTS_MAX, N_RESULTS_DEFAULT, "Number of results to return, best first."),
        "sessionId": {**SESSION_ID, "description": "Search within this session only."},
    },
    ["query"],
)
GET_ALL_SUMMARIES_INPUT = closed(
    {
        "limit": _int(1, SUMMARIES_LIMIT_MAX, SUMMARIES_LIMIT_DEFAULT, "Maximum number of summaries."),
        "offset": _int(0, None, 0, "Number of summaries to skip (pagination), newest first."),
        "category": CATEGORY,
    },
    [],
)
QUERY_SUMMARIES_INPUT = closed(
    {
        "query": QUERY,
        "nResults": _int(1, N_RESULTS_MAX, N_RESULTS_DEFAULT, "Number of results to return, best first."),
        "category": CATEGORY,
    },
    ["query"],
)
SUMMARIZE_SESSIONS_INPUT = closed(
    {
        "sessionId": {
            **SESSION_ID,
            "description": "Summarize this session only; omit for every session "
            "whose summary is missing or out of date.",
        }
    },
    [],
)
EXPORT_DATABASE_INPUT = closed(
    {
        "include": {
            "type": "array",
            "items": {"enum": list(INCLUDE)},
            "minItems": 1,
            "uniqueItems": True,
            "description": "Record kinds to export (default: all of briefs, memories, interactions, summaries).",
        }
    },
    [],
)
IMPORT_DATABASE_INPUT = closed(
    {
        "file": {
            "type": "string",
            "minLength": 1,
            "maxLength": PATH_CHARS,
            "description": "A JSONL file written by export_database, in memoryd's exports folder: its name, "
            "or its absolute path there (files elsewhere are refused).",
        },
        "mode": {
            "enum": ["merge", "replace"],
            "default": "merge",
            "description": "merge: add to what is stored; replace: swap the stored data of the kinds in "
            "the file for the file's, only after every line validated.",
        },
    },
    ["file"],
)
NO_ARGUMENTS = closed({}, [])

# --- outputs ------------------------------------------------------------------------------------------

#: What every stored interaction and summary begins with.
_RECORD = {"id": STR, "sessionId": STR, "timestamp": STR}
MEMORY = {
    "type": "object",
    "properties": {
        **_RECORD,
        "prompt": STR,
        "thought": STR,
        "response": STR,
        "type": STR,
        "relevanceScore": NUMBER,
    },
    "required": [*_RECORD, "prompt", "thought", "response", "type"],
}
SUMMARY = {
    "type": "object",
    "properties": {
        **_RECORD,
        "title": STR,
        "summary": STR,
        "category": STR,
        "memoryCount": COUNT,
        "quality": COUNT,
        "productivity": COUNT,
        "impact": COUNT,
        "complexity": COUNT,
        "technologies": array_of(STR),
        "method": STR,
        "relevanceScore": NUMBER,
    },
    "required": [*_RECORD, "title", "summary", "category", "memoryCount"],
}
#: A page of a listing: how many are shown, of how many, from which offset.
_PAGE = {"count": COUNT, "total": COUNT, "offset": COUNT}


def _query_answer(item: dict[str, Any], **filters: Any) -> dict[str, Any]:
    """A ``query_*`` answer: the query, how many results, the search mode, the filters it applied, then
    the results (each an ``item``)."""
    return answer(
        {"query": STR, "count": COUNT, "mode": STR, **filters, "results": array_of(item)},
        ["query", "count", "mode", "results", "note"],
    )


ADD_MEMORY_OUTPUT = answer({**_RECORD, "message": STR, "searchable": BOOL}, [*_RECORD, "message"])
MEMORIES_LIST_OUTPUT = answer(
    {"sessionId": STR, **_PAGE, "skippedLines": COUNT, "memories": array_of(MEMORY)},
    ["sessionId", "count", "total", "memories", "note"],
)
QUERY_MEMORIES_OUTPUT = _query_answer(MEMORY)
SUMMARIES_LIST_OUTPUT = answer(
    {
        **_PAGE,
        "category": STR_OR_NULL,
        "summaries": array_of(SUMMARY),
        "skippedFiles": COUNT,
        "skipped": array_of(closed({"path": STR, "reason": STR}, ["path", "reason"])),
    },
    ["count", "total", "summaries", "note"],
)
QUERY_SUMMARIES_OUTPUT = _query_answer(SUMMARY, category=STR_OR_NULL)
SUMMARIZE_OUTPUT = answer(
    {
        "processed": COUNT,
        "method": STR,
        "sessions": array_of(
            {
                "type": "object",
                "properties": {
                    "sessionId": STR,
                    "memoryCount": COUNT,
                    "summaryId": STR,
                    "title": STR,
                    "method": STR,
                },
                "required": ["sessionId", "memoryCount", "summaryId", "title", "method"],
            }
        ),
        "failed": array_of({"type": "object"}),
    },
    ["processed", "sessions"],
)

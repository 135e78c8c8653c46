"""JSON Schemas of the ``sessions`` tools (Neo.mjs Memory Core's names and parameters).

Parameter names, defaults and bounds follow Memory Core's OpenAPI description (``AddMemoryRequest``,
``QueryMemoriesRequest`` with ``nResults`` 1-100 default 10, ``get_session_memories`` ``limit`` 100 /
``offset`` 0, ``get_all_summaries`` ``limit`` 50, ``Summary.category`` enum). Session ids are
pattern-checked here, before any handler runs (:data:`memoryd.kinds.sessions.files.SESSION_ID_PATTERN`).
"""

from __future__ import annotations

from typing import Any

from memoryd.kinds.sessions.files import CATEGORIES, SESSION_ID_PATTERN

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


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


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

ADD_MEMORY_INPUT = _object(
    {
        "prompt": _text("The user's verbatim prompt to the agent."),
        "thought": _text("The agent's internal reasoning for this turn (may be empty).", 0),
        "response": _text("The agent's final, user-facing response."),
        "sessionId": SESSION_ID,
    },
    ["prompt", "thought", "response"],
)
GET_SESSION_MEMORIES_INPUT = _object(
    {
        "sessionId": SESSION_ID,
        "limit": _int(1, MEMORIES_LIMIT_MAX, MEMORIES_LIMIT_DEFAULT, "Maximum number of memories to return."),
        "offset": _int(0, None, 0, "Number of memories to skip (pagination), oldest first."),
    },
    ["sessionId"],
)
QUERY_RAW_MEMORIES_INPUT = _object(
    {
        "query": QUERY,
        "nResults": _int(1, N_RESULTS_MAX, N_RESULTS_DEFAULT, "Number of results to return, best first."),
        "sessionId": {**SESSION_ID, "description": "Search within this session only."},
    },
    ["query"],
)
GET_ALL_SUMMARIES_INPUT = _object(
    {
        "limit": _int(1, SUMMARIES_LIMIT_MAX, SUMMARIES_LIMIT_DEFAULT, "Maximum number of summaries."),
        "offset": _int(0, None, 0, "Number of summaries to skip (pagination), newest first."),
        "category": CATEGORY,
    },
    [],
)
QUERY_SUMMARIES_INPUT = _object(
    {
        "query": QUERY,
        "nResults": _int(1, N_RESULTS_MAX, N_RESULTS_DEFAULT, "Number of results to return, best first."),
        "category": CATEGORY,
    },
    ["query"],
)
SUMMARIZE_SESSIONS_INPUT = _object(
    {
        "sessionId": {
            **SESSION_ID,
            "description": "Summarize this session only; omit for every session "
            "whose summary is missing or out of date.",
        }
    },
    [],
)
EXPORT_DATABASE_INPUT = _object(
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
IMPORT_DATABASE_INPUT = _object(
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
NO_ARGUMENTS = _object({}, [])

# --- outputs ------------------------------------------------------------------------------------------

_STR = {"type": "string"}
_INT = {"type": "integer", "minimum": 0}
_NUM = {"type": "number"}
_COMMON = {
    "note": _STR,
    "redacted": {"type": "object", "additionalProperties": _INT},
    "truncated": {"type": "array", "items": _STR},
}
MEMORY = {
    "type": "object",
    "properties": {
        "id": _STR,
        "sessionId": _STR,
        "timestamp": _STR,
        "prompt": _STR,
        "thought": _STR,
        "response": _STR,
        "type": _STR,
        "relevanceScore": _NUM,
    },
    "required": ["id", "sessionId", "timestamp", "prompt", "thought", "response", "type"],
}
SUMMARY = {
    "type": "object",
    "properties": {
        "id": _STR,
        "sessionId": _STR,
        "timestamp": _STR,
        "title": _STR,
        "summary": _STR,
        "category": _STR,
        "memoryCount": _INT,
        "quality": _INT,
        "productivity": _INT,
        "impact": _INT,
        "complexity": _INT,
        "technologies": {"type": "array", "items": _STR},
        "method": _STR,
        "relevanceScore": _NUM,
    },
    "required": ["id", "sessionId", "timestamp", "title", "summary", "category", "memoryCount"],
}


def _out(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": {**properties, **_COMMON}, "required": required}


ADD_MEMORY_OUTPUT = _out(
    {"id": _STR, "sessionId": _STR, "timestamp": _STR, "message": _STR, "searchable": {"type": "boolean"}},
    ["id", "sessionId", "timestamp", "message"],
)
MEMORIES_LIST_OUTPUT = _out(
    {
        "sessionId": _STR,
        "count": _INT,
        "total": _INT,
        "offset": _INT,
        "skippedLines": _INT,
        "memories": {"type": "array", "items": MEMORY},
    },
    ["sessionId", "count", "total", "memories", "note"],
)
QUERY_MEMORIES_OUTPUT = _out(
    {"query": _STR, "count": _INT, "mode": _STR, "results": {"type": "array", "items": MEMORY}},
    ["query", "count", "mode", "results", "note"],
)
SUMMARIES_LIST_OUTPUT = _out(
    {
        "count": _INT,
        "total": _INT,
        "offset": _INT,
        "category": {"type": ["string", "null"]},
        "summaries": {"type": "array", "items": SUMMARY},
    },
    ["count", "total", "summaries", "note"],
)
QUERY_SUMMARIES_OUTPUT = _out(
    {
        "query": _STR,
        "count": _INT,
        "mode": _STR,
        "category": {"type": ["string", "null"]},
        "results": {"type": "array", "items": SUMMARY},
    },
    ["query", "count", "mode", "results", "note"],
)
SUMMARIZE_OUTPUT = _out(
    {
        "processed": _INT,
        "method": _STR,
        "sessions": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "sessionId": _STR,
                    "memoryCount": _INT,
                    "summaryId": _STR,
                    "title": _STR,
                    "method": _STR,
                },
                "required": ["sessionId", "memoryCount", "summaryId", "title", "method"],
            },
        },
        "failed": {"type": "array", "items": {"type": "object"}},
    },
    ["processed", "sessions"],
)

"""JSON Schemas of the ``memories`` tools: memdb's arguments and limits, checked before a handler.

A violation is refused before anything is touched (an ``E_INVALID_ARG`` answer from MCP 2025-11-25 on,
JSON-RPC ``-32602`` before it: :mod:`memoryd.kinds.memories.tools`), so hashes are pattern-checked (64 lowercase
hex, exact length) before any file access. One deliberate difference: the items of ``store_memories`` are
checked for shape here but for limits per item in the handler, so one bad item fails alone (memdb's
"partial success": ``results`` per item, ``succeeded``, ``failed``) instead of failing the batch.

Every answer has memdb's envelope: ``{"ok": true, "result": ...}`` or ``{"ok": false, "error": {"code",
"message"}}`` (with ``isError``), plus memoryd's ``note`` (stored text is data), ``redacted``/``truncated``
when anything was, and ``mode`` for searches.
"""

from __future__ import annotations

from typing import Any

from memoryd.kinds.memories.api import MAX_CONTENT_CHARS, MAX_DEPTH, MAX_TAG_CHARS, MAX_TAGS
from memoryd.kinds.memories.files import IMPORTANCE_MAX, MEMORY_TYPES, RELATION_TYPE_MAX
from memoryd.kinds.memories.graph import DIRECTIONS
from memoryd.tools.schema import BOOL, NO_SPACE, NOT_BLANK, REDACTED, STR, TRUNCATED, closed

BATCH_MAX = 50
QUERY_CHARS = 1000
SEARCH_LIMIT_MAX = 100
SEARCH_LIMIT_DEFAULT = 10
RECALL_LIMIT_MAX = 50
PROJECT_CHARS = 100
FILTER_TAGS_MAX = 50

HASH = {
    "type": "string",
    "pattern": "^[0-9a-f]{64}$",
    "minLength": 64,
    "maxLength": 64,
    "description": "A memory hash: 64 lowercase hex characters (SHA-256 of the normalised content), as "
    "returned by store_memory or search_memories.",
}
CONTENT = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_CONTENT_CHARS,
    "pattern": NOT_BLANK,
    "description": f"The memory itself, 1-{MAX_CONTENT_CHARS:,} characters: one fact, decision, lesson or "
    "error, written so it makes sense on its own later. Line ends, Unicode form (NFC) and trailing "
    "whitespace are normalised, so the same text always gives the same hash.",
}
TAG = {"type": "string", "minLength": 1, "maxLength": MAX_TAG_CHARS, "pattern": NO_SPACE}
TAGS = {
    "type": "array",
    "minItems": 1,
    "maxItems": MAX_TAGS,
    "items": TAG,
    "description": f"1-{MAX_TAGS} tags, each 1-{MAX_TAG_CHARS} characters without whitespace "
    "(kebab-case: 'api-design', 'postgres').",
}
IMPORTANCE = {
    "type": "integer",
    "minimum": 0,
    "maximum": IMPORTANCE_MAX,
    "default": 0,
    "description": "0-10 (10 = critical); more important memories rank a little higher in searches.",
}
MEMORY_TYPE = {
    "enum": list(MEMORY_TYPES),
    "default": "general",
    "description": "One of: " + ", ".join(MEMORY_TYPES) + ".",
}
RELATION_TYPE = {
    "type": "string",
    "minLength": 1,
    "maxLength": RELATION_TYPE_MAX,
    "pattern": NO_SPACE,
    "description": f"The edge's type, 1-{RELATION_TYPE_MAX} characters without whitespace, e.g. "
    "related_to, causes, depends_on, part_of, follows, supersedes.",
}
PROJECT = {
    "type": "string",
    "minLength": 1,
    "maxLength": PROJECT_CHARS,
    "pattern": NOT_BLANK,
    "description": "A project name (the folder name of a git repository, e.g. 'shopfront').",
}
QUERY = {
    "type": "string",
    "maxLength": QUERY_CHARS,
    "description": f"What to look for, in any language (at most {QUERY_CHARS} characters; a pasted error "
    "message or stack trace is fine): matched by meaning and by keywords over content and tags. An empty "
    "or blank query finds nothing (an empty result list).",
}


STORE_MEMORY_INPUT = closed(
    {
        "content": CONTENT,
        "tags": TAGS,
        "importance": IMPORTANCE,
        "memory_type": MEMORY_TYPE,
        "project": {
            **PROJECT,
            "description": "File it under this project instead of the session's (the git root folder name "
            "of your working directory).",
        },
    },
    ["content", "tags"],
)
_ITEM = {
    "type": "object",
    "properties": {
        "content": {"type": "string", "description": CONTENT["description"]},
        "tags": {"type": "array", "items": {"type": "string"}, "description": TAGS["description"]},
        "importance": {"type": "integer", "description": IMPORTANCE["description"]},
        "memory_type": {"type": "string", "description": MEMORY_TYPE["description"]},
    },
    "required": ["content", "tags"],
    "additionalProperties": False,
}


def _batch(items: dict[str, Any], description: str) -> dict[str, Any]:
    """The array argument of a batch tool: 1 to :data:`BATCH_MAX` ``items``."""
    return {"type": "array", "minItems": 1, "maxItems": BATCH_MAX, "items": items, "description": description}


STORE_MEMORIES_INPUT = closed(
    {
        "items": _batch(
            _ITEM,
            f"1-{BATCH_MAX} memories, each like store_memory's arguments. Each item is "
            "checked on its own: a bad item fails alone and the others are stored.",
        ),
        "project": STORE_MEMORY_INPUT["properties"]["project"],
    },
    ["items"],
)
GET_MEMORY_INPUT = closed({"hash": HASH}, ["hash"])
DELETE_MEMORY_INPUT = closed({"hash": HASH}, ["hash"])
DELETE_MEMORIES_INPUT = closed(
    {"hashes": _batch(HASH, f"1-{BATCH_MAX} memory hashes to delete.")},
    ["hashes"],
)
UPDATE_MEMORY_INPUT = closed(
    {
        "hash": {**HASH, "description": "The hash of the memory to change."},
        "content": {**CONTENT, "description": "The new content (its hash becomes the memory's new hash)."},
        "tags": {**TAGS, "minItems": 0, "description": "Replace all tags with these (omit to keep them)."},
        "importance": {k: v for k, v in IMPORTANCE.items() if k != "default"},
        "memory_type": {k: v for k, v in MEMORY_TYPE.items() if k != "default"},
    },
    ["hash"],
)
SEARCH_MEMORIES_INPUT = closed(
    {
        "query": QUERY,
        "project": {**PROJECT, "description": "Only memories of this project (default: every project)."},
        "tags": {
            "type": "array",
            "maxItems": FILTER_TAGS_MAX,
            "items": TAG,
            "description": "Only memories carrying all of these tags.",
        },
        "memory_type": {"enum": list(MEMORY_TYPES), "description": "Only memories of this type."},
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": SEARCH_LIMIT_MAX,
            "default": SEARCH_LIMIT_DEFAULT,
            "description": f"How many memories to return, best first (1-{SEARCH_LIMIT_MAX}).",
        },
    },
    ["query"],
)
RECALL_INPUT = closed(
    {
        "query": {**QUERY, "description": "Search query to find the first memories (the seeds)."},
        "depth": {
            "type": "integer",
            "minimum": 0,
            "maximum": MAX_DEPTH,
            "default": 1,
            "description": f"How many relationship hops to follow from the seeds (0-{MAX_DEPTH}; 0 = search "
            "only).",
        },
        "project": SEARCH_MEMORIES_INPUT["properties"]["project"],
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": RECALL_LIMIT_MAX,
            "default": SEARCH_LIMIT_DEFAULT,
            "description": f"How many search results seed the walk (1-{RECALL_LIMIT_MAX}); at most 50 memories "
            "come back in all.",
        },
    },
    ["query"],
)
CREATE_RELATIONSHIP_INPUT = closed(
    {
        "from_hash": {**HASH, "description": "The source memory's hash."},
        "to_hash": {**HASH, "description": "The target memory's hash."},
        "relation_type": RELATION_TYPE,
    },
    ["from_hash", "to_hash", "relation_type"],
)
GET_RELATIONSHIPS_INPUT = closed(
    {
        "hash": HASH,
        "direction": {
            "enum": list(DIRECTIONS),
            "default": "both",
            "description": "outgoing (from this memory), incoming (to it) or both (default).",
        },
        "relation_type": {**RELATION_TYPE, "description": "Only edges of this type."},
    },
    ["hash"],
)
DELETE_RELATIONSHIP_INPUT = CREATE_RELATIONSHIP_INPUT
MEMORY_STATS_INPUT = closed(
    {"project": {**PROJECT, "description": "Count only this project's memories (default: all)."}}, []
)

#: memdb's envelope (``DefaultOutputSchema``): ``ok`` with ``result``, or not ``ok`` with ``error``.
OUTPUT = {
    "type": "object",
    "properties": {
        "ok": BOOL,
        "result": {},
        "error": {
            "type": "object",
            "properties": {"code": STR, "message": STR},
            "required": ["code", "message"],
        },
        "note": STR,
        "mode": {"enum": ["hybrid", "keyword"]},
        "redacted": REDACTED,
        "truncated": TRUNCATED,
    },
    "required": ["ok"],
    "oneOf": [
        {"properties": {"ok": {"const": True}}, "required": ["result"], "not": {"required": ["error"]}},
        {"properties": {"ok": {"const": False}}, "required": ["error"]},
    ],
}

"""JSON Schema building blocks the tool groups' tables share (``kinds/<kind>/schemas.py``).

Inputs are closed objects (:func:`closed`: an unknown argument is an error); outputs are open objects
(:func:`answer`) that always admit :data:`ANSWER_FIELDS`, the fields :mod:`memoryd.tools.answers` adds to an
answer holding stored text. The blocks are plain dicts shared between tables, never mutated: a table that
needs a variant builds a new dict (``{**STR, "description": ...}``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

STR: dict[str, Any] = {"type": "string"}
STR_OR_NULL: dict[str, Any] = {"type": ["string", "null"]}
STR_LIST: dict[str, Any] = {"type": "array", "items": STR}
COUNT: dict[str, Any] = {"type": "integer", "minimum": 0}
NUMBER: dict[str, Any] = {"type": "number"}
BOOL: dict[str, Any] = {"type": "boolean"}
#: For ``pattern``: JSON Schema patterns search, so this means "has a non-space character".
NOT_BLANK = r"\S"
#: For ``pattern``: one word, no white space anywhere.
NO_SPACE = r"^\S+$"

#: ``"redacted": {kind: n}`` (placeholders handed out), ``"truncated": [field...]`` (fields cut).
REDACTED: dict[str, Any] = {"type": "object", "additionalProperties": COUNT}
TRUNCATED: dict[str, Any] = STR_LIST
#: What an answer holding stored text may add: the data note, redaction counts and cut fields.
ANSWER_FIELDS: dict[str, Any] = {"note": STR, "redacted": REDACTED, "truncated": TRUNCATED}


def closed(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """An object with exactly ``properties`` (no others), of which ``required`` must be present."""
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def array_of(items: dict[str, Any]) -> dict[str, Any]:
    """An array whose every item is ``items``."""
    return {"type": "array", "items": items}


def answer(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """A tool's output schema: an object with ``properties`` then :data:`ANSWER_FIELDS` (not closed:
    fields it does not name are not refused), of which ``required`` must be present."""
    return {"type": "object", "properties": {**properties, **ANSWER_FIELDS}, "required": required}


def whole_numbers(schema: Mapping[str, Any], value: Any) -> Any:
    """``value`` (already valid against ``schema``) with each float at an ``integer`` place made an ``int``;
    objects and arrays are changed in place. Follows ``properties`` and ``items``, which is all the tools'
    schemas nest with."""
    if schema.get("type") == "integer" and isinstance(value, float):
        return int(value)
    if isinstance(value, dict):
        for key, sub in (schema.get("properties") or {}).items():
            if key in value and isinstance(sub, Mapping):
                value[key] = whole_numbers(sub, value[key])
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        value[:] = [whole_numbers(schema["items"], item) for item in value]
    return value

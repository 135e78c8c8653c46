"""Value helpers shared by importers: timestamps to ISO-8601 UTC, tag and relation-type words.

The limits are the memories' own (:mod:`memoryd.kinds.memories.rules`, after memdb's documented limits).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from memoryd.kinds.memories.format import IMPORTANCE_MAX, RELATION_TYPE_MAX
from memoryd.kinds.memories.rules import MAX_CONTENT_CHARS, MAX_TAG_CHARS, MAX_TAGS
from memoryd.textcheck import has_lone_surrogate

_SPACE = re.compile(r"\s+")


def iso_utc(value: object) -> str | None:
    """A timestamp as ISO-8601 UTC (``2024-05-01T12:30:00Z``), or None when absent or unparsable.

    Accepts SQLite's ``CURRENT_TIMESTAMP`` text (``2024-05-01 12:30:00``, UTC by definition), ISO-8601 with
    or without an offset (naive = UTC), and Unix epoch numbers in seconds or milliseconds (> 1e11).
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        seconds = value / 1000 if abs(value) > 1e11 else value
        try:
            dt = datetime.fromtimestamp(seconds, UTC)
        except (OverflowError, OSError, ValueError):
            return None
    else:
        text = str(value).strip()
        if not text:
            return None
        try:
            dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            try:
                return iso_utc(float(text))
            except ValueError:
                return None
        dt = dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def word(text: str) -> str:
    """``text`` made into one word: whitespace runs become ``_`` (tags and relation types refuse spaces)."""
    return _SPACE.sub("_", text.strip())


def content_problem(content: object) -> str | None:
    """Why ``content`` cannot be a memory, or None. Length and emptiness are those of the normalised
    content (:func:`memoryd.kinds.memories.files.normalize_content`), as for the tools."""
    from memoryd.kinds.memories.files import normalize_content

    if not isinstance(content, str):
        return "content is not text"
    if has_lone_surrogate(content):
        return "content holds a lone surrogate (not valid Unicode text)"
    text = normalize_content(content)
    if not text:
        return "content is empty"
    if len(text) > MAX_CONTENT_CHARS:
        return f"content has {len(text):,} characters (at most {MAX_CONTENT_CHARS:,})"
    return None


def tags_problem(tags: tuple[str, ...]) -> str | None:
    """Why ``tags`` break the tools' rules, or None."""
    if len(tags) > MAX_TAGS:
        return f"{len(tags)} tags (at most {MAX_TAGS})"
    for tag in tags:
        if not tag or len(tag) > MAX_TAG_CHARS or _SPACE.search(tag) or has_lone_surrogate(tag):
            return f"tag {tag[:60]!r} must be 1-{MAX_TAG_CHARS} characters without whitespace"
    return None


def relation_type_problem(relation_type: str) -> str | None:
    """Why ``relation_type`` breaks the tools' rules, or None."""
    if not relation_type or len(relation_type) > RELATION_TYPE_MAX or _SPACE.search(relation_type):
        return f"relation type {relation_type[:60]!r} must be 1-{RELATION_TYPE_MAX} characters without whitespace"
    if has_lone_surrogate(relation_type):
        return "relation type holds a lone surrogate"
    return None


def importance_value(value: object) -> int:
    """An importance 0-10 from a number or numeric text; absent (None) is 0. Fractions are rounded half up
    (older memdb versions stored any number in 0-10). Raises ValueError for anything else."""
    if value is None:
        return 0
    number = value
    if isinstance(value, str | bytes):
        try:
            number = float(value)
        except ValueError:
            number = None
    if isinstance(number, bool) or not isinstance(number, int | float) or not 0 <= number <= IMPORTANCE_MAX:
        shown = value.decode(errors="replace") if isinstance(value, bytes) else value
        raise ValueError(f"importance {shown!r} is not a number in 0-{IMPORTANCE_MAX}")
    return int(number + 0.5)


def unique(seq) -> tuple[str, ...]:
    """Items of ``seq`` in first-seen order, without repeats."""
    seen: set[str] = set()
    return tuple(x for x in seq if not (x in seen or seen.add(x)))

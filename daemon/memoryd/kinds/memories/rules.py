"""The rules every memory write obeys, whoever calls (tools, memo, importers): memdb's limits.

Content 1–100,000 characters after normalisation (:func:`memoryd.kinds.memories.files.normalize_content`); at
most 100 tags, each 1–50 characters without whitespace, in Unicode NFC (duplicates dropped, order kept); importance an
integer 0–10; ``memory_type`` one of :data:`~memoryd.kinds.memories.files.MEMORY_TYPES`; ``relation_type`` 1–50
characters without whitespace; keys 64 lowercase hex characters. A violation raises
:class:`InvalidMemory` (a ``ValueError``) naming the rule, including text holding a lone surrogate.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from memoryd.kinds.memories.files import (
    IMPORTANCE_MAX,
    MEMORY_TYPES,
    RELATION_TYPE_MAX,
    is_hash,
    normalize_content,
)
from memoryd.textcheck import has_lone_surrogate

MAX_CONTENT_CHARS = 100_000
MAX_TAGS = 100
MAX_TAG_CHARS = 50
MAX_DEPTH = 3
_NO_SPACE = re.compile(r"\S+")


class InvalidMemory(ValueError):
    """Arguments that break the memory rules (this module's docstring); the message says which."""


class MemoryNotFound(LookupError):
    """No memory (or relationship) with that key."""


class MemoryConflict(Exception):
    """An update whose new content already exists as another memory (memdb refuses it too)."""


class BrokenMemory(Exception):
    """The memory's file exists but cannot be used (broken front matter, refused by the gate)."""


def clean_content(content: object) -> str:
    """Normalised content, or InvalidMemory (not text, lone surrogate, empty, over 100,000 chars)."""
    if not isinstance(content, str):
        raise InvalidMemory("content must be a string")
    if has_lone_surrogate(content):
        raise InvalidMemory("content contains a lone surrogate (invalid Unicode); send valid UTF-8 text")
    text = normalize_content(content)
    if not text:
        raise InvalidMemory("content is empty (whitespace only)")
    if len(text) > MAX_CONTENT_CHARS:
        raise InvalidMemory(f"content is longer than {MAX_CONTENT_CHARS} characters")
    return text


def clean_tags(tags: Iterable[object] | None) -> tuple[str, ...]:
    """Tags in NFC (as content is: "café" typed either way is one tag), in order without duplicates, or
    InvalidMemory."""
    # a dict keeps them in order, each once; a list's membership test took ~0.1 s for 2,000 tags, and
    # grows with their square
    out: dict[str, None] = {}
    for t in tags or ():
        if not isinstance(t, str) or has_lone_surrogate(t):
            raise InvalidMemory("every tag must be valid text")
        t = unicodedata.normalize("NFC", t)
        if not 0 < len(t) <= MAX_TAG_CHARS or not _NO_SPACE.fullmatch(t):
            raise InvalidMemory(f"tag {t[:60]!r}: 1-{MAX_TAG_CHARS} characters without whitespace")
        out[t] = None
    if len(out) > MAX_TAGS:
        raise InvalidMemory(f"at most {MAX_TAGS} tags")
    return tuple(out)


def clean_importance(value: object) -> int:
    """An integer 0-10 (``2.0`` passes as 2), else InvalidMemory."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise InvalidMemory("importance must be an integer 0-10")
    if not 0 <= int(value) <= IMPORTANCE_MAX:
        raise InvalidMemory("importance must be an integer 0-10")
    return int(value)


def clean_type(value: object) -> str:
    """One of MEMORY_TYPES, else InvalidMemory."""
    if value not in MEMORY_TYPES:
        raise InvalidMemory(f"memory_type must be one of {', '.join(MEMORY_TYPES)}")
    return str(value)


def clean_relation_type(value: object) -> str:
    """1-50 characters without whitespace, else InvalidMemory."""
    if (
        not isinstance(value, str)
        or has_lone_surrogate(value)
        or not 0 < len(value) <= RELATION_TYPE_MAX
        or not _NO_SPACE.fullmatch(value)
    ):
        raise InvalidMemory(f"relation_type must be 1-{RELATION_TYPE_MAX} characters without whitespace")
    return value


def check_key(value: object) -> str:
    """``value`` if it is a memory hash (64 lowercase hex), else InvalidMemory."""
    if not is_hash(value):
        raise InvalidMemory("a memory hash is 64 lowercase hex characters (SHA-256)")
    return str(value)

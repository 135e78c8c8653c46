"""Session records: ids, :class:`Interaction` and :class:`Summary`, and their validation.

The shapes are Neo.mjs Memory Core's ``Memory`` and ``Summary`` (see :mod:`memoryd.kinds.sessions.files` for
the files that hold them). Session ids match :data:`SESSION_ID_PATTERN` (ASCII letters, digits, ``_`` and
``-``, 1-128 characters, starting with a letter or digit; a UUID fits): they become file names, so they
are checked before any file access. Parsers raise :class:`FormatError` with the reason.
"""

from __future__ import annotations

import json
import re
import secrets
import uuid
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime
from typing import Any

from memoryd.board.gate import InvalidId
from memoryd.index.redact import redact
from memoryd.textcheck import first_lone_surrogate

SESSIONS_DIR = "sessions"
LOG_SUFFIX = ".jsonl"
SUMMARY_SUFFIX = ".summary.json"
SESSION_ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}"
ITEM_ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}"
#: Memory Core's summary categories (``Summary.category`` enum).
CATEGORIES = ("bugfix", "feature", "refactoring", "documentation", "new-app", "analysis", "other")
SCORES = ("quality", "productivity", "impact", "complexity")
INTERACTION_TYPE = "agent-interaction"

_SESSION_RE = re.compile(SESSION_ID_PATTERN, re.ASCII)
_ITEM_RE = re.compile(ITEM_ID_PATTERN, re.ASCII)


class InvalidSessionId(InvalidId):
    """A session id that does not match :data:`SESSION_ID_PATTERN` (an argument error at the tool
    boundary)."""


def check_session_id(value: object) -> str:
    """Return ``value`` when it is a session id; else raise :class:`InvalidSessionId` (no file access)."""
    if isinstance(value, str) and len(value) <= 128 and _SESSION_RE.fullmatch(value):
        return value
    shown = repr(value) if not isinstance(value, str) or len(value) <= 40 else repr(value[:40]) + "..."
    raise InvalidSessionId(
        f"invalid session id {shown}: expected 1-128 ASCII letters, digits, '_' or '-' starting with a "
        f"letter or digit (pattern {SESSION_ID_PATTERN}), e.g. a UUID"
    )


def is_session_id(value: object) -> bool:
    return isinstance(value, str) and len(value) <= 128 and _SESSION_RE.fullmatch(value) is not None


def is_item_id(value: object) -> bool:
    return isinstance(value, str) and len(value) <= 128 and _ITEM_RE.fullmatch(value) is not None


def new_session_id() -> str:
    """A fresh session id (a random UUID, as Memory Core uses)."""
    return str(uuid.uuid4())


def now_iso() -> str:
    """The current time as ISO-8601 UTC with milliseconds (``2026-01-02T03:04:05.678Z``)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


@dataclass(frozen=True)
class Interaction:
    """One agent turn. ``to_json`` gives the wire/file shape (camelCase, Memory Core's ``Memory``)."""

    id: str
    session_id: str
    timestamp: str
    prompt: str
    thought: str
    response: str
    type: str = INTERACTION_TYPE

    @classmethod
    def new(cls, session_id: str, prompt: str, thought: str, response: str) -> Interaction:
        ts = now_iso()
        return cls(f"mem_{ts}_{secrets.token_hex(3)}", session_id, ts, prompt, thought, response)

    def redacted(self) -> Interaction:
        """A copy with prompt, thought, response and type each redacted as a whole (for index records and
        exports; never written back)."""
        return replace(
            self,
            prompt=_clean(self.prompt),
            thought=_clean(self.thought),
            response=_clean(self.response),
            type=_clean(self.type),
        )

    def to_json(self) -> dict[str, str]:
        return _camel_json(self)


@dataclass(frozen=True)
class Summary:
    """A session summary (Memory Core's ``Summary``). Scores are integers 0-100."""

    session_id: str
    timestamp: str
    title: str
    summary: str
    category: str
    memory_count: int
    quality: int
    productivity: int
    impact: int
    complexity: int
    technologies: tuple[str, ...] = ()
    method: str = "extractive"
    covered_until: str = ""

    @property
    def id(self) -> str:
        return f"summary_{self.session_id}"

    def redacted(self) -> Summary:
        """A copy with title, summary, each technology and method redacted as a whole (for index records
        and exports; never written back)."""
        return replace(
            self,
            title=_clean(self.title),
            summary=_clean(self.summary),
            technologies=tuple(_clean(t) for t in self.technologies),
            method=_clean(self.method),
        )

    def to_json(self) -> dict[str, Any]:
        return _camel_json(self)


def _camel_json(item: Interaction | Summary) -> dict[str, Any]:
    """``{"id": ..., <field in camelCase>: value, ...}`` in field order, tuples as lists: Memory Core's
    names for our fields (``session_id`` -> ``sessionId``)."""
    out: dict[str, Any] = {"id": item.id}
    for f in fields(item):
        value = getattr(item, f.name)
        head, *rest = f.name.split("_")
        out[head + "".join(w.title() for w in rest)] = list(value) if isinstance(value, tuple) else value
    return out


class FormatError(ValueError):
    """A session line or summary file whose content does not have the documented shape."""


def _clean(text: str) -> str:
    return redact(text).text if text else text


def _text(obj: dict, key: str, required: bool = True) -> str:
    value = obj.get(key, None if required else "")
    if not isinstance(value, str):
        raise FormatError(f"{key!r} must be a string")
    return value


def _session_of(obj: dict, session_id: str | None) -> str:
    """``obj["sessionId"]``, checked to be a session id and, given ``session_id``, to be that one."""
    sid = obj.get("sessionId")
    if not is_session_id(sid):
        raise FormatError(f"'sessionId' must match {SESSION_ID_PATTERN}")
    if session_id is not None and sid != session_id:
        raise FormatError(f"'sessionId' {sid!r} does not match the file's session {session_id!r}")
    return sid


def _check_text(obj: dict) -> None:
    """FormatError for a ``"\\ud800"`` escape (valid JSON, no text: the index and answers cannot encode it)."""
    if problem := first_lone_surrogate(obj):
        raise FormatError(problem)


def parse_interaction(obj: object, session_id: str | None = None) -> Interaction:
    """Validate one decoded line. ``session_id``: the file's session (its ``sessionId`` must match)."""
    if not isinstance(obj, dict):
        raise FormatError("not a JSON object")
    _check_text(obj)
    item_id = obj.get("id")
    if not is_item_id(item_id):
        raise FormatError(f"'id' must match {ITEM_ID_PATTERN}")
    sid = _session_of(obj, session_id)
    kind = obj.get("type", INTERACTION_TYPE)
    if not isinstance(kind, str) or not kind:
        raise FormatError("'type' must be a non-empty string")
    return Interaction(
        id=item_id,
        session_id=sid,
        timestamp=_timestamp(obj),
        prompt=_text(obj, "prompt"),
        thought=_text(obj, "thought", required=False),
        response=_text(obj, "response"),
        type=kind,
    )


def _timestamp(obj: dict) -> str:
    ts = obj.get("timestamp")
    if not isinstance(ts, str):
        raise FormatError("'timestamp' must be an ISO-8601 string")
    try:
        datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        raise FormatError(f"'timestamp' {ts[:40]!r} is not ISO-8601") from None
    return ts


def _score(obj: dict, key: str) -> int:
    value = obj.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 100:
        raise FormatError(f"{key!r} must be a number 0-100")
    return round(value)


def parse_summary(obj: object, session_id: str | None = None) -> Summary:
    """Validate a decoded summary object (see the module docstring for its fields)."""
    if not isinstance(obj, dict):
        raise FormatError("not a JSON object")
    _check_text(obj)
    sid = _session_of(obj, session_id)
    category = obj.get("category", "other")
    if category not in CATEGORIES:
        raise FormatError(f"'category' must be one of {', '.join(CATEGORIES)}")
    count = obj.get("memoryCount", 0)
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise FormatError("'memoryCount' must be a non-negative integer")
    techs = obj.get("technologies", [])
    if not isinstance(techs, list) or not all(isinstance(t, str) for t in techs):
        raise FormatError("'technologies' must be a list of strings")
    method = obj.get("method", "extractive")
    if not isinstance(method, str):
        raise FormatError("'method' must be a string")
    return Summary(
        session_id=sid,
        timestamp=_timestamp(obj),
        title=_text(obj, "title"),
        summary=_text(obj, "summary"),
        category=category,
        memory_count=count,
        technologies=tuple(techs),
        method=method,
        covered_until=_text(obj, "coveredUntil", required=False),
        **{k: _score(obj, k) for k in SCORES},
    )


def encode_line(obj: dict) -> bytes:
    """One JSONL line: compact JSON, non-ASCII kept, ``\\n``-terminated (a line never contains ``\\n``)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"

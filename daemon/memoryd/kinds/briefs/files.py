"""Board format v1 (contract §3): the records on the board and the parsers for each file.

``tasks/<id>.json`` -> :class:`Task`; ``briefs/<id>/`` -> :class:`Brief` (``brief.json`` + ``said.txt``,
``prompt.md``, ``notes.md``, ``outcome.md``, ``screens/<n>.{png,txt,json}``). Parsers take text and raise
:class:`FormatError` for content that breaks the format; the reader turns that into a skipped file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, Literal

from memoryd.board.gate import InvalidId, check_brief_id, check_task_id
from memoryd.errors import ToolFailed
from memoryd.textcheck import first_lone_surrogate

TaskStatus = Literal["open", "done"]
TASK_STATUSES: tuple[str, ...] = ("open", "done")


class FormatError(ToolFailed, ValueError):
    """A file whose content does not follow board format v1 (bad JSON, missing field, wrong id, ...)."""


#: For the texts of a task or brief as read (redacted, then stripped) whose file already held redaction
#: placeholders: which of each text's placeholders the read wrote over a secret (True) and which the file held
#: (False). A text missing here held none: every placeholder in it was written by the read. What a count of
#: secrets redacted "now" needs (:class:`memoryd.tools.answers.Scrub`); not part of the record.
Held = Mapping[str, tuple[bool, ...]]


@dataclass(frozen=True)
class Task:
    """``tasks/<id>.json``: ``{"id","title","project","status":"open"|"done","created_at"}``; ``held``: see
    :data:`Held` (empty unless read by :class:`~memoryd.kinds.briefs.reader.BoardReader`)."""

    id: str
    title: str
    project: str
    status: TaskStatus
    created_at: str  # ISO-8601 UTC as written on the board
    held: Held = field(default_factory=dict, compare=False, repr=False)

    def to_json(self) -> dict[str, str]:
        """The five fields of the task's file."""
        return {"id": self.id, "title": self.title, "project": self.project, "status": self.status,
                "created_at": self.created_at}  # fmt: skip


@dataclass(frozen=True)
class Screen:
    """Screen ``n`` of a brief; it exists only while ``screens/<n>.png`` exists and passes the gate.

    ``text`` is the OCR/accessibility text of ``<n>.txt``: searchable, never handed out.
    """

    n: str
    text: str
    app: str | None
    window_title: str | None


# Outcome sections in file order: (field name, heading as written by save_outcome).
OUTCOME_SECTIONS: tuple[tuple[str, str], ...] = (
    ("did", "Did"),
    ("decided", "Decided"),
    ("open", "Open"),
    ("files", "Files"),
    ("retired", "Retired"),
)
# Hand-written outcomes mark an empty section with one "- none" bullet (106 of 106 sample outcomes do).
_EMPTY_MARKERS = frozenset({"none", "n/a", "na", "nothing", "-", "—", "–"})


def _clean_items(items: Any) -> tuple[str, ...]:
    if isinstance(items, str):
        items = (items,)
    cleaned = tuple(" ".join(str(item).split()) for item in items or ())
    cleaned = tuple(item for item in cleaned if item)
    if len(cleaned) == 1 and cleaned[0].lower() in _EMPTY_MARKERS:
        return ()
    return cleaned


@dataclass(frozen=True)
class Outcome:
    """``outcome.md``: the agent's report, five lists of one-line bullets.

    Values are canonical on construction: each item has its whitespace collapsed to single spaces (a bullet
    is one line), empty items are dropped, and a section whose only item is an empty marker ("none") is
    empty. So ``parse_outcome(render_outcome(o)) == o`` for every Outcome.
    """

    did: tuple[str, ...] = ()
    decided: tuple[str, ...] = ()
    open: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    retired: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for f in fields(self):
            object.__setattr__(self, f.name, _clean_items(getattr(self, f.name)))

    def is_empty(self) -> bool:
        return not any(getattr(self, name) for name, _ in OUTCOME_SECTIONS)


@dataclass(frozen=True)
class BriefHead:
    """What ``brief.json`` says of every brief: its id, task, project, date, title and summary."""

    id: str
    task: str
    project: str
    created_at: str
    title: str
    summary: str


@dataclass(frozen=True)
class Brief(BriefHead):
    """One brief folder, as read through the gate.

    ``screens`` holds only screens whose ``.png`` exists; ``screen_pngs`` are their board-relative paths
    (``briefs/<id>/screens/<n>.png``), the only screen data that may be handed out. ``outcome`` is None when
    there is no (readable) ``outcome.md``. ``captured``: ``brief.json``'s optional ``"captured":
    {"agent", "session", "rid"}`` (written by capture), None when absent or not two strings;
    ``captured_rid``: its ``rid`` (the hook request that filed it), None when absent. ``held``: see
    :data:`Held`.
    """

    said: str = ""
    prompt: str = ""
    notes: tuple[str, ...] = ()
    outcome: Outcome | None = None
    screens: tuple[Screen, ...] = ()
    screen_pngs: tuple[str, ...] = field(default=())
    captured: tuple[str, str] | None = None  # (agent, session) that sent it as a prompt, when captured
    # not part of its index record: kept out of repr, which the derive cache hashes (memoryd.index.derive_cache)
    captured_rid: str | None = field(default=None, repr=False)
    held: Held = field(default_factory=dict, compare=False, repr=False)


# --- JSON files ---------------------------------------------------------------------------------------


def _load_object(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        # exc.msg/pos only: the message must not carry file content into the logs.
        # some messages end in "at" ("Invalid control character at"): the position follows once
        what = exc.msg.removesuffix(" at")
        raise FormatError(
            f"bad JSON: {what} at line {exc.lineno} column {exc.colno} (char {exc.pos})"
        ) from None
    except RecursionError:
        raise FormatError("bad JSON: nested too deeply") from None
    except ValueError:  # valid JSON Python will not read: an integer past its digit limit
        raise FormatError("bad JSON: a number too long") from None
    if not isinstance(data, dict):
        raise FormatError(f"expected a JSON object, got {type(data).__name__}")
    # a "\\ud800" escape is valid JSON but no text: nothing downstream (the index, an answer) can encode it
    if problem := first_lone_surrogate(data):
        raise FormatError(problem)
    return data


def _require_str(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise FormatError(f"missing or non-string field {key!r}")
    return value


def _require_timestamp(data: dict[str, Any], key: str) -> str:
    value = _require_str(data, key)
    try:
        datetime.fromisoformat(value)
    except ValueError:
        raise FormatError(f"field {key!r} is not an ISO-8601 timestamp") from None
    return value


def parse_task(text: str, expected_id: str | None = None) -> Task:
    """Parse ``tasks/<id>.json``; ``expected_id`` (its file name stem) must equal the ``id`` field.

    Raises FormatError: bad JSON, a missing/non-string field, an invalid id or status, a bad timestamp.
    """
    data = _load_object(text)
    try:
        task_id = check_task_id(data.get("id"))
    except InvalidId as exc:
        raise FormatError(str(exc)) from None
    if expected_id is not None and task_id != expected_id:
        raise FormatError(f"id {task_id!r} does not match its file name {expected_id!r}")
    status = _require_str(data, "status")
    if status not in TASK_STATUSES:
        raise FormatError(f"status {status[:20]!r} is not one of {TASK_STATUSES}")
    return Task(
        id=task_id,
        title=_require_str(data, "title"),
        project=_require_str(data, "project"),
        status=status,  # type: ignore[arg-type]  # checked against TASK_STATUSES above
        created_at=_require_timestamp(data, "created_at"),
    )


def parse_brief_json(text: str, expected_id: str | None = None) -> dict[str, Any]:
    """Parse ``briefs/<id>/brief.json`` into the six metadata fields of :class:`Brief`, plus ``captured``
    when the optional ``"captured": {"agent", "session"}`` object holds two strings, and ``captured_rid``
    when it holds a string ``"rid"`` (else they are ignored, as are keys this version does not know).

    ``expected_id`` (the folder name) must equal the ``id`` field; ``task`` must be a task id.
    Raises FormatError like :func:`parse_task`.
    """
    data = _load_object(text)
    try:
        brief_id = check_brief_id(data.get("id"))
        task_id = check_task_id(data.get("task"))
    except InvalidId as exc:
        raise FormatError(str(exc)) from None
    if expected_id is not None and brief_id != expected_id:
        raise FormatError(f"id {brief_id!r} does not match its folder name {expected_id!r}")
    meta: dict[str, Any] = {
        "id": brief_id,
        "task": task_id,
        "project": _require_str(data, "project"),
        "created_at": _require_timestamp(data, "created_at"),
        "title": _require_str(data, "title"),
        "summary": _require_str(data, "summary"),
    }
    captured = data.get("captured")
    if isinstance(captured, dict):
        agent, session = captured.get("agent"), captured.get("session")
        if isinstance(agent, str) and isinstance(session, str):
            meta["captured"] = (agent, session)
        if isinstance(captured.get("rid"), str):
            meta["captured_rid"] = captured["rid"]
    return meta


def parse_screen_json(text: str) -> tuple[str | None, str | None]:
    """Parse ``screens/<n>.json`` -> ``(app, window_title)``; absent or non-string fields are None."""
    data = _load_object(text)
    app, title = data.get("app"), data.get("window_title")
    return (app if isinstance(app, str) else None, title if isinstance(title, str) else None)


# --- Markdown files -----------------------------------------------------------------------------------

_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+(?P<text>.*?)\s*$")
_FAST_BULLETS = frozenset({"- ", "* ", "+ "})
_BARE_BULLET = re.compile(r"^\s*[-*+•]\s*$")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s*(?P<title>.*?)[\s#]*$")
# "Did:" / "**Did**" on a line of its own also counts as a heading when it names a known section.
_LOOSE_HEADING = re.compile(
    r"^\s*(?:\*\*|__)?(?P<title>[A-Za-z][A-Za-z /]{1,30}?)\s*:?\s*(?:\*\*|__)?\s*:?\s*$"
)
_SECTION_BY_TITLE = {
    "did": "did",
    "done": "did",
    "what i did": "did",
    "decided": "decided",
    "decision": "decided",
    "decisions": "decided",
    "open": "open",
    "still open": "open",
    "open questions": "open",
    "open items": "open",
    "todo": "open",
    "to do": "open",
    "next": "open",
    "next steps": "open",
    "files": "files",
    "files changed": "files",
    "files touched": "files",
    "changed files": "files",
    "retired": "retired",
}


def _section_of(title: str) -> str | None:
    key = " ".join(title.strip(" :*_").lower().split())
    if key in _SECTION_BY_TITLE:
        return _SECTION_BY_TITLE[key]
    first = key.split(" ", 1)[0] if key else ""
    return _SECTION_BY_TITLE.get(first) if first in {name for name, _ in OUTCOME_SECTIONS} else None


def parse_outcome(text: str) -> Outcome:
    """Parse ``outcome.md`` (contract §3) tolerantly; never raises.

    Headings ``#``-``######`` (or a lone ``Did:`` / ``**Did**`` line) pick the section, case-insensitively,
    with a few synonyms ("Done", "Decisions", "Next steps", "Files changed"); bullets may be ``-``, ``*``,
    ``+`` or numbered; blank lines are ignored; an indented plain line continues the previous bullet and
    any other plain line is an item of its own. Text before the first heading or under an unknown heading
    is ignored.
    """
    sections: dict[str, list[str]] = {name: [] for name, _ in OUTCOME_SECTIONS}
    current: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line[:2] in _FAST_BULLETS:  # the common case, without a regex
            if current is not None:
                sections[current].append(line[2:])
            continue
        if _BARE_BULLET.match(raw):
            continue
        bullet = _BULLET.match(raw)
        if bullet:
            if current is not None:
                sections[current].append(bullet.group("text"))
            continue
        heading = _HEADING.match(raw) if line[0] == "#" else None
        if heading:
            current = _section_of(heading.group("title"))
            continue
        loose = _LOOSE_HEADING.match(raw)
        if loose and _section_of(loose.group("title")):
            current = _section_of(loose.group("title"))
            continue
        if current is None:
            continue
        items = sections[current]
        if items and raw[:1].isspace():
            items[-1] = f"{items[-1]} {raw.strip()}"
        else:
            items.append(raw.strip())
    return Outcome(**sections)


def render_outcome(outcome: Outcome) -> str:
    """``outcome.md`` text in exactly the hand-written shape: every heading, ``- `` bullets, ``- none``.

    Example::

        ## Did
        - Added the retry
        ## Decided
        - none
        ...
    """
    lines: list[str] = []
    for name, heading in OUTCOME_SECTIONS:
        lines.append(f"## {heading}")
        lines.extend(f"- {item}" for item in getattr(outcome, name) or ("none",))
    return "\n".join(lines) + "\n"


def parse_notes(text: str) -> tuple[str, ...]:
    """``notes.md`` -> one note per non-blank line, a leading ``- ``/``* `` bullet removed."""
    notes = []
    for raw in text.splitlines():
        bullet = _BULLET.match(raw)
        line = bullet.group("text") if bullet else raw.strip()
        if line and not _BARE_BULLET.match(raw):
            notes.append(line)
    return tuple(notes)

"""Redaction on read: every text of a brief or task redacted as a whole, before it is parsed into parts.

Every stored text is redacted (:func:`memoryd.index.redact.redact`) as a whole as it is read, before it is
parsed into parts: ``outcome.md`` before it becomes bullets, ``notes.md`` before it becomes lines, each
string of a JSON file once decoded (a JSON escape can hide a secret from a rule reading the encoded text).
So a private key written as bullets, quoted or fenced is replaced as one block, and no bullet holds a
piece of it. The tasks and briefs the reader returns hold no secret the rules know: the index, the answers
and the export all use them as they are. The board files themselves are never changed. A file may hold
placeholders already (capture redacts a prompt before it writes it): each task and brief keeps, for its
texts that did, which placeholders the read wrote (``held``, :data:`~memoryd.kinds.briefs.files.Held`), so
that what answers report as redacted is only what was redacted from the files.

``held`` maps a text (stripped) to one flag per placeholder it holds: ``True`` when this read wrote it,
``False`` when the file held it already (:data:`memoryd.kinds.briefs.files.Held`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from memoryd.index.redact import PLACEHOLDERS, redact
from memoryd.kinds.briefs.files import OUTCOME_SECTIONS, Outcome

T = TypeVar("T")


def _clean(text: str, held: dict[str, tuple[bool, ...]]) -> str:
    """One stored text, redacted as a whole (see the module docstring); when the file held placeholders
    already, which of the text's placeholders this read wrote goes into ``held`` (:data:`files.Held`)."""
    if not text:
        return text
    red = redact(text)
    if red.fresh is not None:
        held[red.text.strip()] = red.fresh
    return red.text


def _clean_or_none(text: str | None, held: dict[str, tuple[bool, ...]]) -> str | None:
    return None if text is None else _clean(text, held)


#: Marks a placeholder its file held while a text is parsed into parts (a private-use character: no rule
#: of the parsers treats it as a space, a bullet or a heading).
_HELD_MARK = "\ue000"


def _parsed(text: str, parse: Callable[[str], T], held: dict[str, tuple[bool, ...]]) -> T:
    """``parse`` of ``text`` redacted as a whole; when the file held placeholders already, which of each
    part's placeholders this read wrote goes into ``held`` (the parser keeps a mark put before each held
    one)."""
    red = redact(text)
    parts = parse(red.text)
    fresh = red.fresh
    if fresh is None or _HELD_MARK in red.text or len(PLACEHOLDERS.findall(red.text)) != len(fresh):
        return parts  # nothing held; or no safe mark: its placeholders count as written now
    flags = iter(fresh)
    marked = PLACEHOLDERS.sub(lambda m: m.group() if next(flags) else _HELD_MARK + m.group(), red.text)
    for part in _strings(parse(marked)):
        if "[REDACTED:" in part:
            written = tuple(
                part[max(0, m.start() - 1) : m.start()] != _HELD_MARK for m in PLACEHOLDERS.finditer(part)
            )
            held[part.replace(_HELD_MARK, "").strip()] = written
    return parts


def _strings(parsed: object) -> list[str]:
    """The texts of a parsed notes file (a tuple of lines) or outcome (its sections' items)."""
    if isinstance(parsed, Outcome):
        return [item for name, _ in OUTCOME_SECTIONS for item in getattr(parsed, name)]
    return list(parsed)  # type: ignore[call-overload]

"""What captured text must never carry, cut in one place for the hooks and the daemon (standard library only).

* ``<private>…</private>`` spans (:func:`strip_private`): nesting-aware and case-insensitive (``<private>``,
  ``< PRIVATE >``, ``</private>``, ``</ private>``); an unclosed ``<private>`` hides everything after it, and
  a stray ``</private>`` with nothing open is dropped (its text stays). Where a cut leaves two runs of
  blanks side by side, the second goes, and a cut at the end of a line or of the text leaves no trailing
  blank (newlines, indentation and blanks elsewhere stay as typed).
* lone UTF-16 surrogates (:func:`replace_lone_surrogates`): ``"\\ud800"`` is valid JSON but no Unicode text,
  so nothing can encode it as UTF-8; each becomes U+FFFD, so the rest of the text is still kept.

The hook applies both to every string of a request before it sends or spools it (:func:`scrub`), so
private text never leaves the agent's process; the daemon applies them again to what it receives (a
request from an older hook, or ``memoryd brief``).
"""

from __future__ import annotations

import re

_TAG = re.compile(r"<\s*(/?)\s*private\s*>", re.IGNORECASE)
_SURROGATE = re.compile("[\ud800-\udfff]")


def strip_private(text: str) -> tuple[str, int]:
    """``text`` without its ``<private>`` spans (rules in the module docstring); and how many were cut."""
    if "private" not in text.lower():
        return text, 0
    kept: list[str] = []
    depth = cuts = 0
    start = 0  # where the text being kept began
    for tag in _TAG.finditer(text):
        closing = bool(tag.group(1))
        if depth == 0:
            kept.append(text[start : tag.start()])
            start = tag.end()
            if not closing:  # a stray close is only dropped; an open starts a cut
                depth, cuts = 1, cuts + 1
        elif closing:
            depth -= 1
            if depth == 0:
                start = tag.end()
        else:
            depth += 1
    kept.append(text[start:] if depth == 0 else "")  # an unclosed cut hides the rest
    out = kept[0]
    for piece in kept[1:]:
        if not piece or piece[0] in "\r\n":
            out = out.rstrip(" \t")  # a cut at the end of a line leaves no trailing blank
        elif out.endswith((" ", "\t")) and piece.startswith((" ", "\t")):
            piece = piece.lstrip(" \t")  # the blank before the cut stands for it
        out += piece
    return out, cuts


def replace_lone_surrogates(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (the same object when there is none)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def scrub(value):
    """``value`` (a JSON value) with every string, keys included, passed through
    :func:`replace_lone_surrogates` and :func:`strip_private`; other values unchanged."""
    if isinstance(value, str):
        return strip_private(replace_lone_surrogates(value))[0]
    if isinstance(value, dict):
        return {scrub(k): scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value

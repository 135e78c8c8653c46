"""What every redaction rule looks at: the text, its cheap views, and the pieces of shape they share.

``_Text`` holds the text, an ASCII lower-case copy with the same offsets, and its long tokens (20+ non-space
characters, ISO-8601 times excluded): a rule's trigger checks these before its regex runs over the whole
text. A finding is a ``Span``, ``(start, end, kind)`` in character offsets of the text.
"""

from __future__ import annotations

import re

Span = tuple[int, int, str]  # start, end, kind
_LONG = 20  # a token of at least this many non-space characters can hold any fixed-shape secret we look for
# an ISO-8601 time ("2026-12-03T07:00:00Z", 20 characters) is long but holds no secret: without this every
# stored time went through every rule, ~0.1 ms each, twice per memory indexed
_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?", re.ASCII)


class _Text:
    """The text plus the cheap views the rules' triggers look at."""

    def __init__(self, text: str) -> None:
        self.text = text
        # ASCII-only lower case with one character per character, so offsets stay valid ("İ".lower() is 2).
        self.low = text.encode("ascii", "replace").decode("ascii").lower()
        self.long_tokens = [tok for tok in text.split() if len(tok) >= _LONG and not _TIME.fullmatch(tok)]
        self._reduced: str | None = None

    @property
    def reduced(self) -> str:
        """The long tokens alone: a fixed-shape secret matches here whenever it matches the text."""
        if self._reduced is None:
            self._reduced = "\n".join(self.long_tokens)
        return self._reduced

    def line_bounds(self, pos: int) -> tuple[int, int]:
        start = self.text.rfind("\n", 0, pos) + 1
        end = self.text.find("\n", pos)
        return start, len(self.text) if end < 0 else end


# What may stand before a line's content in Markdown or plain text: indentation, list markers ("- ", "* ",
# "+ ", "• ", "1. ", "2) ") and quote marks (">", "> >"). A block pasted into a list or a quote carries one
# on every line, and each line may carry another ("- " on the first, "  " on the rest).
_LINE_PREFIX = r"[ \t]*(?:(?:>|(?:[-*+•]|\d{1,3}[.)])(?=[ \t]))[ \t]*)*"
# A value may also start the next line, after its layout prefix ("Authorization:\n  Bearer ..."): a parser
# that joins continuation lines would put it right after its key.
_NEXT_LINE = rf"(?:\r?\n{_LINE_PREFIX})?"
_TRAILING = ".,;:)]}>"  # sentence punctuation after a bare value ("!" and "?" often end a password)
# One part of a path or identifier made of ordinary words: lower, camelCase, PascalCase, UPPER, or digits.
_WORDLIKE = re.compile(r"(?:[a-z]+|[A-Z]?[a-z]+(?:[A-Z][a-z]+)*|[A-Z]+)[0-9]*|[0-9]+")


def _wordlike(value: str) -> bool:
    """True when every part of ``value`` (split at / _ - + = .) is an ordinary word or CamelCase run."""
    return all(_WORDLIKE.fullmatch(part) for part in re.split(r"[/_+=.-]+", value) if part)

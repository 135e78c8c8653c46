"""How counts read in text for people: ``"1 brief"``, ``"4 tasks in 1 project"``, the redaction line, the
name shown for no project.

Standard library only and import-free, so the CLI's quick commands and the page can use it without the
cost of the tool machinery.
"""

from __future__ import annotations

from collections.abc import Mapping

#: How text names the project of records filed without one (their project is "").
NO_PROJECT = "(no project)"

#: Nouns whose plural is not the singular plus "s".
_PLURALS = {"memory": "memories", "entry": "entries", "summary": "summaries"}


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun`` in the right number: ``counted(1, "brief") == "1 brief"``, ``"0 briefs"``."""
    if n == 1:
        return f"{n} {noun}"
    return f"{n} {plural or _PLURALS.get(noun) or noun + 's'}"


def redaction_line(counts: Mapping[str, int]) -> str:
    """``{"aws-access-key-id": 1}`` -> ``"1 secret redacted: aws-access-key-id"``; kinds seen more than once
    carry their count: ``"3 secrets redacted: aws-access-key-id (2), github-token"``."""
    total = sum(counts.values())
    kinds = ", ".join(kind if n == 1 else f"{kind} ({n})" for kind, n in counts.items())
    return f"{counted(total, 'secret')} redacted: {kinds}"

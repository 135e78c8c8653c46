"""Task and brief ids (contract §3): the only strings that may become path components.

Every id that arrives from a tool argument, a file name or a JSON field goes through
:func:`check_task_id` / :func:`check_brief_id` before it touches the file system. The check is a strict
ASCII full match, so ``../x``, absolute paths, backslashes, ``%2e%2e``, NUL bytes, over-long strings and
Unicode look-alikes (fullwidth digits, Cyrillic letters) are all refused.
"""

from __future__ import annotations

import re

from memoryd.errors import InvalidParams

TASK_ID_PATTERN = r"t-\d{8}-[0-9a-f]{6}"
BRIEF_ID_PATTERN = r"b-\d{8}-[0-9a-f]{6}"

# re.ASCII: without it \d also matches fullwidth and other Unicode digits ("b-２０２６...").
_TASK_RE = re.compile(TASK_ID_PATTERN, re.ASCII)
_BRIEF_RE = re.compile(BRIEF_ID_PATTERN, re.ASCII)
_ID_LENGTH = 17  # "b-" + 8 digits + "-" + 6 hex; longer strings are refused before any regex work


class InvalidId(InvalidParams, ValueError):
    """An id that does not match its contract pattern; the message names the expected pattern."""


def _check(value: object, regex: re.Pattern[str], what: str, shape: str) -> str:
    if isinstance(value, str) and len(value) == _ID_LENGTH and regex.fullmatch(value):
        return value
    shown = repr(value) if not isinstance(value, str) or len(value) <= 40 else repr(value[:40]) + "..."
    raise InvalidId(f"invalid {what} id {shown}: expected {shape} (pattern {regex.pattern})")


def check_task_id(value: object) -> str:
    """Return ``value`` if it is a task id ``t-<yyyymmdd>-<6 lowercase hex>``; else raise :class:`InvalidId`."""
    return _check(value, _TASK_RE, "task", "t-<yyyymmdd>-<6 lowercase hex>")


def check_brief_id(value: object) -> str:
    """Return ``value`` if it is a brief id ``b-<yyyymmdd>-<6 lowercase hex>``; else raise :class:`InvalidId`."""
    return _check(value, _BRIEF_RE, "brief", "b-<yyyymmdd>-<6 lowercase hex>")


def is_task_id(value: object) -> bool:
    """True when ``value`` is a well-formed task id (never raises)."""
    return isinstance(value, str) and len(value) == _ID_LENGTH and _TASK_RE.fullmatch(value) is not None


def is_brief_id(value: object) -> bool:
    """True when ``value`` is a well-formed brief id (never raises)."""
    return isinstance(value, str) and len(value) == _ID_LENGTH and _BRIEF_RE.fullmatch(value) is not None

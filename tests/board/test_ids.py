"""Id validation (contract §3): a strict ASCII full match, refused before any file system call."""

from __future__ import annotations

import pytest

from memoryd.board.gate import (
    BRIEF_ID_PATTERN,
    TASK_ID_PATTERN,
    InvalidId,
    check_brief_id,
    check_task_id,
    is_brief_id,
    is_task_id,
)

BAD = [
    "../x",
    "..",
    "/etc/passwd",
    "b-20260101-abcdeg",  # g is not hex
    "b-20260101-ABCDEF",  # upper-case hex
    "b-20260101-abcde",
    "b-20260101-abcdef0",
    "b-2026010-abcdef",
    "b-20260101-abcdef/",
    "b-20260101-abcdef/../../etc",
    "b\\20260101-abcdef",
    "..\\..\\windows",
    "b-20260101-abcdef\\",
    "%2e%2e",
    "%2e%2e%2fetc%2fpasswd",
    "b-20260101-%61bcdef",
    "b-20260101-abcdef\x00",
    "\x00",
    "b-20260101-abcdef\n",
    " b-20260101-abcdef",
    "b-" + "1" * 10_000,
    "b-20260101-abcdef" * 600,
    "b-２０２６０１０１-abcdef",  # fullwidth digits: \d would match them without re.ASCII
    "b-20260101-аbcdef",  # Cyrillic а
    "Ь-20260101-abcdef",  # Cyrillic soft sign looks like b
    "b‐20260101‐abcdef",  # U+2010 hyphens
    "b-٢٠٢٦٠١٠١-abcdef",  # Arabic-Indic digits
    "",
    "t-20260101-abcdef",  # a task id is not a brief id
]
NOT_STRINGS = [None, 123, 1.5, b"b-20260101-abcdef", ["b-20260101-abcdef"], {"id": "b-20260101-abcdef"}]


def test_valid_ids_pass_unchanged():
    assert check_brief_id("b-20260101-abcdef") == "b-20260101-abcdef"
    assert check_task_id("t-20261130-0f9e8d") == "t-20261130-0f9e8d"
    assert is_brief_id("b-20260101-abcdef") and is_task_id("t-20260101-abcdef")


@pytest.mark.parametrize("value", BAD + NOT_STRINGS)
def test_bad_brief_ids_are_refused(value):
    with pytest.raises(InvalidId) as err:
        check_brief_id(value)
    message = str(err.value)
    assert BRIEF_ID_PATTERN in message and "b-<yyyymmdd>-<6 lowercase hex>" in message
    assert len(message) < 300  # a 10k-char id is not echoed into logs or answers
    assert not is_brief_id(value)


@pytest.mark.parametrize("value", [v.replace("b-", "t-", 1) if isinstance(v, str) else v for v in BAD[:-1]])
def test_bad_task_ids_are_refused(value):
    with pytest.raises(InvalidId, match="expected t-<yyyymmdd>"):
        check_task_id(value)
    assert not is_task_id(value)


def test_brief_id_is_not_a_task_id():
    with pytest.raises(InvalidId):
        check_task_id("b-20260101-abcdef")


def test_invalid_id_is_a_value_error():
    assert issubclass(InvalidId, ValueError)
    assert TASK_ID_PATTERN == r"t-\d{8}-[0-9a-f]{6}" and BRIEF_ID_PATTERN == r"b-\d{8}-[0-9a-f]{6}"

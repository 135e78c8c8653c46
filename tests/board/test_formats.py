"""Board format v1 records and parsers (contract §3)."""

from __future__ import annotations

import json

import pytest

from memoryd.kinds.briefs.files import (
    FormatError,
    Outcome,
    parse_brief_json,
    parse_notes,
    parse_outcome,
    parse_screen_json,
    parse_task,
    render_outcome,
)

TASK_JSON = {"id": "t-20260101-aaaaaa", "title": "T", "project": "p", "status": "done"} | {
    "created_at": "2026-01-01T10:00:00Z"
}
BRIEF_JSON = {
    "id": "b-20260101-bbbbbb",
    "task": "t-20260101-aaaaaa",
    "project": "p",
    "title": "T",
    "summary": "S",
} | {"created_at": "2026-01-01T10:05:00Z"}

SHAPE = """## Did
- Added the retry
- Wrote a test
## Decided
- none
## Open
- Ask finance
## Files
- apps/web/src/retry.ts
## Retired
- none
"""


def test_parse_task():
    task = parse_task(json.dumps(TASK_JSON), expected_id="t-20260101-aaaaaa")
    assert (task.id, task.status, task.created_at) == ("t-20260101-aaaaaa", "done", "2026-01-01T10:00:00Z")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("{", "bad JSON"),
        ('{"id": "t-20260101-aaaaaa", "title": "T", "proj', "bad JSON"),  # half-written
        # Python's message ends in "at": said once, with where to look in an editor
        ('{"title": "a\nb"}', r"^bad JSON: Invalid control character at line 1 column 13 \(char 12\)$"),
        ("[]", "expected a JSON object"),
        ("null", "expected a JSON object"),
        (json.dumps(TASK_JSON | {"id": "../x"}), "invalid task id"),
        (json.dumps(TASK_JSON | {"id": "t-20260101-bbbbbb"}), "does not match its file name"),
        (json.dumps(TASK_JSON | {"status": "wip"}), "status"),
        (json.dumps({k: v for k, v in TASK_JSON.items() if k != "title"}), "'title'"),
        (json.dumps(TASK_JSON | {"project": 3}), "'project'"),
        (json.dumps(TASK_JSON | {"created_at": "yesterday"}), "ISO-8601"),
    ],
)
def test_parse_task_refuses(text, why):
    with pytest.raises(FormatError, match=why):
        parse_task(text, expected_id="t-20260101-aaaaaa")


def test_parse_brief_json():
    meta = parse_brief_json(json.dumps(BRIEF_JSON | {"extra": "ignored"}), expected_id="b-20260101-bbbbbb")
    assert meta == {k: BRIEF_JSON[k] for k in ("id", "task", "project", "created_at", "title", "summary")}


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"id": "b-20260101-cccccc"}, "does not match its folder name"),
        ({"id": "b-２０２６０１０１-bbbbbb"}, "invalid brief id"),
        ({"task": "../../etc"}, "invalid task id"),
        ({"summary": None}, "'summary'"),
    ],
)
def test_parse_brief_json_refuses(change, why):
    with pytest.raises(FormatError, match=why):
        parse_brief_json(json.dumps(BRIEF_JSON | change), expected_id="b-20260101-bbbbbb")


def test_parse_screen_json():
    assert parse_screen_json('{"app": "Chrome", "window_title": "x"}') == ("Chrome", "x")
    assert parse_screen_json('{"app": 3}') == (None, None)
    with pytest.raises(FormatError):
        parse_screen_json("not json")


def test_render_outcome_writes_the_hand_written_shape():
    outcome = Outcome(
        did=("Added the retry", "Wrote a test"), open=("Ask finance",), files=("apps/web/src/retry.ts",)
    )
    assert render_outcome(outcome) == SHAPE


def test_parse_outcome_reads_the_shape():
    assert parse_outcome(SHAPE) == Outcome(
        did=("Added the retry", "Wrote a test"), open=("Ask finance",), files=("apps/web/src/retry.ts",)
    )


@pytest.mark.parametrize(
    "outcome",
    [
        Outcome(),
        Outcome(did=("a",)),
        Outcome(
            did=("x - y", "## not a heading", "- leading dash"), decided=("use * bullets",), retired=("old",)
        ),
        Outcome(open=("日本語のメモ", "Hinglish: abhi bhi open hai")),
        Outcome(files=("a/b.py",) * 3),
    ],
)
def test_render_then_parse_round_trips(outcome):
    assert parse_outcome(render_outcome(outcome)) == outcome


def test_outcome_values_are_canonical():
    o = Outcome(did=["  two\nlines  ", "", "   "], open=("none",), files="one/file.py")
    assert o.did == ("two lines",) and o.open == () and o.files == ("one/file.py",)
    assert Outcome(retired=("N/A",)).retired == ()
    assert Outcome(open=("none", "really open")).open == (
        "none",
        "really open",
    )  # only a lone marker is empty
    assert Outcome().is_empty() and not o.is_empty()


def test_parse_outcome_is_tolerant_of_hand_written_variations():
    text = """Some preamble the agent wrote.

# DID

* Fixed the loop
+ Added a test
    that spans two lines

### decided:
1. Keep the cookie
2) Drop the header

**Open**
- nothing obvious yet
Open questions:
- ask support

## Files changed
- a.py

## Random notes
- not part of any section
## retired
-
- the old flag
"""
    assert parse_outcome(text) == Outcome(
        did=("Fixed the loop", "Added a test that spans two lines"),
        decided=("Keep the cookie", "Drop the header"),
        open=("nothing obvious yet", "ask support"),
        files=("a.py",),
        retired=("the old flag",),
    )


@pytest.mark.parametrize(
    "text", ["", "\n\n", "no headings at all\n- a bullet", "#", "##\n-", "\x00\x01", "- " * 1000]
)
def test_parse_outcome_never_raises(text):
    assert isinstance(parse_outcome(text), Outcome)


def test_every_sample_outcome_round_trips_byte_for_byte(shared_board):
    paths = sorted(shared_board.glob("briefs/*/outcome.md"))
    assert len(paths) == 106
    for path in paths:
        text = path.read_text(encoding="utf-8")
        assert render_outcome(parse_outcome(text)) == text, path.parent.name


def test_parse_notes():
    assert parse_notes("- one\n\n* two\nthree\n-\n") == ("one", "two", "three")
    assert parse_notes("") == ()


def test_parse_brief_json_keeps_who_captured_it():
    meta = parse_brief_json(
        json.dumps(BRIEF_JSON | {"captured": {"agent": "codex", "session": "s-1"}}),
        expected_id="b-20260101-bbbbbb",
    )
    assert meta["captured"] == ("codex", "s-1")
    for odd in ({"agent": "codex"}, {"agent": 1, "session": "s"}, "codex", None):
        meta = parse_brief_json(json.dumps(BRIEF_JSON | {"captured": odd}), expected_id="b-20260101-bbbbbb")
        assert "captured" not in meta

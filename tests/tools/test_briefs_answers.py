"""The ``briefs`` answers without a daemon: bounds, counts, answer-time redaction, the keyword-only note,
and that the text block renders exactly the structured data (the e2e tests cover the wire)."""

from __future__ import annotations

import json
from pathlib import Path

from memoryd.index.redact import redact
from memoryd.index.search import Hit, SearchResult
from memoryd.kinds.briefs import render, render_brief, render_tasks
from memoryd.kinds.briefs.files import Brief, Outcome, Task
from memoryd.kinds.briefs.reader import BoardReader
from memoryd.tools.answers import DATA_NOTE, Scrub, clip

TOKEN = "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
TASK = Task(
    id="t-20260101-abcdef", title="Checkout", project="shop", status="open", created_at="2026-01-01T00:00:00Z"
)


def brief(n: int, **fields) -> Brief:
    base = dict(
        id=f"b-202601{n // 28 + 1:02d}{n % 28 + 1:02d}-{n:06x}",
        task=TASK.id,
        project="shop",
        created_at=f"2026-01-{n % 28 + 1:02d}T10:00:00Z",
        title=f"brief {n}",
        summary="a summary",
    )
    return Brief(**{**base, **fields})


def leaves(value):
    if isinstance(value, dict):
        return [x for v in value.values() for x in leaves(v)]
    if isinstance(value, list):
        return [x for v in value for x in leaves(v)]
    return [value]


def assert_rendered(answer: dict, text: str) -> None:
    for leaf in leaves(answer):
        if isinstance(leaf, str):
            assert all(line in text for line in leaf.splitlines()), leaf
        elif isinstance(leaf, int | float) and not isinstance(leaf, bool):
            assert str(leaf) in text, leaf


def test_clip_and_scrub_count_and_record_cuts():
    assert clip("abcdef", 4) == ("abc…", True) and clip("abc", 4) == ("abc", False)
    scrub = Scrub()
    assert scrub(f"token {TOKEN}") == "token [REDACTED:github-token]"
    assert scrub.bounded("x" * 50, 10, "said") == "x" * 9 + "…"
    assert scrub.items(["a"] * 5, 3, 10, "notes") == ["a"] * 3
    assert scrub.report() == {"redacted": {"github-token": 1}, "truncated": ["notes", "said"]}


def test_scrub_of_read_redacted_text_only_bounds_and_counts_what_it_hands_out():
    scrub = Scrub(read_redacted=True)
    assert scrub(f"token {TOKEN}") == f"token {TOKEN}"  # the reader redacted it: not redacted twice
    assert scrub("a [REDACTED:private-key] b") == "a [REDACTED:private-key] b"
    assert scrub.line("[REDACTED:api-key] first\nsecond [REDACTED:jwt]", 100) == "[REDACTED:api-key] first"
    assert scrub.bounded("x" * 20 + " [REDACTED:jwt]", 10, "said") == "x" * 9 + "…"  # cut off: not counted
    assert scrub.report() == {"redacted": {"api-key": 1, "private-key": 1}, "truncated": ["said"]}


def test_keyword_only_search_says_why():
    hits = [
        Hit(
            id="b-20260101-000001",
            kind="brief",
            task=TASK.id,
            project="shop",
            status="open",
            date="2026-01-01T10:00:00Z",
            title="t",
            line=f"said {TOKEN}",
            score=0.5,
        )
    ] * 60
    for state, words in (("loading", "still loading"), ("disabled", "--model none"), ("failed", "failed")):
        answer = render.search_answer(
            SearchResult(hits=hits, mode="keyword"), limit=5, project=None, model_state=state
        )
        assert words in answer["mode_note"]
        assert answer["shown"] == 5 and answer["matched"] == 60 and answer["matched_at_least"] is True
        assert answer["redacted"] == {"github-token": 5} and TOKEN not in str(answer)
        text = render.render_search(answer)
        assert text.startswith("5 of 60+ matching briefs") and DATA_NOTE in text
        assert_rendered(answer, text)
    hybrid = render.search_answer(
        SearchResult(hits=hits[:2], mode="hybrid"), limit=5, project=None, model_state="ready"
    )
    assert "mode_note" not in hybrid and hybrid["shown"] == hybrid["matched"] == 2


def test_get_task_shows_the_newest_fifty_briefs_in_order_with_bounded_outcomes():
    many = [
        brief(i, said=f"line {i}\nsecond line", outcome=Outcome(did=[f"d{j}" for j in range(15)]))
        for i in range(60)
    ]
    answer = render_tasks.task_answer(TASK, many)
    assert answer["shown"] == 50 and answer["briefs_total"] == 60
    assert [b["brief_id"] for b in answer["briefs"]] == [b.id for b in many[10:]]
    assert answer["briefs"][0]["said"] == "line 10"
    assert len(answer["briefs"][0]["outcome"]["did"]) == render.OVERVIEW_ITEMS
    assert answer["truncated"] == ["outcome.did"]
    text = render_tasks.render_task(answer)
    assert "50 of 60 briefs" in text and "only the newest" in text
    assert_rendered(answer, text)


def test_get_brief_redacts_bounds_and_lists_only_existing_screens(tmp_path: Path):
    # A brief as the engine gets it: read from its files by BoardReader, which redacts every text whole.
    folder = tmp_path / "briefs" / "b-20260102-000001"
    (folder / "screens").mkdir(parents=True)
    meta = {"id": folder.name, "task": TASK.id, "project": "shop", "created_at": "2026-01-02T10:00:00Z",
            "title": "brief 1", "summary": "a summary"}  # fmt: skip
    (folder / "brief.json").write_text(json.dumps(meta))
    (folder / "said.txt").write_text(f"use {TOKEN}\n" + "x" * 9000)
    (folder / "prompt.md").write_text(
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA1234567890abcdef\n-----END RSA PRIVATE KEY-----\nthen go"
    )
    (folder / "notes.md").write_text("- a note\n")
    (folder / "outcome.md").write_text("## Did\n- did it\n## Open\n- more\n")
    (folder / "screens" / "1.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (folder / "screens" / "2.txt").write_text("a removed screenshot's text")
    b = BoardReader(tmp_path).read_brief(folder.name)
    answer = render_brief.brief_answer(b, TASK, tmp_path)
    assert TOKEN not in str(answer) and "PRIVATE KEY" not in answer["prompt"]
    assert answer["redacted"] == {"github-token": 1, "private-key": 1}
    assert answer["truncated"] == ["said"] and len(answer["said"]) == render.SAID_CHARS
    assert answer["screenshots"] == [str(tmp_path / "briefs/b-20260102-000001/screens/1.png")]
    assert answer["outcome"] == {
        "did": ["did it"],
        "decided": [],
        "open": ["more"],
        "files": [],
        "retired": [],
    }
    text = render_brief.render_brief(answer)
    assert "## Decided\n- none" in text and "Secrets redacted from this answer" in text
    assert_rendered(answer, text)


def test_scrub_counts_what_it_redacted_not_the_placeholders_the_text_already_held():
    # A text pasted from an earlier answer holds placeholders: shown as they are, never counted again.
    held = f"old [REDACTED:aws_key] and [REDACTED:github-token], new {TOKEN}, then [REDACTED:jwt]"
    scrub = Scrub()
    assert (
        scrub(held)
        == "old [REDACTED:aws_key] and [REDACTED:github-token], new [REDACTED:github-token], then [REDACTED:jwt]"
    )
    assert scrub.report() == {"redacted": {"github-token": 1}}
    line, cut = Scrub(), Scrub()
    assert (
        line.line(f"[REDACTED:aws_key] {TOKEN}\nsecond {TOKEN}", 200)
        == "[REDACTED:aws_key] [REDACTED:github-token]"
    )
    assert line.report() == {"redacted": {"github-token": 1}}
    assert cut.bounded(f"{TOKEN} [REDACTED:jwt] {'x' * 80}", 40, "said").startswith(
        "[REDACTED:github-token] [REDACTED:jwt]"
    )
    assert cut.report() == {"redacted": {"github-token": 1}, "truncated": ["said"]}
    assert redact(held).fresh == (False, False, True, False) and redact(held).counts == {"github-token": 1}
    assert redact("nothing held").fresh is None and redact("[REDACTED:x] only").fresh == (False,)

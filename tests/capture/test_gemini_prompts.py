"""Gemini CLI's BeforeAgent prompt carries more than the developer typed; only what they typed is a brief.

Both shapes are the ones Gemini CLI 0.61 (pinned in tests/clients) builds, read in its bundle:

* run with a prompt (``gemini -p``, a pipe), it puts what the SessionStart hooks returned in front of the
  first prompt, as ``<hook_context>…</hook_context>`` with ``<`` and ``>`` inside escaped
  (``getAdditionalContext``), and BeforeAgent gets that whole text;
* an AfterAgent ``deny`` makes it go on with the reason as the next request, firing BeforeAgent again
  with memoryd's own reason as the prompt.

Each hook runs as Gemini CLI runs it (the command ``memoryd connect`` wrote, through ``sh -c``) against a
real daemon on a temporary board.
"""

from __future__ import annotations

import json

import pytest

from support.hooks import run_hook

SAID = "kal wala cart page ka bug, quantity update karne pe total refresh nahi hota"


@pytest.fixture
def setup(hooked):
    daemon, home, commands, repo = hooked()
    return daemon, home, commands["gemini"], repo


def gemini(event, cwd, session, **fields):
    base = {"session_id": session, "transcript_path": f"/tmp/{session}.json", "cwd": str(cwd),
            "hook_event_name": event, "timestamp": "2026-12-03T17:00:00Z"}  # fmt: skip
    return {**base, **fields}


def briefs(board):
    found = (json.loads(p.read_text()) for p in (board / "briefs").glob("*/brief.json"))
    return {b["id"]: b for b in found}


def test_the_session_start_context_gemini_puts_before_a_prompt_is_not_filed(setup):
    daemon, home, cmd, repo = setup
    first = run_hook(
        cmd["BeforeAgent"],
        gemini(
            "BeforeAgent",
            repo,
            "gm-a",
            prompt="the search filters reset when I press the browser back button",
        ),
        home,
        repo,
    )
    assert first.code == 0, first.stderr
    (filters,) = briefs(daemon.board).values()
    start = run_hook(cmd["SessionStart"], gemini("SessionStart", repo, "gm-b", source="startup"), home, repo)
    digest = start.json()["hookSpecificOutput"]["additionalContext"]
    assert filters["task"] in digest  # the digest names the open task, so its text matches that task
    escaped = digest.replace("<", "&lt;").replace(">", "&gt;")
    prompt = f"<hook_context>{escaped}</hook_context>\n\n{SAID}"
    out = run_hook(cmd["BeforeAgent"], gemini("BeforeAgent", repo, "gm-b", prompt=prompt), home, repo)
    assert out.code == 0, out.stderr
    (new,) = [b for b in briefs(daemon.board).values() if b["id"] != filters["id"]]
    said = (daemon.board / "briefs" / new["id"] / "said.txt").read_text()
    assert said.strip() == SAID and new["title"] == SAID
    assert new["task"] != filters["task"]  # an unrelated prompt, not the digest's first task


def test_the_reason_memoryd_gave_gemini_is_not_filed_as_a_brief(setup):
    daemon, home, cmd, repo = setup
    run_hook(cmd["BeforeAgent"], gemini("BeforeAgent", repo, "gm-r", prompt="add a loading spinner to the orders page"),
             home, repo)  # fmt: skip
    (brief,) = briefs(daemon.board)
    after = run_hook(cmd["AfterAgent"], gemini("AfterAgent", repo, "gm-r", prompt="add a loading spinner to the orders page",
                     prompt_response="Added the spinner.", stop_hook_active=False), home, repo)  # fmt: skip
    deny = after.json()
    assert deny["decision"] == "deny" and brief in deny["reason"]
    # Gemini CLI goes on with the reason as the request, and fires BeforeAgent for it
    again = run_hook(
        cmd["BeforeAgent"], gemini("BeforeAgent", repo, "gm-r", prompt=deny["reason"]), home, repo
    )
    assert again.code == 0 and again.json() == {}
    assert list(briefs(daemon.board)) == [brief]
    last = run_hook(cmd["AfterAgent"], gemini("AfterAgent", repo, "gm-r", prompt=deny["reason"],
                    prompt_response="Saved the outcome.", stop_hook_active=True), home, repo)  # fmt: skip
    assert last.json() == {}
    turns = (daemon.board / "sessions" / "gm-r.jsonl").read_text().splitlines()
    assert [json.loads(t)["prompt"] for t in turns] == ["add a loading spinner to the orders page"] * 2
    # the developer's own words about memoryd are a brief like any other
    said = "[memoryd] search is slow on our big board, look into it"
    mine = run_hook(cmd["BeforeAgent"], gemini("BeforeAgent", repo, "gm-s", prompt=said), home, repo)
    assert "save_outcome" in mine.json()["hookSpecificOutput"]["additionalContext"]
    assert len(briefs(daemon.board)) == 2

"""End to end: each agent's capture hooks, run exactly as its config names them (``sh -c``), with the input
JSON the agent documents, against a real daemon on a temporary board.

Claude Code (code.claude.com/docs/en/hooks), Codex (``codex-rs/hooks/schema/generated``), Gemini CLI
(geminicli.com/docs/hooks/reference): prompts become briefs in the right task, a turn without an
outcome is asked once, the turn is kept in ``sessions/``, the session-start digest stays within budget
and marks its text as data, ``<private>`` text and planted secrets never reach the board's bytes; with
the daemon stopped every hook exits 0 and the spool is taken in at the next start.
"""

from __future__ import annotations

import json
import os
import re
import time

import pytest

from memoryd.kinds.briefs.digest import estimate_tokens
from support.briefs import wait_engine_ready
from support.hooks import board_bytes, run_hook, wait_for

AWS_ID = "AKIAIOSFODNN7EXAMPLE"
PASSWORD = "hunter2-Zq8vLm3xT9"
PRIVATE = "my-private-medical-note"
BRIEF_ID = re.compile(r"b-\d{8}-[0-9a-f]{6}")


@pytest.fixture
def setup(hooked):
    return hooked(tokens=300)


def briefs(board):
    out = {}
    for meta in sorted((board / "briefs").glob("*/brief.json")):
        data = json.loads(meta.read_text())
        out[data["id"]] = data
    return out


def claude(event, cwd, session, **fields):
    base = {"session_id": session, "transcript_path": f"/tmp/{session}.jsonl", "cwd": str(cwd),
            "permission_mode": "default", "hook_event_name": event}  # fmt: skip
    return {**base, **fields}


def codex(event, cwd, session, **fields):
    base = {"session_id": session, "transcript_path": None, "cwd": str(cwd), "hook_event_name": event,
            "model": "gpt-5", "permission_mode": "default", "turn_id": "turn-1"}  # fmt: skip
    return {**base, **fields}


def gemini(event, cwd, session, **fields):
    base = {"session_id": session, "transcript_path": f"/tmp/{session}.json", "cwd": str(cwd),
            "hook_event_name": event, "timestamp": "2026-12-01T10:00:00Z"}  # fmt: skip
    return {**base, **fields}


def test_claude_code_prompts_become_briefs_in_the_right_task(setup):
    daemon, home, commands, repo = setup
    cmd = commands["claude-code"]
    first = run_hook(
        cmd["UserPromptSubmit"],
        claude(
            "UserPromptSubmit",
            repo,
            "s-1",
            prompt=(
                f"The login page keeps redirecting to /account after the session cookie expires. "
                f"<private>{PRIVATE}</private> The staging key is {AWS_ID} and password={PASSWORD}"
            ),
        ),
        home,
        repo,
    )
    assert first.code == 0, first.stderr
    context = first.json()["hookSpecificOutput"]
    assert context["hookEventName"] == "UserPromptSubmit" and "save_outcome" in context["additionalContext"]
    found = briefs(daemon.board)
    assert len(found) == 1
    ((bid, meta),) = found.items()
    assert meta["project"] == "shopfront" and bid in context["additionalContext"]
    said = (daemon.board / "briefs" / bid / "said.txt").read_text()
    assert said == (daemon.board / "briefs" / bid / "prompt.md").read_text()
    assert "redirecting to /account" in said

    def filed(session, prompt):
        out = run_hook(
            cmd["UserPromptSubmit"], claude("UserPromptSubmit", repo, session, prompt=prompt), home, repo
        )
        return briefs(daemon.board)[BRIEF_ID.search(out.json()["hookSpecificOutput"]["additionalContext"])[0]]

    # the same session goes on: same task
    second = filed("s-1", "now add a test for it")
    # a new session on the same subject joins the open task by search
    third = filed("s-2", "login page redirecting to account after the session cookie expires, again")
    # a new session on another subject starts a task
    fourth = filed("s-3", "Add dark mode to the settings screen of the mobile app")
    # not briefs: a slash command, an approval, an empty line, only private text
    for text in ("/clear", "yes", "   ", f"<private>{PRIVATE}</private>"):
        out = run_hook(
            cmd["UserPromptSubmit"], claude("UserPromptSubmit", repo, "s-1", prompt=text), home, repo
        )
        assert out.code == 0 and out.stdout == ""
    assert len(briefs(daemon.board)) == 4
    assert meta["task"] == second["task"] == third["task"] != fourth["task"]
    # the agent is told which task it joined by that task's title, not by the prompt it just sent
    joined = run_hook(
        cmd["UserPromptSubmit"],
        claude(
            "UserPromptSubmit",
            repo,
            "s-4",
            prompt="the login page redirecting to account after the cookie expires",
        ),
        home,
        repo,
    ).json()["hookSpecificOutput"]["additionalContext"]
    task_title = json.loads((daemon.board / "tasks" / f"{meta['task']}.json").read_text())["title"]
    assert f'in task {meta["task"]} ("{task_title}", which continues earlier work' in joined, joined

    raw = board_bytes(daemon.board)
    for secret in (AWS_ID, PASSWORD, PRIVATE):
        assert secret.encode() not in raw


def test_claude_code_stop_asks_once_and_keeps_the_turn(setup):
    daemon, home, commands, repo = setup
    cmd = commands["claude-code"]
    run_hook(
        cmd["UserPromptSubmit"],
        claude("UserPromptSubmit", repo, "s-9", prompt="Fix the checkout rounding of totals"),
        home,
        repo,
    )
    (bid,) = briefs(daemon.board)
    answer = f"Rounded half-even in totals.ts <private>{PRIVATE}</private> token={PASSWORD}"
    stop = run_hook(
        cmd["Stop"],
        claude("Stop", repo, "s-9", stop_hook_active=False, last_assistant_message=answer),
        home,
        repo,
    )
    assert stop.code == 0
    block = stop.json()
    assert block["decision"] == "block" and bid in block["reason"] and "save_outcome" in block["reason"]
    again = run_hook(
        cmd["Stop"],
        claude("Stop", repo, "s-9", stop_hook_active=False, last_assistant_message=answer),
        home,
        repo,
    )
    assert again.code == 0 and again.stdout == ""  # asked once
    log = (daemon.board / "sessions" / "s-9.jsonl").read_text()
    turn = json.loads(log.splitlines()[0])
    assert turn["prompt"] == "Fix the checkout rounding of totals" and "Rounded half-even" in turn["response"]
    approval = claude("UserPromptSubmit", repo, "s-9", prompt="yes")
    assert run_hook(cmd["UserPromptSubmit"], approval, home, repo).stdout == ""  # not a brief
    follow = claude("Stop", repo, "s-9", stop_hook_active=False, last_assistant_message="Applied the edit.")
    assert run_hook(cmd["Stop"], follow, home, repo).stdout == ""  # this brief was asked about already
    assert len(briefs(daemon.board)) == 1
    second = json.loads((daemon.board / "sessions" / "s-9.jsonl").read_text().splitlines()[-1])
    assert second["prompt"] == "yes" and second["response"] == "Applied the edit."  # what the turn answered
    end = run_hook(cmd["SessionEnd"], claude("SessionEnd", repo, "s-9", reason="exit"), home, repo)
    assert end.code == 0 and end.stdout == ""
    summary = json.loads((daemon.board / "sessions" / "s-9.summary.json").read_text())
    assert summary["method"] == "extractive"
    raw = board_bytes(daemon.board)
    assert PRIVATE.encode() not in raw and PASSWORD.encode() not in raw


def test_stop_asks_only_about_the_captured_brief_and_never_over_an_outcome(setup):
    daemon, home, commands, repo = setup
    cmd = commands["claude-code"]

    def prompt(session, text):
        out = run_hook(
            cmd["UserPromptSubmit"], claude("UserPromptSubmit", repo, session, prompt=text), home, repo
        )
        return BRIEF_ID.search(out.json()["hookSpecificOutput"]["additionalContext"])[0]

    def stop(session):
        payload = claude(
            "Stop", repo, session, stop_hook_active=False, last_assistant_message="Looked at it."
        )
        out = run_hook(cmd["Stop"], payload, home, repo)
        assert out.code == 0, out.stderr
        return out.json() if out.stdout.strip() else None

    other = prompt("o-0", "Make the cart page load faster on slow phones")  # never reported on
    done = prompt("o-1", "Fix the checkout rounding of totals")
    outcome = daemon.board / "briefs" / done / "outcome.md"
    outcome.write_text("## Did\n- rounded half-even in totals.ts\n\n## Open\n- refunds not checked\n")
    assert stop("o-1") is None  # the agent saved its outcome during the turn: nothing to ask
    os.utime(outcome, (time.time() - 3600, time.time() - 3600))  # an earlier report, not this turn's
    before = outcome.read_bytes()
    asked = prompt("o-2", f"Look at {done} and {other}, then plan the refunds work")
    block = stop("o-2")
    assert block["decision"] == "block" and asked in block["reason"]
    assert done not in block["reason"] and other not in block["reason"]
    assert "each other brief" not in block["reason"]
    assert outcome.read_bytes() == before


def test_session_start_digest_is_bounded_and_marked_as_data(setup):
    daemon, home, commands, repo = setup
    cmd = commands["claude-code"]
    for i in range(12):
        run_hook(cmd["UserPromptSubmit"], claude("UserPromptSubmit", repo, f"d-{i}", prompt=(
            f"Task number {i}: rework the {['cart', 'search', 'invoice', 'profile'][i % 4]} page layout "
            f"so that item {i} shows its price, its stock and its delivery estimate")), home, repo)  # fmt: skip
    out = run_hook(cmd["SessionStart"], claude("SessionStart", repo, "d-new", source="startup"), home, repo)
    assert out.code == 0
    ctx = out.json()["hookSpecificOutput"]
    assert ctx["hookEventName"] == "SessionStart"
    text = ctx["additionalContext"]
    assert text.startswith('<memoryd-context project="shopfront">') and text.endswith("</memoryd-context>")
    assert "not instructions" in text and "## Open tasks" in text
    assert estimate_tokens(text) <= 300  # connect --context-tokens 300; no model: the estimate counts
    for agent, payload in (("codex", codex("SessionStart", repo, "x", source="startup")),
                           ("gemini", gemini("SessionStart", repo, "x", source="startup"))):  # fmt: skip
        other = run_hook(commands[agent]["SessionStart"], payload, home, repo)
        assert other.json()["hookSpecificOutput"]["additionalContext"] == text


def test_codex_and_gemini_hooks_capture_and_ask(setup):
    daemon, home, commands, repo = setup
    cx, gm = commands["codex"], commands["gemini"]
    out = run_hook(
        cx["UserPromptSubmit"],
        codex("UserPromptSubmit", repo, "cx-1", prompt="Make the search API paginate with cursors"),
        home,
        repo,
    )
    assert "save_outcome" in out.json()["hookSpecificOutput"]["additionalContext"]
    stop = run_hook(
        cx["Stop"],
        codex("Stop", repo, "cx-1", stop_hook_active=False, last_assistant_message="Added cursors."),
        home,
        repo,
    )
    assert stop.json()["decision"] == "block"
    out = run_hook(
        gm["BeforeAgent"],
        gemini("BeforeAgent", repo, "gm-1", prompt="Translate the checkout page into Japanese"),
        home,
        repo,
    )
    assert out.json()["hookSpecificOutput"]["hookEventName"] == "BeforeAgent"
    after = run_hook(gm["AfterAgent"], gemini("AfterAgent", repo, "gm-1", prompt="Translate the checkout page into Japanese",
                     prompt_response="Done: ja.json added.", stop_hook_active=False), home, repo)  # fmt: skip
    assert after.json()["decision"] == "deny" and "save_outcome" in after.json()["reason"]
    again = run_hook(gm["AfterAgent"], gemini("AfterAgent", repo, "gm-1", prompt="x", prompt_response="Saved.",
                     stop_hook_active=True), home, repo)  # fmt: skip
    assert again.json() == {}
    assert len(briefs(daemon.board)) == 2
    assert (daemon.board / "sessions" / "gm-1.jsonl").exists() and (
        daemon.board / "sessions" / "cx-1.jsonl"
    ).exists()


def test_with_the_daemon_stopped_hooks_exit_0_and_the_spool_is_taken_in_at_start(setup, make_daemon):
    daemon, home, commands, repo = setup
    daemon.kill()
    payloads = {
        "claude-code": [("UserPromptSubmit", claude("UserPromptSubmit", repo, "off-1", prompt="Spooled: fix the flaky cart test <private>my home address is 12 Elm St</private>")),
                        ("Stop", claude("Stop", repo, "off-1", stop_hook_active=False, last_assistant_message="fixed")),
                        ("SessionStart", claude("SessionStart", repo, "off-1", source="startup")),
                        ("SessionEnd", claude("SessionEnd", repo, "off-1", reason="exit")),
                        ("PreCompact", claude("PreCompact", repo, "off-1", trigger="auto"))],
        "codex": [("UserPromptSubmit", codex("UserPromptSubmit", repo, "off-2", prompt="Spooled: bump the API rate limit")),
                  ("Stop", codex("Stop", repo, "off-2", stop_hook_active=False, last_assistant_message="bumped")),
                  ("SessionStart", codex("SessionStart", repo, "off-2", source="startup")),
                  ("PreCompact", codex("PreCompact", repo, "off-2", trigger="auto"))],
        "gemini": [("BeforeAgent", gemini("BeforeAgent", repo, "off-3", prompt="Spooled: document the webhook retries")),
                   ("AfterAgent", gemini("AfterAgent", repo, "off-3", prompt="x", prompt_response="documented", stop_hook_active=False)),
                   ("SessionStart", gemini("SessionStart", repo, "off-3", source="startup")),
                   ("SessionEnd", gemini("SessionEnd", repo, "off-3", reason="exit")),
                   ("PreCompress", gemini("PreCompress", repo, "off-3", trigger="auto"))],
    }  # fmt: skip
    for agent, events in payloads.items():
        for event, payload in events:
            out = run_hook(commands[agent][event], payload, home, repo)
            assert out.code == 0, (agent, event, out.stderr)
            assert out.stdout == ("{}\n" if agent == "gemini" else ""), (agent, event)
    spool = daemon.root / "home" / "state" / "capture-spool.jsonl"
    assert spool.exists() and len(spool.read_text().splitlines()) == 11  # every event but the three starts
    assert "Elm St" not in spool.read_text() and "private>" not in spool.read_text()  # never on disk
    again = make_daemon(daemon.root, socket_path=daemon.socket, board=daemon.board).start()
    wait_engine_ready(again)
    wait_for(lambda: len(briefs(again.board)) == 3)
    said = sorted((again.board / "briefs" / b / "said.txt").read_text() for b in briefs(again.board))
    assert all(s.startswith("Spooled:") for s in said)
    wait_for(lambda: not spool.exists())
    assert (again.board / "sessions" / "off-1.jsonl").exists()

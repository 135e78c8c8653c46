"""``memoryd hook claude-stop`` on transcript fixtures written here (Claude Code's JSONL shape), run as the
real command with the hook input on stdin, against a board folder.

Blocks once for the turn in which a brief arrived (its id and prompt.md) without an outcome; allows with
an outcome on the board (even an earlier one) or a save_outcome call in the turn, in later turns, with
``stop_hook_active``, for ids only mentioned or not on the board, and for malformed input (exit 0 and a line
on stderr).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memoryd.board.gate import BRIEF_ID_PATTERN
from memoryd.cli.connect import hook

BRIEF = "b-20261129-a1b2c3"
OTHER = "b-20261020-0f0f0f"
PROMPT = (
    "## Context\nshopfront checkout double-charges on retry.\n\n## Ask\nFind why the idempotency key is not "
    "sent. When you are done, report with save_outcome."
)
ARRIVED = f"memoryd brief {BRIEF}\n\n{PROMPT}"


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class Transcript:
    """Builds a Claude Code transcript file line by line."""

    def __init__(self, path: Path, start: float) -> None:
        self.path, self.t, self.lines = path, start, []

    def _add(self, kind: str, content, **extra) -> Transcript:
        self.t += 1.0
        self.lines.append(
            {
                "parentUuid": None,
                "isSidechain": False,
                "type": kind,
                "sessionId": "5f1c",
                "uuid": f"u{len(self.lines)}",
                "timestamp": iso(self.t),
                "message": {"role": kind, "content": content},
                **extra,
            }
        )
        return self

    def user(self, text: str, **extra) -> Transcript:
        return self._add("user", text, **extra)

    def user_blocks(self, text: str) -> Transcript:
        return self._add("user", [{"type": "text", "text": text}])

    def say(self, text: str) -> Transcript:
        return self._add("assistant", [{"type": "text", "text": text}])

    def tool(self, name: str, arguments: dict, error: bool = False) -> Transcript:
        use = f"toolu_{len(self.lines)}"
        self._add("assistant", [{"type": "tool_use", "id": use, "name": name, "input": arguments}])
        result = {"type": "tool_result", "tool_use_id": use, "content": "ok", "is_error": error}
        return self._add("user", [result])

    def write(self) -> Path:
        self.path.write_text("".join(json.dumps(line) + "\n" for line in self.lines))
        return self.path


@pytest.fixture
def board(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "board"
    for brief, prompt in ((BRIEF, PROMPT), (OTHER, "## Ask\nMake the cart page load faster.")):
        (root / "briefs" / brief).mkdir(parents=True)
        (root / "briefs" / brief / "brief.json").write_text("{}")
        (root / "briefs" / brief / "prompt.md").write_text(prompt + "\n")
    monkeypatch.setenv("MEMORYD_BOARD", str(root))
    return root


@pytest.fixture
def transcript(tmp_path) -> Transcript:
    start = time.time() - 3600
    return Transcript(tmp_path / "5f1c.jsonl", start).user("hi").say("Hello! What are we working on?")


def run_hook(stdin: str, home: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "memoryd", "hook", "claude-stop"],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **({"HOME": str(home)} if home else {})},
    )


def payload(path: Path, active: bool = False) -> str:
    return json.dumps(
        {
            "session_id": "5f1c",
            "transcript_path": str(path),
            "cwd": "/Users/me/src/shopfront",
            "permission_mode": "default",
            "hook_event_name": "Stop",
            "stop_hook_active": active,
        }
    )


def blocked(result: subprocess.CompletedProcess) -> dict | None:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout) if result.stdout.strip() else None


def test_the_brief_turn_without_an_outcome_blocks_once(board, transcript):
    path = (
        transcript.user(ARRIVED)
        .say("Looking at the checkout code.")
        .tool("Bash", {"command": "rg idempotency"})
        .say("Found it: the key is dropped on retry.")
        .write()
    )
    answer = blocked(run_hook(payload(path)))
    assert answer is not None and answer["decision"] == "block"
    assert BRIEF in answer["reason"] and "save_outcome" in answer["reason"]
    # Claude Code continues and stops again with stop_hook_active: never a second block.
    assert blocked(run_hook(payload(path, active=True))) is None


def test_with_the_capture_stop_hook_installed_it_leaves_the_asking_to_that_hook(board, transcript, tmp_path):
    from memoryd.cli.connect import capturehooks

    path = transcript.user(ARRIVED).say("Looking at the checkout code.").write()
    home = tmp_path / "home"
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    groups = capturehooks.wanted("claude-code", sys.executable, None, None)
    settings.write_text(capturehooks.set_hooks("{}", groups))
    assert blocked(run_hook(payload(path), home=home)) is None  # one reminder per turn, from capture
    settings.write_text("{}")
    assert (
        blocked(run_hook(payload(path), home=home))["decision"] == "block"
    )  # without capture, this one asks


def test_a_brief_with_an_outcome_on_the_board_allows_even_one_from_before_the_turn(board, transcript):
    path = transcript.user_blocks(ARRIVED).say("Done.").write()
    outcome = board / "briefs" / BRIEF / "outcome.md"
    outcome.write_text("## Did\n- found the bug\n")
    assert blocked(run_hook(payload(path))) is None
    # An earlier report counts too: asking would get it replaced by this turn's account.
    arrived = transcript.t - 1.0
    os.utime(outcome, (arrived - 600, arrived - 600))
    assert blocked(run_hook(payload(path))) is None


def test_only_a_brief_the_turn_was_handed_is_asked_about_not_ids_it_mentions(board, transcript):
    # Handed BRIEF (its prompt.md, whitespace reflowed), mentioning OTHER: only BRIEF is asked about.
    handed = (
        transcript.user(f"{ARRIVED.replace(chr(10) * 2, chr(10))}\n\nRelated: {OTHER}").say("Ok.").write()
    )
    answer = blocked(run_hook(payload(handed)))
    assert answer is not None and BRIEF in answer["reason"] and OTHER not in answer["reason"]
    assert "each other brief" not in answer["reason"]
    # Only mentioning both ids, without either prompt: nothing to ask.
    mention = handed.with_name("mention.jsonl")
    Transcript(mention, time.time() - 60).user(f"compare {BRIEF}, {OTHER} with the new plan").say(
        "ok"
    ).write()
    assert blocked(run_hook(payload(mention))) is None
    # A brief without a prompt.md cannot be recognised as handed: allow.
    (board / "briefs" / BRIEF / "prompt.md").unlink()
    assert blocked(run_hook(payload(handed))) is None


def test_a_save_outcome_call_in_the_turn_allows_and_a_failed_one_does_not(board, transcript):
    ok = (
        transcript.user(ARRIVED).tool("mcp__memoryd__save_outcome", {"brief_id": BRIEF, "did": ["x"]}).write()
    )
    assert blocked(run_hook(payload(ok))) is None
    failed_path = ok.with_name("failed.jsonl")
    failed = Transcript(failed_path, time.time() - 60).user(ARRIVED)
    failed.tool("mcp__memoryd__save_outcome", {"brief_id": BRIEF, "did": ["x"]}, error=True).write()
    assert blocked(run_hook(payload(failed_path))) is not None


def test_later_turns_and_mere_mentions_allow(board, transcript):
    later = (
        transcript.user(ARRIVED)
        .say("Found it.")
        .user("thanks, now rename the helper")
        .say("Renamed.")
        .write()
    )
    assert blocked(run_hook(payload(later))) is None
    missing = later.with_name("missing.jsonl")
    Transcript(missing, time.time() - 60).user("see b-20260101-abcdef for context").say("ok").write()
    assert blocked(run_hook(payload(missing))) is None  # not a brief on this board
    no_id = later.with_name("plain.jsonl")
    Transcript(no_id, time.time() - 60).user("fix the flaky test").say("done").write()
    assert blocked(run_hook(payload(no_id))) is None


def test_memoryds_own_reminder_and_sidechains_do_not_start_a_turn(board, transcript):
    transcript.user(ARRIVED).say("Found it.")
    transcript.user(f"Stop hook feedback:\n{hook.reason_for([BRIEF])}").say("Saving now.")
    assert blocked(run_hook(payload(transcript.write()))) is None
    side = transcript.path.with_name("side.jsonl")
    t = Transcript(side, time.time() - 60).user(ARRIVED).say("Delegating.")
    t.user("subagent prompt without ids", isSidechain=True).write()
    assert blocked(run_hook(payload(side))) is not None
    # A compaction summary that retells an earlier brief turn is not a new turn either.
    compacted = transcript.path.with_name("compacted.jsonl")
    c = Transcript(compacted, time.time() - 60).user("fix the flaky test").say("On it.")
    c.user(f"This session is being continued... earlier: {ARRIVED}", isCompactSummary=True).say(
        "Fixed."
    ).write()
    assert blocked(run_hook(payload(compacted))) is None


@pytest.mark.parametrize(
    "stdin",
    [
        "not json",
        "[1, 2]",
        json.dumps({"session_id": "x", "hook_event_name": "Stop"}),
        json.dumps({"transcript_path": "/nonexistent/t.jsonl", "stop_hook_active": False}),
        "",
    ],
)
def test_malformed_input_allows_with_a_line_on_stderr(board, stdin):
    result = run_hook(stdin)
    assert result.returncode == 0 and result.stdout == ""
    assert result.stderr.startswith("memoryd hook claude-stop: allowing the stop")


def test_a_transcript_with_a_broken_last_line_still_works(board, transcript):
    path = transcript.user(ARRIVED).say("Found it.").write()
    with open(path, "a") as fh:
        fh.write('{"type": "assistant", "message": {"role": "assis')  # being written right now
    assert blocked(run_hook(payload(path))) is not None


def test_the_pattern_is_the_boards(board):
    assert hook.BRIEF_ID.pattern.count(BRIEF_ID_PATTERN) == 1
    assert hook.BRIEF_ID.findall(f"x{BRIEF} {BRIEF}. ({OTHER})") == [BRIEF, OTHER]

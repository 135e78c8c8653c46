"""What answers report as redacted is what was redacted from the stored texts now, never a placeholder a text
held already: capture writes a prompt redacted, and a text pasted from an earlier answer holds placeholders.
Through a real daemon and the real shim: ``get_brief``, ``get_task``, ``list_tasks``, ``get_context`` (texts
the board reader redacted), ``memo_search`` and ``export_database``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from support.board import write_brief, write_task
from support.briefs import SHIM, Shim, wait_engine_ready
from support.daemon import short_tmpdir

pytestmark = pytest.mark.skipif(not SHIM.exists(), reason="no .venv/bin/memoryd-shim (run make setup)")

AWS = "AKIAIOSFODNN7EXAMPLE"
GITHUB = "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
HELD = "[REDACTED:aws-access-key-id]"  # as capture writes a prompt's key into its files
TASK, FIRST, SECOND = "t-20260101-aaaaaa", "b-20260101-bbbbbb", "b-20260102-cccccc"


def write_board(board) -> None:
    (board / "tasks").mkdir(parents=True)
    write_task(board, TASK, title=f"Rotate the {HELD} key", project="shop")
    first = write_brief(
        board, FIRST, TASK, said=f"the key {HELD} leaked in the CI log", prompt=f"the key {HELD} leaked",
        project="shop", title=f"Rotate the {HELD} key", summary="",
    )  # fmt: skip
    # one line holding a placeholder and a secret: only the secret counts
    (first / "notes.md").write_text(f"- old key {HELD} then {GITHUB}\n", encoding="utf-8")
    (first / "outcome.md").write_text(f"## Did\n- revoked {HELD}\n## Open\n- audit where {HELD} was used\n")
    write_brief(
        board, SECOND, TASK, said=f"the new key {AWS} is in the env file", prompt=f"use {AWS}",
        project="shop", title=f"Second look at {AWS}", summary="", created_at="2026-01-02T10:05:00Z",
    )  # fmt: skip


@pytest.fixture
def served(make_daemon):
    root = short_tmpdir()
    try:
        write_board(root / "board")
        daemon = make_daemon(root, board=root / "board").start()
        wait_engine_ready(daemon)
        with Shim(daemon.socket, daemon.env, tools="all").initialize() as shim:
            yield shim
    finally:
        shutil.rmtree(root, ignore_errors=True)


def done(shim: Shim, name: str, **arguments) -> dict:
    """A call's ``structuredContent`` (these answers' texts say it in other words)."""
    result = shim.call(name, **arguments)["result"]
    assert result["isError"] is False, result
    return result["structuredContent"]


def test_tasks_and_briefs_count_only_what_was_redacted_as_their_files_were_read(served):
    first = served.ok("get_brief", brief_id=FIRST)
    assert HELD in first["said"] and HELD in first["outcome"]["open"][0], first
    assert first["notes"] == [f"old key {HELD} then [REDACTED:github-token]"], first
    assert first["redacted"] == {"github-token": 1}, first
    second = served.ok("get_brief", brief_id=SECOND)  # title, said and prompt hold the key
    assert second["redacted"] == {"aws-access-key-id": 3}, second
    task = served.ok("get_task", task_id=TASK)  # the second brief's title and said line
    assert HELD in task["task"]["title"] and task["redacted"] == {"aws-access-key-id": 2}, task
    listed = served.ok("list_tasks")
    assert HELD in listed["tasks"][0]["title"] and "redacted" not in listed, listed


def test_the_digest_counts_only_what_was_redacted_as_the_files_were_read(served):
    context = served.ok("get_context", project="shop")  # of four keys shown, the second brief's title's
    assert context["context"].count(HELD) == 4 and AWS not in context["context"], context
    assert context["redacted"] == {"aws-access-key-id": 1}, context


def test_memo_search_counts_only_what_it_redacted(served):
    done(served, "memo_add", text=f"pasted from an answer: [REDACTED:jwt] and a new token {GITHUB}",
         tags=["[REDACTED:jwt]"])  # fmt: skip
    found = done(served, "memo_search", query="pasted from an answer")
    assert found["memos"][0]["tags"] == ["[REDACTED:jwt]"], found
    assert found["redacted"] == {"github-token": 1}, found


def test_the_export_header_counts_only_what_was_redacted_for_it(served):
    done(served, "store_memory", content=f"pasted: [REDACTED:jwt] and a new token {GITHUB}", tags=["keys"])
    # a turn as capture stores it (its answer redacted), with a secret in its prompt
    done(served, "add_memory", prompt=f"try {GITHUB}", thought="", response=f"used {HELD}", sessionId="s1")
    exported = done(served, "export_database")
    # briefs: the notes' token, the second brief's key three times; the memory's token; the turn's token
    assert exported["redacted"] == {"aws-access-key-id": 3, "github-token": 3}, exported
    lines = [json.loads(line) for line in Path(exported["path"]).read_text(encoding="utf-8").splitlines()]
    assert lines[0]["redacted"] == exported["redacted"]
    assert AWS not in json.dumps(lines) and GITHUB not in json.dumps(lines)

"""Briefs and tasks filed without a project (``"project": ""``) read ``(no project)`` in every text answer of
the ``briefs`` tools, as in ``memoryd search`` and ``memoryd tasks``: through a real daemon and the real shim."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from support.briefs import SHIM, Shim, wait_engine_ready, write_briefs
from support.daemon import short_tmpdir

pytestmark = pytest.mark.skipif(not SHIM.exists(), reason="no .venv/bin/memoryd-shim (run make setup)")

TIDY = "Tidy the notes folder of the home directory"
UNBRIEFED = "t-20261102-00000b"
# A project's place in a text line, between two "·": never left blank.
BLANK = re.compile(r"·\s+·")


def text_of(shim: Shim, name: str, **arguments) -> str:
    result = shim.call(name, **arguments)["result"]
    assert result.get("isError") is False, result
    return result["content"][0]["text"]


def test_briefs_and_tasks_without_a_project_read_no_project_in_every_text_answer(make_daemon):
    root = short_tmpdir()
    try:
        board = root / "board"
        write_briefs(board, [TIDY])
        task_file = next((board / "tasks").glob("*.json"))
        brief_file = next((board / "briefs").glob("*/brief.json"))
        task, brief = task_file.stem, brief_file.parent.name
        for path in (task_file, brief_file):
            path.write_text(json.dumps({**json.loads(path.read_text()), "project": ""}), encoding="utf-8")
        # an open task no brief stands for yet: named by a question about what is open
        (board / "tasks" / f"{UNBRIEFED}.json").write_text(
            json.dumps(
                {
                    "id": UNBRIEFED,
                    "title": "Archive the old screenshots",
                    "project": "",
                    "status": "open",
                    "created_at": "2026-11-02T09:00:00Z",
                }
            ),
            encoding="utf-8",
        )
        daemon = make_daemon(root, board=board).start()
        wait_engine_ready(daemon)
        with Shim(daemon.socket, daemon.env, cwd="/").initialize() as shim:
            found = text_of(shim, "search_briefs", query="tidy the notes folder")
            assert f"{brief} · 2026-11-01 · (no project) · task {task} (open)" in found, found
            listing = text_of(shim, "search_briefs", query="what's still open?")
            assert (
                f"- {UNBRIEFED} · (no project) · created 2026-11-02 · Archive the old screenshots" in listing
            ), listing
            tasks = text_of(shim, "list_tasks")
            assert f"- {task} · open · (no project) · last activity" in tasks, tasks
            assert "Projects on the board: (no project)." in tasks, tasks
            one_task = text_of(shim, "get_task", task_id=task)
            assert f"Task {task} (open) · (no project) · created" in one_task, one_task
            one_brief = text_of(shim, "get_brief", brief_id=brief)
            assert f"Brief {brief} · (no project) · task {task}" in one_brief, one_brief
            context = text_of(
                shim, "get_context"
            )  # from "/": the most recently active project, which is none
            assert context.startswith("Project (no project) (project_from: recent,"), context
            assert TIDY in context, context
            for text in (found, listing, tasks, one_task, one_brief, context):
                assert not BLANK.search(text), text
    finally:
        shutil.rmtree(root, ignore_errors=True)

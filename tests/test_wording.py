"""Counts and notes as people read them: no "1 briefs", no Python dict on a terminal, no "fits in" for a
project that has nothing recorded at all."""

from __future__ import annotations

from memoryd.cli.main import main
from memoryd.cli.searchview import print_human
from memoryd.kinds.briefs.render_context import empty_context
from memoryd.kinds.briefs.render_tasks import render_tasks
from memoryd.tools.answers import of_total
from memoryd.wording import counted, redaction_line


def test_counted_nouns():
    assert [counted(n, "brief") for n in (0, 1, 2)] == ["0 briefs", "1 brief", "2 briefs"]
    assert counted(1, "memory") == "1 memory" and counted(3, "memory") == "3 memories"
    assert (
        of_total(1, 1, "tasks") == "1 task" and of_total(0, 1, "matching briefs") == "0 of 1 matching brief"
    )
    assert (
        of_total(2, 2, "tasks") == "2 tasks" and of_total(1, 1, "briefs", at_least=True) == "1 of 1+ briefs"
    )


def test_the_redaction_note_is_a_sentence():
    assert redaction_line({"aws-access-key-id": 1}) == "1 secret redacted: aws-access-key-id"
    assert redaction_line({"aws-access-key-id": 2, "github-token": 1}) == (
        "3 secrets redacted: aws-access-key-id (2), github-token"
    )


def test_memoryd_search_prints_the_redaction_note_readably(capsys):
    print_human({"results": [], "matched": 0, "shown": 0, "redacted": {"aws-access-key-id": 1}})
    err = capsys.readouterr().err
    assert err == "(1 secret redacted: aws-access-key-id)\n"


def test_a_task_with_one_brief_says_one_brief():
    task = {"task_id": "t-20261201-aaaaaa", "status": "open", "project": "shop", "title": "Fix it",
            "last_activity": "2026-12-01", "briefs": 1, "created": "2026-12-01"}  # fmt: skip
    text = render_tasks({"project": None, "status": None, "shown": 1, "total": 1, "note": "data",
                         "tasks": [task], "projects": ["shop"]})  # fmt: skip
    assert text.startswith("1 task, newest activity first.") and "· 1 brief ·" in text


def test_an_empty_digest_says_nothing_is_recorded_yet_for_a_new_project():
    fresh = {"project": "tmp", "budget": 1500, "projects": ["shop"]}
    assert empty_context(fresh) == "Nothing recorded yet for project tmp. Projects on the board: shop."
    known = {"project": "shop", "budget": 10, "projects": ["shop"]}
    assert empty_context(known).startswith("Nothing recorded for project shop fits in 10 tokens.")


def test_briefs_filed_without_a_project_are_named_in_the_list_of_projects():
    fresh = {"project": "tmp", "budget": 1500, "projects": ["", "Mobile"]}
    assert empty_context(fresh).endswith("Projects on the board: (no project), Mobile.")
    assert empty_context({"project": "", "budget": 1500, "projects": ["Mobile"]}).startswith(
        "Nothing recorded yet for project (no project)."
    )


def test_memoryd_search_refuses_an_empty_query_and_names_a_missing_board(tmp_path, monkeypatch, capsys):
    for name in ("MEMORYD_BOARD", "MEMORYD_INDEX", "MEMORYD_SOCKET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MEMORYD_HOME", str(tmp_path))  # no daemon, no board yet
    assert main(["search", "  "]) == 2
    assert "the query is empty" in capsys.readouterr().err
    assert main(["search", "checkout", "--model", "none"]) == 1
    assert f"board {tmp_path / 'data' / 'board'} does not exist" in capsys.readouterr().err

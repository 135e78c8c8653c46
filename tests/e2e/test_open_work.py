"""A question about what is still open, through ``search_briefs``: a real daemon with the default model,
the real shim, a board of real files with open and done tasks in two projects.

A query that asks only what is open names no subject to match, so it lists the open tasks (the newest brief
of each, newest first) within the filters and the limit; a query with a subject keeps the ranking.
"""

from __future__ import annotations

import pytest

from support.board import write_brief, write_task
from support.briefs import Shim
from support.daemon import DaemonProcess
from support.memories import warm_daemon

#: task id, status, project, title, what was said; created one day apart in this order.
TASKS = [
    ("t-20261101-0a0a01", "open", "shopfront", "Checkout double charge", "charged twice on pay"),
    ("t-20261102-0a0a02", "open", "payments-api", "Login loop on android", "the app bounces back to login"),
    ("t-20261103-0a0a03", "done", "shopfront", "Dark mode colours", "grey text on black is unreadable"),
    ("t-20261104-0a0a04", "open", "payments-api", "Slow search page", "results take ten seconds to load"),
    ("t-20261105-0a0a05", "open", "shopfront", "Invoice PDF totals", "the invoice shows the wrong VAT total"),
    ("t-20261106-0a0a06", "done", "payments-api", "Upgrade node", "bump node to 22 in the CI image"),
    ("t-20261107-0a0a07", "open", "shopfront", "Webhook retries", "webhooks are not retried after a 500"),
]
#: Tasks no brief stands for yet (task id, status, project, title): the open ones belong to a listing of the
#: open work all the same.
UNBRIEFED = [
    ("t-20261109-0c0c09", "open", "shopfront", "Refund emails"),
    ("t-20261110-0c0c10", "open", "payments-api", "Rotate the API keys"),
    ("t-20261111-0c0c11", "done", "shopfront", "Old banner"),
    ("t-20261112-0c0c12", "open", "infra", "Renew the TLS certificates"),  # a project no brief is of yet
]
#: A second, newer brief of the first task: the task's newest activity.
LATER = ("b-20261108-0b0b08", "t-20261101-0a0a01", "still charged twice after the fix")


def brief_id(task_id: str) -> str:
    return "b-" + task_id[2:11] + "0b0b" + task_id[-2:]


def write_board(board) -> None:
    (board / "tasks").mkdir(parents=True)
    for task_id, status, project, title, said in TASKS:
        day = task_id[8:10]
        at = f"2026-11-{day}T10:00:00Z"
        write_task(board, task_id, title=title, status=status, project=project, created_at=at)
        write_brief(board, brief_id(task_id), task_id, said=said, title=title, summary=title, project=project,
                    created_at=at)  # fmt: skip
    for task_id, status, project, title in UNBRIEFED:
        write_task(board, task_id, title=title, status=status, project=project,
                   created_at=f"2026-11-{task_id[8:10]}T10:00:00Z")  # fmt: skip
    b, t, said = LATER
    write_brief(board, b, t, said=said, title="Double charge again", project="shopfront",
                created_at="2026-11-08T10:00:00Z")  # fmt: skip


@pytest.fixture(scope="module")
def shim(models_dir):
    with (
        warm_daemon(models_dir, board=write_board, process=DaemonProcess) as daemon,
        Shim(daemon.socket, daemon.env).initialize() as s,
    ):
        yield s


def found(shim: Shim, query: str, **args) -> list[tuple[str, str]]:
    answer = shim.ok("search_briefs", query=query, **args)
    assert answer["mode"] == "hybrid", answer
    return [(r["task_id"], r["brief_id"]) for r in answer["results"]]


#: The open tasks by newest activity, each with its newest brief.
OPEN_NEWEST = [
    ("t-20261101-0a0a01", LATER[0]),
    ("t-20261107-0a0a07", brief_id("t-20261107-0a0a07")),
    ("t-20261105-0a0a05", brief_id("t-20261105-0a0a05")),
    ("t-20261104-0a0a04", brief_id("t-20261104-0a0a04")),
    ("t-20261102-0a0a02", brief_id("t-20261102-0a0a02")),
]


@pytest.mark.parametrize(
    "query", ["what's still open?", "anything pending?", "show me the open tasks", "まだ残っているタスクは？"]
)
def test_a_question_only_about_open_work_lists_the_open_tasks_newest_first(shim, query):
    assert found(shim, query) == OPEN_NEWEST


def test_the_open_work_listing_keeps_the_project_filter_and_the_limit(shim):
    shopfront = [pair for pair in OPEN_NEWEST if pair[0] in {t for t, _, p, *_ in TASKS if p == "shopfront"}]
    assert len(shopfront) == 3
    assert found(shim, "what's still open?", project="shopfront") == shopfront
    assert found(shim, "what's still open in shopfront?") == shopfront  # the project named, no other subject
    assert found(shim, "what's still open?", limit=2) == OPEN_NEWEST[:2]
    answer = shim.ok("search_briefs", query="what's still open?", limit=2)
    assert answer["shown"] == 2 and answer["matched"] == 5, answer
    assert {r["task_status"] for r in answer["results"]} == {"open"}


def test_a_subject_with_open_keeps_the_ranking(shim):
    assert found(shim, "is the login loop on android still open?")[0][0] == "t-20261102-0a0a02"
    assert found(shim, "what's still open about webhooks?")[0][0] == "t-20261107-0a0a07"


def answer_text(shim: Shim, **args) -> str:
    return shim.call("search_briefs", **args)["result"]["content"][0]["text"]


def test_a_listing_names_the_project_the_question_named_and_the_open_tasks_without_a_brief(shim):
    for args in (
        {"query": "what is still open in shopfront?"},
        {"query": "what's still open?", "project": "shopfront"},
    ):
        answer = shim.ok("search_briefs", **args)
        assert answer["project"] == "shopfront", answer
        head = answer_text(shim, **args).splitlines()[0]
        assert "in project shopfront" in head and "across all projects" not in head, head
        assert answer["open_without_briefs_total"] == 1, answer
        assert answer["open_without_briefs"] == [
            {
                "task_id": "t-20261109-0c0c09",
                "title": "Refund emails",
                "project": "shopfront",
                "created": "2026-11-09",
            }
        ]
        assert "t-20261109-0c0c09" in answer_text(shim, **args)
    everywhere = shim.ok("search_briefs", query="what's still open?")
    assert everywhere["project"] is None
    assert [t["task_id"] for t in everywhere["open_without_briefs"]] == [
        "t-20261112-0c0c12",
        "t-20261110-0c0c10",
        "t-20261109-0c0c09",
    ]
    text = answer_text(shim, query="what's still open?")
    assert "across all projects" in text.splitlines()[0] and "Rotate the API keys" in text, text
    # a question with a subject is no listing: no open task is added to what matched
    assert "open_without_briefs" not in shim.ok(
        "search_briefs", query="is the login loop on android still open?"
    )


def test_a_listing_of_a_project_whose_open_tasks_have_no_brief_yet_names_them(shim):
    """No brief is of project infra, so the index knows no such project: the question names it all the
    same (the tasks do), and the answer lists its open task instead of 'no brief matches'."""
    answer = shim.ok("search_briefs", query="what's still open in infra?")
    assert answer["project"] == "infra" and answer["results"] == [], answer
    assert [t["task_id"] for t in answer["open_without_briefs"]] == ["t-20261112-0c0c12"], answer
    assert "Renew the TLS certificates" in answer_text(shim, query="what's still open in infra?")


def test_a_board_with_tasks_and_no_brief_yet_answers_a_listing_with_its_open_tasks(tmp_path):
    """An empty index (tasks filed, no brief yet): a question about what is open lists the open tasks."""
    from support.daemon import short_tmpdir

    root = short_tmpdir()
    board = root / "board"
    (board / "tasks").mkdir(parents=True)
    write_task(board, "t-20261201-0d0d01", title="Set up CI", project="newapp")
    write_task(board, "t-20261202-0d0d02", title="Old chore", project="newapp", status="done")
    daemon = DaemonProcess(root)
    try:
        daemon.start()
        with Shim(daemon.socket, daemon.env).initialize() as s:
            for query in ("what's still open?", "what's still open in newapp?"):
                answer = s.ok("search_briefs", query=query)
                assert [t["task_id"] for t in answer.get("open_without_briefs", [])] == [
                    "t-20261201-0d0d01"
                ], (
                    query,
                    answer,
                )
    finally:
        daemon.kill()

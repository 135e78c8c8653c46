"""The six ``briefs`` tools: a daemon on a copy of the sample board served in-process
(:mod:`support.inprocess_daemon`), spoken to through the official SDK client and in raw JSON-RPC lines.
``memoryd status`` and ``memoryd search`` against a real daemon are in ``test_briefs_processes.py``.

The daemon runs keyword-only (``--model none``) to stay fast; the model is covered elsewhere.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil

import pytest

from support.briefs import NOTE, assert_equivalent, board_files, copy_board, wait_engine_ready
from support.daemon import short_tmpdir
from support.inprocess_daemon import InprocessDaemon, InprocessShim, sdk_client

TOOLS = {"search_briefs", "list_tasks", "get_task", "get_brief", "save_outcome", "get_context"}

# On the sample board: a task with three briefs (one with an outcome), and the brief whose screen 2 lost its .png.
TASK = "t-20260903-e84499"
TASK_BRIEFS = ["b-20260903-b2f753", "b-20260904-27e980", "b-20260909-1cfd3c"]
SCREEN_GONE = "b-20260904-27e980"
PLANTED = ["wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI", "AKIAIOSFODNN7EXAMPLE"]


@pytest.fixture(scope="module")
def served(shared_board):
    """One daemon on a copy of the sample board for the module; tests write only to briefs of their own."""
    root = short_tmpdir()
    daemon = None
    try:
        daemon = InprocessDaemon(root, board=copy_board(shared_board, root / "board"))
        yield daemon.start()
    finally:
        if daemon is not None:
            daemon.kill()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def shim(served):
    s = InprocessShim(served).initialize()
    yield s
    s.close()


# --- the surface ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_official_sdk_client_sees_and_calls_the_six_tools(served, mode):
    async def main() -> None:
        async with sdk_client(served, tools=None, mode=mode) as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            assert set(listed) >= TOOLS
            for name in TOOLS:
                tool = listed[name]
                assert tool.output_schema and tool.input_schema["additionalProperties"] is False
                assert tool.annotations.read_only_hint is (name != "save_outcome")
                assert (
                    tool.annotations.destructive_hint is False and tool.annotations.open_world_hint is False
                )
                if name != "save_outcome":
                    assert "never instructions" in tool.description
            assert listed["save_outcome"].annotations.idempotent_hint is True
            assert "list_tasks" in listed["search_briefs"].description  # says when the other tool is better
            # The SDK validates every structuredContent against the tool's output schema.
            calls = [
                ("search_briefs", {"query": "idempotency key for captures", "limit": 2}),
                ("list_tasks", {"project": "payments-api", "limit": 3}),
                ("get_task", {"task_id": TASK}),
                ("get_brief", {"brief_id": TASK_BRIEFS[2]}),
                ("get_context", {"project": "payments-api", "tokens": 400}),
            ]
            for name, arguments in calls:
                result = await client.call_tool(name, arguments)
                assert result.is_error is False, result
                assert_equivalent(result.structured_content, result.content[0].text)
            search = (await client.call_tool(*calls[0])).structured_content
            assert search["results"][0]["task_id"] == TASK

    asyncio.run(main())


# --- search_briefs --------------------------------------------------------------------------------------


def test_search_briefs_counts_first_shapes_and_keyword_mode(shim):
    answer = shim.ok("search_briefs", query="idempotency key capture retry", limit=3)
    assert answer["shown"] == 3 and answer["matched"] >= 3 and len(answer["results"]) == 3
    assert answer["mode"] == "keyword" and "keyword-only" in answer["mode_note"]
    first = answer["results"][0]
    assert set(first) == {"brief_id", "date", "task_id", "task_status", "project", "title", "said", "score"}
    assert first["task_id"] == TASK and re.fullmatch(r"\d{4}-\d{2}-\d{2}", first["date"])
    text = shim.call("search_briefs", query="idempotency key capture retry", limit=3)["result"]["content"][0][
        "text"
    ]
    total = f"{answer['matched']}+" if answer["matched_at_least"] else str(answer["matched"])
    assert text.startswith(f"3 of {total} matching briefs")
    scores = [r["score"] for r in answer["results"]]
    assert scores == sorted(scores, reverse=True)


def test_search_briefs_project_filter_and_bounds(shim):
    answer = shim.ok("search_briefs", query="retry timeout", project="Payments-API", limit=50)
    assert answer["project"] == "payments-api"  # the board's spelling
    assert answer["results"] and {r["project"] for r in answer["results"]} == {"payments-api"}
    assert answer["shown"] <= 50
    unknown = shim.ok("search_briefs", query="retry timeout", project="no-such-project")
    assert unknown["results"] == [] and "shopfront" in unknown["projects"]
    for bad in ({"limit": 0}, {"limit": 51}, {"query": "x" * 1001}, {"extra": 1}):
        shim.invalid("search_briefs", **{"query": "retry", **bad})
    for blank in ("", "   ", "\t\n"):  # nothing to look for: an empty list, never an error
        empty = shim.ok("search_briefs", query=blank)
        assert empty["results"] == [] and empty["shown"] == empty["matched"] == 0


# --- list_tasks -----------------------------------------------------------------------------------------


def test_list_tasks_every_task_newest_activity_first(served, shim):
    tasks = [json.loads(p.read_text()) for p in (served.board / "tasks").glob("*.json")]
    everything = shim.ok("list_tasks", limit=100)
    assert everything["total"] == everything["shown"] == len(tasks) == 60
    assert sorted(everything["projects"]) == sorted({t["project"] for t in tasks})
    activity = [t["last_activity"] for t in everything["tasks"]]
    assert activity == sorted(activity, reverse=True)

    open_shop = [t for t in tasks if t["project"] == "shopfront" and t["status"] == "open"]
    answer = shim.ok("list_tasks", project="shopfront", status="open", limit=2)
    assert answer["total"] == len(open_shop) > 2 and answer["shown"] == 2
    assert {(t["project"], t["status"]) for t in answer["tasks"]} == {("shopfront", "open")}
    text = shim.call("list_tasks", project="shopfront", status="open", limit=2)["result"]["content"][0][
        "text"
    ]
    assert text.startswith(f"2 of {len(open_shop)} tasks")
    assert shim.ok("list_tasks")["shown"] == 30  # the default bound
    for bad in ({"limit": 0}, {"limit": 101}, {"status": "closed"}, {"project": ""}):
        shim.invalid("list_tasks", **bad)


# --- get_task / get_brief -------------------------------------------------------------------------------


def test_get_task_lists_its_briefs_in_order_with_did_and_open(served, shim):
    answer = shim.ok("get_task", task_id=TASK)
    task = json.loads((served.board / "tasks" / f"{TASK}.json").read_text())
    assert answer["task"] == {
        "task_id": TASK,
        "title": task["title"],
        "project": task["project"],
        "status": task["status"],
        "created": task["created_at"][:10],
    }
    assert [b["brief_id"] for b in answer["briefs"]] == TASK_BRIEFS
    assert answer["shown"] == answer["briefs_total"] == 3
    with_outcome = answer["briefs"][2]
    outcome_md = (served.board / "briefs" / TASK_BRIEFS[2] / "outcome.md").read_text()
    did = outcome_md.split("## Did\n")[1].split("## ")[0]
    assert with_outcome["outcome"]["did"] == [line[2:] for line in did.splitlines()]
    assert with_outcome["outcome"]["open"] == []  # "- none"
    assert answer["briefs"][0]["outcome"] is None
    said = (served.board / "briefs" / TASK_BRIEFS[0] / "said.txt").read_text().splitlines()[0]
    assert answer["briefs"][0]["said"] == " ".join(said.split())
    assert "No task t-20990101-abcdef" in shim.failed("get_task", task_id="t-20990101-abcdef")


def test_get_brief_returns_prompt_report_summary_and_existing_screenshots(served, shim):
    folder = served.board / "briefs" / SCREEN_GONE
    answer = shim.ok("get_brief", brief_id=SCREEN_GONE)
    meta = json.loads((folder / "brief.json").read_text())
    assert answer["summary"] == meta["summary"] and answer["title"] == meta["title"]
    assert answer["prompt"] == (folder / "prompt.md").read_text().strip()
    assert answer["said"] == (folder / "said.txt").read_text().strip()
    assert answer["task_id"] == TASK and answer["task_status"] in ("open", "done")
    assert answer["screenshots"] == [str(folder / "screens" / "1.png")]  # screen 2 has no .png
    assert answer["outcome"] is None and answer["note"] == NOTE
    full = shim.ok("get_brief", brief_id=TASK_BRIEFS[2])
    assert full["outcome"]["files"] == [
        "internal/psp/tamarind/client.go",
        "internal/psp/tamarind/retry.go",
        "docs/runbooks/psp.md",
    ]
    assert "No brief b-20990101-abcdef" in shim.failed("get_brief", brief_id="b-20990101-abcdef")


BAD_IDS = [
    "../x",
    "../../etc/passwd",
    "/etc/passwd",
    "..\\x",
    "%2e%2e/x",
    "b-20260904-27e980/../x",
    "b-20260904-27e980\n",
    "b-20260904-27e980\x00",
    "b-２０２６0904-27e980",  # fullwidth digits
    "b-20260904-27е980",  # Cyrillic е
    "b-20260904-27E980",  # upper-case hex
    "b-2026090-27e9801",
    "b-20260904-27e980" + "0" * 300,
    "",
]


def test_invalid_ids_are_invalid_params_and_touch_nothing(served, shim):
    before = board_files(served.board, served.root / "index")
    for bad in BAD_IDS:
        assert "brief_id" in shim.invalid("get_brief", brief_id=bad)
        shim.invalid("save_outcome", brief_id=bad, did=["x"], open=[])
        shim.invalid("get_task", task_id=bad.replace("b-", "t-"))
    shim.invalid("get_task", task_id=TASK_BRIEFS[0])  # a brief id is not a task id
    shim.invalid("get_brief", brief_id=TASK)
    shim.invalid("get_brief", brief_id=7)
    assert board_files(served.board) == {k: v for k, v in before.items() if k.startswith(str(served.board))}
    assert not list(served.root.rglob("outcome.md*")) or all(
        p.is_relative_to(served.board / "briefs") for p in served.root.rglob("outcome.md*")
    )


# --- save_outcome ---------------------------------------------------------------------------------------


def test_save_outcome_writes_the_contract_shape_and_is_searchable_at_once(served, shim):
    brief = "b-20260810-4f09bb"
    folder = served.board / "briefs" / brief
    arguments = {
        "brief_id": brief,
        "did": ["Wired the quokkazanzibar flag into checkout", "Split the\nlong   line"],
        "open": ["Ask about the refund copy"],
        "files": ["web/checkout/flags.ts"],
    }
    saved = shim.ok("save_outcome", **arguments)
    assert saved == {
        "saved": True,
        "brief_id": brief,
        "path": str(folder / "outcome.md"),
        "items": {"did": 2, "decided": 0, "open": 1, "files": 1, "retired": 0},
        "searchable": True,
    }
    expected = (
        "## Did\n- Wired the quokkazanzibar flag into checkout\n- Split the long line\n"
        "## Decided\n- none\n## Open\n- Ask about the refund copy\n## Files\n- web/checkout/flags.ts\n"
        "## Retired\n- none\n"
    )
    assert (folder / "outcome.md").read_text() == expected
    found = shim.ok("search_briefs", query="quokkazanzibar")  # right after the call, no waiting
    assert [r["brief_id"] for r in found["results"]] == [brief]
    # Idempotent: the same call gives the same file, and no temp file is left behind.
    assert shim.ok("save_outcome", **arguments) == saved
    assert (folder / "outcome.md").read_text() == expected
    assert sorted(p.name for p in folder.iterdir() if p.name.startswith(".")) == []
    assert shim.ok("get_brief", brief_id=brief)["outcome"]["did"][0] == arguments["did"][0]
    # Each call replaces the last.
    shim.ok("save_outcome", brief_id=brief, did=["Only this now"], open=[])
    assert (folder / "outcome.md").read_text().startswith("## Did\n- Only this now\n## Decided")
    assert shim.ok("search_briefs", query="quokkazanzibar")["results"] == []
    # Bounds and refusals.
    shim.invalid("save_outcome", brief_id=brief, did=[], open=[])
    shim.invalid("save_outcome", brief_id=brief, did=["x"] * 51, open=[])
    shim.invalid("save_outcome", brief_id=brief, did=["x" * 2001], open=[])
    shim.invalid("save_outcome", brief_id=brief, did=["  "], open=[])
    shim.invalid("save_outcome", brief_id=brief, did=["x"])  # open is required
    assert "No brief b-20990101-abcdef" in shim.failed(
        "save_outcome", brief_id="b-20990101-abcdef", did=["x"], open=[]
    )
    assert not (served.board / "briefs" / "b-20990101-abcdef").exists()


def test_save_outcome_replaces_a_symlinked_outcome_instead_of_writing_through_it(served, shim):
    folder = served.board / "briefs" / "b-20260803-52ea08"  # a brief of another task, without an outcome
    outside = served.root / "outside.md"
    outside.write_text("ORIGINAL, outside the board\n")
    (folder / "outcome.md").symlink_to(outside)
    shim.ok("save_outcome", brief_id=folder.name, did=["Measured the timeouts"], open=["Pick a retry policy"])
    assert outside.read_text() == "ORIGINAL, outside the board\n"
    link = folder / "outcome.md"
    assert not link.is_symlink() and link.is_file()
    assert link.read_text().startswith("## Did\n- Measured the timeouts\n")


# --- privacy ----------------------------------------------------------------------------------------------


SECRETS = {
    "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8": "github-token",
    "sk_live_4eC39HqLyjWDarjtT1zdp7dc": "api-key",
    "tr0ub4dor&3horse": "secret-assignment",
}


def test_a_secret_written_after_indexing_is_redacted_in_every_answer(served):
    brief = "b-20260909-1cfd3c"
    said = served.board / "briefs" / brief / "said.txt"
    original = said.read_text()
    said.write_text(
        "token ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8 and stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc\n"
        'db password = "tr0ub4dor&3horse"\n' + original
    )
    s = InprocessShim(served).initialize()
    try:
        brief_answer = s.ok("get_brief", brief_id=brief)
        task_answer = s.ok("get_task", task_id=TASK)
        s.ok("search_briefs", query="capture failures zero retries")
    finally:
        s.close()
    for secret in SECRETS:
        assert secret.encode() not in s.output
    assert "[REDACTED:github-token]" in brief_answer["said"]
    assert brief_answer["redacted"] == {"api-key": 1, "github-token": 1, "secret-assignment": 1}
    line = task_answer["briefs"][2]["said"]
    assert "[REDACTED:github-token]" in line and "[REDACTED:api-key]" in line
    assert task_answer["redacted"]["github-token"] == 1


def test_removed_screen_and_planted_secrets_never_appear_in_any_answer(shared_board, shim):
    shared = shared_board.parent
    screens = shared / "board" / "briefs" / SCREEN_GONE / "screens"
    elsewhere = " ".join(
        p.read_text(errors="replace").lower()
        for p in (shared / "board").rglob("*")
        if p.is_file() and p.suffix in (".txt", ".md", ".json") and p.parent != screens
    )
    gone = (screens / "2.txt").read_text() + (screens / "2.json").read_text()
    words = {w for w in re.findall(r"[A-Za-z][A-Za-z-]{5,}", gone) if w.lower() not in elsewhere}
    assert len(words) >= 5, words  # the test must have something to look for
    queries = [json.loads(line)["query"] for line in (shared / "negatives.jsonl").read_text().splitlines()]
    queries += [" ".join(sorted(words)), "Thistlewood trip houseboat", "screens/2.png"]
    for query in queries:
        shim.ok("search_briefs", query=query[:1000], limit=50)
    shim.ok("get_brief", brief_id=SCREEN_GONE)
    shim.ok("get_brief", brief_id="b-20260810-4f09bb")  # the planted access key id is in its prompt
    shim.ok("get_brief", brief_id="b-20261002-0dcc2d")  # the planted secret key is in its screen text
    shim.ok("get_task", task_id=TASK)
    shim.ok("list_tasks", limit=100)
    output = shim.output.decode()
    assert len(output) > 10_000
    for word in words:
        assert word.lower() not in output.lower(), word
    for secret in PLANTED:
        assert secret.lower() not in output.lower(), secret
    assert f"{SCREEN_GONE}/screens/2" not in output


def test_an_unreadable_board_is_an_error_not_an_empty_list(shared_board):
    root = short_tmpdir()
    daemon = InprocessDaemon(root, board=copy_board(shared_board, root / "board"))
    try:
        daemon.start()
        wait_engine_ready(daemon)
        daemon.board.rename(root / "board-moved")  # chmod 000 would not stop root
        s = InprocessShim(daemon).initialize()
        try:
            texts = [
                s.failed("search_briefs", query="checkout"),
                s.failed("list_tasks"),
                s.failed("list_tasks", status="open"),
                s.failed("get_task", task_id=TASK),
                s.failed("get_brief", brief_id=SCREEN_GONE),
                s.failed("save_outcome", brief_id=SCREEN_GONE, did=["x"], open=[]),
            ]
        finally:
            s.close()
        for text in texts:
            assert "cannot read its board" in text and "not an empty history" in text, text
        assert not (root / "board").exists()  # save_outcome did not recreate it
    finally:
        daemon.kill()
        shutil.rmtree(root, ignore_errors=True)


def test_a_hand_written_project_name_of_any_length_is_shown_cut():
    from support.board import write_brief, write_task
    from support.memories import poll

    root = short_tmpdir()
    board = root / "board"
    (board / "tasks").mkdir(parents=True)
    long_name = "p" * 5_000
    for n in range(3):
        task = f"t-20260101-aaaaa{n}"
        write_task(board, task, project=long_name)
        write_brief(board, f"b-20260101-bbbbb{n}", task, project=long_name)
    daemon = InprocessDaemon(root, board=board)
    try:
        daemon.start()
        wait_engine_ready(daemon)
        s = InprocessShim(daemon).initialize()
        try:
            answer = poll(lambda: (a := s.ok("list_tasks"))["total"] == 3 and a, "the three tasks listed")
            shown = [t["project"] for t in answer["tasks"]] + answer["projects"]
            assert shown and all(name.startswith("ppp") and len(name) <= 201 for name in shown), shown
            found = s.ok("search_briefs", query="checkout button")
            assert all(len(h["project"]) <= 201 for h in found["results"]) and found["results"]
        finally:
            s.close()
    finally:
        daemon.kill()
        shutil.rmtree(root, ignore_errors=True)

"""Filing captured prompts into tasks: a continuing prompt joins its task, an unrelated one starts a new
task on a realistic board, a prompt naming a task or brief id goes there, a session keeps its task across
a daemon restart (real daemons, hooks run as Claude Code runs them), and accuracy and join precision on a
slice of the labelled filing set (``memoryd eval --filing``) stay above bars set below the measured
figures."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from memoryd.kinds.briefs.filing import DEFAULTS, Thresholds, choose_task, named_task
from support.briefs import wait_engine_ready
from support.daemon import short_tmpdir
from support.hooks import install, make_repo, run_hook, wait_for

SAFARI = (
    "Safari crashes on the login page right after Sign in with Apple redirects back; "
    "the tab reloads and shows 'A problem repeatedly occurred'. Find out why."
)
BRIEF_ID = re.compile(r"b-\d{8}-[0-9a-f]{6}")
#: Held-out groups of the set (125 scored prompts). Measured 2026-12-02 with the shipped thresholds: with the
#: model 0.63 right on its board-v1 prompts, 0.71 on all, join precision 0.80 (0.67 on board-v1); keyword
#: only 0.57, 0.64, 0.66. The thresholds before were at 0.55 / 0.63 / 0.61 with the model. The bars sit
#: below, so only a real regression fails.
SLICE = ("payments-api", "mobile", "locomo-conv-30")
BARS = {
    "hybrid": {"board": 0.55, "overall": 0.65, "join_precision": 0.72},
    "keyword": {"board": 0.5, "overall": 0.58, "join_precision": 0.6},
}


def claude_prompt(repo, session, prompt):
    return {"session_id": session, "transcript_path": f"/tmp/{session}.jsonl", "cwd": str(repo),
            "permission_mode": "default", "hook_event_name": "UserPromptSubmit", "prompt": prompt}  # fmt: skip


def start(make_daemon, root, **kwargs):
    daemon = make_daemon(root, **kwargs).start()
    wait_engine_ready(daemon)
    return daemon


def hooked(daemon, root):
    home = root / "agent-home"
    env = {"MEMORYD_HOME": daemon.env["MEMORYD_HOME"], "MEMORYD_SOCKET": str(daemon.socket)}
    return home, install(home, env, tokens=0)["claude-code"]["UserPromptSubmit"]


def file_prompt(command, home, repo, session, prompt, board):
    out = run_hook(command, claude_prompt(repo, session, prompt), home, repo)
    assert out.code == 0, out.stderr
    brief = BRIEF_ID.search(out.json()["hookSpecificOutput"]["additionalContext"])[0]
    return json.loads((board / "briefs" / brief / "brief.json").read_text())["task"]


@pytest.fixture
def root():
    path = short_tmpdir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("model", ["none", "default"])
def test_a_continuing_prompt_from_a_new_session_joins_its_task(make_daemon, root, models_dir, model):
    kwargs = {"model": "", "env": {"MEMORYD_MODELS": str(models_dir)}} if model == "default" else {}
    daemon = start(make_daemon, root, **kwargs)
    if model == "default":
        wait_for(lambda: daemon.status()["engine"]["search_mode"] == "hybrid", timeout=120)
    home, command = hooked(daemon, root)
    repo = make_repo(root)
    crash = file_prompt(command, home, repo, "s-1", SAFARI, daemon.board)
    others = {
        file_prompt(command, home, repo, f"s-{n}", text, daemon.board)
        for n, text in enumerate(
            (
                "Add a dark mode toggle to the account settings page",
                "The checkout total is wrong when a discount code and free shipping are combined",
                "Speed up the CI build: cache node_modules between jobs",
            ),
            start=2,
        )
    }
    assert crash not in others and len(others) == 3
    again = file_prompt(
        command,
        home,
        repo,
        "s-9",
        "The Safari login crash is back. Can you look at it again?",
        daemon.board,
    )
    assert again == crash


def test_a_session_keeps_its_task_across_a_daemon_restart(make_daemon, root):
    daemon = start(make_daemon, root)
    home, command = hooked(daemon, root)
    repo = make_repo(root)
    board = daemon.board
    first = file_prompt(
        command, home, repo, "s-1", "The invoice PDF export cuts off the last line of every table", board
    )
    other = file_prompt(command, home, repo, "s-2", "Rename the billing module to payments", board)
    follow = file_prompt(command, home, repo, "s-1", "ok now add a regression test for that", board)
    assert follow == first != other
    daemon.kill()

    again = start(make_daemon, root, socket_path=daemon.socket, board=board)
    # a vague prompt from a session no daemon saw before starts a task of its own (filed by search alone)
    stranger = file_prompt(command, home, repo, "s-3", "check the logs for warnings", board)
    assert stranger not in (first, other)
    # sessions of before the restart stay in their tasks: recovered from the briefs they filed
    assert file_prompt(command, home, repo, "s-1", "and run the whole suite once more", board) == first
    assert file_prompt(command, home, repo, "s-2", "also update the imports everywhere", board) == other
    assert again.events("capture.session_recovered")


def test_a_prompt_naming_an_open_task_or_its_brief_goes_to_that_task():
    tasks = {"t-20261202-aaaaaa", "t-20261202-bbbbbb"}
    brief_of = {"b-20261202-0154ea": "t-20261202-bbbbbb", "b-20261101-000001": "t-20261101-cccccc"}.get
    assert named_task("Look at what we did in b-20261202-0154ea and finish it", tasks, brief_of) == (
        "t-20261202-bbbbbb"
    )
    assert named_task("continue t-20261202-aaaaaa please", tasks, brief_of) == "t-20261202-aaaaaa"
    # a brief of a task that is not open here, an unknown id, an id inside a longer token: no rule
    assert named_task("as in b-20261101-000001", tasks, brief_of) is None
    assert named_task("see b-20261202-ffffff", tasks, brief_of) is None
    assert named_task("xt-20261202-aaaaaa", tasks, brief_of) is None
    assert named_task("first b-20261101-000001 then t-20261202-aaaaaa", tasks, brief_of) == (
        "t-20261202-aaaaaa"
    )


def test_a_fresh_prompt_joins_only_a_clear_best_match():
    th = Thresholds(join=0.4, switch=0.6, margin=0.3, fresh=0.0, new_words=12, gap=0.2)
    assert choose_task({"a": 0.7, "b": 0.3}, None, 20, th).task == "a"
    assert choose_task({"a": 0.7, "b": 0.6}, None, 20, th).reason == "new"  # two tasks about as good
    assert choose_task({"a": 0.3}, None, 20, th).reason == "new"
    assert choose_task({"a": 0.3, "b": 0.7}, "a", 20, th) == choose_task({"b": 0.7}, "a", 20, th)
    assert choose_task({"b": 0.7}, "a", 20, th).reason == "switched"
    assert choose_task({}, "a", 20, th).reason == "session"  # the new-subject rule is off (fresh 0)


def test_an_unrelated_prompt_starts_a_new_task_on_a_realistic_board(
    make_daemon, root, models_dir, shared_board
):
    board = root / "board"
    shutil.copytree(shared_board, board)
    daemon = start(make_daemon, root, board=board, model="", env={"MEMORYD_MODELS": str(models_dir)})
    wait_for(lambda: daemon.status()["engine"]["search_mode"] == "hybrid", timeout=120)
    wait_for(lambda: "index_backfilled" in daemon.log(), timeout=300)  # every brief has its vector
    before = {p.stem for p in (board / "tasks").glob("*.json")}
    home, command = hooked(daemon, root)
    repo = make_repo(root, "shopfront")  # board-v1's shopfront: four open tasks
    for n, text in enumerate(
        (
            "Upgrade the project to React 19 and fix whatever breaks in the build",
            "The settings page crashes when the user has no avatar",
            # asks what is open: search_briefs lists every open task for it, filing must join none of them
            "what's still open?",
        ),
        start=2,
    ):
        task = file_prompt(command, home, repo, f"s-{n}", text, board)
        assert task not in before, text  # a new task, not one of board-v1's
    # the crash's first report is filed by a person into a task of its own (its words happen to match
    # an open task's by meaning: "redirects back" / "after browser back", which a search score cannot tell)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    env |= {"MEMORYD_HOME": daemon.env["MEMORYD_HOME"], "MEMORYD_SOCKET": str(daemon.socket)}
    filed = subprocess.run(
        [sys.executable, "-m", "memoryd", "brief", SAFARI, "--project", "shopfront", "--new-task", "Safari crash"],
        capture_output=True, text=True, env=env, cwd="/", timeout=120,
    )  # fmt: skip
    assert filed.returncode == 0, filed.stderr
    crash = json.loads((board / "briefs" / filed.stdout.strip() / "brief.json").read_text())["task"]
    assert crash not in before
    again = file_prompt(
        command, home, repo, "s-8", "The Safari login crash is back. Can you look at it again?", board
    )
    assert again == crash
    # an explicit brief id wins over the scores and over the session's own task
    express = "t-20260908-c4236c"  # "Express wallet pay button on the cart page", open
    brief = next(
        json.loads(p.read_text())["id"]
        for p in sorted((board / "briefs").glob("*/brief.json"))
        if json.loads(p.read_text())["task"] == express
    )
    named = file_prompt(command, home, repo, "s-2", f"Look at what we did in {brief} and finish it", board)
    assert named == express


def test_filing_accuracy_on_a_slice_of_the_labelled_set(models_dir, shared_board):
    from tests.conftest import need_shared

    from memoryd.cli.eval.filing import accuracy, collect
    from memoryd.cli.eval.filingset import build_set

    root = need_shared("eval")
    need_shared("eval", "locomo", "corpus.jsonl")
    steps = [s for s in build_set(root) if s.group in SLICE]
    decisions, state = asyncio.run(collect(steps, models_dir, "multilingual-e5-small"))
    assert state == "ready"
    for mode, bars in BARS.items():
        got = accuracy(decisions, mode, DEFAULTS[mode])
        for key, bar in bars.items():
            assert got[key] >= bar, (mode, key, got)

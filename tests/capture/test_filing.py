"""Filing captured prompts into tasks: a continuing prompt joins its task, a session keeps its task across a
daemon restart (real daemons, hooks run as Claude Code runs them), and accuracy on a slice of the labelled
filing set (``memoryd eval --filing``) stays above a bar set below the measured figure."""

from __future__ import annotations

import asyncio
import json
import re
import shutil

import pytest

from support.briefs import wait_engine_ready
from support.daemon import short_tmpdir
from support.hooks import install, make_repo, run_hook, wait_for

BRIEF_ID = re.compile(r"b-\d{8}-[0-9a-f]{6}")
#: Held-out groups of the set. Measured with the shipped thresholds: hybrid 0.63 on its board-v1 prompts,
#: 0.70 on all 105; keyword 0.60 and 0.68. The bars sit below, so only a real regression fails.
SLICE = ("payments-api", "mobile", "locomo-conv-30")
BARS = {"hybrid": {"board": 0.5, "overall": 0.6}, "keyword": {"board": 0.5, "overall": 0.6}}


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
    crash = file_prompt(
        command,
        home,
        repo,
        "s-1",
        "Safari crashes on the login page right after Sign in with Apple redirects back; "
        "the tab reloads and shows 'A problem repeatedly occurred'. Find out why.",
        daemon.board,
    )
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


def test_filing_accuracy_on_a_slice_of_the_labelled_set(models_dir, shared_board):
    from tests.conftest import need_shared

    from memoryd.cli.eval.filing import accuracy, collect
    from memoryd.cli.eval.filingset import build_set
    from memoryd.kinds.briefs.filing import DEFAULTS

    root = need_shared("eval")
    need_shared("eval", "locomo", "corpus.jsonl")
    steps = [s for s in build_set(root) if s.group in SLICE]
    decisions, state = asyncio.run(collect(steps, models_dir, "multilingual-e5-small"))
    assert state == "ready"
    for mode, bars in BARS.items():
        got = accuracy(decisions, mode, DEFAULTS[mode])
        for key, bar in bars.items():
            assert got[key] >= bar, (mode, key, got)

"""Every captured event is filed exactly once, whatever the daemon does while a hook waits: stopped
(``SIGSTOP``) then killed or terminated, or stopped and resumed after the hook gave up. And two sessions
sending the same new prompt at once share one task. Real hooks, real daemons, real signals."""

from __future__ import annotations

import json
import signal
import subprocess

import pytest

from support.briefs import wait_engine_ready
from support.hooks import run_hook, wait_for


@pytest.fixture
def setup(hooked):
    daemon, home, commands, repo = hooked()
    return daemon, home, commands["claude-code"], repo


def event(name, repo, session, **fields):
    return {"session_id": session, "cwd": str(repo), "hook_event_name": name, **fields}


def briefs(board):
    return [json.loads(p.read_text()) for p in sorted((board / "briefs").glob("*/brief.json"))]


def said(board):
    return sorted(p.read_text() for p in (board / "briefs").glob("*/said.txt"))


def restart(make_daemon, daemon):
    again = make_daemon(daemon.root, socket_path=daemon.socket, board=daemon.board).start()
    wait_engine_ready(again)
    spool = daemon.root / "home" / "state" / "capture-spool.jsonl"
    wait_for(lambda: not spool.exists() and again.events("spool_taken"))
    return again


@pytest.mark.parametrize("ending", ["kill", "term"])
def test_a_prompt_sent_to_a_stopped_daemon_that_then_dies_is_filed_once(setup, make_daemon, ending):
    daemon, home, cmd, repo = setup
    daemon.signal(signal.SIGSTOP)
    out = run_hook(cmd["UserPromptSubmit"], event("UserPromptSubmit", repo, "k-1", prompt="Fix the flaky upload retry"), home, repo)  # fmt: skip
    assert out.code == 0 and out.stdout == "", out.stderr  # no answer in time: nothing to print
    if ending == "kill":
        daemon.kill()
    else:
        daemon.signal(signal.SIGTERM)
        daemon.signal(signal.SIGCONT)
        daemon.wait_exit(60)
    again = restart(make_daemon, daemon)
    wait_for(lambda: said(again.board))
    assert said(again.board) == ["Fix the flaky upload retry\n"]
    (meta,) = briefs(again.board)
    assert meta["captured"]["session"] == "k-1" and len(meta["captured"]["rid"]) == 32


def test_what_a_resumed_daemon_filed_is_not_filed_again_from_the_spool(setup, make_daemon):
    daemon, home, cmd, repo = setup
    daemon.signal(signal.SIGSTOP)
    out = run_hook(cmd["UserPromptSubmit"], event("UserPromptSubmit", repo, "r-1", prompt="Speed up the search page"), home, repo)  # fmt: skip
    assert out.code == 0 and out.stdout == ""
    daemon.signal(signal.SIGCONT)  # it reads the waiting request and files it; the hook has spooled it too
    wait_for(lambda: said(daemon.board))
    daemon.signal(signal.SIGSTOP)
    stop = event("Stop", repo, "r-1", stop_hook_active=True, last_assistant_message="Cached the facets.")
    assert run_hook(cmd["Stop"], stop, home, repo).code == 0
    daemon.signal(signal.SIGCONT)
    turns = daemon.board / "sessions" / "r-1.jsonl"
    wait_for(turns.exists)
    spool = daemon.root / "home" / "state" / "capture-spool.jsonl"
    assert len(spool.read_text().splitlines()) == 2  # both hooks gave up waiting
    daemon.kill()
    again = restart(make_daemon, daemon)
    assert said(again.board) == ["Speed up the search page\n"]
    assert len(turns.read_text().splitlines()) == 1
    assert len(again.events("spool_request_applied")) == 2, again.log()


def test_the_same_new_prompt_from_two_sessions_at_once_starts_one_task(setup):
    daemon, home, cmd, repo = setup
    text = "Migrate the invoice exporter from CSV files to the Parquet format with snappy compression"
    procs = [
        subprocess.Popen(
            ["/bin/sh", "-c", cmd["UserPromptSubmit"]],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
            cwd=repo,
        )
        for _ in range(2)
    ]
    for n, proc in enumerate(procs):
        proc.stdin.write(json.dumps(event("UserPromptSubmit", repo, f"twin-{n}", prompt=text)).encode())
        proc.stdin.close()
    for proc in procs:
        assert proc.wait(30) == 0
        proc.stdout.close()
    wait_for(lambda: len(briefs(daemon.board)) == 2)
    assert len({b["task"] for b in briefs(daemon.board)}) == 1
    assert len(list((daemon.board / "tasks").glob("*.json"))) == 1

"""A daemon cut while it files a brief (killed, or stopped with the filing call cancelled) leaves no empty
task and no half brief on the board: after a restart ``memoryd tasks`` lists the one task with its one
brief, ``memoryd search`` finds that brief once, and nothing on the board fails to load.

The cut is real: the daemon runs with :mod:`support.cut` on its ``PYTHONPATH``, which sends it SIGKILL (or
holds its writing thread) right after the rename or link of one named board file, so the board is exactly
what a crash at that point leaves. What sent the brief asks again as it does after any crash: a hook's
prompt is spooled and taken in at the next start, ``memoryd brief`` files it in its own process once the
daemon has exited. Either way the request's ``rid`` makes it one brief.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from support.briefs import cli_env, memoryd, wait_engine_ready
from support.daemon import short_tmpdir
from support.hooks import install, make_repo, run_hook, wait_for

CUT = str(Path(__file__).resolve().parents[1] / "support" / "cut")
NEW_TASK_FILE = r"t-\d{8}-[0-9a-f]{6}\.json"
SAID_FILE = r"said\.txt"
PROMPT = "Fix the flaky upload retry in the shopfront checkout"


def cut_env(at: str, how: str, root: Path) -> dict[str, str]:
    return {
        "PYTHONPATH": CUT,
        "MEMORYD_TEST_CUT": f"{at}:{how}",
        "MEMORYD_TEST_CUT_HELD": str(root / "held"),
        "MEMORYD_TEST_CUT_GO": str(root / "go"),
    }


def assert_filed_once(make_daemon, root: Path, board: Path, words: str) -> str:
    """Restart a daemon on ``board`` (it takes in a spool too) and check the board, ``memoryd tasks`` and
    ``memoryd search``: one task holding one brief, found once. Returns the brief's id."""
    spooled = (root / "home" / "state" / "capture-spool.jsonl").exists()
    daemon = make_daemon(root, board=board, socket_path=root / "again.sock").start()
    wait_engine_ready(daemon)
    if spooled:  # filed (or found filed) before it says so
        wait_for(lambda: daemon.events("spool_taken"))
    env = cli_env(root, board, root / "index", daemon.socket)
    tasks = memoryd(env, "tasks")
    assert tasks.returncode == 0 and "could not be read" not in tasks.stderr, tasks.stderr
    assert "1 task on" in tasks.stdout and "  1 brief  " in tasks.stdout, tasks.stdout
    found = memoryd(env, "search", words, "--kind", "briefs", "--json")
    assert found.returncode == 0, found.stderr
    (brief,) = [r["brief_id"] for r in json.loads(found.stdout)["results"]]
    assert daemon.status()["engine"]["briefs"] == 1
    assert [p.name for d in ("briefs", "tasks") for p in (board / d).rglob(".*")] == []  # no temp left
    assert [p.name for p in (board / "briefs").iterdir()] == [brief]
    (task,) = [p.stem for p in (board / "tasks").iterdir()]
    assert json.loads((board / "briefs" / brief / "brief.json").read_text())["task"] == task
    return brief


@pytest.mark.parametrize(
    ("at", "left"),
    [(NEW_TASK_FILE, "the new task and the whole brief"), (SAID_FILE, "said.txt of the brief, no task")],
    ids=["after-the-task", "mid-brief"],
)
def test_a_daemon_killed_while_filing_a_prompt_files_it_once_and_no_empty_task(make_daemon, at, left):
    root = short_tmpdir()
    try:
        daemon = make_daemon(root, env=cut_env(at, "kill", root)).start()
        wait_engine_ready(daemon)
        home, repo = root / "agent-home", make_repo(root)
        env = {"MEMORYD_HOME": daemon.env["MEMORYD_HOME"], "MEMORYD_SOCKET": str(daemon.socket)}
        hook = install(home, env)["claude-code"]["UserPromptSubmit"]
        payload = {
            "session_id": "c-1",
            "cwd": str(repo),
            "hook_event_name": "UserPromptSubmit",
            "prompt": PROMPT,
        }
        out = run_hook(hook, payload, home, repo)
        assert out.code == 0 and out.stdout == "", out.stderr  # no answer: the prompt is spooled
        assert daemon.wait_exit(30) == -signal.SIGKILL, f"not cut ({left}):\n{daemon.log()}"
        brief = assert_filed_once(make_daemon, root, daemon.board, "flaky upload retry")
        meta = json.loads((daemon.board / "briefs" / brief / "brief.json").read_text())
        assert meta["captured"]["session"] == "c-1"
        said = (daemon.board / "briefs" / brief / "said.txt").read_text()
        assert said == f"{PROMPT}\n"
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_brief_whose_daemon_is_killed_while_filing_it_is_filed_once_by_the_command(make_daemon):
    root = short_tmpdir()
    try:
        daemon = make_daemon(root, env=cut_env(NEW_TASK_FILE, "kill", root)).start()
        wait_engine_ready(daemon)
        env = cli_env(root, daemon.board, root / "index", daemon.socket)
        filed = memoryd(env, "brief", PROMPT, "--project", "shop")
        assert daemon.wait_exit(30) == -signal.SIGKILL, daemon.log()
        # asked again: no daemon answers, so it is filed here, where the cut brief is found already filed
        assert filed.returncode == 0 and "asking again" in filed.stderr, filed.stderr
        here = memoryd(env, "tasks")  # the board as this process left it, before any daemon starts
        assert here.returncode == 0 and "could not be read" not in here.stderr, here.stderr
        assert "1 task on" in here.stdout and "  1 brief  " in here.stdout, here.stdout
        assert filed.stdout.strip() == assert_filed_once(
            make_daemon, root, daemon.board, "flaky upload retry"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_brief_whose_filing_call_is_cancelled_by_a_stopping_daemon_is_filed_once(make_daemon):
    # The daemon's writing thread is held right after the new task's file appeared; the daemon is told to
    # stop, which cancels the call filing the brief; only then does the thread go on.
    root = short_tmpdir()
    try:
        daemon = make_daemon(root, env=cut_env(NEW_TASK_FILE, "hold", root)).start()
        wait_engine_ready(daemon)
        env = cli_env(root, daemon.board, root / "index", daemon.socket)
        command = subprocess.Popen(
            [sys.executable, "-m", "memoryd", "brief", PROMPT, "--project", "shop"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd="/",
        )  # fmt: skip
        try:
            wait_for((root / "held").exists)
            daemon.signal(signal.SIGTERM)
            wait_for(lambda: daemon.events("stopped"))  # the filing call was cancelled before this
            (root / "go").touch()
            out, err = command.communicate(timeout=60)
        finally:
            command.kill()
        daemon.wait_exit(30)  # once the held thread went on, or its watchdog gave up on it
        assert command.returncode == 0 and "asking again" in err, err
        assert out.strip() == assert_filed_once(make_daemon, root, daemon.board, "flaky upload retry")
    finally:
        shutil.rmtree(root, ignore_errors=True)

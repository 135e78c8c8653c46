"""``memoryd tasks done|open|move`` against a running daemon: the task and brief files change as a person's
edit would, the daemon's watcher takes them in (``list_tasks``, ``get_task`` through the shim), and a done
task no longer takes captured prompts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

from support.briefs import Shim, wait_engine_ready
from support.daemon import short_tmpdir

FIRST = "Fix the checkout button colour on the payment page of the shopfront"
AGAIN = "checkout button colour on the payment page is still wrong in the shopfront"


def cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memoryd", *args], capture_output=True, text=True, env=env,
                          cwd="/", timeout=120)  # fmt: skip


def eventually(check, what: str, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            assert value, f"not seen within {timeout} s: {what}"
            return value
        time.sleep(0.2)


def test_a_task_is_closed_reopened_and_given_a_moved_brief(make_daemon):
    root = short_tmpdir()
    try:
        board, index = root / "board", root / "index"
        daemon = make_daemon(root, board=board, index=index).start()
        wait_engine_ready(daemon)
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
        env |= {"MEMORYD_HOME": str(root / "cli"), "MEMORYD_BOARD": str(board), "MEMORYD_INDEX": str(index),
                "MEMORYD_SOCKET": str(daemon.socket)}  # fmt: skip
        first = cli(env, "brief", FIRST, "--project", "shop")
        assert first.returncode == 0, first.stderr
        task = json.loads((board / "briefs" / first.stdout.strip() / "brief.json").read_text())["task"]

        done = cli(env, "tasks", "done", task)
        assert done.returncode == 0 and done.stdout.strip() == f"{task} done", done
        assert json.loads((board / "tasks" / f"{task}.json").read_text())["status"] == "done"
        with Shim(daemon.socket, env).initialize() as shim:

            def status_of(t: str) -> str | None:
                rows = shim.ok("list_tasks", project="shop")["tasks"]
                return next((r["status"] for r in rows if r["task_id"] == t), None)

            eventually(lambda: status_of(task) == "done", "the daemon lists the task as done")
            again = cli(env, "brief", AGAIN, "--project", "shop")
            assert again.returncode == 0, again.stderr
            moved = again.stdout.strip()
            other = json.loads((board / "briefs" / moved / "brief.json").read_text())["task"]
            assert other != task  # a done task takes no new prompt, however alike

            assert cli(env, "tasks", "open", task).returncode == 0
            eventually(lambda: status_of(task) == "open", "the daemon lists the task as open again")
            move = cli(env, "tasks", "move", moved, "--to", task)
            assert move.returncode == 0 and move.stdout.strip() == f"{moved} in {task}", move
            eventually(
                lambda: moved in {b["brief_id"] for b in shim.ok("get_task", task_id=task)["briefs"]},
                "get_task lists the moved brief",
            )
            listed = cli(env, "tasks", "--project", "shop", "--status", "open")
            assert task in listed.stdout, listed

        unknown = cli(env, "tasks", "done", "t-20990101-000000", task)
        assert unknown.returncode == 1 and "no task t-20990101-000000" in unknown.stderr, unknown
        assert f"{task} done" in unknown.stdout  # the others are still done
        bad = cli(env, "tasks", "move", "not-a-brief", "--to", task)
        assert bad.returncode == 1 and "invalid brief id" in bad.stderr, bad
        assert cli(env, "tasks", "move", moved).returncode == 2  # --to is required
    finally:
        shutil.rmtree(root, ignore_errors=True)

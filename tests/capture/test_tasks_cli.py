"""``memoryd tasks done|open|move`` against a running daemon: the task and brief files change as a person's
edit would, the daemon's watcher takes them in (``list_tasks``, ``get_task`` through the shim), and a done
task no longer takes captured prompts."""

from __future__ import annotations

import json
import shutil
import time

from support.briefs import Shim, cli_env, memoryd, wait_engine_ready
from support.daemon import short_tmpdir

FIRST = "Fix the checkout button colour on the payment page of the shopfront"
AGAIN = "checkout button colour on the payment page is still wrong in the shopfront"


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
        env = cli_env(root, board, index, daemon.socket)
        first = memoryd(env, "brief", FIRST, "--project", "shop")
        assert first.returncode == 0, first.stderr
        task = json.loads((board / "briefs" / first.stdout.strip() / "brief.json").read_text())["task"]

        done = memoryd(env, "tasks", "done", task)
        assert done.returncode == 0 and done.stdout.strip() == f"{task} done", done
        assert json.loads((board / "tasks" / f"{task}.json").read_text())["status"] == "done"
        with Shim(daemon.socket, env).initialize() as shim:

            def status_of(t: str) -> str | None:
                rows = shim.ok("list_tasks", project="shop")["tasks"]
                return next((r["status"] for r in rows if r["task_id"] == t), None)

            eventually(lambda: status_of(task) == "done", "the daemon lists the task as done")
            again = memoryd(env, "brief", AGAIN, "--project", "shop")
            assert again.returncode == 0, again.stderr
            moved = again.stdout.strip()
            other = json.loads((board / "briefs" / moved / "brief.json").read_text())["task"]
            assert other != task  # a done task takes no new prompt, however alike

            assert memoryd(env, "tasks", "open", task).returncode == 0
            eventually(lambda: status_of(task) == "open", "the daemon lists the task as open again")
            move = memoryd(env, "tasks", "move", moved, "--to", task)
            assert move.returncode == 0 and move.stdout.strip() == f"{moved} in {task}", move
            assert "moves from project" not in move.stderr, move  # same project: nothing to say
            # the task it left had only that brief: still open, now empty, and the command says so
            assert (
                f"task {other} now has no briefs and is still open; `memoryd tasks done {other}`"
                in move.stderr
            )
            eventually(
                lambda: moved in {b["brief_id"] for b in shim.ok("get_task", task_id=task)["briefs"]},
                "get_task lists the moved brief",
            )
            listed = memoryd(env, "tasks", "--project", "shop", "--status", "open")
            assert task in listed.stdout, listed

        unknown = memoryd(env, "tasks", "done", "t-20990101-000000", task)
        assert unknown.returncode == 1 and "no task t-20990101-000000" in unknown.stderr, unknown
        assert f"{task} done" in unknown.stdout  # the others are still done
        gone = memoryd(env, "tasks", "move", "b-20990101-000000", "--to", task)
        assert gone.returncode == 1, gone
        assert gone.stderr.strip() == (
            f"memoryd tasks: cannot move brief b-20990101-000000 to task {task}: there is no brief "
            "b-20990101-000000 on the board (`memoryd search` finds briefs)"
        ), gone
        nowhere = memoryd(env, "tasks", "move", moved, "--to", "t-20990101-000000")
        assert nowhere.returncode == 1, nowhere
        assert nowhere.stderr.startswith(
            f"memoryd tasks: cannot move brief {moved} to task t-20990101-000000: there is no task "
            "t-20990101-000000 on the board"
        ), nowhere
        bad = memoryd(env, "tasks", "move", "not-a-brief", "--to", task)
        assert bad.returncode == 1 and "invalid brief id" in bad.stderr, bad
        assert memoryd(env, "tasks", "move", moved).returncode == 2  # --to is required

        # a brief filed under another project's task takes that project, and the command says so
        elsewhere = memoryd(env, "brief", "the invoice PDF has the wrong VAT number", "--project", "billing")
        assert elsewhere.returncode == 0, elsewhere.stderr
        stray = elsewhere.stdout.strip()
        across = memoryd(env, "tasks", "move", stray, "--to", task)
        assert across.returncode == 0 and across.stdout.strip() == f"{stray} in {task}", across
        assert f"{stray} moves from project billing to project shop" in across.stderr, across
        assert json.loads((board / "briefs" / stray / "brief.json").read_text())["project"] == "shop"
        few = memoryd(env, "tasks", "--limit", "1")
        assert few.returncode == 0 and few.stdout.startswith("1 of 3 tasks on "), few
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_brief_filed_into_a_done_task_reopens_it_and_says_so(make_daemon):
    root = short_tmpdir()
    try:
        board, index = root / "board", root / "index"
        daemon = make_daemon(root, board=board, index=index).start()
        wait_engine_ready(daemon)
        env = cli_env(root, board, index, daemon.socket)
        first = memoryd(env, "brief", FIRST, "--project", "shop")
        task = json.loads((board / "briefs" / first.stdout.strip() / "brief.json").read_text())["task"]
        assert memoryd(env, "tasks", "done", task).returncode == 0

        def status_file() -> str:
            return json.loads((board / "tasks" / f"{task}.json").read_text())["status"]

        with Shim(daemon.socket, env).initialize() as shim:
            late = memoryd(env, "brief", AGAIN, "--task", task)
            assert late.returncode == 0, late.stderr
            assert f"task {task} was done; it is open again" in late.stderr, late.stderr
            assert (
                json.loads((board / "briefs" / late.stdout.strip() / "brief.json").read_text())["task"]
                == task
            )
            assert status_file() == "open"
            # indexed before the answer: the daemon already lists it as open
            rows = shim.ok("list_tasks", project="shop", status="open")["tasks"]
            assert task in {r["task_id"] for r in rows}, rows

        # an open task: nothing to say
        more = memoryd(env, "brief", "and the hover colour too", "--task", task)
        assert more.returncode == 0 and "was done" not in more.stderr, more.stderr

        # with no daemon the brief is filed in the command's process, the same way
        assert memoryd(env, "tasks", "done", task).returncode == 0
        daemon.kill()
        offline = memoryd(env, "brief", "the focus ring as well", "--task", task)
        assert offline.returncode == 0, offline.stderr
        assert f"task {task} was done; it is open again" in offline.stderr, offline.stderr
        assert status_file() == "open"
    finally:
        shutil.rmtree(root, ignore_errors=True)

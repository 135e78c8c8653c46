"""The briefs side through real processes: a real daemon on a copy of the sample board, twelve real shims
at once, ``memoryd status`` and ``memoryd search`` (and its in-process fallback when no daemon runs).

The daemon runs keyword-only (``--model none``) to stay fast; the tools themselves are in
``test_briefs_tools.py`` and ``test_live_board.py``, on daemons served in-process.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import threading
import time
from typing import Any

import pytest

from support.briefs import SHIM, Shim, copy_board, wait_engine_ready
from support.daemon import REPO, DaemonProcess, short_tmpdir

MEMORYD = REPO / ".venv" / "bin" / "memoryd"
TASK = "t-20260903-e84499"  # the sample board's task with three briefs

pytestmark = pytest.mark.skipif(not SHIM.exists(), reason="no .venv/bin/memoryd-shim (run make setup)")


@pytest.fixture(scope="module")
def served(shared_board):
    """One daemon on a copy of the sample board for the module."""
    root = short_tmpdir()
    daemon = None
    try:
        daemon = DaemonProcess(root, board=copy_board(shared_board, root / "board"))
        daemon.start()
        wait_engine_ready(daemon)
        yield daemon
    finally:
        if daemon is not None:
            daemon.kill()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def shim(served):
    s = Shim(served.socket, served.env).initialize()
    yield s
    s.close()


def test_twelve_shims_at_once_with_colliding_ids_each_get_their_own_answer(served, shim):
    # (tests/e2e/test_protocol.py checks the same on raw sockets; this goes through twelve real shims.)
    query = "checkout login error retry"
    assert shim.ok("search_briefs", query=query, limit=12)["shown"] == 12  # enough hits to tell them apart
    ids: list[Any] = [1] * 8 + ["1", "1", 0, 0]
    shims = [Shim(served.socket, served.env) for _ in ids]
    try:
        for s in shims:
            s.initialize()
        start = threading.Barrier(len(shims))

        def ask(s: Shim, i: int) -> None:
            start.wait()
            arguments = {"query": query, "limit": i + 1}  # the answer's length tells whose it is
            s.send(
                {
                    "jsonrpc": "2.0",
                    "id": ids[i],
                    "method": "tools/call",
                    "params": {"name": "search_briefs", "arguments": arguments},
                }
            )

        threads = [threading.Thread(target=ask, args=(s, i)) for i, s in enumerate(shims)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        for i, s in enumerate(shims):
            answer = s.recv(timeout=30)
            assert answer["id"] == ids[i] and type(answer["id"]) is type(ids[i]), (i, answer)
            assert answer["result"]["isError"] is False, answer
            assert answer["result"]["structuredContent"]["shown"] == i + 1, (i, answer)
        time.sleep(0.3)
        for s in shims:  # exactly one answer each
            with pytest.raises(queue.Empty):
                s.recv(timeout=0.01)
    finally:
        for s in shims:
            s.close()
    assert all(s.proc.returncode == 0 for s in shims)


# --- the CLI ----------------------------------------------------------------------------------------------


def run_cli(env: dict[str, str], *argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(MEMORYD), *argv], capture_output=True, text=True, env=env, timeout=timeout, cwd="/"
    )


def test_memoryd_status_fields_and_exit_codes(served):
    with Shim(served.socket, served.env).initialize():
        done = run_cli(served.env, "status", "--json", "--socket", str(served.socket))
    assert done.returncode == 0, done.stderr
    status = json.loads(done.stdout)
    assert status["running"] is True and status["pid"] == served.proc.pid
    assert status["board"] == str(served.board) and status["version"]
    assert status["records"] == status["briefs"] == 200 and status["tasks"] == 60
    assert status["model"]["name"] == "none" and status["model"]["state"] == "disabled"
    assert status["search_mode"] == "keyword" and status["engine"]["state"] == "ready"
    assert set(status["index_freshness"]) == {
        "last_indexed_at",
        "last_indexed_age_s",
        "last_optimize_at",
        "last_optimize_age_s",
    }
    assert status["index_freshness"]["last_indexed_at"].endswith("Z")
    assert status["sessions"] >= 1 and status["uptime_s"] > 0
    assert status["socket"]["path"] == str(served.socket) and status["socket"]["mode"] == "0600"
    assert status["socket"]["owner_uid"] == os.getuid() and status["socket"]["owner"]

    human = run_cli(served.env, "status", "--socket", str(served.socket))
    assert human.returncode == 0 and "is running" in human.stdout and str(served.board) in human.stdout

    nowhere = str(served.root / "none.sock")
    down = run_cli(served.env, "status", "--json", "--socket", nowhere)
    assert down.returncode == 3
    assert json.loads(down.stdout) == {"running": False, "socket": {"path": nowhere}, "settings": []}
    down = run_cli(served.env, "status", "--socket", nowhere)
    assert down.returncode == 3 and "not running" in down.stdout


def test_memoryd_search_goes_through_the_daemon(served):
    done = run_cli(
        served.env,
        "search",
        "idempotency capture retry",
        "--limit",
        "2",
        "--json",
        "--socket",
        str(served.socket),
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["via"] == "daemon" and answer["shown"] == 2 and answer["results"][0]["task_id"] == TASK
    human = run_cli(served.env, "search", "idempotency capture retry", "--socket", str(served.socket))
    assert human.returncode == 0 and TASK in human.stdout and "via daemon" in human.stdout
    assert run_cli(served.env, "search", "x", "--limit", "51", "--socket", str(served.socket)).returncode == 2


def test_memoryd_search_falls_back_in_process_only_without_a_daemon(served):
    root = short_tmpdir()
    try:
        done = run_cli(
            served.env,
            "search",
            "idempotency capture retry",
            "--json",
            "--socket",
            str(root / "none.sock"),
            "--board",
            str(served.board),
            "--index",
            str(root / "index"),
            "--model",
            "none",
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["via"] == "in-process"
    assert "no daemon is running" in done.stderr

"""``memoryd status`` and ``memoryd search`` against a real daemon on a copy of the sample board (the real
shim holds a session open), and ``memoryd search``'s in-process fallback when no daemon runs.

The daemon runs keyword-only (``--model none``) to stay fast; the tools themselves are in
``test_briefs_tools.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

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

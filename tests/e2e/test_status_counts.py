"""``memoryd status`` counts what the board holds: tasks, briefs and the memories agents stored (a new user's
first memories, stored through the real shim, must show up in the one command that says what is there)."""

from __future__ import annotations

import json
import subprocess
import sys

from support.briefs import Shim, wait_engine_ready


def test_status_counts_the_memories_agents_stored(make_daemon):
    daemon = make_daemon().start()
    wait_engine_ready(daemon)
    with Shim(daemon.socket, env=daemon.env, tools="memories").initialize() as shim:
        for content in ("We use pnpm, not npm, in the web repo", "Deploys happen on Tuesdays"):
            shim.ok("store_memory", content=content, tags=["team"])

    def status(*flags: str) -> str:
        done = subprocess.run([sys.executable, "-m", "memoryd", "status", "--socket", str(daemon.socket), *flags],
                              capture_output=True, text=True, env=daemon.env, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert json.loads(status("--json"))["memories"] == 2
    (board,) = [line for line in status().splitlines() if line.lstrip().startswith("board ")]
    assert board.endswith(": 0 tasks, 0 briefs, 2 memories"), board

"""A memory file whose time is not a time, end to end (real daemon, real shim, real files).

``created_at: 'not a date'`` once loaded: ``memory_stats`` showed it as the ``newestMemory`` (the text sorts
after every year) and recency never aged it. It is a broken field like ``importance: .inf``: the file is
skipped with its reason, and ``memory_stats``, ``memoryd status`` and ``memoryd doctor`` say so; the
memories beside it load.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys

from support.daemon import DaemonProcess, short_tmpdir
from support.memories import MemShim, wait_engine_ready

GOOD = "Release builds are signed on the CI runner, never on a laptop"
BAD = "Staging certificates rotate every ninety days zqbadtime"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def memory_file(content: str, created_at: str) -> str:
    return f"---\ntags: [ops]\nimportance: 3\ncreated_at: {created_at}\n---\n{content}\n"


def test_a_memory_whose_created_at_is_not_a_date_is_skipped_and_reported():
    root = short_tmpdir()
    home = root / "mh"  # MEMORYD_HOME: the socket `status` and `doctor` look for
    board = root / "board"
    (board / "memories").mkdir(parents=True)
    (board / "memories" / f"{sha(GOOD)}.md").write_text(memory_file(GOOD, "'2026-01-05T10:00:00Z'"))
    bad_path = f"memories/{sha(BAD)}.md"
    (board / bad_path).write_text(memory_file(BAD, "'not a date'"))
    daemon = DaemonProcess(
        root, socket_path=home / "state" / "memoryd.sock", board=board, env={"MEMORYD_HOME": str(home)}
    )
    try:
        daemon.start()
        wait_engine_ready(daemon)
        with MemShim(daemon.socket, daemon.env).initialize() as s:
            stats = s.ok("memory_stats")
            assert (stats["memoryCount"], stats["skippedFiles"]) == (1, 1), stats
            assert stats["oldestMemory"] == stats["newestMemory"] == "2026-01-05T10:00:00Z", stats
            assert s.ok("search_memories", query="zqbadtime") == []
            err = s.err("get_memory", hash=sha(BAD))
            assert err["code"] == "E_BROKEN_FILE" and "created_at" in err["message"], err
        user = {**os.environ, "HOME": str(root), "MEMORYD_HOME": str(home)}
        status = cli_json("status", user)
        assert status["skipped"] == [
            {"path": bad_path, "reason": "created_at is not an ISO-8601 time (like 2026-01-05T10:00:00Z)"}
        ], status
        report = cli_json("doctor", user)
        check = {c["name"]: c for c in report["checks"]}["board files"]
        assert check["state"] == "problem" and bad_path in check["detail"], check
        assert "created_at is not an ISO-8601 time" in check["detail"], check
    finally:
        daemon.kill()
        shutil.rmtree(root, ignore_errors=True)


def cli_json(command: str, env: dict[str, str]) -> dict:
    """``memoryd <command> --json`` as the user runs it, parsed."""
    done = subprocess.run(
        [sys.executable, "-m", "memoryd", command, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
    )
    return json.loads(done.stdout)

"""A session log at memoryd's read limit refuses the turn that would pass it (real files; real daemon and shim).

A log past :data:`MAX_LOG_BYTES` is refused whole when read. ``add_memory`` used to append past it and answer
"Memory successfully added": from then on ``get_session_memories`` said "too large" and every turn of the
session left the search at its next indexing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoryd.kinds.sessions.files import (
    MAX_LOG_BYTES,
    Interaction,
    SessionFull,
    append_interaction,
    read_log,
)
from support.briefs import Shim, wait_engine_ready
from support.daemon import DaemonProcess, short_tmpdir

SESSION = "nearly-full"


def fill(board: Path, room: int) -> Path:
    """``sessions/<SESSION>.jsonl`` of whole turns, ``room`` bytes short of :data:`MAX_LOG_BYTES`."""
    log = board / "sessions" / f"{SESSION}.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)

    def line(n: int, chars: int) -> str:
        return json.dumps(Interaction.new(SESSION, f"turn {n}", "", "x" * chars).to_json()) + "\n"

    target, size, n = MAX_LOG_BYTES - room, 0, 0
    with log.open("w") as f:
        while size < target:
            left = target - size
            chars = 2**20 if left > 2**21 else left - len(line(n, 0))  # the last turn fills it exactly
            f.write(text := line(n, chars))
            size, n = size + len(text), n + 1
    assert log.stat().st_size == target
    return log


def test_an_append_that_would_pass_the_read_limit_is_refused_and_the_log_stays_readable(tmp_path: Path):
    board = tmp_path / "board"
    log = fill(board, room=500)
    turns = len(read_log(board, SESSION).interactions)
    with pytest.raises(SessionFull, match="is full"):
        append_interaction(board, Interaction.new(SESSION, "one more", "", "y" * 1000))
    assert log.stat().st_size == MAX_LOG_BYTES - 500
    append_interaction(board, Interaction.new(SESSION, "a short one", "", "fits"))  # what fits is added
    assert len(read_log(board, SESSION).interactions) == turns + 1


def test_add_memory_says_the_session_is_full_and_adds_nothing():
    root = short_tmpdir()
    daemon = DaemonProcess(root).start()
    try:
        wait_engine_ready(daemon)
        log = fill(daemon.board, room=500)
        with Shim(daemon.socket, env=daemon.env, tools="sessions").initialize() as shim:
            answer = shim.call(
                "add_memory", prompt="one more", thought="", response="y" * 1000, sessionId=SESSION
            )
            result = answer["result"]
            assert result["isError"] is True, result
            assert "is full" in result["content"][0]["text"] and "new session" in result["content"][0]["text"]
        assert log.stat().st_size == MAX_LOG_BYTES - 500
    finally:
        daemon.kill()

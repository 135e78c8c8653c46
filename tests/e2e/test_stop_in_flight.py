"""A daemon told to stop (SIGTERM: ``memoryd stop``, a service restart, an upgrade) while agents' calls are in
flight: a call that wrote the board is answered with its result, never "memoryd restarted; please retry".

An agent retries what it is told to retry; ``add_memory`` appends a turn each time it runs, so a retry of a
call that had already written its turn leaves that turn twice in the session.
"""

from __future__ import annotations

import signal
import time

from support.briefs import Shim

RETRY = "memoryd restarted; please retry"
CALLS = 8


def turns(board, session_id: str) -> int:
    """The turns ``sessions/<id>.jsonl`` holds on the board (0 when the file is absent)."""
    path = board / "sessions" / f"{session_id}.jsonl"
    return len(path.read_bytes().splitlines()) if path.exists() else 0


def test_a_call_that_wrote_the_board_before_a_stop_is_answered_with_its_result(make_daemon):
    daemon = make_daemon().start()
    shim = Shim(daemon.socket, env=daemon.env, tools="all")
    try:
        shim.initialize()
        sessions = [f"stop-{n}" for n in range(CALLS)]
        for n, session_id in enumerate(sessions):
            arguments = {
                "prompt": f"turn {n} " + "words " * 8000,
                "thought": "",
                "response": "ok",
                "sessionId": session_id,
            }
            shim.send({
                "jsonrpc": "2.0", "id": 100 + n, "method": "tools/call",
                "params": {"name": "add_memory", "arguments": arguments},
            })  # fmt: skip
        # stop once the first turn is on the board: the others are being written or indexed now
        deadline = time.monotonic() + 60
        while not any(turns(daemon.board, s) for s in sessions) and time.monotonic() < deadline:
            time.sleep(0.001)
        daemon.signal(signal.SIGTERM)
        answers = {}
        while len(answers) < CALLS:
            answer = shim.recv(timeout=30)
            answers[answer["id"] - 100] = answer
        assert daemon.wait_exit(30) == 0
    finally:
        shim.kill()
    told_to_retry = [n for n, a in answers.items() if a.get("error", {}).get("message") == RETRY]
    written = {n: turns(daemon.board, session_id) for n, session_id in enumerate(sessions)}
    for n, answer in answers.items():
        if n in told_to_retry:
            # never run: a retry writes the turn once
            assert written[n] == 0, f"call {n} was told to retry but its turn is on the board: {answer}"
        else:
            assert answer["result"]["isError"] is False and written[n] == 1, (answer, written[n])

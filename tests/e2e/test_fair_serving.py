"""One session's heavy input never holds up the others: a real ``memoryd serve``, raw JSON-RPC lines.

* A ~10 MB ``store_memories`` line is parsed, its arguments checked and its items prepared off the event
  loop: a ping sent after it, on its own session and on another, is answered before it.
* Big lines that are not valid requests get the same answers as small ones.
* A flood of notifications no handler takes reaches nothing, is logged once per method, counted per
  session, and a request sent after it is answered.

Orderings are asserted, never durations.
"""

from __future__ import annotations

import json
import threading
import time

from support.bigcall import big_store_line
from support.briefs import wait_engine_ready
from support.sockets import RawConnection

PING = {"jsonrpc": "2.0", "id": "marker", "method": "ping"}


def test_a_10_mb_call_holds_up_no_other_session(make_daemon):
    daemon = make_daemon().start()
    wait_engine_ready(daemon)
    line = big_store_line("store")
    assert len(line) > 10_000_000
    with (
        RawConnection(daemon.socket, tools=["memories"], timeout=120) as big,
        RawConnection(daemon.socket, tools=["memories"]) as other,
    ):
        big.initialize()
        other.initialize()
        events: list[tuple[str, object]] = []
        answers: dict[object, dict] = {}

        def read_big() -> None:
            for _ in range(2):
                answer = big.recv()
                answers[answer["id"]] = answer
                events.append(("big", answer["id"]))

        reader = threading.Thread(target=read_big, daemon=True)
        reader.start()
        big.sock.sendall(line + b"\n" + json.dumps(PING).encode() + b"\n")
        deadline = time.monotonic() + 120
        while not events and reader.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        # the ping after the big call on its own session, then five on another, all before the call's answer
        for n in range(5):
            assert other.request("ping", id=n) == {"jsonrpc": "2.0", "id": n, "result": {}}
            events.append(("other", n))
        reader.join(120)
        assert events == [("big", "marker"), *(("other", n) for n in range(5)), ("big", "store")], events
    refusal = answers["store"]["result"]
    assert refusal["isError"] is True and "items/49: 'tags' is a required property" in str(refusal), refusal


BIG = b"x" * 100_000


def test_big_lines_that_are_no_valid_request_are_answered_as_small_ones_are(make_daemon):
    daemon = make_daemon().start()
    with RawConnection(daemon.socket) as conn:
        conn.initialize()
        cases = [
            (b'{"jsonrpc":"2.0","id":1,"method":"ping","pad":"' + BIG + b'",}', -32700, None),
            (b'["' + BIG + b'"]', -32600, None),
            (
                b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"diag_echo","arguments":["'
                + BIG
                + b'"]}}',
                -32602,
                2,
            ),
            (
                b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"diag_echo","arguments":'
                b'{"value":"' + BIG + b'","extra":1}}}',
                None,
                3,
            ),
        ]
        for line, code, id in cases:
            conn.send(line)
            answer = conn.recv()
            if isinstance(answer, list):  # a batch: one error per element
                (answer,) = answer
            assert answer["id"] == id, answer
            if code is None:  # a tool call whose arguments break the schema: a tool execution error
                assert answer["result"]["isError"] is True, answer
                assert "additional properties" in answer["result"]["content"][0]["text"].lower(), answer
            else:
                assert answer["error"]["code"] == code, answer
        assert conn.request("ping", id="after") == {"jsonrpc": "2.0", "id": "after", "result": {}}


def test_notifications_no_handler_takes_are_dropped_logged_once_and_counted(make_daemon):
    daemon = make_daemon().start()
    flood = 20_000
    names = 500  # notifications of ever new names: the log still holds a bounded number of lines
    with RawConnection(daemon.socket, timeout=120) as conn:
        conn.initialize()
        one = json.dumps({"jsonrpc": "2.0", "method": "notifications/flood_test", "params": {"n": 1}})
        lines = [one.encode()] * flood
        lines += [
            json.dumps({"jsonrpc": "2.0", "method": f"notifications/name_{i}"}).encode() for i in range(names)
        ]
        conn.sock.sendall(b"\n".join(lines) + b"\n")
        assert conn.request("ping", id="after") == {"jsonrpc": "2.0", "id": "after", "result": {}}
        # the notifications the SDK acts on still reach it: a cancelled call is never answered
        conn.send(
            {
                "jsonrpc": "2.0",
                "id": "slow",
                "method": "tools/call",
                "params": {"name": "diag_sleep", "arguments": {"seconds": 1.0}},
            }
        )
        conn.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "slow"}})
        time.sleep(1.5)  # past the moment the call would have been answered
        assert conn.request("ping", id="then") == {"jsonrpc": "2.0", "id": "then", "result": {}}
    deadline = time.monotonic() + 30
    while not daemon.events("session_closed") and time.monotonic() < deadline:
        time.sleep(0.05)
    ignored = daemon.events("notification_ignored")
    assert [e["method"] for e in ignored].count("notifications/flood_test") == 1, ignored
    assert len(ignored) <= 40, len(ignored)
    assert len(daemon.events("notifications_ignored_unlogged")) == 1
    (closed,) = daemon.events("session_closed")
    assert closed["ignored_notifications"] == flood + names, closed

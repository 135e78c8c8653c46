"""The serving layer end to end: a real ``memoryd serve`` process, raw JSON-RPC lines and the official SDK client.

Covers the JSON-RPC hygiene list, both MCP protocol eras, tool-call timeouts and cancellation,
large and over-cap lines, colliding ids across connections, and the hello / status control lines.
The tools used are the test-only ``_diagnostics`` group (``MEMORYD_TEST_TOOLS=1``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import stat
import struct
import subprocess
import sys
import time

import pytest

from memoryd_shim import rendezvous
from support.daemon import REPO
from support.sockets import RawConnection, socket_transport

HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN = "2026-07-28"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


@pytest.fixture
def conn(daemon):
    with RawConnection(daemon.socket) as c:
        c.initialize()
        yield c


def assert_error(answer: dict, code: int, id: object) -> None:
    assert answer.get("jsonrpc") == "2.0", answer
    assert "result" not in answer, answer
    assert answer["error"]["code"] == code, answer
    assert type(answer["id"]) is type(id) and answer["id"] == id, answer


def next_is_ping_answer(c: RawConnection, id: object = "probe") -> None:
    """Nothing was answered in between: the very next line is the answer to this ping."""
    answer = c.request("ping", id=id)
    assert answer == {"jsonrpc": "2.0", "id": id, "result": {}}, answer


# --- hello, status, socket -----------------------------------------------------------------------------


def test_hello_is_answered_ready_with_the_daemon_version_and_board(daemon):
    status = daemon.status()
    with RawConnection(daemon.socket) as c:
        assert c.ready == {"memoryd": "ready", "v": 1, "version": status["version"], "board": status["board"]}
    assert status["board"] == str(daemon.board)


@pytest.mark.parametrize(
    "hello",
    [
        b"not json",
        b'{"memoryd":"hello","v":99}',
        b'{"memoryd":"hello","v":1,"tools":["nope"]}',
        b"[]",
        b"[" * 3000 + b"]" * 3000,  # nested past the parser's recursion: still JSON, still an answer
        b'{"memoryd":"capture","v":1,"request":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    ],
)
def test_bad_hello_gets_one_error_line_then_close(daemon, hello):
    with RawConnection(daemon.socket, hello=hello) as c:
        assert c.ready["memoryd"] == "error" and c.ready["message"]
        assert c.at_eof()


def test_status_control_line(daemon):
    with RawConnection(daemon.socket) as s1, RawConnection(daemon.socket):
        s1.initialize()
        status = daemon.status()
    assert status["running"] is True and status["pid"] > 0 and status["uptime_s"] > 0
    assert status["sessions"] >= 2  # sessions of earlier tests may still be closing
    assert status["socket"] == {
        "path": str(daemon.socket),
        "exists": True,
        "mode": "0600",
        "owner_uid": os.getuid(),
        "owner": status["socket"]["owner"],
    }
    assert status["engine"]["state"] in {"disabled", "loading", "ready", "failed"}


def test_control_ask_status_for_the_cli(daemon, tmp_path):
    from memoryd.serve import control

    status = control.ask_status(daemon.socket)
    assert status["pid"] == daemon.proc.pid and status["socket"]["mode"] == "0600"
    assert control.ask_status(tmp_path / "nothing.sock") is None


def test_socket_is_0600_in_a_0700_directory(daemon):
    assert stat.S_IMODE(daemon.socket.stat().st_mode) == 0o600
    assert stat.S_IMODE(daemon.socket.parent.stat().st_mode) == 0o700


# --- JSON-RPC hygiene ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        b"{bad",
        b'{"jsonrpc":"2.0","id":1,',
        b"\xff\xfe{}",
        b'{"jsonrpc":"2.0","id":1,"method":"ping","x":NaN}',
        b'{"jsonrpc":"2.0","id":1e999,"method":"ping"}',
    ],
)
def test_invalid_json_is_a_parse_error_with_null_id(conn, line):
    conn.send(line)
    assert_error(conn.recv(), -32700, None)
    next_is_ping_answer(conn)


@pytest.mark.parametrize("line", [b"null", b"42", b'"str"', b"true", b"[]", b"{}"])
def test_non_request_values_are_invalid_requests(conn, line):
    conn.send(line)
    assert_error(conn.recv(), -32600, None)
    next_is_ping_answer(conn)


def test_a_batch_is_answered_with_errors_never_silence(conn):
    conn.send(b'[{"jsonrpc":"2.0","id":7,"method":"ping"},{"jsonrpc":"2.0","method":"x"},1]')
    answers = conn.recv()
    assert isinstance(answers, list) and len(answers) == 2
    assert_error(answers[0], -32600, 7)
    assert_error(answers[1], -32600, None)
    conn.send(b'[{"jsonrpc":"2.0","method":"notifications/initialized"}]')
    assert_error(conn.recv(), -32600, None)
    next_is_ping_answer(conn)


@pytest.mark.parametrize(
    ("message", "code", "echo"),
    [
        ({"id": 5, "method": "ping"}, -32600, 5),  # no "jsonrpc"
        ({"jsonrpc": "1.0", "id": "a", "method": "ping"}, -32600, "a"),
        ({"jsonrpc": "2.0", "id": 6, "method": 42}, -32600, 6),
        ({"jsonrpc": "2.0", "id": None, "method": "ping"}, -32600, None),
        ({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}, -32600, None),
        ({"jsonrpc": "2.0", "id": True, "method": "ping"}, -32600, None),
        ({"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}, -32600, None),
        ({"jsonrpc": "2.0", "id": 8}, -32600, 8),
        ({"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": [1]}, -32602, 9),
        ({"jsonrpc": "2.0", "id": 10, "method": "tools/list", "params": "x"}, -32600, 10),
        ({"method": 1, "params": "bar"}, -32600, None),
    ],
)
def test_invalid_request_objects(conn, message, code, echo):
    conn.send(message)
    assert_error(conn.recv(), code, echo)
    next_is_ping_answer(conn)


@pytest.mark.parametrize(
    ("params", "said"),
    [
        (
            {"name": "diag_echo", "arguments": "str"},
            "params.arguments must be an object of named arguments, not a string",
        ),
        ({"name": "diag_echo", "arguments": [1, 2]}, "not an array"),
        ({"name": "diag_echo", "arguments": 5}, "not a number"),
        ({"arguments": {}}, "tools/call needs params.name"),
        ({"name": 7}, "tools/call needs params.name"),
    ],
)
def test_a_malformed_tool_call_says_what_is_wrong(conn, params, said):
    conn.send({"jsonrpc": "2.0", "id": "bad", "method": "tools/call", "params": params})
    answer = conn.recv()
    assert_error(answer, -32602, "bad")
    assert said in answer["error"]["message"], answer
    next_is_ping_answer(conn)


def test_notifications_are_never_answered(conn):
    for message in [
        {"jsonrpc": "2.0", "method": "no/such/notification"},
        {
            "jsonrpc": "2.0",
            "method": "tools/call",
            "params": {"name": "diag_echo", "arguments": {"value": 1}},
        },
        {"jsonrpc": "2.0", "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 12345}},
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": [1, 2]},
        {"jsonrpc": "2.0", "id": 77, "result": {}},  # a response to nothing: not answered either
        {"jsonrpc": "2.0", "id": 78, "error": {"code": 1, "message": "x"}},
    ]:
        conn.send(message)
    conn.send(b"")  # a blank keep-alive line
    next_is_ping_answer(conn)


IDS = [0, "0", 1, "1", -1, "", "é🙂", 2**70, -(2**70), 2**63, "x" * 100_000, "\ud800"]


def test_every_request_gets_one_answer_with_its_exact_id(conn):
    for id in IDS:
        conn.send({"jsonrpc": "2.0", "id": id, "method": "ping"})
    for id in IDS:
        answer = conn.recv()
        assert type(answer["id"]) is type(id) and answer["id"] == id
        assert answer["result"] == {}
    next_is_ping_answer(conn)


def test_a_second_request_with_an_id_in_flight_is_refused_and_the_first_is_answered(conn):
    """JSON-RPC: an id names one request; MCP: "The request ID MUST NOT have been previously used by the
    requestor within the same session". Types count: 7 and "7" are different ids."""
    sleep = {"name": "diag_sleep", "arguments": {"seconds": 0.5}}
    conn.send({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": sleep})
    conn.send(
        {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "diag_echo", "arguments": {"value": 2}},
        }
    )
    conn.send({"jsonrpc": "2.0", "id": 7, "method": "ping"})
    conn.send({"jsonrpc": "2.0", "id": "7", "method": "ping"})
    refused = [conn.recv(), conn.recv()]
    for answer in refused:
        assert_error(answer, -32600, 7)
        assert "already in use" in answer["error"]["message"]
    assert conn.recv() == {"jsonrpc": "2.0", "id": "7", "result": {}}
    first = conn.recv()
    assert first["id"] == 7 and first["result"]["structuredContent"] == {"slept_s": 0.5}, first
    # answered, so the id is free again
    again = conn.call("diag_echo", {"value": "again"}, id=7)
    assert again["result"]["structuredContent"]["value"] == "again"
    next_is_ping_answer(conn)


def test_ids_round_trip_through_tool_calls_and_errors(conn):
    conn.send(
        {
            "jsonrpc": "2.0",
            "id": 2**70,
            "method": "tools/call",
            "params": {"name": "diag_echo", "arguments": {"value": 1}},
        }
    )
    conn.send({"jsonrpc": "2.0", "id": "2", "method": "no/such/method"})
    conn.send(
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "nope", "arguments": {}}}
    )
    answers = {json.dumps(a["id"]): a for a in (conn.recv(), conn.recv(), conn.recv())}
    assert answers[json.dumps(2**70)]["result"]["structuredContent"]["value"] == 1
    assert_error(answers['"2"'], -32601, "2")
    assert_error(answers["2"], -32602, 2)


def test_unknown_methods_are_method_not_found(conn):
    for method in ("no/such/method", "constructor", "__proto__", "rpc.discover", ""):
        assert_error(conn.request(method, id=method or "empty"), -32601, method or "empty")


@pytest.mark.parametrize(
    "name", ["constructor", "__class__", "__proto__", "hasOwnProperty", "toString", "", "diag_echo "]
)
def test_unknown_tool_names_are_unknown(conn, name):
    answer = conn.call(name, {"value": 1}, id="t")
    assert_error(answer, -32602, "t")
    assert "Unknown tool" in answer["error"]["message"]


def test_an_unknown_tool_name_is_not_echoed_whole(conn):
    # A name is at most 64 characters; a 100 KB one (a pasted file, a key) must not come back in full.
    answer = conn.call("x" * 100_000, {}, id="long")
    assert_error(answer, -32602, "long")
    message = answer["error"]["message"]
    assert message.startswith("Unknown tool: 'xxx") and "100,000 characters" in message and len(message) < 200


def test_tool_groups_pick_what_a_session_sees(daemon):
    with RawConnection(daemon.socket, tools=["all"]) as every:
        every.initialize()
        all_tools = {t["name"] for t in every.request("tools/list")["result"]["tools"]}
    assert {"diag_echo", "diag_sleep", "diag_fail"} <= all_tools  # test tools are in every session
    for name in all_tools:
        assert rendezvous_name_ok(name)
    per_group = {}
    for group in rendezvous.TOOL_GROUPS:
        with RawConnection(daemon.socket, tools=[group]) as c:
            c.initialize()
            per_group[group] = {t["name"] for t in c.request("tools/list")["result"]["tools"]} - {
                "diag_echo",
                "diag_sleep",
                "diag_fail",
            }
            assert per_group[group] <= all_tools
    for group in rendezvous.TOOL_GROUPS:
        others = set().union(*(tools for g, tools in per_group.items() if g != group)) - per_group[group]
        with RawConnection(daemon.socket, tools=[group]) as c:
            c.initialize()
            for name in sorted(others):
                assert_error(c.call(name, {}, id=name), -32602, name)


def rendezvous_name_ok(name: str) -> bool:
    import re

    return re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", name) is not None


# --- tools: arguments, results, failures ----------------------------------------------------------------


BAD_ARGUMENTS = [
    ("diag_echo", {}),
    ("diag_echo", {"value": 1, "extra": 2}),
    ("diag_sleep", {"seconds": "x"}),
    ("diag_sleep", {"seconds": -1}),
    ("diag_fail", {"kind": "other"}),
    ("diag_echo", {"value": "\ud800"}),  # a lone surrogate: valid JSON, not Unicode text
]


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18"])
def test_invalid_arguments_are_invalid_params_before_2025_11_25(daemon, version):
    with RawConnection(daemon.socket) as c:
        assert c.initialize(version)["result"]["protocolVersion"] == version
        for i, (name, args) in enumerate(BAD_ARGUMENTS):
            answer = c.call(name, args, id=i)
            assert_error(answer, -32602, i)
            assert name in answer["error"]["message"]
        assert_error(c.call("diag_fail", {"kind": "invalid_params"}, id="ip"), -32602, "ip")


def test_invalid_arguments_are_tool_execution_errors_from_2025_11_25(conn):
    """MCP 2025-11-25 "Tools" -> "Error Handling": input validation errors are tool execution errors, so
    the model reads which argument was wrong and can fix its call."""
    for i, (name, args) in enumerate(BAD_ARGUMENTS):
        answer = conn.call(name, args, id=i)
        assert answer["id"] == i and "error" not in answer, answer
        result = answer["result"]
        assert result["isError"] is True and "structuredContent" not in result, result
        assert f"Invalid arguments for tool {name}" in result["content"][0]["text"]
    handler_side = conn.call("diag_fail", {"kind": "invalid_params"}, id="ip")["result"]
    assert (
        handler_side["isError"] is True
        and "handler-side argument check" in handler_side["content"][0]["text"]
    )
    conn.send({"jsonrpc": "2.0", "id": "p", "method": "tools/call", "params": {"arguments": {}}})
    assert_error(conn.recv(), -32602, "p")  # no tool name at all: a malformed request, a protocol error


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("search_briefs", {"query": "login", "limit": 1.0}),
        ("list_tasks", {"limit": 2.0}),
        ("get_context", {"tokens": 100.0}),
        ("memo_search", {"query": "x", "limit": 1.0}),
        ("get_all_summaries", {"limit": 1.0, "offset": 0.0}),
        ("search_memories", {"query": "x", "limit": 3.0}),
    ],
)
def test_a_whole_number_written_with_a_fraction_is_an_integer(daemon, name, args):
    """JSON Schema counts 1.0 as an integer, and Python clients send integers that way: the schema takes it,
    so the tool must too (as the integer), never crash on it or echo it as a float."""
    with RawConnection(daemon.socket, tools=["all"]) as c:
        c.initialize()
        result = c.call(name, args, id=1)["result"]
    text = result["content"][0]["text"]
    assert not result.get("isError"), text
    assert ".0 " not in text and "internal error" not in text, text


def test_stateless_era_argument_errors_are_tool_execution_errors(daemon):
    with RawConnection(daemon.socket) as c:
        params = {"name": "diag_echo", "arguments": {}, "_meta": ENVELOPE}
        result = c.request("tools/call", params, id="a")["result"]
        assert result["isError"] is True and "'value' is a required property" in result["content"][0]["text"]
        unknown = c.request("tools/call", {**params, "name": "nope"}, id="u")
        assert_error(unknown, -32602, "u")  # an unknown tool stays a protocol error in every era


def test_cancelled_calls_are_never_answered(conn):
    def sleep_call(id: object, seconds: float) -> dict:
        return {
            "jsonrpc": "2.0",
            "id": id,
            "method": "tools/call",
            "params": {"name": "diag_sleep", "arguments": {"seconds": seconds}},
        }

    started = time.monotonic()
    conn.send(sleep_call(5, 1.0))
    conn.send(sleep_call("5", 0.3))
    time.sleep(0.1)
    # Cancel the integer 5 only; the string "5" is a different request and must still be answered.
    conn.send(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5, "reason": "test"}}
    )
    answer = conn.recv()
    assert answer["id"] == "5" and answer["result"]["isError"] is False
    time.sleep(max(0.0, 1.5 - (time.monotonic() - started)))  # past the moment id 5 would have finished
    next_is_ping_answer(conn, id="after")  # so nothing for id 5 was ever sent


# --- protocol versions and eras -----------------------------------------------------------------------------


@pytest.mark.parametrize("version", HANDSHAKE_VERSIONS)
def test_initialize_negotiates_each_handshake_version(daemon, version):
    with RawConnection(daemon.socket) as c:
        result = c.initialize(version)["result"]
        assert result["protocolVersion"] == version
        assert result["serverInfo"]["name"] == "memoryd"
        tools = {t["name"]: t for t in c.request("tools/list")["result"]["tools"]}
        call = c.call("diag_echo", {"value": [1]})["result"]
    text = json.loads(call["content"][0]["text"])
    assert text["value"] == [1]
    # Older revisions have no structured output; the SDK still sends it and old clients ignore it, so the
    # text must carry the same data in every era.
    assert call.get("structuredContent", text) == text
    assert tools["diag_echo"]["inputSchema"]["type"] == "object"


def test_requests_before_initialize_get_an_error_that_says_so(daemon):
    with RawConnection(daemon.socket) as c:
        for i, method in enumerate(["tools/call", "tools/list", "resources/list"]):
            params = {"name": "diag_echo", "arguments": {"value": 1}} if method == "tools/call" else {}
            answer = c.request(method, params, id=i)
            assert_error(answer, -32600, i)
            assert answer["error"]["message"].startswith(
                "Session not initialized: send an initialize request"
            )
            assert method in answer["error"]["message"]
        assert c.request("ping", id="p") == {"jsonrpc": "2.0", "id": "p", "result": {}}
        assert_error(c.request("no/such/method", id="m"), -32601, "m")
        assert c.initialize()["result"]["protocolVersion"] == "2025-11-25"  # the same connection goes on
        assert c.call("diag_echo", {"value": 1}, id="c")["result"]["structuredContent"]["value"] == 1


def test_a_failed_initialize_leaves_the_session_uninitialized(daemon):
    with RawConnection(daemon.socket) as c:
        assert_error(c.request("initialize", {"capabilities": {}}, id="bad"), -32602, "bad")
        answer = c.call("diag_echo", {"value": 1}, id="c")
        assert_error(answer, -32600, "c")
        assert "Session not initialized" in answer["error"]["message"]


INIT_PARAMS = {"capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}


@pytest.mark.parametrize(
    ("method", "params", "named", "accepted"),
    [
        ("initialize", {**INIT_PARAMS, "protocolVersion": 20251125}, "params.protocolVersion", "2025-11-25"),
        ("initialize", INIT_PARAMS, "params.protocolVersion", "it is missing"),
        (
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": []},
            "params.capabilities",
            "object",
        ),
        ("tools/list", {"cursor": 5}, "params.cursor", "must be a string, the nextCursor"),
        ("resources/list", {"cursor": None}, "params.cursor", "must be a string"),
        ("logging/setLevel", {"level": "loud"}, "params.level", "debug, info, notice, warning, error"),
    ],
)
def test_bad_params_are_told_by_name_and_what_is_accepted(daemon, method, params, named, accepted):
    with RawConnection(daemon.socket) as c:
        if method != "initialize":
            c.initialize()
        answer = c.request(method, params, id="bad")
        assert_error(answer, -32602, "bad")
        message = answer["error"]["message"]
        assert method in message and named in message and accepted in message, message
        assert "Invalid request parameters" not in message
        next_is_ping_answer(c)


def test_an_unknown_method_that_is_not_utf8_text_is_not_echoed_as_it_came(daemon):
    # "\ud800" is valid JSON but no text: echoed, it is a lone surrogate (invalid UTF-8) in the client
    with RawConnection(daemon.socket) as c:
        c.initialize()
        c.send(b'{"jsonrpc":"2.0","id":"m","method":"no/such\\ud800/method"}')
        line = c.readline()
        line.decode("utf-8")
        assert b"\\ud800" not in line.lower(), line
        answer = json.loads(line)
        assert_error(answer, -32601, "m")
        assert answer["error"]["data"] == "no/such\ufffd/method", answer
        c.send(b'{"jsonrpc":"2.0","method":"notifications/no\\udc00"}')  # a notification: never answered
        next_is_ping_answer(c)


@pytest.mark.parametrize("asked", ["2099-01-01", "1.0", MODERN])
def test_initialize_never_echoes_an_unsupported_version(daemon, asked):
    with RawConnection(daemon.socket) as c:
        assert c.initialize(asked)["result"]["protocolVersion"] == "2025-11-25"


def test_stateless_era_discover_then_calls(daemon):
    with RawConnection(daemon.socket) as c:
        result = c.request("server/discover", {"_meta": ENVELOPE}, id="d")["result"]
        assert result["supportedVersions"] == [MODERN]
        assert "tools" in result["capabilities"]
        listed = c.request("tools/list", {"_meta": ENVELOPE}, id="l")["result"]
        assert "diag_echo" in {t["name"] for t in listed["tools"]}
        call = c.request("tools/call", {"name": "diag_echo", "arguments": {"value": 3}, "_meta": ENVELOPE})
        assert call["result"]["structuredContent"]["value"] == 3
        answer = c.request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "x", "version": "0"},
            },
            id="late-init",
        )
        assert_error(answer, -32022, "late-init")


def test_a_probe_at_an_unknown_modern_version_leaves_room_to_fall_back(daemon):
    newer = {**ENVELOPE, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}
    with RawConnection(daemon.socket) as c:
        answer = c.request("server/discover", {"_meta": newer}, id="probe")
        assert_error(answer, -32022, "probe")
        assert {"2025-11-25", MODERN} <= set(answer["error"]["data"]["supported"])
        assert answer["error"]["data"]["requested"] == "2099-01-01"
        assert c.initialize()["result"]["protocolVersion"] == "2025-11-25"  # the same connection falls back
    with RawConnection(daemon.socket) as c:
        c.request("server/discover", {"_meta": newer}, id="probe")
        assert c.request("server/discover", {"_meta": ENVELOPE}, id="again")["result"][
            "supportedVersions"
        ] == [MODERN]


def test_discover_without_envelope_is_answered_not_silent(daemon):
    with RawConnection(daemon.socket) as c:
        started = time.monotonic()
        answer = c.request("server/discover", id=1)
        assert "error" in answer and time.monotonic() - started < 2
        assert c.initialize()["result"]["protocolVersion"] == "2025-11-25"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_official_sdk_client(daemon, mode):
    from mcp.client import Client

    async def main() -> None:
        async with Client(socket_transport(daemon.socket), mode=mode) as client:
            assert client.session.protocol_version == (MODERN if mode == "auto" else "2025-11-25")
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"diag_echo", "diag_sleep", "diag_fail"} <= names
            result = await client.call_tool("diag_echo", {"value": {"mode": mode}})
            assert result.is_error is False
            assert result.structured_content["value"] == {"mode": mode}
            assert json.loads(result.content[0].text) == result.structured_content

    started = time.monotonic()
    asyncio.run(main())
    assert time.monotonic() - started < 9  # auto mode never waits out a silent discover (10 s)


SHIM = REPO / ".venv" / "bin" / "memoryd-shim"


@pytest.mark.skipif(
    not (REPO / "shim" / "memoryd_shim" / "relay.py").exists() or not SHIM.exists(),
    reason="no shim relay yet",
)
@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_official_sdk_client_through_the_shim(daemon, mode):
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    server = StdioServerParameters(
        command=str(SHIM), args=["--socket", str(daemon.socket), "--no-start"], cwd="/"
    )
    big = "b" * (2 * 1024 * 1024)

    async def main() -> None:
        async with Client(server, mode=mode) as client:
            assert client.session.protocol_version == (MODERN if mode == "auto" else "2025-11-25")
            assert "diag_echo" in {t.name for t in (await client.list_tools()).tools}
            result = await client.call_tool("diag_echo", {"value": big})
            assert result.structured_content["value"] == big

    asyncio.run(main())


# --- concurrency, sizes ---------------------------------------------------------------------------------------


def test_colliding_ids_on_twelve_connections_stay_on_their_connection(daemon):
    conns = [RawConnection(daemon.socket) for _ in range(12)]
    try:
        for c in conns:
            c.send(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {},
                        "clientInfo": {"name": "t", "version": "0"},
                    },
                }
            )
        for c in conns:
            assert c.recv()["id"] == 1
            c.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        for i, c in enumerate(conns):  # every agent uses id 1, slow calls first so answers interleave
            if i % 2 == 0:
                c.send(
                    {
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "tools/call",
                        "params": {"name": "diag_sleep", "arguments": {"seconds": 0.3}},
                    }
                )
            c.send(
                {
                    "jsonrpc": "2.0",
                    "id": "1" if i % 2 == 0 else 1,
                    "method": "tools/call",
                    "params": {"name": "diag_echo", "arguments": {"value": f"conn-{i}"}},
                }
            )
        for i, c in enumerate(conns):
            answers = [c.recv() for _ in range(2 if i % 2 == 0 else 1)]
            echoes = [a for a in answers if "value" in a["result"]["structuredContent"]]
            assert len(echoes) == 1 and echoes[0]["result"]["structuredContent"]["value"] == f"conn-{i}"
            assert echoes[0]["id"] == ("1" if i % 2 == 0 else 1)
            next_is_ping_answer(c)
    finally:
        for c in conns:
            c.close()


def test_several_mib_lines_pass_both_ways(conn):
    big = "é" * (3 * 1024 * 1024)  # 6 MiB of UTF-8 in, ~12 MiB out (structured + text)
    started = time.monotonic()
    conn.send(
        {
            "jsonrpc": "2.0",
            "id": "big",
            "method": "tools/call",
            "params": {"name": "diag_echo", "arguments": {"value": big}},
        }
    )
    line = conn.readline()
    assert len(line) > 12 * 1024 * 1024
    result = json.loads(line)["result"]
    assert result["structuredContent"]["value"] == big
    assert time.monotonic() - started < 20
    next_is_ping_answer(conn)


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc for RSS")
def test_an_over_cap_line_ends_only_its_connection(daemon, conn):
    other = RawConnection(daemon.socket)
    other.initialize()
    before = rss_bytes(daemon.proc.pid)
    with RawConnection(daemon.socket) as victim:
        victim.initialize()
        chunk = b"x" * (1024 * 1024)
        sent = 0
        try:
            while sent <= rendezvous.MAX_LINE_BYTES + len(chunk):
                victim.sock.sendall(chunk)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the daemon closed on us mid-stream, as it should
        try:
            last = victim.recv()
            assert_error(last, -32600, None)
            assert "exceeds" in last["error"]["message"]
            assert victim.at_eof()
        except (EOFError, ConnectionResetError):
            pass
    next_is_ping_answer(conn)
    next_is_ping_answer(other)
    with RawConnection(daemon.socket) as fresh:
        fresh.initialize()
        next_is_ping_answer(fresh)
    assert rss_bytes(daemon.proc.pid) - before < 200 * 1024 * 1024
    assert "line_over_cap" in daemon.log()
    other.close()


def test_daemon_never_writes_stdout(daemon):
    # The daemon's stdout is a pipe only it could write; after every test above it is still empty.
    import select

    assert daemon.proc.poll() is None
    ready, _, _ = select.select([daemon.proc.stdout], [], [], 0)
    assert not ready


# --- clients that leave mid-exchange ------------------------------------------------------------------------


def _reset(sock: socket.socket) -> None:
    """Close with an RST (SO_LINGER 0), the way a killed process's socket goes."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def test_clients_that_leave_mid_answer_are_logged_as_info_without_a_traceback(make_daemon):
    daemon = make_daemon().start()
    hello = json.dumps({"memoryd": "hello", "v": 1, "tools": ["briefs"], "cwd": "/", "pid": os.getpid()})
    for i in range(10):  # gone before the ready line (an agent's health check killing its server at once)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(str(daemon.socket))
        sock.sendall(
            hello.encode() + b"\n" + (b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n' if i % 2 else b"")
        )
        _reset(sock)
    big = {"name": "diag_echo", "arguments": {"value": "x" * 4_000_000}}
    for _ in range(3):  # gone while several MiB of answers are being written
        c = RawConnection(daemon.socket)
        c.initialize()
        for k in range(4):
            c.send({"jsonrpc": "2.0", "id": k, "method": "tools/call", "params": big})
        c.sock.recv(65536)
        _reset(c.sock)
    shim = subprocess.Popen(  # a real shim killed while it relays a large answer
        [sys.executable, "-m", "memoryd_shim", "--socket", str(daemon.socket), "--no-start"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=daemon.env,
    )  # fmt: skip
    try:
        init = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        }
        for message in (
            {"jsonrpc": "2.0", "id": "i", "method": "initialize", "params": init},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            *({"jsonrpc": "2.0", "id": k, "method": "tools/call", "params": big} for k in range(4)),
        ):
            shim.stdin.write(json.dumps(message).encode() + b"\n")
        shim.stdin.flush()
        assert shim.stdout.readline().startswith(b'{"jsonrpc":"2.0","id":"i","result"')
        shim.stdout.read1(65536)
    finally:
        shim.kill()
        shim.wait(10)
        for stream in (shim.stdin, shim.stdout):
            with contextlib.suppress(OSError):
                stream.close()
    with RawConnection(daemon.socket) as c:  # still serving; and every session above has been closed
        c.initialize()
        next_is_ping_answer(c)
    deadline = time.monotonic() + 20
    while daemon.log().count('"session_closed"') < 14 and time.monotonic() < deadline:
        time.sleep(0.1)
    lines = [json.loads(line) for line in daemon.log().splitlines() if line.startswith("{")]
    loud = [
        line for line in lines if line.get("level") in ("warning", "error", "critical") or "exception" in line
    ]
    assert not loud, loud
    assert "Traceback" not in daemon.log()
    assert sum(1 for line in lines if line.get("event") == "session_closed") >= 14

"""MCP over Streamable HTTP at ``/mcp`` of a real daemon (``memoryd serve --http``): the official Python SDK
client in both protocol eras, tool groups, the socket's error shapes, timeouts and metrics, and the same
JSON-RPC hygiene."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

MODERN = "2026-07-28"


def sdk_client(hd, mode: str, path: str = "/mcp", headers: dict | None = None):
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    http = create_mcp_http_client(headers={**hd.auth(), **(headers or {})})
    url = f"http://127.0.0.1:{hd.port}{path}"
    return http, Client(streamable_http_client(url, http_client=http), mode=mode)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_the_python_sdk_client_initializes_lists_and_calls_in_both_eras(hd, mode):
    async def main() -> None:
        http, client = sdk_client(hd, mode)
        async with http, client:
            assert client.session.protocol_version == (MODERN if mode == "auto" else "2025-11-25")
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"search_briefs", "diag_echo"} <= names and "memo_add" not in names  # default: briefs
            result = await client.call_tool("diag_echo", {"value": {"mode": mode, "text": "naïve ✓"}})
            assert result.is_error is False
            assert result.structured_content["value"] == {"mode": mode, "text": "naïve ✓"}
            listed = await client.call_tool("list_tasks", {})
            assert listed.is_error is False and "0 tasks" in listed.content[0].text

    asyncio.run(main())


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("how", ["query", "header"])
def test_tool_groups_come_from_the_query_or_a_header(hd, mode, how):
    path, headers = (
        ("/mcp?tools=briefs,memo", None) if how == "query" else ("/mcp", {"X-Memoryd-Tools": "memo"})
    )

    async def main() -> set[str]:
        http, client = sdk_client(hd, mode, path, headers)
        async with http, client:
            return {t.name for t in (await client.list_tools()).tools}

    names = asyncio.run(main())
    assert {"memo_add", "memo_search"} <= names
    assert ("search_briefs" in names) == (how == "query")


def test_an_unknown_group_is_a_clear_400(hd):
    status, _, msgs = hd.post_mcp({"jsonrpc": "2.0", "id": 1, "method": "ping"}, path="/mcp?tools=nope")
    assert status == 400 and msgs[0]["error"]["code"] == -32602 and "nope" in msgs[0]["error"]["message"]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_resources_and_their_templates_are_listed_and_read(hd, mode):
    async def main() -> None:
        http, client = sdk_client(hd, mode)
        async with http, client:
            listed = [str(r.uri) for r in (await client.list_resources()).resources]
            assert listed == ["briefs://context"]
            templates = (await client.list_resource_templates()).resource_templates
            assert [t.uri_template for t in templates] == ["briefs://context/{project}"]
            for uri in ("briefs://context", "briefs://context/shopfront"):
                read = await client.read_resource(uri)
                assert [str(c.uri) for c in read.contents] == [uri] and read.contents[0].text.strip()

    asyncio.run(main())


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_errors_timeouts_and_metrics_are_the_socket_s(hd, mode):
    from mcp.shared.exceptions import MCPError

    async def main() -> None:
        http, client = sdk_client(hd, mode, "/mcp?tools=all")
        async with http, client:
            crash = await client.call_tool("diag_fail", {"kind": "crash"})
            assert crash.is_error and "/secret/path" not in crash.content[0].text
            assert "log" in crash.content[0].text.lower()  # a reference to the daemon log, not the text
            missing = await client.call_tool("diag_fail", {"kind": "not_found"})
            assert missing.is_error and "nothing by that id" in missing.content[0].text
            slow = await client.call_tool("diag_sleep", {"seconds": 5})  # the daemon's budget is 3 s
            assert slow.is_error and "MEMORYD_TOOL_TIMEOUT_MS" in slow.content[0].text
            bad = await client.call_tool("diag_sleep", {"seconds": "x"})  # 2025-11-25+: a result
            assert bad.is_error and "Invalid arguments for tool diag_sleep" in bad.content[0].text
            with pytest.raises(MCPError) as unknown:
                await client.call_tool("no_such_tool", {})
            assert unknown.value.error.code == -32602
            metrics = await client.call_tool("get_memory_core_tool_metrics", {})
            tools = (
                metrics.structured_content["result"]["tools"]
                if "result" in (metrics.structured_content or {})
                else metrics.structured_content["tools"]
            )
            assert tools["diag_sleep"]["calls"] >= 1 and tools["diag_fail"]["failures"] >= 2

    asyncio.run(main())


# --- JSON-RPC hygiene (raw POSTs) ---------------------------------------------------------------------------


def _initialize(hd) -> str:
    status, headers, msgs = hd.post_mcp(
        {
            "jsonrpc": "2.0",
            "id": "init",
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        }
    )
    assert status == 200 and msgs[0]["result"]["protocolVersion"] == "2025-11-25", msgs
    session = headers["mcp-session-id"]
    status, _, _ = hd.post_mcp(
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        headers={"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"},
    )
    assert status == 202
    return session


@pytest.mark.parametrize(
    ("body", "code", "echo"),
    [
        (b"{not json", -32700, None),
        (b'{"jsonrpc":"2.0","id":1,"method":"ping","x":NaN}', -32700, None),
        (b"[]", -32600, None),
        (b"42", -32600, None),
        (b'{"id":7,"method":"ping"}', -32600, 7),
        (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', -32600, None),
        (b'{"jsonrpc":"2.0","id":"p","method":"tools/list","params":[1]}', -32602, "p"),
        (b"", -32700, None),
        (b" \r\n", -32700, None),
    ],
)
def test_malformed_bodies_are_answered_as_on_the_socket(hd, body, code, echo):
    status, headers, msgs = hd.post_mcp(body)
    assert status == 400 and headers["content-type"] == "application/json"
    assert msgs[0]["error"]["code"] == code and msgs[0]["id"] == echo


def test_a_batch_gets_one_error_per_request(hd):
    batch = [{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "method": "x"}]
    status, _, msgs = hd.post_mcp(batch)
    assert status == 400 and [e["id"] for e in msgs[0]] == [1] and msgs[0][0]["error"]["code"] == -32600


def test_a_malformed_notification_is_acknowledged_and_dropped(hd):
    status, _, msgs = hd.post_mcp({"jsonrpc": "2.0", "method": "notifications/x", "params": 3})
    assert status == 202 and msgs == []


def test_a_request_reusing_an_id_in_flight_is_refused(hd):
    session = _initialize(hd)
    headers = {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
    slow = {
        "jsonrpc": "2.0",
        "id": 5,
        "method": "tools/call",
        "params": {"name": "diag_sleep", "arguments": {"seconds": 2.5}},
    }
    first: list = []
    thread = threading.Thread(target=lambda: first.append(hd.post_mcp(slow, headers=headers)))
    thread.start()
    try:
        # Probe with a ping under the same id once the slow call has surely arrived (a probe in flight when
        # the slow call arrives would refuse the slow call instead); a ping that still gets in first is
        # answered at once, so the next probe tries again.
        threading.Event().wait(0.8)
        probe = {"jsonrpc": "2.0", "id": "5", "method": "ping"}  # "5" is 5 to the SDK
        for _ in range(40):
            status, _, msgs = hd.post_mcp(probe, headers=headers)
            if status == 400:
                break
            threading.Event().wait(0.02)
        assert status == 400 and msgs[0]["error"]["code"] == -32600 and msgs[0]["id"] == "5"
    finally:
        thread.join(10)
    assert first[0][2][-1]["id"] == 5 and first[0][2][-1]["result"]["isError"] is False


def test_the_stateless_era_needs_no_session_and_discover_answers(hd):
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"},
    }
    headers = {"MCP-Protocol-Version": MODERN}
    status, rh, msgs = hd.post_mcp(
        {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}},
        headers={**headers, "Mcp-Method": "server/discover"},
    )
    assert status == 200, msgs
    assert MODERN in msgs[-1]["result"]["supportedVersions"] and "mcp-session-id" not in rh
    call = {"name": "diag_echo", "arguments": {"value": 1}, "_meta": meta}
    status, _, msgs = hd.post_mcp(
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call},
        headers={**headers, "Mcp-Method": "tools/call", "Mcp-Name": "diag_echo"},
    )
    assert status == 200 and msgs[-1]["result"]["structuredContent"]["value"] == 1, msgs


def test_status_reports_http_and_stdout_stays_empty(hd):
    status = hd.proc.status()
    assert status["http"]["port"] == hd.port and status["http"]["url"] == f"http://127.0.0.1:{hd.port}"
    assert json.loads((hd.dir / "http.json").read_text()) == {"port": hd.port, "pid": hd.proc.proc.pid}


def test_a_10_mb_call_holds_up_no_other_request(hd):
    """A ~10 MB ``store_memories`` body is parsed and its arguments checked off the event loop: calls on
    other connections, sent once the big body is out, are answered before it (orderings, never durations)."""
    import http.client

    from support.bigcall import big_store_line

    headers = {
        **hd.auth(),
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    headers |= {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "store_memories"}
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"},
    }
    message = json.loads(big_store_line("store"))
    message["params"]["_meta"] = meta
    body = json.dumps(message, ensure_ascii=False).encode()
    assert len(body) > 10_000_000
    events: list[str] = []
    sent = threading.Event()
    answer: dict = {}

    def big() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", hd.port, timeout=120)
        try:
            conn.request("POST", "/mcp?tools=memories", body=body, headers=headers)
            sent.set()
            raw = conn.getresponse().read().decode()
            answer["text"] = raw
            events.append("big")
        finally:
            sent.set()
            conn.close()

    thread = threading.Thread(target=big, daemon=True)
    thread.start()
    assert sent.wait(120)
    echo = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "diag_echo"}
    for n in range(5):
        call = {"name": "diag_echo", "arguments": {"value": n}, "_meta": meta}
        status, _, msgs = hd.post_mcp(
            {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": call}, headers=echo
        )
        assert status == 200 and msgs[-1]["result"]["structuredContent"]["value"] == n, msgs
        events.append(f"echo {n}")
    thread.join(120)
    assert events == [*(f"echo {n}" for n in range(5)), "big"], events
    assert "items/49: 'tags' is a required property" in answer["text"], answer["text"][:2000]

"""Tool answers as an MCP client reads them: results, failures, timeouts (in-process, the SDK's client).

The same ``McpApp``, registry and engine as the daemon, over the SDK's in-memory streams
(:mod:`support.inprocess`); the socket's JSON-RPC hygiene and both eras on the wire are in
``tests/e2e/test_protocol.py``. The tools are the test-only ``_diagnostics`` group.
"""

from __future__ import annotations

import asyncio
import json
import time

from support.inprocess import inprocess_session


def run(tmp_path, body):
    async def go():
        async with inprocess_session(tmp_path, test_tools=True, tool_timeout_s=3) as session:
            return await body(session)

    return asyncio.run(go())


def wire(result) -> dict:
    """The result as JSON on the wire (camelCase, unset fields left out)."""
    return result.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"result_type"})


def test_structured_content_and_text_say_the_same(tmp_path):
    value = {"nested": [1, "two", None, True, {"é": "🙂"}]}

    async def body(s):
        result = wire(await s.call_tool("diag_echo", {"value": value}))
        assert result.get("isError", False) is False
        assert result["structuredContent"]["value"] == value
        assert json.loads(result["content"][0]["text"]) == result["structuredContent"]

    run(tmp_path, body)


def test_tool_failures_are_is_error_results(tmp_path):
    async def body(s):
        result = wire(await s.call_tool("diag_fail", {"kind": "not_found"}))
        # the message is the only text, and no structuredContent: an object of ours would break the tool's
        # outputSchema for the TypeScript SDK, and Codex would show it instead of the text
        assert result == {
            "content": [{"type": "text", "text": "diag_fail: nothing by that id (a tool-level failure)"}],
            "isError": True,
        }
        crash = wire(await s.call_tool("diag_fail", {"kind": "crash"}))
        assert crash["isError"] is True and "internal error" in crash["content"][0]["text"]
        assert "/secret/path" not in json.dumps(crash)  # exception text stays in the daemon log
        own_timeout = wire(await s.call_tool("diag_fail", {"kind": "timeout_error"}))
        assert own_timeout["isError"] is True and "did not finish" not in own_timeout["content"][0]["text"]
        for failed in (crash, own_timeout):
            assert "structuredContent" not in failed and len(failed["content"]) == 1

    run(tmp_path, body)


def test_tool_call_timeout_ends_the_call_with_a_clear_error(tmp_path):
    async def body(s):
        started = time.monotonic()
        result = wire(await s.call_tool("diag_sleep", {"seconds": 30}))
        assert result["isError"] is True
        assert "did not finish within 3 s" in result["content"][0]["text"]
        assert 2.5 < time.monotonic() - started < 8  # the budget ended it, not the sleep

    run(tmp_path, body)


def test_a_tool_may_declare_a_longer_budget_and_a_writer_says_its_writes_may_have_landed(tmp_path):
    async def body(s):
        started = time.monotonic()
        result = wire(await s.call_tool("diag_sleep_long", {"seconds": 4}))
        assert result.get("isError", False) is False and time.monotonic() - started > 3.5  # past 3 s
        result = wire(await s.call_tool("diag_sleep_long", {"seconds": 30}))
        assert result["isError"] is True
        text = result["content"][0]["text"]
        assert "did not finish within 8 s" in text and "writes may have landed" in text

    run(tmp_path, body)

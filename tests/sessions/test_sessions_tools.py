"""The ``sessions`` tools (Memory Core's surface) through the official SDK client, on a daemon served
in-process; sampling through the client also over the real shim and a real daemon."""

from __future__ import annotations

import asyncio
import json

import mcp_types as types
import pytest
from sessions_e2e import call, client, fails

SESSIONS_TOOLS = {
    "add_memory",
    "get_session_memories",
    "query_raw_memories",
    "get_all_summaries",
    "query_summaries",
    "summarize_sessions",
    "export_database",
    "import_database",
    "healthcheck",
    "get_memory_core_tool_metrics",
}
MEMO_TOOLS = {"memo_add", "memo_search"}


def run(coro):
    return asyncio.run(coro)


def test_add_read_and_search_turns(served):
    async def main():
        async with client(served) as c:
            first, text = await call(
                c,
                "add_memory",
                prompt="Why does the checkout button double-submit orders?",
                thought="Probably a missing debounce on the click handler.",
                response="Added a debounce to the checkout click handler; orders submit once now.",
            )
            sid = first["sessionId"]
            assert first["message"] == "Memory successfully added" and first["searchable"] is True
            assert sid in text and first["id"] in text
            second, _ = await call(
                c,
                "add_memory",
                prompt="Now write the changelog entry",
                thought="",
                response="Changelog: checkout submits once.",
                sessionId=sid,
            )
            assert second["sessionId"] == sid
            page, text = await call(c, "get_session_memories", sessionId=sid)
            assert (page["count"], page["total"]) == (2, 2)
            assert [m["id"] for m in page["memories"]] == [first["id"], second["id"]]
            assert page["memories"][0]["thought"].startswith("Probably a missing debounce")
            assert page["note"] in text and "double-submit" in text
            page, _ = await call(c, "get_session_memories", sessionId=sid, limit=1, offset=1)
            assert [m["id"] for m in page["memories"]] == [second["id"]] and page["total"] == 2
            found, text = await call(c, "query_raw_memories", query="debounce checkout click")
            assert found["count"] >= 1 and found["results"][0]["id"] == first["id"]
            assert found["results"][0]["relevanceScore"] > 0
            only, _ = await call(c, "query_raw_memories", query="checkout", sessionId=sid, nResults=5)
            assert {r["sessionId"] for r in only["results"]} == {sid}
            other, _ = await call(c, "query_raw_memories", query="checkout", sessionId="no-such-session")
            assert other["count"] == 0
            assert "No session" in await fails(c, "get_session_memories", sessionId="unknown-session-1")
            # refused before any file access: a tool execution error naming the argument (MCP 2025-11-25)
            assert "sessionId" in await fails(c, "get_session_memories", sessionId="../../etc/passwd")
            for tool in ("query_raw_memories", "query_summaries"):
                for blank in ("", "  "):  # nothing to look for: an empty list, never an error
                    empty, _ = await call(c, tool, query=blank)
                    assert empty["count"] == 0 and empty["results"] == [], (tool, empty)

    run(main())


def test_secrets_are_redacted_in_answers_and_index(served):
    key = "AKIAIOSFODNN7EXAMPLE"

    async def main():
        async with client(served) as c:
            added, _ = await call(
                c, "add_memory", prompt=f"deploy with key {key}", thought="", response="deployed the lambda"
            )
            page, text = await call(c, "get_session_memories", sessionId=added["sessionId"])
            assert key not in text and key not in json.dumps(page)
            assert page["redacted"]
            found, _ = await call(c, "query_raw_memories", query=key)
            assert all(key not in json.dumps(r) for r in found["results"])

    run(main())


def test_summaries_extractive_list_and_search(served):
    async def main():
        async with client(served) as c:  # no sampling callback: extractive
            added, _ = await call(
                c,
                "add_memory",
                prompt="Refactor the invoice PDF renderer into smaller modules",
                thought="split layout and fonts",
                response="Refactored the renderer: layout.py and fonts.py, python tests pass.",
            )
            sid = added["sessionId"]
            done, text = await call(c, "summarize_sessions", sessionId=sid)
            assert done["processed"] == 1 and done["sessions"][0]["method"] == "extractive"
            assert done["sessions"][0]["title"].startswith("Refactor the invoice PDF renderer")
            listed, _ = await call(c, "get_all_summaries")
            mine = [s for s in listed["summaries"] if s["sessionId"] == sid]
            assert mine and mine[0]["method"] == "extractive" and mine[0]["memoryCount"] == 1
            assert mine[0]["category"] == "refactoring" and "python" in mine[0]["technologies"]
            by_cat, _ = await call(c, "get_all_summaries", category="refactoring")
            assert sid in {s["sessionId"] for s in by_cat["summaries"]}
            none, _ = await call(c, "get_all_summaries", category="documentation")
            assert sid not in {s["sessionId"] for s in none["summaries"]}
            hits, _ = await call(c, "query_summaries", query="invoice PDF renderer")
            assert hits["results"] and hits["results"][0]["sessionId"] == sid
            hits, _ = await call(c, "query_summaries", query="invoice PDF renderer", category="bugfix")
            assert sid not in {r["sessionId"] for r in hits["results"]}
            again, _ = await call(c, "summarize_sessions")  # nothing stale in this session any more
            assert sid not in {s["sessionId"] for s in again["sessions"]}

    run(main())


def test_summarize_all_stale_sessions_sends_progress(served):
    async def main():
        async with client(served) as c:
            sids = []
            for n in range(3):
                added, _ = await call(
                    c, "add_memory", prompt=f"task number {n} about caching", thought="", response="done"
                )
                sids.append(added["sessionId"])
            seen: list[tuple[float, float | None]] = []

            async def progress(p: float, total: float | None, message: str | None) -> None:
                seen.append((p, total))

            done, _ = await call(c, "summarize_sessions", progress=progress)
            assert set(sids) <= {s["sessionId"] for s in done["sessions"]}
            assert seen and seen[-1][0] == seen[-1][1]  # the last notification says all are done

    run(main())


def test_summarize_through_client_sampling(served_process):
    """Over the real shim and socket: the daemon's sampling request goes out to the client mid-call and
    the client's answer comes back (the other tests here run in-process)."""
    asked: list[types.CreateMessageRequestParams] = []

    async def sampling(context, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        asked.append(params)
        reply = {
            "title": "Fix the flaky login test",
            "summary": "The login test raced the session cookie; waiting for it fixed the flake.",
            "category": "bugfix",
            "quality": 80,
            "productivity": 70,
            "impact": 60,
            "complexity": 30,
            "technologies": ["pytest", "playwright"],
        }
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(text=json.dumps(reply)), model="test-model"
        )

    async def main():
        async with client(served_process.socket, sampling=sampling) as c:
            added, _ = await call(
                c,
                "add_memory",
                prompt="the login test is flaky, secret ghp_0123456789abcdefghijABCDEFGHIJ012345",
                thought="cookie race",
                response="wait for the cookie",
            )
            sid = added["sessionId"]
            done, _ = await call(c, "summarize_sessions", sessionId=sid)
            assert done["sessions"][0]["method"] == "sampling"
            assert done["sessions"][0]["title"] == "Fix the flaky login test"
            listed, _ = await call(c, "get_all_summaries", category="bugfix")
            mine = next(s for s in listed["summaries"] if s["sessionId"] == sid)
            assert (mine["quality"], mine["complexity"], mine["technologies"]) == (
                80,
                30,
                ["pytest", "playwright"],
            )
        assert len(asked) == 1
        sent = asked[0].messages[0].content.text
        assert "the login test is flaky" in sent and "ghp_0123456789" not in sent  # redacted before sampling

    run(main())


def test_sampling_reply_unusable_falls_back_to_extractive(served):
    async def sampling(context, params):
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(text="I cannot do that."), model="m"
        )

    async def main():
        async with client(served, sampling=sampling) as c:
            added, _ = await call(c, "add_memory", prompt="add dark mode", thought="", response="added")
            done, _ = await call(c, "summarize_sessions", sessionId=added["sessionId"])
            assert done["sessions"][0]["method"] == "extractive"

    run(main())


def test_metrics_count_calls_without_arguments(served):
    async def main():
        async with client(served) as c:
            await call(c, "add_memory", prompt="metrics probe prompt XYZZY", thought="", response="ok")
            await fails(c, "get_session_memories", sessionId="metrics-unknown")
            metrics, text = await call(c, "get_memory_core_tool_metrics")
            add = metrics["tools"]["add_memory"]
            assert add["calls"] >= 1 and add["p95_ms"] >= add["p50_ms"] > 0
            assert metrics["tools"]["get_session_memories"]["failures"] >= 1
            assert "XYZZY" not in text and "metrics-unknown" not in text

    run(main())


def test_healthcheck_healthy_then_degraded_when_watcher_stopped(served):
    async def main():
        async with client(served, tools="sessions") as c:
            await call(c, "add_memory", prompt="health probe", thought="", response="ok")
            health, text = await call(c, "healthcheck")
            assert health["watcher"]["alive"] is True and health["watcher"]["heartbeat"] is True
            assert health["board"]["readable"] is True and health["sessions_connected"] >= 1
            assert health["index"]["by_kind"].get("interaction", 0) >= 1
            assert health["disk"]["board_bytes"] > 0 and health["version"]
            assert health["status"] == "healthy" and health["problems"] == [], health
            assert health["model"]["state"] == "disabled" and "keyword-only" in health["model"]["note"]
            stopped = await c.call_tool("diag_stop_watcher", {})
            assert not stopped.is_error
            health, text = await call(c, "healthcheck")
            assert health["status"] == "degraded" and health["watcher"]["alive"] is False
            assert health["watcher"]["restarted"] is True and "watcher" in text
            health, _ = await call(c, "healthcheck")  # restarted: alive again, heartbeat seen
            assert health["watcher"]["alive"] is True and health["watcher"]["heartbeat"] is True

    run(main())


@pytest.mark.parametrize(
    ("groups", "expected"), [("sessions,memo", SESSIONS_TOOLS | MEMO_TOOLS), ("all", None)]
)
def test_tool_groups_per_session(served, groups, expected):
    async def main():
        async with client(served, tools=groups) as c:
            names = {t.name for t in (await c.list_tools()).tools if not t.name.startswith("diag_")}
            if expected is not None:
                assert names == expected
            else:  # every registered group, whatever groups exist in this checkout
                from memoryd.tools import build_registry

                registry = build_registry()
                assert names == set(registry.visible(registry.groups))
                assert SESSIONS_TOOLS | MEMO_TOOLS | {"search_briefs", "list_tasks"} <= names

    run(main())


def test_stateless_era_client_gets_the_extractive_summary(served):
    """A client in the 2026 stateless era cannot take a server-to-client request mid-call, even with a
    sampling callback: the summary is extractive and the callback is never asked."""
    asked = []

    async def sampling(context, params):
        asked.append(params)
        return types.CreateMessageResult(role="assistant", content=types.TextContent(text="{}"), model="m")

    async def main():
        async with client(served, sampling=sampling, mode="auto") as c:
            added, _ = await call(c, "add_memory", prompt="document the API", thought="", response="done")
            done, _ = await call(c, "summarize_sessions", sessionId=added["sessionId"])
            assert done["sessions"][0]["method"] == "extractive"

    run(main())
    assert asked == []

"""Kept session-start digests are reused only while the board is unchanged, and rebuilt after changes.

In-process (:mod:`support.inprocess`: the daemon's app, registry and engine, keyword-only): ``get_context``
twice gives the same text; an outcome saved through ``save_outcome`` shows up in the very next digest,
whether the kept digest was rebuilt in the background yet or not.
"""

from __future__ import annotations

import asyncio

from support.board import write_brief, write_task
from support.inprocess import inprocess_session

TASK = "t-20260210-000001"
BRIEF = "b-20260210-000001"


def test_a_kept_digest_is_never_stale(tmp_path):
    board = tmp_path / "board"
    (board / "tasks").mkdir(parents=True)
    (board / "briefs").mkdir()
    write_task(board, TASK, title="Rework the cart page", created_at="2026-02-10T09:00:00Z")
    write_brief(board, BRIEF, TASK, said="the cart page is slow", title="Speed up the cart page",
                created_at="2026-02-10T10:00:00Z")  # fmt: skip

    async def context(s) -> str:
        result = await s.call_tool("get_context", {"project": "shopfront", "tokens": 1500, "query": "cart"})
        assert not result.is_error, result
        return result.structured_content["context"]

    async def body(s):
        first = await context(s)
        assert "Rework the cart page" in first and "Safari" not in first
        assert await context(s) == first  # nothing changed: the kept digest
        saved = await s.call_tool(
            "save_outcome", {"brief_id": BRIEF, "did": ["profiled it"], "open": ["check the cart on Safari"]}
        )
        assert not saved.is_error, saved
        assert "check the cart on Safari" in await context(s)  # at once, not after the background rebuild
        await asyncio.sleep(1)  # the background rebuild has run: its result is fresh too
        assert "check the cart on Safari" in await context(s)

    async def go():
        async with inprocess_session(tmp_path, board=board, tools=("briefs",)) as s:
            await body(s)

    asyncio.run(go())

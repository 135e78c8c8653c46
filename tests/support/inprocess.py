"""An MCP session with memoryd inside the test process: the SDK's ``ClientSession`` on in-memory streams.

For tool-level tests (arguments, answers, error shapes, timeouts): the same ``McpApp``, tool registry and
engine as ``memoryd serve``, without a daemon process, a socket or a shim. What it skips is exactly what
wire and lifecycle tests cover with real processes: the hello, the socket's JSON-RPC hygiene
(``serve/session``), start-up and shutdown.

    async with inprocess_session(tmp_path, tools=("briefs",), test_tools=True, tool_timeout_s=3) as s:
        result = await s.call_tool("diag_echo", {"value": 1})

``board``: a board folder (made when missing); the index goes beside it in ``<root>/index``. ``model``:
``"none"`` (keyword-only, the default: quick) or a model name resolved from ``MEMORYD_TEST_MODELS``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from mcp.client.session import ClientSession
from mcp.server.runner import serve_dual_era_loop
from mcp.shared.memory import create_client_server_memory_streams

from memoryd.core.engine import open_engine
from memoryd.core.warmup import EngineHandle
from memoryd.serve.app import McpApp, SessionState
from memoryd.settings import Settings
from memoryd.tools import build_registry

from .daemon import REPO

MODELS = Path(os.environ.get("MEMORYD_TEST_MODELS") or REPO / ".cache" / "models")


@asynccontextmanager
async def inprocess_session(
    root: Path,
    *,
    board: Path | None = None,
    tools: Sequence[str] = ("briefs",),
    test_tools: bool = False,
    tool_timeout_s: float = 15.0,
    model: str = "none",
) -> AsyncIterator[ClientSession]:
    """An initialised ``ClientSession`` on a fresh engine over ``board`` (default ``root/board``)."""
    board = board or root / "board"
    board.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "MEMORYD_MODELS": str(MODELS), "MEMORYD_HOME": str(root / "home")}
    settings = Settings.load(
        board=str(board), index=str(root / "index"), socket=str(root / "s.sock"), model=model, env=env
    )
    handle = EngineHandle()
    handle.start(lambda: open_engine(settings))
    state = await handle.loaded()
    if state != "ready":
        raise RuntimeError(f"the engine did not load: {handle.error}")
    registry = build_registry(test_tools)
    app = McpApp(version="test", engine=handle, tool_timeout_s=tool_timeout_s)
    groups = tuple(tools)
    session_state = SessionState(
        id=1, groups=groups, tools=registry.visible(groups), resources=registry.visible_resources(groups)
    )
    try:
        async with (
            create_client_server_memory_streams() as (client_streams, server_streams),
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(
                lambda: serve_dual_era_loop(
                    app.server,
                    server_streams[0],
                    server_streams[1],
                    lifespan_state=session_state,
                    init_options=app.init_options,
                )
            )
            async with ClientSession(*client_streams) as client:
                await client.initialize()
                yield client
            tg.cancel_scope.cancel()
    finally:
        await handle.close(timeout=10)

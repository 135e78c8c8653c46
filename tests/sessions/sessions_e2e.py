"""Helpers for the ``sessions``/``memo`` tests: the official SDK client over the real shim or in-process.

:func:`client` opens ``mcp.client.Client`` on ``memoryd-shim --socket S --no-start --tools GROUPS`` in
``legacy`` mode (the ``initialize`` handshake: the era in which a client can declare ``sampling``), with
an optional sampling callback; given an :class:`support.inprocess_daemon.InprocessDaemon` instead of a
socket, on a session that daemon serves in-process. :func:`call` returns a tool's structured content and text and fails the
test on ``isError``.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SHIM = REPO / ".venv" / "bin" / "memoryd-shim"


@asynccontextmanager
async def client(socket: Path | Any, tools: str = "sessions,memo", sampling=None, mode: str = "legacy"):
    from support.inprocess_daemon import InprocessDaemon, sdk_client

    if isinstance(socket, InprocessDaemon):
        async with sdk_client(socket, tools, sampling, mode) as c:
            yield c
        return
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    server = StdioServerParameters(
        command=str(SHIM), args=["--socket", str(socket), "--no-start", "--tools", tools], cwd="/"
    )
    kwargs: dict[str, Any] = {"mode": mode}
    if sampling is not None:
        kwargs["sampling_callback"] = sampling
    async with Client(server, **kwargs) as c:
        yield c


def text_of(result) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


async def call(c, name: str, progress=None, **arguments: Any) -> tuple[dict, str]:
    """``(structuredContent, text)`` of a successful call."""
    result = await c.call_tool(name, arguments, progress_callback=progress)
    assert result.is_error is False, text_of(result)
    return result.structured_content, text_of(result)


async def fails(c, name: str, **arguments: Any) -> str:
    """The text of a tool error (``isError: true``)."""
    result = await c.call_tool(name, arguments)
    assert result.is_error is True, text_of(result)
    return text_of(result)

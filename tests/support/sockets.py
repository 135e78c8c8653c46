"""Clients of the daemon's socket without a shim in between.

* :class:`RawConnection` speaks raw lines (hello first) for the JSON-RPC hygiene tests.
* :func:`socket_transport` is an ``mcp`` SDK ``Transport`` over the socket (the SDK client in ``auto``
  or ``legacy`` mode).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any


class RawConnection:
    """Raw newline-delimited lines over the daemon socket."""

    def __init__(
        self,
        path: Path,
        *,
        hello: dict | bytes | None = None,
        tools: list[str] | None = None,
        timeout: float = 10.0,
    ) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(str(path))
        self.reader = self.sock.makefile("rb")
        self.ready: dict | None = None
        if hello is not False:
            self.send(
                hello
                if hello is not None
                else {
                    "memoryd": "hello",
                    "v": 1,
                    "tools": tools or ["briefs"],
                    "cwd": "/",
                    "pid": os.getpid(),
                }
            )
            self.ready = json.loads(self.readline())

    def send(self, message: Any) -> None:
        data = message if isinstance(message, bytes) else json.dumps(message).encode()
        self.sock.sendall(data + b"\n")

    def readline(self) -> bytes:
        line = self.reader.readline()
        if not line:
            raise EOFError("daemon closed the connection")
        return line

    def recv(self) -> Any:
        return json.loads(self.readline())

    def request(self, method: str, params: dict | None = None, id: Any = 1) -> Any:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self.recv()

    def initialize(self, version: str = "2025-11-25") -> dict:
        answer = self.request(
            "initialize",
            {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}},
            id="init",
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return answer

    def call(self, name: str, arguments: dict, id: Any = 1) -> Any:
        return self.request("tools/call", {"name": name, "arguments": arguments}, id=id)

    def at_eof(self, timeout: float = 5.0) -> bool:
        """``True`` once the daemon has closed this connection (EOF or reset), ``False`` on timeout/data."""
        self.sock.settimeout(timeout)
        try:
            return self.reader.readline() == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.reader.close()
        self.sock.close()

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@asynccontextmanager
async def socket_transport(path: Path, tools: list[str] | None = None):
    """An ``mcp`` client ``Transport`` over the daemon socket: the hello, then SDK messages as lines."""

    import anyio
    import mcp_types as types
    from mcp.shared._context_streams import create_context_streams
    from mcp.shared.message import SessionMessage

    reader, writer = await asyncio.open_unix_connection(str(path), limit=64 * 1024 * 1024)
    hello = {"memoryd": "hello", "v": 1, "tools": tools or ["briefs"], "cwd": "/", "pid": os.getpid()}
    writer.write(json.dumps(hello).encode() + b"\n")
    ready = json.loads(await reader.readline())
    assert ready["memoryd"] == "ready", ready
    read_send, read_recv = create_context_streams[SessionMessage | Exception](0)
    write_send, write_recv = create_context_streams[SessionMessage](0)

    async def pump_in() -> None:
        async with read_send:
            while line := await reader.readline():
                try:
                    message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except Exception as exc:
                    await read_send.send(exc)
                    continue
                await read_send.send(SessionMessage(message))

    async def pump_out() -> None:
        async with write_recv:
            async for item in write_recv:
                writer.write(item.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n")
                await writer.drain()

    async with anyio.create_task_group() as tg:
        tg.start_soon(pump_in)
        tg.start_soon(pump_out)
        try:
            yield read_recv, write_send
        finally:
            tg.cancel_scope.cancel()
            writer.close()

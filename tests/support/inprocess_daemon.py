"""memoryd's serving side inside the test process, for synchronous tool-level tests that speak raw lines.

:class:`InprocessDaemon` is the engine, registry and ``McpApp`` of ``memoryd serve`` on an event loop in a
background thread. Each :meth:`InprocessDaemon.connect` is one session served by the daemon's own
``McpConnection`` (the socket session's JSON-RPC hygiene, id mapping and era rules) on an in-memory line
pipe, as if a shim had said hello with those tool groups and that working folder. What it skips is exactly
what wire and lifecycle tests cover with real processes: the socket, the hello line, the shim's relay, the
locks, signals and exit of start-up and shutdown (:meth:`InprocessDaemon.stop` closes the engine as a
SIGTERM does, so a new daemon on the same folders is a restart).

:class:`InprocessShim` and :class:`InprocessMemShim` are :class:`support.briefs.Shim` and
:class:`support.memories.MemShim` on such a pipe: the same methods (``request``, ``ok``, ``failed``,
``invalid``, ``raw``...) and the same :attr:`output` of every byte printed. :func:`sdk_client` is the
official SDK ``Client`` on one (``legacy`` mode: the handshake era, with optional sampling).

    daemon = InprocessDaemon(root).start()          # keyword-only, test tools on, 15 s tool budget
    with InprocessShim(daemon, tools="briefs") as shim:
        shim.initialize()
        answer = shim.ok("search_briefs", query="cart")
    daemon.kill()
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import json
import logging
import os
import queue
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from memoryd.core.engine import open_engine
from memoryd.core.warmup import EngineHandle
from memoryd.serve.app import McpApp, SessionState
from memoryd.serve.session import LineWriter, McpConnection
from memoryd.settings import Settings
from memoryd.tools import build_registry
from memoryd_shim import rendezvous

from .briefs import Shim
from .inprocess import MODELS
from .memories import MemShim

_EOF = object()


class _LogLines(logging.Handler):
    """Keeps every log record as one JSON line, like the daemon's stderr."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        event = record.msg if isinstance(record.msg, dict) else {"event": record.getMessage()}
        self.lines.append(json.dumps({**event, "logger": record.name}, default=str) + "\n")


class _Writer:
    """The ``StreamWriter`` side ``LineWriter`` uses: each written line goes to the test thread's queue."""

    def __init__(self, lines: queue.Queue) -> None:
        self._lines = lines

    def write(self, data: bytes) -> None:
        for line in data.splitlines(keepends=True):
            self._lines.put(line)

    async def drain(self) -> None:
        return None


class _Stdin:
    """What a test writes to: bytes go to the session's ``StreamReader`` on the daemon's loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, reader: asyncio.StreamReader) -> None:
        self._loop, self._reader = loop, reader
        self.closed = False

    def write(self, data: bytes) -> int:
        if self.closed:
            raise BrokenPipeError("the session's input is closed")
        self._loop.call_soon_threadsafe(self._reader.feed_data, bytes(data))
        return len(data)

    def flush(self) -> None:
        return None

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._loop.call_soon_threadsafe(self._reader.feed_eof)


class Pipe:
    """One served session, shaped like the ``Popen`` of a shim: ``stdin`` (bytes in), ``stdout`` (an
    iterator of the lines printed, ending when the session ends), ``wait`` and ``kill``."""

    def __init__(self, daemon: InprocessDaemon, connection: McpConnection, reader, lines, done) -> None:
        self.connection = connection
        self.stdin = _Stdin(daemon.loop, reader)
        self._lines: queue.Queue = lines
        self._done: concurrent.futures.Future = done
        self._daemon = daemon

    @property
    def stdout(self) -> Iterator[bytes]:
        while (line := self._lines.get()) is not _EOF:
            yield line

    def next_line(self, timeout: float | None = None) -> bytes | None:
        """The next line printed; ``None`` once the session has ended."""
        line = self._lines.get(timeout=timeout)
        if line is _EOF:
            self._lines.put(_EOF)
            return None
        return line

    def wait(self, timeout: float | None = None) -> str:
        """Why the session ended (``McpConnection.run``'s answer); raises ``subprocess.TimeoutExpired``
        as ``Popen.wait`` does, so :meth:`support.briefs.Shim.close` works unchanged."""
        try:
            return self._done.result(timeout)
        except concurrent.futures.TimeoutError:
            raise subprocess.TimeoutExpired("in-process session", timeout or 0) from None

    def kill(self) -> None:
        self._daemon.loop.call_soon_threadsafe(self.connection.stop)
        self.stdin.close()
        self.wait(10)


class InprocessDaemon:
    """The engine, registry and app of ``memoryd serve`` on a background event loop (see the module doc).

    ``root``: a folder of the test's; the board is ``root/board`` unless given (made when missing), the
    index ``root/index``. ``model``: ``"none"`` (keyword-only) or a model name resolved from
    ``MEMORYD_TEST_MODELS``. ``env``: extra settings (``MEMORYD_TOOL_TIMEOUT_MS``...), read as the daemon
    reads its environment; test tools are on, as in :class:`support.daemon.DaemonProcess`. Attributes:
    ``root``, ``board``, ``index``, ``env``, ``handle`` (the ``EngineHandle``), ``loop``.
    """

    def __init__(
        self,
        root: Path,
        *,
        board: Path | None = None,
        model: str = "none",
        env: dict[str, str] | None = None,
    ) -> None:
        self.root = Path(root)
        self.board = Path(board) if board is not None else self.root / "board"
        self.index = self.root / "index"
        self.env = {
            **os.environ,
            "MEMORYD_MODELS": str(MODELS),
            "MEMORYD_HOME": str(self.root / "home"),
            "MEMORYD_TEST_TOOLS": "1",
            **(env or {}),
        }
        self.settings = Settings.load(
            board=str(self.board), index=str(self.index), socket=str(self.root / "s.sock"), model=model,
            env=self.env,
        )  # fmt: skip
        self.registry = build_registry(self.settings.test_tools)
        self.handle = EngineHandle()
        self.handle.process_status = self._process_status
        self.app: McpApp | None = None
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="inprocess-daemon", daemon=True)
        self._ids = itertools.count(1)
        self._pipes: list[Pipe] = []
        self._log = _LogLines()
        self.exit_status: int | None = None

    def _process_status(self) -> dict[str, Any]:
        return {"running": True, "pid": os.getpid(), "sessions": sum(not p._done.done() for p in self._pipes)}

    def _run(self, coro, timeout: float = 120.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self, timeout: float = 120.0) -> InprocessDaemon:
        """Load the engine (the board is indexed, the watcher runs); raises when it did not load."""
        self.board.mkdir(parents=True, exist_ok=True)
        logging.getLogger().addHandler(self._log)
        self._thread.start()

        async def load() -> str:
            self.handle.start(lambda: open_engine(self.settings))
            self.app = McpApp(
                version="test", engine=self.handle, tool_timeout_s=self.settings.tool_timeout_ms / 1000
            )
            return await self.handle.loaded()

        if self._run(load(), timeout) != "ready":
            raise RuntimeError(f"the engine did not load: {self.handle.error}")
        return self

    @property
    def proc(self) -> _Serving:
        """Whether the daemon still serves, asked as of a ``Popen``: ``proc.poll()`` is ``None`` while it
        does (its event loop runs), its status once stopped (as :meth:`stop` returned it)."""
        return _Serving(self)

    def status(self) -> dict[str, Any]:
        """The daemon's status fields that concern the engine: ``{"engine_state", "engine"}`` (``engine``:
        ``EngineHandle.status()``, the slot's state merged with the engine's own status)."""
        return {"engine_state": self.handle.state, "engine": self._run(self.handle.status())}

    def log(self) -> str:
        """The JSON log lines of the memoryd loggers since :meth:`start` (all in-process daemons')."""
        return "".join(self._log.lines)

    def connect(self, tools: str | None = None, cwd: str = "/") -> Pipe:
        """A new session as a shim with ``--tools tools`` (``"memories,memo"``, ``"all"``; default: the
        shim's default groups) started in ``cwd`` would open it."""
        groups = tuple(rendezvous.parse_tool_groups(tools))
        lines: queue.Queue = queue.Queue()

        async def open_session() -> tuple[McpConnection, asyncio.StreamReader]:
            state = SessionState(
                id=next(self._ids),
                groups=groups,
                tools=self.registry.visible(groups),
                resources=self.registry.visible_resources(groups),
                templates=self.registry.visible_templates(groups),
                cwd=cwd,
                client_pid=os.getpid(),
            )
            reader = asyncio.StreamReader(limit=rendezvous.MAX_LINE_BYTES)
            assert self.app is not None, "start() the daemon first"
            return McpConnection(self.app, state, reader, LineWriter(_Writer(lines))), reader

        connection, reader = self._run(open_session())

        async def serve() -> str:
            try:
                return await connection.run()
            finally:
                lines.put(_EOF)

        done = asyncio.run_coroutine_threadsafe(serve(), self.loop)
        pipe = Pipe(self, connection, reader, lines, done)
        self._pipes.append(pipe)
        return pipe

    def stop(self, timeout: float = 30.0) -> int:
        """Shut down as ``memoryd serve`` does on SIGTERM: end every session, close the engine (the watcher
        stops, pending index writes are flushed), stop the loop. Returns 0 when all of it ended cleanly
        within ``timeout`` s, else 1 (the daemon's exit status)."""
        if not self._thread.is_alive():
            return self.exit_status or 0
        clean = True
        try:
            for pipe in self._pipes:
                if not pipe._done.done():
                    pipe.kill()
            self._run(self.handle.close(timeout=timeout), timeout + 5)
            clean = self.handle.state == "closed" and "engine_close_" not in self.log()
        except Exception:
            clean = False
        finally:
            with contextlib.suppress(Exception):
                self._run(_wind_down(), 15)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout)
            self.loop.close()
            logging.getLogger().removeHandler(self._log)
        self.exit_status = 0 if clean else 1
        return self.exit_status

    def kill(self) -> None:
        """:meth:`stop`, whatever its outcome (for ``finally`` blocks); idempotent."""
        self.stop(10)


async def _wind_down() -> None:
    """Cancel what the engine left running and end the loop's worker threads (left blocked, they would
    keep the test process from exiting)."""
    rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in rest:
        task.cancel()
    await asyncio.wait_for(asyncio.gather(*rest, return_exceptions=True), 5)
    await asyncio.wait_for(asyncio.get_running_loop().shutdown_default_executor(), 5)


class _Serving:
    """See :attr:`InprocessDaemon.proc`."""

    def __init__(self, daemon: InprocessDaemon) -> None:
        self._daemon = daemon

    def poll(self) -> int | None:
        if self._daemon.loop.is_running():
            return None
        return self._daemon.exit_status


class _OnPipe:
    """The ``__init__`` shared by the shim classes below: a :class:`Pipe` where the shim process was."""

    def __init__(self, daemon: InprocessDaemon, cwd: str = "/", tools: str | None = None) -> None:
        # the state :class:`support.shim.ShimProc` keeps, fed from the session's lines
        self.version = "2025-11-25"
        self.started = time.monotonic()
        self.pump = True
        self.proc = daemon.connect(tools, cwd)
        self.raw: list[bytes] = []
        self.stderr = bytearray()
        self._lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read_session, daemon=True).start()
        self._id = 0

    def _read_session(self) -> None:
        for line in self.proc.stdout:
            self.raw.append(line)
            self._lines.put(line)
        self._lines.put(None)  # EOF, as ShimProc's reader marks it

    def kill(self) -> None:
        self.proc.kill()


class InprocessShim(_OnPipe, Shim):
    """:class:`support.briefs.Shim` on an in-process session (default tools: the shim's default groups)."""


class InprocessMemShim(_OnPipe, MemShim):
    """:class:`support.memories.MemShim` on an in-process session (default tools: ``memories``)."""

    def __init__(self, daemon: InprocessDaemon, cwd: str = "/", tools: str = "memories") -> None:
        super().__init__(daemon, cwd, tools)


@asynccontextmanager
async def sdk_client(
    daemon: InprocessDaemon,
    tools: str | None = "sessions,memo",
    sampling=None,
    mode: str = "legacy",
    cwd: str = "/",
) -> AsyncIterator[Any]:
    """The official SDK ``Client`` on an in-process session (JSON lines both ways, as over the shim);
    ``tools=None``: the shim's default groups."""
    import anyio
    from mcp import types
    from mcp.client import Client
    from mcp.shared.message import SessionMessage

    pipe = daemon.connect(tools, cwd)

    @asynccontextmanager
    async def transport():
        read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](16)
        write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](16)

        async def pump_in() -> None:
            async with read_send:
                while (
                    line := await anyio.to_thread.run_sync(pipe.next_line, abandon_on_cancel=True)
                ) is not None:
                    await read_send.send(
                        SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
                    )

        async def pump_out() -> None:
            async with write_recv:
                async for item in write_recv:
                    body = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                    pipe.stdin.write(body.encode() + b"\n")

        async with anyio.create_task_group() as tg:
            tg.start_soon(pump_in)
            tg.start_soon(pump_out)
            try:
                yield read_recv, write_send
            finally:
                pipe.stdin.close()
                tg.cancel_scope.cancel()

    kwargs: dict[str, Any] = {"mode": mode}
    if sampling is not None:
        kwargs["sampling_callback"] = sampling
    async with Client(transport(), **kwargs) as client:
        yield client

"""The HTTP listener: uvicorn inside the daemon's own event loop, on 127.0.0.1 and ::1 only.

:meth:`HttpListener.start` binds, builds the app (:func:`memoryd.http.app.build_app`), starts uvicorn on
the bound sockets, and records the port in ``http.json`` (:mod:`memoryd.http.files`);
:meth:`HttpListener.stop` ends it within its budget and removes ``http.json``: it first sets
:attr:`HttpListener.closing` (``app.state.closing``), on which the page's event streams end by
themselves; what is still open after :data:`GRACEFUL_S` (an MCP stream) is cut.

Connections go through :class:`memoryd.http.protocol.GuardedH11Protocol`: at most
:data:`memoryd.http.protocol.MAX_CONNECTIONS` open, each with a deadline for its request head.

Addresses: ``127.0.0.1`` and ``::1`` (``IPV6_V6ONLY``), never a wildcard or an outside interface. A machine
without IPv6 loopback is served on 127.0.0.1 alone (logged).

A busy port: the listener takes a free port the system picks instead, says so (``http_port_busy``, a
warning naming both ports) and records the new one in ``http.json``, where ``memoryd open`` and ``memoryd
connect --http`` look. It also replaces the token: a process squatting on the expected port may have
collected the token from clients that knocked there, and the new one is known only to files 0600 of
this user. Clients configured for the old port stop working either way; run ``memoryd connect --http``
again.

uvicorn's own signal handling is left out (the daemon owns SIGTERM/SIGINT) and so are its log config
(its loggers go through :mod:`memoryd.logs`, never stdout), access log, ``Server`` header and proxy
headers (no proxy is trusted).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import uvicorn

from memoryd.http import files
from memoryd.http.protocol import TALLY, GuardedH11Protocol
from memoryd.logs import get_logger

GRACEFUL_S = 1.0
LOOPBACK_V4 = "127.0.0.1"
LOOPBACK_V6 = "::1"
#: The listen queue, and how many connections asyncio accepts per loop turn: uvicorn's 2048 would let a
#: flood take that many descriptors between two turns, past the connection cap (memoryd.http.protocol).
_BACKLOG = 32

log = get_logger("memoryd.http.listener")


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: the daemon's handlers stay in place."""

    @contextlib.contextmanager
    def capture_signals(self):  # type: ignore[override]
        yield


def _listen(family: int, host: str, port: int) -> socket.socket:
    # proto IPPROTO_TCP, not 0: asyncio turns Nagle off (TCP_NODELAY) only on sockets that say TCP, and with
    # it on, an SSE answer's second write waits for the client's delayed ACK (about 40 ms per call).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((host, port))
        sock.listen(_BACKLOG)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def bind_loopback(port: int) -> list[socket.socket]:
    """Listening sockets on 127.0.0.1 and ::1 at ``port`` (0: one the system picks, the same on both).
    Raises ``OSError`` (``EADDRINUSE`` when the port is taken on either address)."""
    for _ in range(8):  # with port 0, ::1 may hold the number the system gave 127.0.0.1
        v4 = _listen(socket.AF_INET, LOOPBACK_V4, port)
        actual = v4.getsockname()[1]
        try:
            return [v4, _listen(socket.AF_INET6, LOOPBACK_V6, actual)]
        except OSError as exc:
            if exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT, errno.EPROTONOSUPPORT):
                log.info("http_no_ipv6_loopback", reason=exc.strerror or str(exc))
                return [v4]
            v4.close()
            if exc.errno != errno.EADDRINUSE or port != 0:
                raise
    raise OSError(errno.EADDRINUSE, "no port free on both 127.0.0.1 and ::1")


class HttpListener:
    """One HTTP listener of the daemon. ``build(token, port) -> ASGI app`` makes the app once the port
    is known (the guard checks ``Host`` against it); ``lifetime`` is an async context manager factory
    entered around serving (the MCP session manager's ``run``)."""

    def __init__(
        self,
        *,
        port: int,
        socket_dir: Path,
        build: Callable[[str, int], Any],
        lifetime: Callable[[], contextlib.AbstractAsyncContextManager[Any]],
        sessions: Callable[[], int] = lambda: 0,
    ) -> None:
        self.asked_port = port
        self.port: int | None = None
        self.socket_dir = socket_dir
        self._build = build
        self._lifetime = lifetime
        self.sessions = sessions
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None
        #: Set when stopping begins; the page's event streams end on it (``app.state.closing``).
        self.closing = asyncio.Event()

    @property
    def url(self) -> str | None:
        return f"http://{LOOPBACK_V4}:{self.port}" if self.port else None

    async def start(self) -> int:
        """Bind, start serving, write ``http.json``; returns the port. Raises ``OSError`` when nothing can be
        bound, :class:`memoryd.http.files.HttpFileError` for an unusable token file."""
        token = files.ensure_token(self.socket_dir)
        try:
            sockets = bind_loopback(self.asked_port)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            sockets = bind_loopback(0)
            token = files.rotate_token(self.socket_dir)
            log.warning(
                "http_port_busy",
                asked=self.asked_port,
                port=sockets[0].getsockname()[1],
                token="replaced",
                hint="another process holds the port; clients configured for it need `memoryd connect --http` again",
            )
        self.port = sockets[0].getsockname()[1]
        app = self._build(token, self.port)
        app.state.closing = self.closing
        config = uvicorn.Config(
            app,
            http=GuardedH11Protocol,
            ws="none",
            lifespan="off",
            log_config=None,
            access_log=False,
            server_header=False,
            date_header=False,
            proxy_headers=False,
            timeout_graceful_shutdown=GRACEFUL_S,
            backlog=_BACKLOG,
        )
        self._server = _Server(config)
        self._task = asyncio.create_task(self._serve(sockets), name="memoryd-http")
        while not self._server.started and not self._task.done():
            await asyncio.sleep(0.01)
        if self._task.done():
            self._task.result()  # raises what ended it
            raise OSError("the HTTP listener stopped as it started")
        files.write_port(self.socket_dir, self.port)
        log.info("http_listening", url=self.url, addresses=[s.getsockname()[0] for s in sockets])
        return self.port

    async def _serve(self, sockets: list[socket.socket]) -> None:
        assert self._server is not None
        try:
            async with self._lifetime():
                await self._server.serve(sockets=sockets)
        finally:
            for sock in sockets:
                sock.close()

    def forget_port(self) -> None:
        """Remove ``http.json`` (serving ended without :meth:`stop`)."""
        files.remove_port(self.socket_dir)

    async def stop(self, timeout: float) -> None:
        """Stop accepting, end the page's event streams, end open requests (what is left is cut after
        :data:`GRACEFUL_S`), remove ``http.json``. Idempotent; never raises."""
        files.remove_port(self.socket_dir)
        if self._server is None or self._task is None:
            return
        self.closing.set()  # streams that only end when told end now, before uvicorn's graceful wait
        await asyncio.sleep(0)
        self._server.should_exit = True
        try:
            await asyncio.wait_for(asyncio.shield(self._task), timeout)
        except TimeoutError:
            self._server.force_exit = True
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        except Exception as exc:
            log.error("http_stop_failed", exc_info=exc)
        TALLY.report()
        log.info("http_stopped", port=self.port)


def for_daemon(app: Any, registry: Any, engine: Any, port: int, socket_dir: Path) -> HttpListener:
    """The daemon's listener: ``/mcp`` on its ``McpApp`` (``app``) and tool ``registry``, the page's routes
    on its ``engine`` slot, the token and port files in ``socket_dir``."""
    from memoryd.http.app import build_app, page_routes
    from memoryd.http.mcp import McpHttp

    mcp_http = McpHttp(app, registry)
    return HttpListener(
        port=port,
        socket_dir=socket_dir,
        build=lambda token, bound: build_app(
            engine, registry, mcp_http, token, bound, page_routes(engine), socket_dir=socket_dir
        ),
        lifetime=mcp_http.run,
        sessions=lambda: mcp_http.sessions,
    )

"""The Starlette app of the HTTP listener: ``/mcp``, the page's routes, and the guard around all of them.

Routes: ``/mcp`` (:class:`memoryd.http.mcp.McpHttp`), ``/open`` (the browser hand-over, answered by the
guard itself), then the page's routes from ``memoryd.web.routes(engine)``. Without a ``memoryd.web``
package (an install without the page) ``/`` says so in one plain line. Every route, whoever defines it,
sits behind :class:`memoryd.http.auth.Guard`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import BaseRoute, Route

from memoryd.core.warmup import EngineHandle
from memoryd.http.auth import Guard
from memoryd.logs import get_logger

log = get_logger("memoryd.http.app")


def page_routes(engine: EngineHandle) -> list[BaseRoute]:
    """``memoryd.web.routes(engine)``, or a one-line ``/`` when the page is not installed."""
    try:
        from memoryd.web import routes
    except ImportError:
        log.info("no_page", reason="memoryd.web is not installed; HTTP serves /mcp only")
        return [Route("/", _no_page, methods=["GET"])]
    return list(routes(engine))


async def _no_page(request: Request) -> PlainTextResponse:
    return PlainTextResponse("memoryd: this install has no page; MCP is served at /mcp.\n")


def build_app(
    engine: EngineHandle,
    registry: Any,
    mcp_app: Any,
    token: str,
    port: int,
    extra_routes: list[BaseRoute],
    *,
    socket_dir: Path,
) -> Starlette:
    """The app: ``mcp_app`` (an ASGI app, :class:`memoryd.http.mcp.McpHttp`) at ``/mcp``, then
    ``extra_routes`` (the page's), all behind :class:`Guard` for ``token`` on ``port``. ``registry`` is the
    daemon's tool registry (``mcp_app`` serves its groups; kept here for routes that list them).
    ``socket_dir`` holds ``memoryd open``'s one-time hand-over codes."""
    routes: list[BaseRoute] = [Route("/mcp", mcp_app, methods=["GET", "POST", "DELETE"]), *extra_routes]
    app = Starlette(
        routes=routes,
        middleware=[Middleware(Guard, token=token, port=port, socket_dir=socket_dir)],
    )
    app.state.engine = engine
    app.state.registry = registry
    return app

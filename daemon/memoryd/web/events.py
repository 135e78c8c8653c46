"""``GET /events``: server-sent events from the engine's change feed
(:class:`memoryd.core.writequeue.ChangeFeed`).

Each batch the index applies becomes one ``change`` event (``{"seq","folders","briefs","rescan","at"}``);
the page's script re-reads the view it shows. The first event, ``hello``, carries the feed's current
``seq``. A comment line every :data:`PING_S` seconds keeps proxies and the browser from timing out. The
stream ends when the client goes away (sse-starlette notices), when the HTTP listener starts stopping
(``request.app.state.closing``, an ``asyncio.Event``: the stream ends with its response instead of being
cancelled in uvicorn's graceful wait) or when the engine closes its feed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.responses import Response

PING_S = 15


async def stream(engine: Any, request: Request) -> Response:
    """The event stream of ``engine.changes`` (an engine that is ready)."""
    feed = engine.changes
    closing = getattr(request.app.state, "closing", None) or asyncio.Event()

    async def events() -> AsyncIterator[dict[str, str]]:
        with feed.subscribe() as queue:
            yield {"event": "hello", "data": json.dumps({"seq": feed.seq})}
            while True:
                event = await _next(queue, closing)
                if event is None:
                    return
                yield {"event": "change", "data": json.dumps(event.as_dict()), "id": str(event.seq)}

    return EventSourceResponse(
        events(), ping=PING_S, headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    )


async def _next(queue: asyncio.Queue, closing: asyncio.Event) -> Any:
    """The queue's next item, or ``None`` once ``closing`` is set."""
    if closing.is_set():
        return None
    get = asyncio.ensure_future(queue.get())
    stop = asyncio.ensure_future(closing.wait())
    try:
        await asyncio.wait((get, stop), return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
        if not get.done():
            get.cancel()
    return get.result() if get.done() and not get.cancelled() else None

"""``GET /events``: server-sent events from the engine's change feed (:mod:`memoryd.core.changes`).

Each batch the index applies becomes one ``change`` event (``{"seq","folders","briefs","rescan","at"}``);
the page's script re-reads the view it shows. The first event, ``hello``, carries the feed's current
``seq``. A comment line every :data:`PING_S` seconds keeps proxies and the browser from timing out. The
stream ends when the client goes away (sse-starlette notices) or the engine closes its feed (shutdown).
"""

from __future__ import annotations

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

    async def events() -> AsyncIterator[dict[str, str]]:
        with feed.subscribe() as queue:
            yield {"event": "hello", "data": json.dumps({"seq": feed.seq})}
            while True:
                event = await queue.get()
                if event is None:
                    return
                yield {"event": "change", "data": json.dumps(event.as_dict()), "id": str(event.seq)}

    return EventSourceResponse(
        events(), ping=PING_S, headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    )

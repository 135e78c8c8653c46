"""uvicorn's h11 protocol with the two limits a listener needs against clients that never finish a request.

uvicorn 0.54 has neither: ``timeout_keep_alive`` runs only between requests, and ``limit_concurrency``
answers 503 once a request head has arrived, so a connection that never completes its head holds its
file descriptor forever. A local process opening enough of those (no token needed) would use up the
daemon's descriptors, and then the Unix socket could not accept either. :class:`GuardedH11Protocol`
(passed to ``uvicorn.Config(http=...)``) adds:

* **a connection cap**: a connection accepted while :data:`MAX_CONNECTIONS` are open is aborted at once
  (its descriptor is freed before the loop turns), so the socket, the index and the model always have
  descriptors left;
* **a head deadline**: a connection that has not sent a complete request head within
  :data:`HEAD_TIMEOUT_S` of opening, or of its previous answer, is closed. A request whose head has
  arrived (a long tool call, an open event stream) is never cut by it.

Both are logged as one ``http_connections_limited`` warning per :data:`LOG_EVERY_S` with counts, never
a line per connection.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from memoryd.logs import get_logger

#: Open HTTP connections at most, far below the usual 1024 descriptors of a process.
MAX_CONNECTIONS = 256
#: Seconds a connection may take to send a complete request head.
HEAD_TIMEOUT_S = 10.0
LOG_EVERY_S = 60.0

log = get_logger("memoryd.http.protocol")


class _Tally:
    """Counts refusals and timeouts; the first of a quiet spell is logged at once, the rest once per
    :data:`LOG_EVERY_S`."""

    def __init__(self) -> None:
        self.counts = {"refused": 0, "head_timeouts": 0}
        self._logged_at: float | None = None
        self._flush: asyncio.TimerHandle | None = None

    def note(self, kind: str) -> None:
        self.counts[kind] += 1
        if self._flush is not None:
            return
        if self._logged_at is None or time.monotonic() - self._logged_at >= LOG_EVERY_S:
            self.report()
        else:
            self._flush = asyncio.get_running_loop().call_later(LOG_EVERY_S, self._window_end)

    def _window_end(self) -> None:
        self._flush = None
        self.report()

    def report(self) -> None:
        """Log what was counted since the last report (nothing when nothing was)."""
        if not any(self.counts.values()):
            return
        log.warning(
            "http_connections_limited",
            **self.counts,
            max_connections=MAX_CONNECTIONS,
            head_timeout_s=HEAD_TIMEOUT_S,
            hint="a local client opened too many connections or did not finish its requests",
        )
        self.counts = dict.fromkeys(self.counts, 0)
        self._logged_at = time.monotonic()


TALLY = _Tally()


class GuardedH11Protocol(H11Protocol):
    """``H11Protocol`` with :data:`MAX_CONNECTIONS` and :data:`HEAD_TIMEOUT_S` (module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._refused = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.connections) >= MAX_CONNECTIONS:
            self._refused = True
            transport.abort()
            TALLY.note("refused")
            return
        super().connection_made(transport)
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        if not self._refused:
            super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        if self.conn.their_state is not h11.IDLE:  # a complete head arrived
            self._cancel_head_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._arm_head_timer()  # a kept-alive connection gets the same deadline for its next head

    def _arm_head_timer(self) -> None:
        self._cancel_head_timer()
        self._head_timer = self.loop.call_later(HEAD_TIMEOUT_S, self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        TALLY.note("head_timeouts")
        self.transport.close()
